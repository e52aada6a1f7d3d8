"""A scripted LLM server on loopback that speaks OpenAI Chat Completions and Anthropic Messages.

Run as its own process (``python -m tests.generators.fake_llm_server SCRIPT.json BILLING.jsonl
REQUESTS.jsonl [CERT KEY]`` from the repository's root; with a certificate and key it speaks
TLS); it prints ``PORT <n>`` once it listens on ``127.0.0.1:<n>``. The script is::

    {"endpoints": {"<name>": {"replies": [REPLY, ...], "default": REPLY}}}

``POST /<name>/v1/chat/completions`` answers in the OpenAI format, ``POST /<name>/v1/messages``
in the Anthropic one; each request takes the endpoint's next reply (``default`` once the list is
spent; without one, a 500 marked ``exhausted``). An endpoint may also have ``routes``:
``{"<problem>|<temperature>|<turn>": [REPLY, ...]}`` — a request whose prompt names that problem
(``Problem `aten::add```), with that temperature (``None`` when not sent) and that many assistant
messages plus one, takes that route's next reply (its last one repeats), whatever else is in
flight: a sweep's concurrent trajectories get deterministic replies. A REPLY is a dict with ``kind``:

* ``ok`` / ``truncated``: a normal reply (``text``; truncated: finish_reason ``length`` or
  stop_reason ``max_tokens``) with ``usage`` given in the endpoint's own wire format; with
  ``tool_calls`` (``[{"id", "name", "arguments"}]``, arguments a JSON string or an object) the
  reply asks for those tools — OpenAI ``message.tool_calls`` and finish_reason ``tool_calls``,
  Anthropic ``tool_use`` blocks and stop_reason ``tool_use`` (streamed too: see
  tests/generators/fake_llm_stream.py); ``raw_tool_calls`` puts its value in the body as it is
  (OpenAI ``message.tool_calls``, Anthropic one more content block), for replies that break the
  wire format; with
  ``"bill": "always"`` it is billed even when it could not be sent (the client went away while
  it was generated, as a provider bills what it generated);
* ``error``: HTTP ``status`` with optional ``headers`` (e.g. Retry-After), ``body`` text and
  ``usage`` (added to a JSON error body);
* ``hang``: no reply until the client goes away (or ``hang_s``, default 30 s);
* ``malformed``: a 200 whose body is ``not_json`` (plain text), ``truncated_json`` (a valid reply
  cut in half) or ``no_choices`` (valid JSON that is not the wire format), with or without usage;
* ``drop``: a 200 whose Content-Length promises the whole reply (usage first), of which two thirds
  are sent before the connection is closed: the server bills it, the client never has it whole;
* ``garbage``: bytes that are not HTTP, then the connection closes.

A request whose body says ``"stream": true`` gets an ``ok``/``truncated`` reply as server-sent
events, one chunk each (tests/generators/fake_llm_stream.py: the events, ``bad_event`` and
``stream_error``), unless the reply says ``ignore_stream``; ``cut_after`` closes the connection
after that many events (no terminating chunk), ``event_delay_s`` sleeps before each event. Any
reply may say ``delay_s`` (sleep before answering) and ``gzip`` (compress the body whatever the
client accepts). The server appends one JSON line per response it sent to the billing log —
``{"endpoint", "seq", "idempotency_key", "kind", "http_status", "sent", "usage"}``, where
``usage`` (what it billed: the books are kept by idempotency key) is exactly the
wire-format usage object the body carried (null when none; for ``not_json``/``truncated_json``
it is the object embedded in the broken text; for a stream, what the events sent carried, merged
as a client reads them, and ``sent`` says whether the stream was complete) — and
one line per request to the request log, with the headers it saw, its body, its start and end
times, the client's port and how many requests of that endpoint were in flight when it arrived.
The request line is written just before the reply (its end time is then), so a client holding a
reply can read the request it answered; a request that got no reply is logged when the server
gives up on it.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import select
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.generators.fake_llm_stream import carried, events

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


class _State:
    def __init__(self, script: dict[str, Any], billing: Path, requests: Path) -> None:
        self.endpoints: dict[str, dict[str, Any]] = script["endpoints"]
        self.next: dict[str, int] = {name: 0 for name in self.endpoints}
        self.in_flight: dict[str, int] = {name: 0 for name in self.endpoints}
        self.seq = 0
        self.lock = threading.Lock()
        self.billing = billing
        self.requests = requests

    def take(self, endpoint: str, body: Any = None) -> tuple[int, dict[str, Any], int]:
        with self.lock:
            self.seq += 1
            spec = self.endpoints[endpoint]
            route = _route(body)
            routes = spec.get("routes", {})
            if route in routes:  # the route's replies in order; its last one repeats
                i = self.next.setdefault(f"{endpoint}|{route}", 0)
                self.next[f"{endpoint}|{route}"] = i + 1
                reply = routes[route][min(i, len(routes[route]) - 1)]
                self.in_flight[endpoint] += 1
                return self.seq, reply, self.in_flight[endpoint]
            i = self.next[endpoint]
            self.next[endpoint] = i + 1
            replies = spec.get("replies", [])
            reply = replies[i] if i < len(replies) else spec.get("default", {"kind": "exhausted"})
            self.in_flight[endpoint] += 1
            return self.seq, reply, self.in_flight[endpoint]

    def done(self, endpoint: str) -> None:
        with self.lock:
            self.in_flight[endpoint] -= 1

    def log(self, path: Path, record: dict[str, Any]) -> None:
        with self.lock, path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def _route(body: Any) -> str:
    """``problem|temperature|turn`` of a request: the problem its prompt names, its temperature
    and how many assistant replies it already holds plus one."""
    if not isinstance(body, dict):
        return ""
    messages = body.get("messages") or []
    text = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    problem = re.search(r"Problem `([^`]+)`", text)
    turn = 1 + sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
    return f"{problem.group(1) if problem else ''}|{body.get('temperature')}|{turn}"


def arguments_text(arguments: Any) -> str:
    """A scripted tool call's arguments as the JSON text OpenAI sends (a string stays as is)."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def arguments_object(arguments: Any) -> Any:
    """A scripted tool call's arguments as the object Anthropic sends."""
    return json.loads(arguments) if isinstance(arguments, str) else arguments


def _openai_body(reply: dict[str, Any], seq: int) -> dict[str, Any]:
    calls = reply.get("tool_calls") or []
    finish = "length" if reply["kind"] == "truncated" else "tool_calls" if calls else "stop"
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("text", "")}
    if calls:
        message["content"] = reply.get("text") or None
        message["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
            "name": c["name"], "arguments": arguments_text(c["arguments"])}} for c in calls]
    if "raw_tool_calls" in reply:
        message["tool_calls"] = reply["raw_tool_calls"]
    body: dict[str, Any] = {
        "id": f"chatcmpl-{seq}", "object": "chat.completion", "model": "fake",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
    }
    if reply.get("usage") is not None:
        body["usage"] = reply["usage"]
    return body


def _anthropic_body(reply: dict[str, Any], seq: int) -> dict[str, Any]:
    calls = reply.get("tool_calls") or []
    stop = "max_tokens" if reply["kind"] == "truncated" else "tool_use" if calls else "end_turn"
    content: list[Any] = [{"type": "thinking", "thinking": "hmm", "signature": "x"},
                          {"type": "text", "text": reply.get("text", "")}]
    content += [{"type": "tool_use", "id": c["id"], "name": c["name"],
                 "input": arguments_object(c["arguments"])} for c in calls]
    if "raw_tool_calls" in reply:
        content.append(reply["raw_tool_calls"])
    body: dict[str, Any] = {
        "id": f"msg_{seq}", "type": "message", "role": "assistant", "model": "fake",
        "content": content, "stop_reason": stop,
    }
    if reply.get("usage") is not None:
        body["usage"] = reply["usage"]
    return body


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        state = self.server.state
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length)
        parts = self.path.split("?", 1)[0].split("/", 2)  # a query (Claude Code: ?beta=true) is ignored
        endpoint = parts[1] if len(parts) > 2 else ""
        rest = "/" + parts[2] if len(parts) > 2 else ""
        if endpoint not in state.endpoints or rest not in (OPENAI_PATH, ANTHROPIC_PATH):
            self._send(404, b'{"error": "no such endpoint"}', {})
            return
        wire = "openai" if rest == OPENAI_PATH else "anthropic"
        try:
            parsed: Any = json.loads(raw)
        except ValueError:
            parsed = None
        seq, reply, in_flight = state.take(endpoint, parsed)
        self._counted: str | None = endpoint
        self._request_record: dict[str, Any] | None = {
            "endpoint": endpoint, "seq": seq, "wire": wire, "path": self.path,
            "authorization": self.headers.get("authorization"),
            "x_api_key": self.headers.get("x-api-key"),
            "anthropic_version": self.headers.get("anthropic-version"),
            "idempotency_key": self.headers.get("idempotency-key"),
            "accept_encoding": self.headers.get("accept-encoding"),
            "peer_port": self.client_address[1],
            "body": parsed, "t_start": time.time(), "in_flight": in_flight,
        }
        stream = isinstance(parsed, dict) and parsed.get("stream") is True
        try:
            sent, status, usage = self._reply(wire, reply, seq, stream)
        finally:
            self._uncount()
            self._log_request()  # a request that got no reply
        state.log(state.billing, {"endpoint": endpoint, "seq": seq,
                                  "idempotency_key": self.headers.get("idempotency-key"),
                                  "kind": reply["kind"], "http_status": status, "sent": sent,
                                  "usage": usage})

    def _reply(self, wire: str, reply: dict[str, Any], seq: int,
               stream: bool) -> tuple[bool, int, Any]:
        """Send the scripted reply; returns (sent whole, HTTP status, the usage object the bytes
        that went out carried: None for a reply that failed to go out, except a ``drop`` (billed
        before it was cut) and a stream (what its sent events carried))."""
        time.sleep(float(reply.get("delay_s", 0.0)))
        kind = reply["kind"]
        usage = reply.get("usage")
        if kind == "hang":
            self._wait_for_disconnect(float(reply.get("hang_s", 30.0)))
            return False, 0, None
        if kind in ("ok", "truncated") and stream and not reply.get("ignore_stream"):
            return self._stream(wire, reply, seq)
        if kind in ("ok", "truncated"):
            body = _openai_body(reply, seq) if wire == "openai" else _anthropic_body(reply, seq)
            sent = self._send(200, json.dumps(body).encode(), {}, reply)
            return sent, 200, usage if sent or reply.get("bill") == "always" else None
        if kind == "drop":
            body = _openai_body(reply, seq) if wire == "openai" else _anthropic_body(reply, seq)
            data = json.dumps({"usage": usage, **body}).encode()
            self._uncount()
            self._log_request()
            self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             + f"content-length: {len(data)}\r\n\r\n".encode()
                             + data[: len(data) * 2 // 3])
            self.wfile.flush()
            self.close_connection = True
            return False, 200, usage
        if kind == "garbage":
            self._uncount()
            self._log_request()
            self.wfile.write(b"SSH-2.0-OpenSSH_9.6 not HTTP at all\r\n\r\n")
            self.wfile.flush()
            self.close_connection = True
            return False, 0, None
        if kind == "error":
            status = int(reply["status"])
            text = reply.get("body")
            if text is None:
                err: dict[str, Any] = {"error": {"type": "scripted", "message": f"scripted {status}"}}
                if usage is not None:
                    err["usage"] = usage
                text = json.dumps(err)
            sent = self._send(status, text.encode(), reply.get("headers", {}))
            return sent, status, usage if sent else None
        if kind == "malformed":
            shape = reply.get("shape", "no_choices")
            if shape == "no_choices":
                obj: dict[str, Any] = {"id": f"bad-{seq}", "object": "chat.completion"}
                if usage is not None:
                    obj["usage"] = usage
                data = json.dumps(obj).encode()
            elif shape == "truncated_json":
                full = _openai_body(reply, seq) if wire == "openai" else _anthropic_body(reply, seq)
                if usage is not None:  # usage first, so the cut keeps it
                    full = {"usage": usage, **{k: v for k, v in full.items() if k != "usage"}}
                text = json.dumps(full)
                data = text[: len(text) * 2 // 3].encode()
            else:  # not_json
                data = b"<html>502 upstream said: "
                if usage is not None:
                    data += b'partial "usage": ' + json.dumps(usage).encode()
                data += b"</html>"
            sent = self._send(200, data, {})
            return sent, 200, usage if sent else None
        return self._send(500, b'{"error": "script exhausted"}', {}), 500, None

    def _uncount(self) -> None:
        endpoint = getattr(self, "_counted", None)
        if endpoint is not None:
            self.server.state.done(endpoint)
            self._counted = None

    def _log_request(self) -> None:
        record = getattr(self, "_request_record", None)
        if record is not None:
            self._request_record = None
            self.server.state.log(self.server.state.requests, {**record, "t_end": time.time()})

    def _stream(self, wire: str, reply: dict[str, Any], seq: int) -> tuple[bool, int, Any]:
        """The reply as server-sent events, one chunk each; ``cut_after`` events, then close."""
        planned = events(wire, reply, seq)
        cut = reply.get("cut_after")
        sending = planned if cut is None else planned[: int(cut)]
        self._uncount()
        self._log_request()
        sent: list[tuple[bytes, Any]] = []
        try:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for data, usage in sending:
                time.sleep(float(reply.get("event_delay_s", 0.0)))
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
                sent.append((data, usage))
            if cut is None:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            else:
                self.close_connection = True
        except OSError:
            self.close_connection = True
        return len(sent) == len(planned), 200, carried(wire, sent)

    def _send(self, status: int, data: bytes, headers: dict[str, str],
              reply: dict[str, Any] | None = None) -> bool:
        self._uncount()  # before the client can see the reply and send its next request
        self._log_request()  # likewise: a client holding the reply finds its request logged
        if reply is not None and reply.get("gzip"):
            data = gzip.compress(data)
            headers = {**headers, "content-encoding": "gzip"}
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            return True
        except OSError:
            return False

    def _wait_for_disconnect(self, limit_s: float) -> None:
        end = time.monotonic() + limit_s
        conn = self.connection
        while time.monotonic() < end:
            ready, _, _ = select.select([conn], [], [], 0.05)
            if ready:
                try:
                    if not conn.recv(1, socket.MSG_PEEK):
                        break
                except OSError:
                    break
                time.sleep(0.05)  # data pending (a pipelined request): keep hanging
        self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: _State

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ssl.SSLError):
            return  # a client that does not trust our certificate: what a TLS test expects
        super().handle_error(request, client_address)


def main(argv: list[str]) -> None:
    script_path, billing, requests = (Path(a) for a in argv[1:4])
    server = _Server(("127.0.0.1", 0), _Handler)
    if len(argv) > 5:  # TLS with this certificate and key
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(argv[4], argv[5])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.state = _State(json.loads(script_path.read_text()), billing, requests)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever(poll_interval=0.05)


# -- the test side: start the server process and read its logs ---------------------------------


@dataclass
class FakeServer:
    port: int
    billing_path: Path
    requests_path: Path
    scheme: str = "http"

    def url(self, endpoint: str, wire: str) -> str:
        """The base URL a provider of that wire format is configured with."""
        root = f"{self.scheme}://127.0.0.1:{self.port}/{endpoint}"
        return root + "/v1" if wire == "openai" else root

    def billing(self, endpoint: str | None = None) -> list[dict[str, Any]]:
        return [r for r in _read_jsonl(self.billing_path) if endpoint in (None, r["endpoint"])]

    def wait_billing(self, n: int, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        """The billing log once it holds ``n`` lines (the server writes each after sending)."""
        end = time.monotonic() + timeout_s
        while True:
            rows = self.billing()
            if len(rows) >= n or time.monotonic() > end:
                return rows
            time.sleep(0.02)

    def requests(self, endpoint: str | None = None) -> list[dict[str, Any]]:
        rows = [r for r in _read_jsonl(self.requests_path) if endpoint in (None, r["endpoint"])]
        return sorted(rows, key=lambda r: r["seq"])


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@contextmanager
def fake_server(script: dict[str, Any], workdir: Path,
                tls: tuple[Path, Path] | None = None) -> Iterator[FakeServer]:
    """Run the server in a separate process for the duration of the block (speaking TLS with
    ``tls``'s certificate and key when given)."""
    script_path = workdir / "script.json"
    script_path.write_text(json.dumps(script))
    billing, requests = workdir / "billing.jsonl", workdir / "requests.jsonl"
    args = [str(script_path), str(billing), str(requests), *(str(p) for p in tls or ())]
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "tests.generators.fake_llm_server", *args],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=root)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"fake LLM server did not start (said {line!r})")
        yield FakeServer(int(line.split()[1]), billing, requests, "https" if tls else "http")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


if __name__ == "__main__":
    main(sys.argv)
