"""LLM calls in the store: persisted before use, replayed on resume for zero tokens.

The model is the scripted fake LLM server (its own process, logging every request and what it
billed); verdicts come from the real ``cpu`` agent. A "killed coordinator" is simulated twice:
an evaluator that raises after turn 1 was stored, and a subprocess SIGKILLed while its evaluator
hangs. Each resume must send no request for a stored turn, and the tokens the store holds must
equal the server's billing log exactly.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import generators
import operators
from coordinator.fleet import AgentEvaluator
from coordinator.recorded_provider import RecordedProvider, ResumeMismatchError, idempotency_key_of
from coordinator.store import Store, TrajectoryKey
from generators import EndReason, Trajectory, TrajectoryContext
from generators.evaluation import Evaluator
from generators.llm import CallStatus, LLMCall, Message, Prompt, Role, Usage
from generators.providers import EndpointConfig, ModelPrice, PriceTable, create
from operators.aten.add import NEGATIVE_NO_ALPHA
from protos.records import Status, Verdict
from tests.generators.fake_llm_server import FakeServer, fake_server

REPO_ROOT = Path(__file__).resolve().parents[2]
ADD = operators.get("aten::add")
MODEL = "fake-coder"
PRICES = PriceTable({MODEL: ModelPrice(prompt=1.0, completion=4.0)})
RUN = "run-1"


def _fenced(source: str) -> str:
    return f"Here is the kernel.\n\n```python\n{source.strip()}\n```\n"


def _ok(text: str, prompt: int, completion: int) -> dict[str, Any]:
    return {"kind": "ok", "text": text,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion}}


def _server_total(server: FakeServer) -> Usage:
    total = Usage()
    for row in server.billing():
        u = row["usage"]
        if row["sent"] and u is not None:
            total = total + Usage(u["prompt_tokens"], u["completion_tokens"])
    return total


def _store_total(store: Store) -> Usage:
    t = store.llm_totals(RUN)
    return Usage(sum(r.prompt_tokens for r in t), sum(r.completion_tokens for r in t))


def _key(method: str, sample: int = 0) -> TrajectoryKey:
    return TrajectoryKey(ADD.id, ADD.version, method, MODEL, sample)


class KilledCoordinator(Exception):
    pass


class Crashing:
    """An evaluator that dies (like the coordinator) once it is asked — after the call's record."""

    def __init__(self, store: Store, key: TrajectoryKey) -> None:
        self.store, self.key = store, key

    async def evaluate(self, operator_id: str, source: str) -> Verdict:
        assert len(self.store.llm_calls(RUN, self.key)) == 1  # persisted before use
        raise KilledCoordinator


async def _run(server: FakeServer, store: Store, method: str, options: dict[str, Any],
               evaluator: Evaluator | None, *, platform: str = "cpu",
               **ctx_kw: Any) -> tuple[Trajectory, RecordedProvider]:
    m = generators.create_trajectory(method, **options)
    config = EndpointConfig(name="fake-openai", kind="openai", base_url=server.url("ep", "openai"),
                            timeout_s=10, max_retries=0)
    async with create(config, PRICES) as inner:
        rp = RecordedProvider(inner, store, RUN, _key(method))
        ctx = TrajectoryContext(provider=rp, model=MODEL, record=rp.record, platform=platform,
                                temperature=0.8, max_tokens=4096, evaluator=evaluator, **ctx_kw)
        return await m.run(ADD, 0, ctx), rp


async def _with_agent(cpu_agent: str, server: FakeServer, store: Store, method: str,
                      options: dict[str, Any]) -> tuple[Trajectory, RecordedProvider]:
    async with AgentEvaluator(cpu_agent, timeout_s=120) as agent:
        return await _run(server, store, method, options, agent)


# -- (a) a crash after turn 1 was stored, resumed in the same process ---------------------------


def test_resume_after_crash_pays_nothing_twice(tmp_path: Path, cpu_agent: str) -> None:
    wrong, right = _fenced(NEGATIVE_NO_ALPHA), _fenced(ADD.solution)
    script = {"endpoints": {"ep": {"replies": [_ok(wrong, 1200, 700), _ok(right, 2600, 720)]}}}
    db = tmp_path / "run" / "kgb.sqlite"
    with fake_server(script, tmp_path) as server:
        store = Store(db)
        with pytest.raises(KilledCoordinator):
            asyncio.run(_run(server, store, "refine", {"turns": 3}, Crashing(store, _key("refine"))))
        store.close()
        server.wait_billing(1)
        assert len(server.requests()) == 1

        store = Store(db)  # the resumed coordinator: a fresh store handle and provider
        traj, rp = asyncio.run(_with_agent(cpu_agent, server, store, "refine", {"turns": 3}))
        server.wait_billing(2)
        requests = server.requests()
        billed = _server_total(server)
    assert traj.end is EndReason.SOLVED, (traj.end, traj.detail)
    assert (rp.replayed, rp.sent) == (1, 1)
    # Turn 1 was not requested again; turn 2 once, continuing the stored conversation.
    assert len(requests) == 2
    assert requests[1]["body"]["messages"][:-2] == requests[0]["body"]["messages"]
    assert requests[1]["body"]["messages"][-2] == {"role": "assistant", "content": wrong}
    first, second = traj.steps
    assert first.call.extra["replayed"] == "1" and "replayed" not in second.call.extra
    assert first.verdict is not None and first.verdict.status is Status.WRONG_ANSWER
    # Exactly what the server billed, once: in the store, and in the trajectory's own account.
    assert billed == Usage(1200 + 2600, 700 + 720)
    assert _store_total(store) == billed == traj.usage
    rows = store.llm_calls(RUN, _key("refine"))
    assert [r.turn for r in rows] == [1, 2]
    assert [r.call.response_id for r in rows] == [c.response_id for c in traj.calls]
    assert "replayed" not in rows[0].call.extra  # only the returned copy is marked
    assert store.llm_totals(RUN)[0].cost_usd == pytest.approx(traj.cost_usd)


# -- (b) a SIGKILLed coordinator process ---------------------------------------------------------


def _child(port: int, db: str) -> None:
    """Run a refine trajectory whose evaluator never answers (the parent kills this process)."""

    class Hang:
        async def evaluate(self, operator_id: str, source: str) -> Verdict:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    server = FakeServer(port, Path(os.devnull), Path(os.devnull))
    asyncio.run(_run(server, Store(Path(db)), "refine", {"turns": 3}, Hang()))


def test_resume_after_sigkill_sends_no_stored_turn(tmp_path: Path, cpu_agent: str) -> None:
    right = _fenced(ADD.solution)
    script = {"endpoints": {"ep": {"replies": [_ok(right, 900, 300)]}}}
    db = tmp_path / "run" / "kgb.sqlite"
    Store(db).close()
    with fake_server(script, tmp_path) as server:
        code = f"from tests.coordinator.test_llm_store import _child; _child({server.port}, {str(db)!r})"
        child = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT)
        try:
            store = Store(db)
            deadline = time.monotonic() + 60
            while store.llm_call_count(RUN) < 1:
                assert child.poll() is None, "the child exited before storing its call"
                assert time.monotonic() < deadline, "the child never stored its call"
                time.sleep(0.05)
            os.kill(child.pid, signal.SIGKILL)
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()
        assert child.returncode == -signal.SIGKILL
        server.wait_billing(1)
        assert len(server.requests()) == 1

        traj, rp = asyncio.run(_with_agent(cpu_agent, server, Store(db), "refine", {"turns": 3}))
        time.sleep(0.2)  # a stray request would be logged by now
        requests = server.requests()
        billed = _server_total(server)
    assert traj.end is EndReason.SOLVED, (traj.end, traj.detail)
    assert len(requests) == 1 and (rp.replayed, rp.sent) == (1, 0)
    assert traj.steps[0].verdict is not None and traj.steps[0].verdict.status is Status.PASSED
    assert billed == Usage(900, 300) == _store_total(store) == traj.usage


# -- (c) a changed prompt on resume ----------------------------------------------------------------


def test_prompt_mismatch_on_resume_raises_and_sends_nothing(tmp_path: Path) -> None:
    script = {"endpoints": {"ep": {"default": _ok(_fenced(ADD.solution), 500, 100)}}}
    store = Store(tmp_path / "kgb.sqlite")
    with fake_server(script, tmp_path) as server:
        traj, _ = asyncio.run(_run(server, store, "sample", {}, None, platform="cpu"))
        assert traj.end is EndReason.CANDIDATE
        server.wait_billing(1)
        # The resume targets another platform: its turn-1 prompt differs from the stored one.
        with pytest.raises(ResumeMismatchError, match=r"turn 1 is stored with a different prompt"):
            asyncio.run(_run(server, store, "sample", {}, None, platform="cuda"))
        time.sleep(0.2)
        assert len(server.requests()) == 1
        # The same settings replay it, for free.
        again, rp = asyncio.run(_run(server, store, "sample", {}, None, platform="cpu"))
        time.sleep(0.2)
        assert len(server.requests()) == 1 and rp.replayed == 1
    assert again.candidates[0].source == traj.candidates[0].source
    assert store.llm_call_count() == 1


def test_a_call_lost_before_its_commit_is_asked_again_under_the_same_key(tmp_path: Path) -> None:
    # A kill -9 between a reply's arrival and its commit leaves the store without the turn; the
    # resumed run sends it again under the key it was first sent with, so an endpoint that
    # honours keys can answer without billing twice. Simulated here by an emptied store.
    script = {"endpoints": {"ep": {"default": _ok(_fenced(ADD.solution), 500, 100)}}}
    with fake_server(script, tmp_path) as server:
        asyncio.run(_run(server, Store(tmp_path / "a.sqlite"), "sample", {}, None))
        asyncio.run(_run(server, Store(tmp_path / "b.sqlite"), "sample", {}, None))
        server.wait_billing(2)
        keys = [r["idempotency_key"] for r in sorted(server.requests(), key=lambda r: r["seq"])]
    assert keys == [idempotency_key_of(RUN, _key("sample"), 1)] * 2
    # Anything else is a different call: another turn, trajectory, sample or run.
    others = {idempotency_key_of(RUN, _key("sample"), 2), idempotency_key_of(RUN, _key("refine"), 1),
              idempotency_key_of(RUN, _key("sample", 1), 1), idempotency_key_of("run-2", _key("sample"), 1)}
    assert len(others) == 4 and keys[0] not in others


# -- (d) exactly-once ---------------------------------------------------------------------------------


DEFAULT_USAGE = Usage(10, 5)


def _call(text: str, status: CallStatus = CallStatus.OK, usage: Usage | None = DEFAULT_USAGE,
          model: str = MODEL, cost: float = 0.5) -> LLMCall:
    prompt = Prompt((Message(Role.SYSTEM, "sys"), Message(Role.USER, "write add")), "aten/v1", ADD.id)
    return LLMCall("fake-openai", model, prompt, status, text=text, usage=usage, cost_usd=cost,
                   latency_s=1.5, attempts=2, finish_reason="stop", error="", response_id=text,
                   temperature=0.8, max_tokens=4096, extra={"attempts": "[]"})


def test_llm_call_insert_is_exactly_once_and_round_trips(tmp_path: Path) -> None:
    store = Store(tmp_path / "kgb.sqlite")
    first = _call("first")
    assert store.add_llm_call(RUN, _key("refine"), 1, first) == first  # whole call round-trips
    assert store.add_llm_call(RUN, str(_key("refine")), 1, _call("second")) == first  # kept
    assert store.llm_call_count() == 1
    # A BUDGET placeholder (never sent) is replaced by a call really sent for that turn; a
    # BUDGET call never replaces anything.
    budget = _call("", CallStatus.BUDGET, None, cost=0.0)
    assert store.add_llm_call(RUN, _key("refine"), 2, budget) == budget
    assert store.add_llm_call(RUN, _key("refine"), 2, _call("sent")).text == "sent"
    assert store.add_llm_call(RUN, _key("refine"), 2, budget).text == "sent"
    store.close()
    store = Store(tmp_path / "kgb.sqlite")
    assert [(r.turn, r.call.text) for r in store.llm_calls(RUN, _key("refine"))] == \
        [(1, "first"), (2, "sent")]
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 1  # back to NORMAL
    assert TrajectoryKey.parse(str(TrajectoryKey("aten::add", 3, "refine", "org/m", 7))) == \
        TrajectoryKey("aten::add", 3, "refine", "org/m", 7)


def test_budget_calls_are_stored_through_record(tmp_path: Path) -> None:
    store = Store(tmp_path / "kgb.sqlite")
    with fake_server({"endpoints": {"ep": {}}}, tmp_path) as server:
        traj, _ = asyncio.run(_run(server, store, "sample", {}, None, trajectory_max_tokens=0))
        assert server.requests() == []
    assert traj.end is EndReason.BUDGET_SPENT
    (row,) = store.llm_calls(RUN, _key("sample"))
    assert row.turn == 1 and row.call.status is CallStatus.BUDGET and not row.call.billed


# -- (e) totals -----------------------------------------------------------------------------------


def test_totals_per_run_model_method(tmp_path: Path) -> None:
    store = Store(tmp_path / "kgb.sqlite")
    store.add_llm_call(RUN, _key("refine"), 1, _call("a", usage=Usage(100, 50, 20, 10), cost=1.0))
    store.add_llm_call(RUN, _key("refine"), 2, _call("b", usage=Usage(200, 60), cost=2.0))
    store.add_llm_call(RUN, _key("refine", 1), 1, _call("t", CallStatus.TIMEOUT, None, cost=0.0))
    store.add_llm_call(RUN, TrajectoryKey(ADD.id, ADD.version, "sample", "other", 0), 1,
                       _call("c", usage=Usage(7, 3), model="other", cost=0.25))
    store.add_llm_call("run-2", _key("refine"), 1, _call("d", usage=Usage(1, 1), cost=0.01))
    totals = {(t.model, t.method): t for t in store.llm_totals(RUN)}
    assert set(totals) == {(MODEL, "refine"), ("other", "sample")}
    refine = totals[(MODEL, "refine")]
    assert (refine.calls, refine.billed_calls) == (3, 2)
    assert (refine.prompt_tokens, refine.completion_tokens, refine.cached_tokens,
            refine.reasoning_tokens, refine.total_tokens) == (300, 110, 20, 10, 410)
    assert refine.cost_usd == pytest.approx(3.0)
    assert totals[("other", "sample")].total_tokens == 10
    assert [t.run_id for t in store.llm_totals()] == [RUN, RUN, "run-2"]
