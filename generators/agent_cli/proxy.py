"""The metering proxy and verify broker one agent-CLI trajectory reaches over loopback.

One aiohttp server per trajectory on ``127.0.0.1`` (an ephemeral port), two kinds of route:

* **model calls** — ``POST /v1/messages`` (an Anthropic endpoint) or ``POST
  /v1/chat/completions`` (an OpenAI-compatible one): the CLI's request is checked (its key must
  be the trajectory's model token: the CLI never sees the real key, and no other workspace's CLI
  can spend this trajectory's budget), its ``model`` replaced by the spec's model id, and handed
  to :class:`Meter`, which enforces the budgets, relays it through the sweep's provider with the
  real key (retries, limits) and writes it in the run's books before the CLI gets the reply. An
  OpenAI stream is asked for its usage (``stream_options.include_usage``) so it is billed. A
  route of the other wire format answers 404 saying which one this endpoint speaks.
* **verify** — ``POST /kgb/verify`` with the kernel's text (the ``verify`` command of the
  workspace, with the trajectory's verify token): judged by the trajectory's
  :class:`~generators.verify.VerifyBroker` (public cases only, ``max_verify_calls``); the text
  is the reply, the verdict's status the ``x-kgb-status`` header.

The reply a CLI gets is the endpoint's own (a stream arrives whole once the endpoint has sent it:
that is what lets it be written down before the CLI reads it).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from generators.llm import Message, Prompt, Role
from generators.providers.wire import WireRequest

MAX_BODY = 32 * 1024 * 1024
ANTHROPIC_VERSION = "2023-06-01"
PASSED_HEADERS = ("anthropic-version", "anthropic-beta")


@dataclass(frozen=True)
class Answer:
    """What goes back to the CLI."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


ModelFn = Callable[[WireRequest, Prompt], Awaitable[Answer]]
VerifyFn = Callable[[str], Awaitable[tuple[str, str]]]   # source -> (status, text)


def error_answer(kind: str, status: int, message: str) -> Answer:
    """An error in the wire format the CLI speaks."""
    if kind == "anthropic":
        body: dict[str, Any] = {"type": "error", "error": {"type": "invalid_request_error"
                                                          if status < 500 else "api_error",
                                                          "message": message}}
    else:
        body = {"error": {"message": message, "type": "kgb_proxy", "code": status}}
    return Answer(status, orjson.dumps(body))


def wire_request(kind: str, body: dict[str, Any], headers: dict[str, str],
                 model: str) -> WireRequest:
    """The CLI's request as the provider sends it: the spec's model, an OpenAI stream asked
    for its usage, the Anthropic headers it set (version, betas)."""
    body = {**body, "model": model}
    stream = body.get("stream") is True
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
    if kind == "anthropic":
        sent = {k: headers[k] for k in PASSED_HEADERS if k in headers}
        sent.setdefault("anthropic-version", ANTHROPIC_VERSION)
        return WireRequest("/v1/messages", body, sent,
                           max_tokens=max_tokens if isinstance(max_tokens, int) else None,
                           stream=stream)
    if stream:
        body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    return WireRequest("/chat/completions", body,
                       max_tokens=max_tokens if isinstance(max_tokens, int) else None, stream=stream)


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the text of its blocks (tool calls and
    results as JSON, so the stored conversation keeps them)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else orjson.dumps(content).decode()
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        else:
            parts.append(orjson.dumps(block).decode())
    return "\n".join(parts)


def stored_prompt(kind: str, body: dict[str, Any], operator_id: str) -> Prompt:
    """The request as its call is stored: its messages' roles and text (the request's exact
    bytes are fingerprinted in its intent)."""
    messages: list[Message] = []
    if kind == "anthropic" and body.get("system"):
        messages.append(Message(Role.SYSTEM, _text(body["system"])))
    for m in body.get("messages") or ():
        if not isinstance(m, dict):
            continue
        role = {"system": Role.SYSTEM, "developer": Role.SYSTEM, "assistant": Role.ASSISTANT,
                "tool": Role.TOOL}.get(str(m.get("role")), Role.USER)
        text = _text(m.get("content"))
        if m.get("tool_calls"):
            text = f"{text}\n{orjson.dumps(m['tool_calls']).decode()}".strip()
        messages.append(Message(role, text, tool_call_id=str(m.get("tool_call_id") or "")))
    return Prompt(tuple(messages), f"agent-cli/{kind}", operator_id)


def _bearer(request: web.Request) -> str:
    key = request.headers.get("x-api-key", "")
    auth = request.headers.get("authorization", "")
    return key or (auth[7:] if auth.lower().startswith("bearer ") else "")


class Gateway:
    """The server: ``model`` answers model calls, ``verify`` verify requests (module doc)."""

    def __init__(self, kind: str, model_id: str, model_token: str, verify_token: str,
                 model: ModelFn, verify: VerifyFn) -> None:
        self.kind, self.model_id = kind, model_id
        self.model_token, self.verify_token = model_token, verify_token
        self.model, self.verify = model, verify
        self.refused = 0       # requests turned away before reaching the meter
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_post("/kgb/verify", self._verify)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _messages(self, request: web.Request) -> web.Response:
        return await self._model_call(request, "anthropic")

    async def _chat(self, request: web.Request) -> web.Response:
        return await self._model_call(request, "openai")

    async def _model_call(self, request: web.Request, kind: str) -> web.Response:
        answer = await self._model_answer(request, kind)
        return web.Response(status=answer.status, body=answer.body,
                            headers={"content-type": answer.content_type, **dict(answer.headers)})

    async def _model_answer(self, request: web.Request, kind: str) -> Answer:
        if not hmac.compare_digest(_bearer(request), self.model_token):
            self.refused += 1
            return error_answer(kind, 401, "invalid API key for this workspace's proxy")
        if kind != self.kind:
            self.refused += 1
            where = "/v1/messages" if self.kind == "anthropic" else "/v1/chat/completions"
            return error_answer(kind, 404, f"this workspace's model speaks the {self.kind} wire "
                                f"format only: POST {where}")
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError as exc:
            self.refused += 1
            return error_answer(kind, 400, f"request body is not JSON: {exc}")
        if not isinstance(body, dict):
            self.refused += 1
            return error_answer(kind, 400, "request body must be a JSON object")
        headers = {k.lower(): v for k, v in request.headers.items()}
        return await self.model(wire_request(kind, body, headers, self.model_id),
                                stored_prompt(kind, body, ""))

    async def _verify(self, request: web.Request) -> web.Response:
        if not hmac.compare_digest(_bearer(request), self.verify_token):
            self.refused += 1
            return web.Response(status=401, text="verify: not this workspace's token",
                                headers={"x-kgb-status": "REFUSED"})
        raw = await request.read()
        try:
            source = raw.decode()
        except UnicodeDecodeError:
            return web.Response(status=400, text="verify: the file is not UTF-8 text",
                                headers={"x-kgb-status": "REFUSED"})
        status, text = await self.verify(source)
        return web.Response(text=text, headers={"x-kgb-status": status})
