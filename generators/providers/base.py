"""LLM endpoints: the retrying, rate-limited call, and the billing rule.

A :class:`Provider` speaks one wire format (OpenAI-compatible Chat Completions or Anthropic
Messages) to one configured endpoint (:class:`~generators.providers.config.EndpointConfig`).
``complete`` never raises for what the endpoint does: every outcome — a reply, a truncated
reply, a malformed body, 429, 5xx, a timeout, a stream cut off — comes back as one
:class:`~generators.llm.LLMCall`. It raises only for configuration the user must fix (a missing
key variable, a proxy the transport cannot use).

Why plain HTTP and not the vendor SDKs: we need every attempt's status, headers, raw body and
usage — a retried 5xx that carried usage is billed, a 2xx body that does not parse may still
carry usage, and Retry-After must be honoured by our own retry loop (the SDKs retry internally,
hiding billed attempts, and raise on bodies they cannot parse, losing the usage in them). Both
wire formats are small and stable, so one HTTP transport serves OpenAI, vLLM, SGLang, DeepSeek,
OpenRouter and Anthropic alike: aiohttp (:mod:`generators.providers.transport`: one session per
provider and event loop, TLS, proxies, the size limit), with bodies encoded and decoded by
orjson. The device agent never imports this package.

Keys: an endpoint names the environment variable that holds its key (``api_key_env``); the key
is read from the environment at each attempt, put in the request header and nowhere else — not
in the config, the provider, an :class:`LLMCall`, a log record or an exception (error text from
the server is scrubbed of it). ``api_key_env = ""`` sends no key (a local vLLM or SGLang server).

Retries: 429, 5xx, 408 and transport failures (timeouts, refused, dropped or cut-off
connections, malformed HTTP) are retried up to ``max_retries`` times. The wait is the server's
Retry-After (``retry-after-ms``, or ``Retry-After`` as seconds or an HTTP date) plus up to 10 %
jitter when given, else capped exponential backoff with full jitter: ``uniform(0, min(cap, base
* 2**n))``. Other 4xx and 3xx, and every 2xx (complete, truncated or malformed) are final. A
transport failure ends as ``SERVER_ERROR`` and a 408 or a timeout as ``TIMEOUT``, each with the
error text. No attempt starts after ``deadline_s``, and each attempt's timeout is the smaller of
``timeout_s`` and what is left of the deadline; it bounds the whole attempt (waiting for a
connection, connecting, TLS, sending and reading the reply, a stream to its end), so a server
that trickles its reply times out like one that never answers. A request that found its
kept-alive connection closed by the server is an attempt like any other failure.

Idempotency: a caller may give ``complete`` an ``idempotency_key``, sent in every attempt under
the endpoint's ``idempotency_header`` (default ``Idempotency-Key``; ``""`` sends none). The sweep
derives it from (run, trajectory, turn), so a resumed run asks for a lost reply under the key it
was first asked with; an endpoint or gateway that honours the key answers a repeat with the reply
it already billed instead of generating and billing it again. Endpoints that ignore the header
(the OpenAI and Anthropic chat APIs do) bill a repeat as a new call.

Limits, per endpoint (per provider instance): at most ``max_concurrency`` requests in flight;
``requests_per_minute`` and ``tokens_per_minute`` as token buckets that hold ``burst_s`` seconds'
worth of the rate (smooth pacing — providers enforce their limits at sub-minute granularity).
The token bucket is charged with an estimate of the prompt (characters / 4) before sending, then
corrected to the reply's true total tokens; an attempt that got no usage is refunded.

Billing rule: every HTTP response that carries usage is billed — complete, truncated
(``finish_reason`` length, ``stop_reason`` max_tokens → ``TRUNCATED``), malformed-but-has-usage
(usage is recovered from a body that is not valid JSON by decoding the object after its
``"usage"`` key) and error responses that carry usage. An error response without usage, and an
attempt that timed out or lost its connection before its reply was complete, are not billed (the
client cannot know what the server counted). Streams (``stream = true``): a stream that reaches
its terminator (OpenAI ``data: [DONE]``, Anthropic ``message_stop``) is a reply like any other,
billed with the usage it carried; one that does not — the connection lost or cut, the attempt's
time run out, the body ending early, or an error event in the stream — ends the attempt as
``SERVER_ERROR`` (``TIMEOUT`` when the time ran out; ``RATE_LIMITED`` for Anthropic's
``rate_limit_error`` event), is retried like one, its text unused, and is billed with the last
usage the stream carried before it ended. Anthropic's ``message_start`` carries the prompt's
tokens and each ``message_delta`` the output so far, so a cut Anthropic stream bills its prompt
and the output reported so far — a lower bound of what the server counted; OpenAI sends usage
only in the last chunk before ``[DONE]``, so a cut OpenAI stream is not billed, like a lost
connection. With retries, every billed attempt counts: the returned call's ``usage`` and
``cost_usd`` are the sums over its attempts, ``attempts`` is the number of requests sent, and
``extra["attempts"]`` holds the per-attempt records as JSON (see :func:`attempt_records`).
``usage`` is None only when no attempt carried usage. ``latency_s`` is the whole call's wall
time (waits and backoff included); each attempt's own latency is in its record.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import os
import random
import time
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import orjson

from generators.llm import CallStatus, LLMCall, Prompt, Usage
from generators.providers.attempts import AttemptRecord, attempt_records, attempts_json
from generators.providers.config import EndpointConfig, ProviderConfigError, ProviderKind
from generators.providers.limits import TokenBucket
from generators.providers.pricing import PriceTable
from generators.providers.stream import SSEDecoder, StreamState
from generators.providers.transport import (
    NotSent,
    ProxyConfigError,
    ReplyTimeout,
    Transport,
    TransportError,
    env_proxy,
)
from generators.providers.wire import (
    WireReply,
    WireRequest,
    estimate_prompt_tokens,
    int_field,
    parse_retry_after,
    scan_usage,
    str_field,
)

__all__ = ["AttemptRecord", "EndpointConfig", "Provider", "ProviderConfigError", "ProviderKind",
           "Relayed",
           "WireReply", "WireRequest", "attempt_records", "int_field", "parse_retry_after",
           "scan_usage", "str_field"]

log = logging.getLogger(__name__)

_REDACTED = "[REDACTED]"
_ERROR_BODY_CHARS = 500


class _LoopState:
    """Things bound to one event loop: the HTTP transport, the semaphore, the rate buckets."""

    def __init__(self, loop: asyncio.AbstractEventLoop, config: EndpointConfig) -> None:
        self.loop = loop
        # Up to max_concurrency connections: the semaphore below lets no more requests through,
        # so a request never waits for a connection.
        self.transport = Transport(max_connections=config.max_concurrency)
        self.semaphore = asyncio.Semaphore(config.max_concurrency)
        self.rpm: TokenBucket | None = None
        self.tpm: TokenBucket | None = None
        if config.requests_per_minute:
            rate = config.requests_per_minute / 60.0
            self.rpm = TokenBucket(rate, max(1.0, rate * config.burst_s))
        if config.tokens_per_minute:
            rate = config.tokens_per_minute / 60.0
            self.tpm = TokenBucket(rate, max(1.0, rate * config.burst_s))


@dataclass
class Relayed:
    """The raw reply of a relayed request's last attempt: HTTP status (0: none came), content
    type and body (a stream's bytes as they came)."""

    http_status: int = 0
    content_type: str = ""
    chunks: list[bytes] = field(default_factory=list)

    def reset(self) -> None:
        self.http_status, self.content_type, self.chunks = 0, "", []

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


class Provider(abc.ABC):
    """A client for one endpoint. Subclasses say how to build requests and read replies."""

    kind: ClassVar[str]

    def __init__(self, config: EndpointConfig, prices: PriceTable | None = None) -> None:
        if config.kind != self.kind:
            raise ProviderConfigError(f"endpoint {config.name!r} has kind {config.kind!r}, "
                                      f"not {self.kind!r}")
        self.config = config
        self.prices = prices if prices is not None else PriceTable()
        self._api_key()  # fail at set-up, not at the first call, when the variable is unset
        self._check_proxy()
        self._state: _LoopState | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config.name!r}, {self.config.base_url!r})"

    def __getstate__(self) -> dict[str, Any]:
        """Pickle config and prices only (a Ray actor rebuilds its session on its own loop)."""
        state = dict(self.__dict__)
        state["_state"] = None
        return state

    # -- what a wire format defines ------------------------------------------------------------

    @abc.abstractmethod
    def build_request(self, prompt: Prompt, *, model: str, temperature: float | None,
                      max_tokens: int | None) -> WireRequest:
        """The request for ``prompt``, with ``model``'s request options (``config.options_for``)
        and, when the endpoint streams, the wire format's streaming fields."""

    @abc.abstractmethod
    def auth_headers(self, key: str) -> dict[str, str]: ...

    @abc.abstractmethod
    def parse_reply(self, data: Any) -> WireReply:
        """Read a decoded 2xx JSON body."""

    @abc.abstractmethod
    def parse_usage(self, usage: Any) -> Usage | None:
        """Read the wire format's usage object; None when it is not one."""

    def new_stream(self) -> StreamState:
        """A fresh state for one streamed reply (wire formats that stream override this)."""
        raise NotImplementedError(f"{type(self).__name__} does not stream")

    # -- set-up and tear-down ------------------------------------------------------------------

    def _api_key(self) -> str:
        env = self.config.api_key_env
        if not env:
            return ""
        key = os.environ.get(env, "")
        if not key:
            raise ProviderConfigError(f"endpoint {self.config.name!r}: environment variable {env} "
                                      "is not set; it must hold the API key")
        return key

    def _check_proxy(self) -> None:
        try:
            env_proxy(self.config.base_url)
        except ProxyConfigError as exc:
            raise ProviderConfigError(f"endpoint {self.config.name!r}: {exc}") from None

    def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._state
        if state is not None and state.loop is not loop:
            if not state.loop.is_closed():
                raise RuntimeError(f"provider {self.config.name!r} is in use by another event loop")
            state.transport.abandon()  # the old loop is gone (e.g. a second asyncio.run)
            state = None
        if state is None:
            self._check_proxy()  # the environment of this process (a Ray actor's may differ)
            state = self._state = _LoopState(loop, self.config)
        return state

    async def aclose(self) -> None:
        """Close the HTTP connections of the current loop's session."""
        state, self._state = self._state, None
        if state is not None:
            if state.loop.is_closed():
                state.transport.abandon()
            else:
                await state.transport.aclose()

    async def __aenter__(self) -> Provider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _redact(self, text: str) -> str:
        env = self.config.api_key_env
        key = os.environ.get(env, "") if env else ""
        if len(key) >= 4:
            text = text.replace(key, _REDACTED)
        return text

    def _backoff(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after * (1.0 + 0.1 * random.random())
        ceiling = min(self.config.backoff_cap_s, self.config.backoff_base_s * 2.0 ** retry)
        return random.uniform(0.0, ceiling)

    # -- the call ------------------------------------------------------------------------------

    async def complete(self, prompt: Prompt, *, model: str, temperature: float | None,
                       max_tokens: int | None, deadline_s: float,
                       idempotency_key: str | None = None) -> LLMCall:
        """Send ``prompt`` with retries; every outcome is a call record (see the module doc).
        ``idempotency_key`` goes in every attempt's ``idempotency_header``."""
        request = self.build_request(prompt, model=model, temperature=temperature, max_tokens=max_tokens)
        return await self.send(request, prompt, model=model, temperature=temperature,
                               deadline_s=deadline_s, idempotency_key=idempotency_key)

    async def relay(self, request: WireRequest, prompt: Prompt, *, model: str,
                    deadline_s: float, idempotency_key: str | None = None) -> tuple[LLMCall, Relayed]:
        """Send a request written by someone else (an agent CLI behind the metering proxy) with
        the endpoint's key, retries and limits; the call record is made as for ``complete``
        (``prompt``: what it is stored as) and the last attempt's raw reply comes back whole, to
        be handed on."""
        relayed = Relayed()
        call = await self.send(request, prompt, model=model, temperature=None,
                               deadline_s=deadline_s, idempotency_key=idempotency_key,
                               capture=relayed)
        return call, relayed

    async def send(self, request: WireRequest, prompt: Prompt, *, model: str,
                   temperature: float | None, deadline_s: float,
                   idempotency_key: str | None = None, capture: Relayed | None = None) -> LLMCall:
        """Send ``request`` (built for ``prompt``) with retries; ``capture`` keeps the raw reply
        of the last attempt."""
        start = time.monotonic()
        deadline = start + deadline_s
        if idempotency_key and self.config.idempotency_header:
            request = replace(request, headers={
                **request.headers, self.config.idempotency_header: idempotency_key})
        url = self.config.base_url.rstrip("/") + request.path
        state = self._loop_state()
        estimate = estimate_prompt_tokens(prompt)
        records: list[AttemptRecord] = []
        reply = WireReply(CallStatus.TIMEOUT)
        for n in range(1, self.config.max_retries + 2):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                reply = _final_timeout(reply, "deadline passed before the request could be sent")
                break
            try:
                await asyncio.wait_for(self._admit(state, estimate), remaining)
            except asyncio.TimeoutError:
                reply = _final_timeout(reply, "deadline passed waiting for the endpoint's limits")
                break
            try:
                timeout = max(min(self.config.timeout_s, deadline - time.monotonic()), 0.001)
                sent = time.monotonic()
                record, reply = await self._send(state.transport, n, url, request, model, timeout,
                                                 capture)
                record = record.with_latency(time.monotonic() - sent)
            finally:
                state.semaphore.release()
            if state.tpm is not None:
                state.tpm.adjust((record.usage.total_tokens if record.usage is not None else 0) - estimate)
            records.append(record)
            if not _retryable(record) or n > self.config.max_retries:
                break
            delay = self._backoff(n - 1, record.retry_after_s)
            if time.monotonic() + delay >= deadline:
                log.info("endpoint %s: attempt %d ended %s; no time left for a retry in %.2fs",
                         self.config.name, n, record.status.value, delay)
                break
            log.info("endpoint %s: attempt %d ended %s (HTTP %d); retrying in %.2fs",
                     self.config.name, n, record.status.value, record.http_status, delay)
            await asyncio.sleep(delay)
        return self._call(prompt, model, temperature, request, records, reply,
                          time.monotonic() - start)

    async def _admit(self, state: _LoopState, estimate: int) -> None:
        """Take a concurrency slot (released by the caller after sending) and the rate tokens."""
        await state.semaphore.acquire()
        try:
            if state.rpm is not None:
                await state.rpm.acquire(1)
            if state.tpm is not None:
                await state.tpm.acquire(estimate)
        except BaseException:
            state.semaphore.release()
            raise

    async def _send(self, transport: Transport, n: int, url: str, request: WireRequest,
                    model: str, timeout: float,
                    capture: Relayed | None = None) -> tuple[AttemptRecord, WireReply]:
        """One attempt: the request out, its reply (or failure) as a record."""
        if capture is not None:
            capture.reset()
        headers = {"content-type": "application/json", **request.headers,
                   **self.auth_headers(self._api_key())}
        body = orjson.dumps(request.body)
        stream: StreamState | None = None
        code = 0
        try:
            async with transport.post(url, body, headers, timeout) as response:
                code, charset = response.status, response.charset
                if capture is not None:
                    capture.http_status, capture.content_type = code, response.content_type
                if (request.stream and 200 <= code < 300
                        and response.content_type == "text/event-stream"):
                    stream = self.new_stream()
                    decoder = SSEDecoder()
                    async for chunk in response.chunks():
                        if capture is not None:
                            capture.chunks.append(chunk)
                        for event, data in decoder.feed(chunk):
                            stream.feed(event, data)
                    return self._streamed(n, code, stream, model, None)
                data = await response.body()
                reply_headers = response.headers
                if capture is not None:
                    capture.chunks.append(data)
        except ProxyConfigError as exc:
            raise ProviderConfigError(f"endpoint {self.config.name!r}: {exc}") from None
        except TransportError as exc:
            status = CallStatus.TIMEOUT if isinstance(exc, ReplyTimeout) else CallStatus.SERVER_ERROR
            error = self._redact(str(exc))
            if stream is not None:
                return self._streamed(n, code, stream, model, (status, error))
            return (AttemptRecord(n, status, error=error, sent=not isinstance(exc, NotSent)),
                    WireReply(status, error=error))
        return self._answered(n, code, reply_headers, data, charset, model)

    def _answered(self, n: int, code: int, headers: Any, raw: bytes, charset: str,
                  model: str) -> tuple[AttemptRecord, WireReply]:
        """The record of a whole (not streamed) reply."""
        try:
            data: Any = orjson.loads(raw if charset == "utf-8" else raw.decode(charset, "replace"))
            decoded = True
        except orjson.JSONDecodeError:
            data, decoded = None, False
        raw_usage = data.get("usage") if isinstance(data, dict) else None
        text = "" if decoded else raw.decode(charset, "replace")
        if raw_usage is None and not decoded:
            raw_usage = scan_usage(text)
        usage = self.parse_usage(raw_usage) if raw_usage is not None else None
        cost = self.prices.cost(model, usage).usd
        if 200 <= code < 300:
            if decoded:
                reply = self.parse_reply(data)
            else:
                reply = WireReply(CallStatus.MALFORMED, error=f"HTTP {code} body is not JSON: "
                                  f"{self._redact(text[:_ERROR_BODY_CHARS])!r}")
            reply = replace(reply, error=self._redact(reply.error))
            return AttemptRecord(n, reply.status, code, usage, cost, error=reply.error), reply
        if code == 429:
            status = CallStatus.RATE_LIMITED
        elif code >= 500:
            status = CallStatus.SERVER_ERROR
        elif code == 408:
            status = CallStatus.TIMEOUT
        else:
            status = CallStatus.CLIENT_ERROR
        body_text = text or raw.decode(charset, "replace")
        error = self._redact(f"HTTP {code}: {body_text[:_ERROR_BODY_CHARS]}")
        retry_after = parse_retry_after(headers)
        return (AttemptRecord(n, status, code, usage, cost, retry_after_s=retry_after, error=error),
                WireReply(status, error=error))

    def _streamed(self, n: int, code: int, state: StreamState, model: str,
                  cut: tuple[CallStatus, str] | None) -> tuple[AttemptRecord, WireReply]:
        """The record of a streamed reply; ``cut``: how its reading failed (the module doc's
        billing rule for a stream that did not reach its terminator)."""
        usage = self.parse_usage(state.usage) if state.usage is not None else None
        cost = self.prices.cost(model, usage).usd
        said = f"after {state.events} events ({len(state.text)} characters of text)"
        if state.complete:
            reply = state.reply()
            if state.malformed:
                reply = WireReply(CallStatus.MALFORMED, finish_reason=reply.finish_reason,
                                  response_id=reply.response_id, error=state.malformed)
        elif state.failed is not None:
            reply = WireReply(state.failed, error=f"error event in the stream {said}: {state.error}")
        elif cut is not None:
            reply = WireReply(cut[0], error=f"stream cut off {said}: {cut[1]}")
        else:
            reply = WireReply(CallStatus.SERVER_ERROR,
                              error=f"stream ended without its terminator {said}")
        reply = replace(reply, error=self._redact(reply.error))
        return AttemptRecord(n, reply.status, code, usage, cost, error=reply.error), reply

    def _call(self, prompt: Prompt, model: str, temperature: float | None, request: WireRequest,
              records: list[AttemptRecord], reply: WireReply, elapsed: float) -> LLMCall:
        usage: Usage | None = None
        unpriced = False
        for r in records:
            if r.usage is not None:
                usage = r.usage if usage is None else usage + r.usage
                unpriced = unpriced or not self.prices.cost(model, r.usage).priced
        extra = {"attempts": attempts_json(records), "endpoint_kind": self.kind}
        if unpriced:
            extra["price"] = "unknown"
        options = self.config.options_for(model).to_json()
        if options:
            extra["request_options"] = orjson.dumps(options).decode()
        if request.stream:
            extra["stream"] = "1"
        return LLMCall(provider=self.config.name, model=model, prompt=prompt, status=reply.status,
                       text=reply.text, usage=usage, cost_usd=sum(r.cost_usd for r in records),
                       latency_s=elapsed, attempts=len(records), finish_reason=reply.finish_reason,
                       error=self._redact(reply.error), response_id=reply.response_id,
                       temperature=temperature, max_tokens=request.max_tokens, extra=extra,
                       tool_calls=reply.tool_calls)


def _retryable(record: AttemptRecord) -> bool:
    return record.status in (CallStatus.RATE_LIMITED, CallStatus.SERVER_ERROR, CallStatus.TIMEOUT)


def _final_timeout(last: WireReply, why: str) -> WireReply:
    """The outcome when the deadline ends the call: the last attempt's status, else TIMEOUT."""
    if last.status is CallStatus.TIMEOUT:
        return WireReply(CallStatus.TIMEOUT, error=f"{last.error}; {why}" if last.error else why)
    return last

