"""A loopback fake LLM for sweep benchmarks and tests: OpenAI Chat Completions, many in flight.

Run it as its own process::

    python bench/fake_llm.py --latency-s 20 --prompt-tokens 20000 --completion-tokens 4000 \
        --log billing.jsonl

It prints ``PORT <n>`` once it listens on ``127.0.0.1:<n>``. ``POST /v1/chat/completions``
sleeps ``--latency-s`` (times a uniform factor in ``1 +- --jitter``), then answers with the
reference solution of the problem the prompt names (``Problem `aten::add```), tagged with the
reply's sequence number so no two candidates are alike, and the configured usage. ``--fail-every
N`` answers every N-th request with a 503 (no usage, not billed: the client retries).

Idempotency: a request with an ``Idempotency-Key`` header is generated once per key. A repeat
of a key (the same body) waits for or returns the first reply and is billed only if no reply
under that key was billed yet; a repeat with a different body gets a 422. Failed (503) replies
are not kept, so a retry generates anew. The last ``--idempotency-keys`` keys are remembered.

Its own books: one JSON line per billed reply in ``--log`` (``seq``, prompt and completion
tokens), written just **before** the reply is sent to a client that is still connected (a reply
whose client hung up while it was being "generated" is counted as abandoned, not billed), and
``GET /stats`` (calls, tokens, requests received, replies generated, repeats answered from a
key without billing, in flight now and at most, abandoned).
SIGTERM or SIGINT flush the log and exit. One asyncio loop, no thread per request: thousands of
concurrent requests cost little CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
import signal
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_PROBLEM = re.compile(r"Problem `([^`]+)`")


@dataclass
class _Keyed:
    """One idempotency key's reply: generated once, billed at most once."""

    body_digest: str
    reply: asyncio.Future[tuple[int, dict[str, Any]]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())
    billed: bool = False


class FakeLLM:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.seq = 0        # replies generated
        self.requests = 0   # chat requests received, repeats of a key included
        self.replayed = 0   # repeats answered from their key's reply without billing
        self.keyed: OrderedDict[str, _Keyed] = OrderedDict()
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.failed = 0
        self.abandoned = 0  # replies whose client was gone when they were ready (not billed)
        self.rng = random.Random(args.seed)
        self.log = open(args.log, "a", buffering=1 << 16) if args.log else None  # noqa: SIM115
        self._solutions: dict[str, str] = {}

    def solution(self, operator_id: str) -> str:
        if operator_id not in self._solutions:
            try:
                import operators

                self._solutions[operator_id] = operators.get(operator_id).solution
            except Exception:  # noqa: BLE001 - an unknown problem gets a reply without a kernel
                self._solutions[operator_id] = ""
        return self._solutions[operator_id]

    def reply_text(self, body: dict[str, Any], seq: int) -> str:
        text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        m = _PROBLEM.search(text)
        code = self.solution(m.group(1)) if m else ""
        if not code:
            return f"I cannot help with that (reply {seq})."
        return f"Here is a kernel.\n\n```python\n{code.rstrip()}\n# fake-llm reply {seq}\n```\n"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (ln.partition(":") for ln in lines[1:] if ln)}
                n = int(headers.get("content-length", "0") or 0)
                raw = await reader.readexactly(n) if n else b""
                key = headers.get("idempotency-key", "")
                keyed: _Keyed | None = None
                if key and method == "POST" and path.endswith("/chat/completions"):
                    status, payload, keyed = await self.respond_keyed(key, path, raw)
                else:
                    status, payload = await self.respond(method, path, raw)
                usage = payload.get("usage") if status == 200 else None
                if usage is not None:
                    if reader.at_eof():  # the client went away while we "generated": not billed
                        self.abandoned += 1
                        return
                    if keyed is not None and keyed.billed:
                        self.replayed += 1  # this key's reply was billed once already
                    else:
                        self.bill(usage)
                        if keyed is not None:
                            keyed.billed = True
                data = json.dumps(payload).encode()
                writer.write(f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
                             f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                             "\r\n".encode() + data)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def respond_keyed(self, key: str, path: str, raw: bytes
                            ) -> tuple[int, dict[str, Any], _Keyed | None]:
        digest = hashlib.sha256(raw).hexdigest()
        keyed = self.keyed.get(key)
        if keyed is not None:
            self.requests += 1
            if keyed.body_digest != digest:
                return 422, {"error": {"message": "Idempotency-Key reused with a different "
                                                  "request body"}}, None
            self.keyed.move_to_end(key)
            status, payload = await asyncio.shield(keyed.reply)
            return status, payload, keyed
        keyed = self.keyed[key] = _Keyed(digest)
        while len(self.keyed) > self.args.idempotency_keys:
            self.keyed.popitem(last=False)
        try:
            status, payload = await self.respond("POST", path, raw)
        except BaseException:
            self.keyed.pop(key, None)
            keyed.reply.cancel()
            raise
        if status != 200:  # a failure is not kept: a retry under the key generates anew
            self.keyed.pop(key, None)
        keyed.reply.set_result((status, payload))
        return status, payload, keyed

    async def respond(self, method: str, path: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        if method == "GET" and path == "/stats":
            return 200, self.stats()
        if method != "POST" or not path.endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {method} {path}"}}
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, {"error": {"message": "body is not JSON"}}
        self.requests += 1
        self.seq += 1
        seq = self.seq
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            a = self.args
            await asyncio.sleep(max(0.0, a.latency_s * (1 + a.jitter * (2 * self.rng.random() - 1))))
            if a.fail_every and seq % a.fail_every == 0:
                self.failed += 1
                return 503, {"error": {"message": "overloaded (scripted)"}}
            usage = {"prompt_tokens": a.prompt_tokens, "completion_tokens": a.completion_tokens,
                     "total_tokens": a.prompt_tokens + a.completion_tokens}
            return 200, {"id": f"fake-{seq}", "object": "chat.completion",
                         "model": body.get("model", ""),
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant",
                                                  "content": self.reply_text(body, seq)}}],
                         "usage": usage}
        finally:
            self.in_flight -= 1

    def bill(self, usage: dict[str, int]) -> None:
        """Book a reply about to be sent to a live client (before it is written: a client that
        dies after this line has been billed, as a real provider would have billed it)."""
        self.calls += 1
        self.prompt_tokens += usage["prompt_tokens"]
        self.completion_tokens += usage["completion_tokens"]
        if self.log is not None:
            self.log.write(json.dumps({"seq": self.calls, "prompt_tokens": usage["prompt_tokens"],
                                       "completion_tokens": usage["completion_tokens"]}) + "\n")

    def stats(self) -> dict[str, Any]:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
                "in_flight": self.in_flight, "max_in_flight": self.max_in_flight,
                "failed": self.failed, "abandoned": self.abandoned, "requests": self.requests,
                "generated": self.seq, "replayed": self.replayed}

    def close(self) -> None:
        if self.log is not None:
            self.log.flush()
            self.log.close()
            self.log = None


async def main(args: argparse.Namespace) -> None:
    fake = FakeLLM(args)
    server = await asyncio.start_server(fake.handle, "127.0.0.1", args.port, backlog=4096,
                                        limit=1 << 24)
    port = server.sockets[0].getsockname()[1]
    if args.port_file:
        Path(args.port_file).write_text(str(port))
    print(f"PORT {port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def flusher() -> None:
        while True:
            await asyncio.sleep(0.5)
            if fake.log is not None:
                fake.log.flush()

    task = loop.create_task(flusher())
    await stop.wait()
    task.cancel()
    server.close()
    fake.close()


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--port-file", default=None, help="also write the port here")
    ap.add_argument("--latency-s", type=float, default=1.0, help="seconds before each reply")
    ap.add_argument("--jitter", type=float, default=0.1, help="latency varies by +- this fraction")
    ap.add_argument("--prompt-tokens", type=int, default=2000, help="usage reported per reply")
    ap.add_argument("--completion-tokens", type=int, default=800, help="usage reported per reply")
    ap.add_argument("--fail-every", type=int, default=0, help="every N-th request gets a 503")
    ap.add_argument("--log", default=None, help="append one JSON line per billed reply")
    ap.add_argument("--idempotency-keys", type=int, default=100_000,
                    help="how many Idempotency-Key replies to remember (oldest forgotten first)")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args(argv)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    try:
        asyncio.run(main(parse()))
    except KeyboardInterrupt:
        pass
