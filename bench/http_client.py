"""CPU time per LLM request of the providers' HTTP path (issues #6 and #21: coordinator CPU).

The generator actors spend most of their CPU in the HTTP request path, so this measures that
path alone: the process CPU time (``time.process_time``: every thread of this process, user and
system) over many requests with many in flight, against the loopback fake LLM
(``bench/fake_llm.py``) running in ANOTHER process, so the server's CPU is not counted. CPU per
request, unlike wall-clock throughput, stays meaningful on a small machine that other work
shares. ::

    python bench/http_client.py                      # every client, 5,000 requests, 500 in flight
    python bench/http_client.py --clients transport,provider --requests 5000 --in-flight 500 --repeat 3

Clients (``--clients``, comma-separated):

* ``transport``: ``generators.providers.transport.Transport`` as the providers use it (aiohttp,
  one session with a connector of ``--in-flight`` connections): the body encoded by orjson, the
  reply read whole. (Before issue #21 this was ``kgb``, the hand-written client that aiohttp
  replaced; measure it on a checkout before that change.)
* ``httpx``: httpx as the providers used it before (``trust_env``, pools of at most 32
  connections with the least busy one chosen, each post under ``asyncio.wait_for``), then
  ``text``; skipped with a note when httpx is not installed (it is no longer a dependency);
* ``provider``: a whole ``Provider.complete`` (OpenAI wire format: request building, limits,
  the HTTP call, JSON decoding, usage and the call record), whatever client it uses.

Each client is measured ``--repeat`` times, each time with a fresh client whose connections are
first opened by a warm-up of ``--in-flight`` requests (not measured). The fake LLM answers after
``--latency-s`` with an aten::add kernel (about 2 KB of JSON); the request carries a prompt of
``--prompt-kb`` KiB. Prints a Markdown table and writes ``bench/results/sweep/http-client-
<date>.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MODEL = "fake-model"
Send = Callable[[], Awaitable[None]]


def _prompt_text(kb: int) -> str:
    """A user message that names a problem (so the fake replies with a kernel), ``kb`` KiB long."""
    head = "Problem `aten::add`: write a Triton kernel for elementwise addition.\n"
    filler = "Use tl.load and tl.store with a mask; keep the block size a power of two.\n"
    return head + filler * max(0, (kb * 1024 - len(head)) // len(filler))


def _body(kb: int) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 4000,
            "messages": [{"role": "system", "content": "You write Triton kernels."},
                         {"role": "user", "content": _prompt_text(kb)}]}


_HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench-not-a-key"}


class Client:
    """One client under test: ``send`` makes one request; ``close`` releases its connections."""

    name = ""

    def __init__(self, url: str, in_flight: int, kb: int) -> None:
        self.url = url
        self.in_flight = in_flight
        self.body = _body(kb)

    async def send(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError


class TransportClient(Client):
    """The providers' transport (made on the running loop, as a provider makes it)."""

    name = "transport"

    def __init__(self, url: str, in_flight: int, kb: int) -> None:
        super().__init__(url, in_flight, kb)
        from generators.providers.transport import Transport

        self.transport = Transport(max_connections=in_flight)

    async def send(self) -> None:
        import orjson

        async with self.transport.post(self.url + "/chat/completions", orjson.dumps(self.body),
                                       _HEADERS, timeout=60.0) as response:
            status, data = response.status, await response.body()
        if status != 200 or not orjson.loads(data):
            raise RuntimeError(f"HTTP {status}")

    async def close(self) -> None:
        await self.transport.aclose()


class HttpxClient(Client):
    """httpx exactly as generators/providers/base.py used it before our own client."""

    name = "httpx"
    POOL_CONNECTIONS = 32

    def __init__(self, url: str, in_flight: int, kb: int) -> None:
        super().__init__(url, in_flight, kb)
        import httpx

        n = math.ceil(in_flight / self.POOL_CONNECTIONS)
        per = math.ceil(in_flight / n)
        limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
        self.clients = [httpx.AsyncClient(limits=limits, trust_env=True) for _ in range(n)]
        self.busy = [0] * n

    async def send(self) -> None:
        i = min(range(len(self.clients)), key=self.busy.__getitem__)
        self.busy[i] += 1
        try:
            response = await asyncio.wait_for(
                self.clients[i].post(self.url + "/chat/completions", json=self.body,
                                     headers=_HEADERS, timeout=60.0), 61.0)
        finally:
            self.busy[i] -= 1
        if response.status_code != 200 or not response.text:
            raise RuntimeError(f"HTTP {response.status_code}")

    async def close(self) -> None:
        for client in self.clients:
            await client.aclose()


class ProviderClient(Client):
    """A whole ``Provider.complete`` call (whatever HTTP client the providers use)."""

    name = "provider"

    def __init__(self, url: str, in_flight: int, kb: int) -> None:
        super().__init__(url, in_flight, kb)
        from generators.llm import Message, Prompt, Role
        from generators.providers import EndpointConfig, create

        self.provider = create(EndpointConfig(name="bench", kind="openai", base_url=url,
                                              max_concurrency=in_flight, timeout_s=60.0,
                                              max_retries=0))
        self.prompt = Prompt(messages=(Message(Role.SYSTEM, "You write Triton kernels."),
                                       Message(Role.USER, _prompt_text(kb))),
                             template="bench/v1", operator_id="aten::add")

    async def send(self) -> None:
        from generators.llm import CallStatus

        call = await self.provider.complete(self.prompt, model=MODEL, temperature=None,
                                            max_tokens=4000, deadline_s=60.0)
        if call.status is not CallStatus.OK:
            raise RuntimeError(f"{call.status.value}: {call.error}")

    async def close(self) -> None:
        await self.provider.aclose()


CLIENTS: dict[str, type[Client]] = {"transport": TransportClient, "httpx": HttpxClient,
                                    "provider": ProviderClient}


async def _drive(send: Send, requests: int, in_flight: int) -> int:
    """``requests`` calls of ``send``, ``in_flight`` at a time; returns how many failed."""
    failed = 0
    left = requests

    async def worker() -> None:
        nonlocal failed, left
        while left > 0:
            left -= 1
            try:
                await send()
            except Exception as exc:  # noqa: BLE001 - counted and reported, never hidden
                failed += 1
                if failed <= 3:
                    print(f"  request failed: {type(exc).__name__}: {exc}", file=sys.stderr)

    await asyncio.gather(*(worker() for _ in range(min(in_flight, requests))))
    return failed


async def _measure(kind: type[Client], url: str, args: argparse.Namespace) -> dict[str, Any]:
    client = kind(url, args.in_flight, args.prompt_kb)
    try:
        warm_failed = await _drive(client.send, args.in_flight, args.in_flight)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        failed = await _drive(client.send, args.requests, args.in_flight)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    finally:
        await client.close()
    return {"client": kind.name, "requests": args.requests, "in_flight": args.in_flight,
            "failed": failed, "warmup_failed": warm_failed, "cpu_s": round(cpu, 4),
            "cpu_us_per_request": round(cpu / args.requests * 1e6, 1),
            "wall_s": round(wall, 3), "requests_per_s": round(args.requests / wall, 1)}


def _start_fake(args: argparse.Namespace) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, str(REPO / "bench" / "fake_llm.py"),
                             "--latency-s", str(args.latency_s), "--jitter", "0.1"],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise SystemExit(f"fake LLM did not start (said {line!r})")
    return proc, int(line.split()[1])


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", default="httpx,transport,provider",
                    help="comma-separated: " + ", ".join(CLIENTS))
    ap.add_argument("--requests", type=int, default=5000, help="measured requests per run")
    ap.add_argument("--in-flight", type=int, default=500, help="requests in flight at once")
    ap.add_argument("--repeat", type=int, default=3, help="runs per client")
    ap.add_argument("--latency-s", type=float, default=0.05, help="the fake LLM's reply latency")
    ap.add_argument("--prompt-kb", type=int, default=8, help="size of the prompt sent")
    ap.add_argument("--out", default=None, help="JSON result file")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.clients.split(",") if n.strip()]
    unknown = [n for n in names if n not in CLIENTS]
    if unknown:
        ap.error(f"unknown clients {unknown}; choose from {sorted(CLIENTS)}")
    if "httpx" in names and _version("httpx") is None:
        print("httpx is not installed (no longer a dependency): skipping it; "
              "pip install httpx==0.28.1 to compare", file=sys.stderr)
        names.remove("httpx")

    proc, port = _start_fake(args)
    url = f"http://127.0.0.1:{port}/v1"
    runs: list[dict[str, Any]] = []
    try:
        for name in names:
            for i in range(args.repeat):
                run = asyncio.run(_measure(CLIENTS[name], url, args))
                run["run"] = i + 1
                runs.append(run)
                print(f"{name} run {i + 1}: {run['cpu_us_per_request']} us CPU/request, "
                      f"{run['failed']} failed", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    print("| client | run | requests | in flight | CPU s | CPU µs/request | wall s | failed |")
    print("|---|---|---|---|---|---|---|---|")
    for r in runs:
        print(f"| {r['client']} | {r['run']} | {r['requests']} | {r['in_flight']} | {r['cpu_s']} "
              f"| {r['cpu_us_per_request']} | {r['wall_s']} | {r['failed']} |")
    now = datetime.now(timezone.utc)
    out = Path(args.out) if args.out else (
        REPO / "bench" / "results" / "sweep" / f"http-client-{now:%Y%m%d-%H%M%S}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "date": now.isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "python": platform.python_version(), "httpx": _version("httpx"),
                    "aiohttp": _version("aiohttp"),
                    "git": _git_head()},
        "settings": {"requests": args.requests, "in_flight": args.in_flight,
                     "latency_s": args.latency_s, "prompt_kb": args.prompt_kb},
        "runs": runs}, indent=2) + "\n")
    print(f"\nwritten: {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")


def _git_head() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


if __name__ == "__main__":
    main()
