"""Providers against real HTTP servers: a scripted server process on loopback per test.

The central check is reconciliation: for each wire format a script of normal, cached/reasoning,
429, 500, hanging, truncated and malformed replies is played through the provider, and the
tokens the project recorded equal, attempt by attempt, the tokens the server logged as billed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pickle
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from generators.llm import CallStatus, LLMCall, Usage
from generators.providers import (
    EndpointConfig,
    PriceError,
    PriceTable,
    ProviderConfigError,
    attempt_records,
    create,
    provider_class,
)
from generators.providers.limits import TokenBucket
from generators.providers.wire import parse_retry_after, scan_usage
from tests.generators.fake_llm_server import fake_server
from tests.generators.llm_helpers import KEY, KEY_ENV, MODEL, PRICES, PROMPT
from tests.generators.llm_helpers import endpoint as _config
from tests.generators.llm_helpers import server_usage as _server_usage
from tests.generators.llm_helpers import wire_usage as _usage


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


# (replies for one call, expected status, expected attempts, expected text)
def _script(wire: str) -> list[tuple[list[dict[str, Any]], CallStatus, int, str]]:
    u = _usage
    return [
        ([{"kind": "ok", "text": "```python\nA\n```", "usage": u(wire, 1200, 300, 1000, 120, 7)}],
         CallStatus.OK, 1, "```python\nA\n```"),
        ([{"kind": "error", "status": 429, "headers": {"Retry-After": "0.3"}},
          {"kind": "ok", "text": "B", "usage": u(wire, 50, 20)}], CallStatus.OK, 2, "B"),
        ([{"kind": "error", "status": 500},
          {"kind": "error", "status": 502, "usage": u(wire, 11, 0)},
          {"kind": "ok", "text": "C", "usage": u(wire, 60, 25, 10, 5)}], CallStatus.OK, 3, "C"),
        ([{"kind": "hang"}, {"kind": "ok", "text": "D", "usage": u(wire, 70, 30)}],
         CallStatus.OK, 2, "D"),
        ([{"kind": "truncated", "text": "def kern", "usage": u(wire, 80, 256, 0, 200)}],
         CallStatus.TRUNCATED, 1, "def kern"),
        ([{"kind": "malformed", "shape": "no_choices", "usage": u(wire, 90, 40)}],
         CallStatus.MALFORMED, 1, ""),
        ([{"kind": "malformed", "shape": "truncated_json", "text": "x" * 200,
           "usage": u(wire, 91, 41, 3, 2)}], CallStatus.MALFORMED, 1, ""),
        ([{"kind": "malformed", "shape": "not_json"}], CallStatus.MALFORMED, 1, ""),
        ([{"kind": "malformed", "shape": "not_json", "usage": u(wire, 92, 42)}],
         CallStatus.MALFORMED, 1, ""),
        ([{"kind": "ok", "text": "no usage"}], CallStatus.OK, 1, "no usage"),  # a 200 without usage
        ([{"kind": "error", "status": 400, "body": '{"error": "bad model"}'}],
         CallStatus.CLIENT_ERROR, 1, ""),
        ([{"kind": "error", "status": 503}] * 3, CallStatus.SERVER_ERROR, 3, ""),
        ([{"kind": "error", "status": 429, "headers": {"retry-after-ms": "30"}}] * 3,
         CallStatus.RATE_LIMITED, 3, ""),
    ]


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_script_reconciles_exactly_with_server_billing(wire: str, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    plan = _script(wire)
    replies = [r for call_replies, *_ in plan for r in call_replies]
    with fake_server({"endpoints": {"ep": {"replies": replies}}}, tmp_path) as server:
        async def run() -> list[LLMCall]:
            async with create(_config(server, wire, "ep"), PRICES) as provider:
                return [await provider.complete(PROMPT, model=MODEL, temperature=0.7,
                                                max_tokens=512, deadline_s=30)
                        for _ in plan]

        calls = asyncio.run(run())
        billing = server.wait_billing(len(replies))
        requests = server.requests()

    for call, (_, status, attempts, text) in zip(calls, plan, strict=True):
        assert (call.status, call.attempts, call.text) == (status, attempts, text), call
        assert len(attempt_records(call)) == attempts
        assert call.provider == f"ep-{wire}" and call.model == MODEL and call.max_tokens == 512
    # One server line per request, in order; each attempt's usage is exactly what the server billed.
    assert len(billing) == len(replies) == sum(c.attempts for c in calls)
    billing.sort(key=lambda r: r["seq"])
    ours = [rec.usage for c in calls for rec in attempt_records(c)]
    theirs = [_server_usage(wire, r["usage"]) if r["sent"] else None for r in billing]
    assert ours == theirs
    # And the totals reconcile: every field, over the whole script.
    total = sum((c.usage for c in calls if c.usage is not None), Usage())
    assert total == sum((u for u in theirs if u is not None), Usage())
    assert total.cached_tokens > 0 and total.reasoning_tokens > (0 if wire == "openai" else -1)
    # Billing rule, call by call: usage is the sum over attempts; None only when no attempt had it.
    for call in calls:
        recs = [r.usage for r in attempt_records(call) if r.usage is not None]
        assert call.usage == (sum(recs, Usage()) if recs else None)
        assert call.billed == bool(recs)
        assert call.cost_usd == pytest.approx(sum(PRICES.cost(MODEL, u).usd for u in recs))
    by_status = {c.status: c for c in calls}
    assert by_status[CallStatus.TRUNCATED].billed and by_status[CallStatus.CLIENT_ERROR].usage is None
    assert [c.billed for c in calls if c.text == "no usage"] == [False]
    malformed = [c for c in calls if c.status is CallStatus.MALFORMED]
    assert [c.billed for c in malformed] == [True, True, False, True]
    first = calls[0].usage
    assert first is not None and first.cached_tokens == 1000
    assert calls[0].cost_usd == pytest.approx((200 * 1.0 + 1000 * 0.25 + 300 * 4.0) / 1e6)
    # The retry after the 429 waited for its Retry-After (0.3 s, plus at most 10 % jitter).
    gap = requests[2]["t_start"] - requests[1]["t_end"]
    assert 0.29 <= gap < 0.8
    # Requests are shaped as the wire format wants, and the key went only into the header.
    body = requests[0]["body"]
    assert body["model"] == MODEL and body["temperature"] == 0.7 and body["max_tokens"] == 512
    if wire == "openai":
        assert requests[0]["authorization"] == f"Bearer {KEY}"
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
    else:
        assert requests[0]["x_api_key"] == KEY and requests[0]["anthropic_version"] == "2023-06-01"
        assert body["system"] == "You write Triton kernels."
        assert [m["role"] for m in body["messages"]] == ["user"]
    _assert_no_key(calls, caplog)


def _assert_no_key(calls: list[LLMCall], caplog: pytest.LogCaptureFixture) -> None:
    for call in calls:
        assert KEY not in repr(call) and KEY not in json.dumps(call.extra)
    assert caplog.records, "the retries should have logged something"
    assert all(KEY not in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_key_never_leaks_even_when_the_server_echoes_it(wire: str, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    echo = {"kind": "error", "status": 401, "body": f'{{"error": "invalid key {KEY}"}}'}
    with fake_server({"endpoints": {"ep": {"replies": [echo]}}}, tmp_path) as server:
        async def run() -> list[LLMCall]:
            refused = EndpointConfig(name="closed", kind=wire,  # type: ignore[arg-type]
                                     base_url="http://127.0.0.1:9", api_key_env=KEY_ENV,
                                     max_retries=1, backoff_base_s=0.01)
            async with create(_config(server, wire, "ep")) as p, create(refused) as q:
                logging.getLogger("test").info("provider %r config %r", p, p.config)
                return [await p.complete(PROMPT, model=MODEL, temperature=None, max_tokens=None,
                                         deadline_s=10),
                        await q.complete(PROMPT, model=MODEL, temperature=None, max_tokens=None,
                                         deadline_s=10)]

        calls = asyncio.run(run())
        seen = server.requests()[0]
    assert (seen["authorization"] if wire == "openai" else seen["x_api_key"]).endswith(KEY)
    assert calls[0].status is CallStatus.CLIENT_ERROR and calls[0].attempts == 1
    assert "invalid key [REDACTED]" in calls[0].error
    assert calls[1].status is CallStatus.SERVER_ERROR and calls[1].attempts == 2 and calls[1].error
    _assert_no_key(calls, caplog)


def test_missing_key_variable_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KGB_TEST_NO_SUCH_KEY", raising=False)
    for kind in ("openai", "anthropic"):
        config = EndpointConfig(name="x", kind=kind, base_url="http://127.0.0.1:9",
                                api_key_env="KGB_TEST_NO_SUCH_KEY")
        with pytest.raises(ProviderConfigError, match="KGB_TEST_NO_SUCH_KEY is not set"):
            create(config)
    # Unset after creation: the call says so too (the key is read at each attempt, never kept).
    provider = create(EndpointConfig(name="x", kind="openai", base_url="http://127.0.0.1:9",
                                     api_key_env=KEY_ENV))
    monkeypatch.delenv(KEY_ENV)

    async def call() -> None:
        async with provider:  # closed, or its session is reported unclosed when collected later
            await provider.complete(PROMPT, model=MODEL, temperature=None, max_tokens=None,
                                    deadline_s=5)

    with pytest.raises(ProviderConfigError, match=KEY_ENV):
        asyncio.run(call())


_WITHOUT_SDKS = """
import asyncio, sys
for name in ("httpx", "httpcore", "h11", "anyio", "requests", "urllib3", "openai", "anthropic"):
    sys.modules[name] = None  # importing any of them now raises ImportError
from generators.llm import CallStatus, Message, Prompt, Role
from generators.providers import EndpointConfig, create, provider_kinds

assert provider_kinds() == ["anthropic", "openai"]
async def main():
    async with create(EndpointConfig(name="x", kind=sys.argv[2], base_url=sys.argv[1])) as p:
        prompt = Prompt(messages=(Message(Role.USER, "hi"),), template="t/v1", operator_id="aten::add")
        return await p.complete(prompt, model="m",
                                temperature=None, max_tokens=8, deadline_s=10)
call = asyncio.run(main())
assert call.status is CallStatus.OK and call.text == "ok", call
assert "aiohttp" in sys.modules
print("OK", call.usage.total_tokens)
"""


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_providers_speak_aiohttp_and_no_sdk(wire: str, tmp_path: Path) -> None:
    # The providers speak HTTP through aiohttp and keep their own retry and billing loop: a
    # fresh interpreter in which the vendor SDKs and the other HTTP clients cannot be imported
    # lists, creates and completes a call.
    ok = {"kind": "ok", "text": "ok", "usage": _usage(wire, 5, 5)}
    with fake_server({"endpoints": {"ep": {"default": ok}}}, tmp_path) as server:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        done = subprocess.run([sys.executable, "-c", _WITHOUT_SDKS,
                               server.url("ep", wire), wire],
                              capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "OK 10", done.stderr


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_concurrency_limit_holds_server_side(wire: str, tmp_path: Path) -> None:
    slow = {"kind": "ok", "text": "ok", "delay_s": 0.15, "usage": _usage(wire, 5, 5)}
    with fake_server({"endpoints": {"ep": {"default": slow}}}, tmp_path) as server:
        async def run() -> list[LLMCall]:
            async with create(_config(server, wire, "ep", max_concurrency=2, timeout_s=5)) as p:
                return await asyncio.gather(*(p.complete(PROMPT, model=MODEL, temperature=None,
                                                         max_tokens=8, deadline_s=30)
                                              for _ in range(8)))

        calls = asyncio.run(run())
        requests = server.requests()
    assert all(c.status is CallStatus.OK for c in calls)
    assert max(r["in_flight"] for r in requests) == 2


def test_requests_per_minute_limit_paces_requests(tmp_path: Path) -> None:
    ok = {"kind": "ok", "text": "ok", "usage": _usage("openai", 5, 5)}
    with fake_server({"endpoints": {"ep": {"default": ok}}}, tmp_path) as server:
        async def run() -> list[LLMCall]:
            # 600/min = 10/s, burst of 0.1 s = 1 request: starts at least 0.1 s apart.
            config = _config(server, "openai", "ep", requests_per_minute=600, burst_s=0.1, timeout_s=5)
            async with create(config) as p:
                return await asyncio.gather(*(p.complete(PROMPT, model=MODEL, temperature=None,
                                                         max_tokens=8, deadline_s=30)
                                              for _ in range(6)))

        t0 = time.monotonic()
        calls = asyncio.run(run())
        wall = time.monotonic() - t0
        assert len(server.requests()) == 6
    assert all(c.status is CallStatus.OK for c in calls)
    # The bucket holds one request and refills one per 0.1 s, so the sixth cannot be sent before
    # 0.5 s. Measured on the client: arrival times at the server also carry connection set-up
    # and scheduling delays, which under CI load compressed their span below 0.5 s.
    assert wall >= 0.5, wall


def test_tokens_per_minute_is_corrected_by_actual_usage(tmp_path: Path) -> None:
    # Prompt estimate is ~20 tokens, but each reply bills 500: the bucket (1000/s, burst 1000)
    # must charge the difference, so five sequential calls take >= (4*500 - 1000) / 1000 s.
    ok = {"kind": "ok", "text": "ok", "usage": _usage("openai", 100, 400)}
    with fake_server({"endpoints": {"ep": {"default": ok}}}, tmp_path) as server:
        async def run() -> list[LLMCall]:
            config = _config(server, "openai", "ep", tokens_per_minute=60_000, burst_s=1.0, timeout_s=5)
            async with create(config) as p:
                return [await p.complete(PROMPT, model=MODEL, temperature=None, max_tokens=8,
                                         deadline_s=30) for _ in range(5)]

        t0 = time.monotonic()
        calls = asyncio.run(run())
        wall = time.monotonic() - t0
        assert len(server.requests()) == 5
    assert all(c.status is CallStatus.OK for c in calls)
    # Measured on the client (server arrival times also carry connection and scheduling
    # delays); the fifth call cannot start before ~1.0 s, less the up-front estimates' slack.
    assert wall >= 0.95, wall


def test_deadline_bounds_a_hanging_server(tmp_path: Path) -> None:
    with fake_server({"endpoints": {"ep": {"default": {"kind": "hang"}}}}, tmp_path) as server:
        async def run() -> LLMCall:
            async with create(_config(server, "anthropic", "ep", timeout_s=30, max_retries=3)) as p:
                return await p.complete(PROMPT, model=MODEL, temperature=None, max_tokens=8,
                                        deadline_s=0.4)

        t0 = time.monotonic()
        call = asyncio.run(run())
        elapsed = time.monotonic() - t0
        billing = server.wait_billing(call.attempts)
    assert call.status is CallStatus.TIMEOUT and call.usage is None and not call.billed
    assert elapsed < 1.5 and call.attempts >= 1
    assert all(not r["sent"] for r in billing)


def test_unknown_model_costs_zero_and_is_flagged(tmp_path: Path) -> None:
    ok = {"kind": "ok", "text": "ok", "usage": _usage("openai", 10, 10)}
    with fake_server({"endpoints": {"ep": {"default": ok}}}, tmp_path) as server:
        async def run() -> list[LLMCall]:
            async with create(_config(server, "openai", "ep"), PRICES) as p:
                return [await p.complete(PROMPT, model=m, temperature=None, max_tokens=8, deadline_s=5)
                        for m in (MODEL, "not-in-table")]

        known, unknown = asyncio.run(run())
    assert known.cost_usd > 0 and "price" not in known.extra
    assert unknown.cost_usd == 0 and unknown.extra["price"] == "unknown" and unknown.billed


def test_price_table_from_toml_and_dict(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('[models."gpt-x"]\nprompt = 2.5\ncached_prompt = 1.25\ncompletion = 10\n'
                    '[models.plain]\nprompt = 1\ncompletion = 2\n')
    table = PriceTable.from_toml(path)
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=500_000, cached_tokens=400_000)
    assert table.cost("gpt-x", usage).usd == pytest.approx(0.6 * 2.5 + 0.4 * 1.25 + 0.5 * 10)
    assert table.cost("plain", usage).usd == pytest.approx(1.0 + 1.0)  # cached at the prompt price
    assert table.cost("other", usage) == table.cost("other", usage) and not table.cost("other", usage).priced
    assert table.cost("other", None).priced  # no usage: nothing to price
    assert PriceTable.from_dict({"m": {"prompt": 1, "completion": 2}}).models["m"].completion == 2
    with pytest.raises(PriceError, match="lacks"):
        PriceTable.from_dict({"m": {"prompt": 1}})
    with pytest.raises(PriceError, match="unknown fields"):
        PriceTable.from_dict({"m": {"prompt": 1, "completion": 2, "output": 3}})
    with pytest.raises(PriceError, match=">= 0"):
        PriceTable.from_dict({"m": {"prompt": -1, "completion": 2}})


def test_retry_after_forms() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert parse_retry_after({"retry-after": "2"}, now) == 2.0
    assert parse_retry_after({"retry-after": "0.25"}, now) == 0.25
    assert parse_retry_after({"retry-after": "Thu, 01 Jan 2026 12:00:07 GMT"}, now) == 7.0
    assert parse_retry_after({"retry-after": "Thu, 01 Jan 2026 11:00:00 GMT"}, now) == 0.0
    assert parse_retry_after({"retry-after-ms": "150", "retry-after": "9"}, now) == 0.15
    assert parse_retry_after({"retry-after": "soon"}, now) is None
    assert parse_retry_after({}, now) is None


def test_usage_is_recovered_from_broken_json() -> None:
    assert scan_usage('{"id": "x", "usage": {"prompt_tokens": 3}, "choices": [{"mess') == {"prompt_tokens": 3}
    assert scan_usage('oops "usage": not json, "usage" : {"a": 1}') == {"a": 1}
    assert scan_usage("<html>502</html>") is None


def test_token_bucket_lets_a_large_charge_through_then_repays_it() -> None:
    async def run() -> tuple[float, float, float]:
        bucket = TokenBucket(rate_per_s=100.0, capacity=10.0)
        first = await bucket.acquire(50)   # larger than the burst: passes at once, into debt
        second = await bucket.acquire(5)   # waits for the debt (-40) to be repaid up to 5
        bucket.adjust(-100)                # a refund never lifts the level above capacity
        return first, second, bucket.level

    first, second, level = asyncio.run(run())
    assert first < 0.05 and 0.4 <= second < 0.7 and level <= 10.0


def test_registry_and_config_validation() -> None:
    assert provider_class("openai").kind == "openai"
    with pytest.raises(ProviderConfigError, match="did you mean openai"):
        provider_class("opnai")
    with pytest.raises(ProviderConfigError, match="kind"):
        EndpointConfig(name="x", kind="gemini", base_url="http://h")  # type: ignore[arg-type]
    with pytest.raises(ProviderConfigError, match="base_url"):
        EndpointConfig(name="x", kind="openai", base_url="localhost:8000")
    with pytest.raises(ProviderConfigError, match="max_concurrency"):
        EndpointConfig(name="x", kind="openai", base_url="http://h", max_concurrency=0)
    config = EndpointConfig(name="x", kind="anthropic", base_url="http://h", api_key_env=KEY_ENV)
    provider = create(config)
    assert KEY not in repr(config) and KEY not in repr(provider)
    # Picklable (Ray ships it to actors), and the pickle holds no key.
    blob = pickle.dumps(provider)
    assert KEY.encode() not in blob and pickle.loads(blob).config == config


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_every_attempt_of_a_call_carries_its_idempotency_key(wire: str, tmp_path: Path) -> None:
    # A 503 then a reply: both attempts carry the caller's key, so an endpoint that honours keys
    # can answer the retry with a reply it generated for the first; no key, no header.
    replies = [{"kind": "error", "status": 503},
               {"kind": "ok", "text": "ok", "usage": _usage(wire, 10, 5)},
               {"kind": "ok", "text": "ok", "usage": _usage(wire, 10, 5)},
               {"kind": "ok", "text": "ok", "usage": _usage(wire, 10, 5)}]
    with fake_server({"endpoints": {"ep": {"replies": replies}}}, tmp_path) as server:
        async def run() -> list[LLMCall]:
            async with create(_config(server, wire, "ep")) as p, \
                    create(_config(server, wire, "ep", idempotency_header="")) as q:
                return [await p.complete(PROMPT, model=MODEL, temperature=None, max_tokens=8,
                                         deadline_s=10, idempotency_key="kgb-abc"),
                        await p.complete(PROMPT, model=MODEL, temperature=None, max_tokens=8,
                                         deadline_s=10),
                        await q.complete(PROMPT, model=MODEL, temperature=None, max_tokens=8,
                                         deadline_s=10, idempotency_key="kgb-def")]

        calls = asyncio.run(run())
        keys = [r["idempotency_key"] for r in sorted(server.requests(), key=lambda r: r["seq"])]
    assert [c.status for c in calls] == [CallStatus.OK] * 3 and calls[0].attempts == 2
    assert keys == ["kgb-abc", "kgb-abc", None, None]


def test_idempotency_header_must_be_a_header_name() -> None:
    with pytest.raises(ProviderConfigError, match="idempotency_header") as bad:
        EndpointConfig(name="x", kind="openai", base_url="http://127.0.0.1:1/v1",
                       idempotency_header="Idempotency Key: x")
    assert bad.value.field == "idempotency_header"  # the spec parser names the key from this
    with pytest.raises(ProviderConfigError, match="backoff_base_s must be >= 0") as bad:
        EndpointConfig(name="x", kind="openai", base_url="http://127.0.0.1:1/v1",
                       backoff_base_s=-1)
    assert bad.value.field == "backoff_base_s"
