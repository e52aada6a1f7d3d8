"""Multi-Chip sweeps in both modes (issue #28, point 4).

Per-platform generation (the default, the published protocol) plans a trajectory per platform;
shared generation (``[sweep] generation = "shared"``) plans one per problem, runs it on the first
listed platform the problem declares and judges its final candidate on every one. End to end: a
shared sweep over a fake cpu agent and a fake rocm agent stores a result per platform under one
trajectory key, its model calls once; a half-done copy resumes without a new token or evaluation.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

import operators
from coordinator.store import DB_NAME
from coordinator.sweep_spec import SweepSpecError, parse_spec
from protos.records import EvalRequest, Status, Verdict
from tests.coordinator.fake_agents import Behaviour, fake_in_thread, honest_verdict
from tests.coordinator.sweeping import kgb, write_spec
from tests.generators.fake_llm_server import fake_server
from tests.generators.llm_helpers import wire_usage

pytestmark = pytest.mark.usefixtures("agent_secret_env")

ADD = operators.get("aten::add")
SPEC = ('operators = ["aten::add", "aten::mm"]\nplatforms = ["cpu", "rocm"]\nsamples = 2\n\n'
        '[sweep]\nname = "mc"\n{extra}\n[[endpoints]]\nname = "ep"\nkind = "openai"\n'
        'base_url = "http://127.0.0.1:9/v1"\n\n[[models]]\nname = "m"\nendpoint = "ep"\n'
        'model = "m"\n\n[[methods]]\nname = "sample"\n\n[[methods]]\nname = "reference"\n')


def test_per_platform_generation_plans_a_trajectory_per_platform() -> None:
    spec = parse_spec(SPEC.format(extra=""))
    plan = spec.plan()
    assert spec.generation == "per-platform"
    assert len(plan) == 2 * 2 * (2 + 1)  # platforms x problems x (samples + reference)
    assert {p.judged_on for p in plan} == {()}
    assert {p.key_platform for p in plan} == {"cpu", "rocm"}


def test_shared_generation_plans_once_and_judges_on_every_platform(
        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = parse_spec(SPEC.format(extra='generation = "shared"\n'))
    plan = spec.plan()
    assert len(plan) == 2 * (2 + 1)
    assert {(p.platform, p.judged_on, p.key_platform) for p in plan} == {
        ("cpu", ("cpu", "rocm"), "")}
    assert sorted(plan) == sorted(set(plan)) and plan == spec.plan()  # distinct, stable
    # a platform a problem does not declare is neither run nor judged on (every registered
    # problem declares all three today: aten::mm is made a GPU-only problem here)
    real = operators.get
    monkeypatch.setattr(operators, "get", lambda i: _GpuOnly(real(i)) if i == "aten::mm"
                        else real(i))
    on = {(p.operator_id, p.platform, p.judged_on) for p in spec.plan()}
    assert on == {("aten::add", "cpu", ("cpu", "rocm")), ("aten::mm", "rocm", ("rocm",))}


class _GpuOnly:
    """A problem as registered, but declaring only cuda and rocm."""

    platforms = frozenset({"cuda", "rocm"})

    def __init__(self, spec: Any) -> None:
        self._spec = spec

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spec, name)


def test_an_unknown_generation_mode_names_the_key() -> None:
    with pytest.raises(SweepSpecError, match=r"sweep\.generation: must be \"per-platform\" .* "
                                             r"or \"shared\" .*got 'both'"):
        parse_spec(SPEC.format(extra='generation = "both"\n'))


def _passes(model: str) -> Behaviour:
    async def judge(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
        await asyncio.sleep(0)
        return replace(honest_verdict(req, Status.PASSED, model=model), harness_version="test")
    return judge


def _reply(tag: str) -> dict[str, Any]:
    code = f"{ADD.solution.strip()}\n# variant {tag}\n"
    return {"kind": "ok", "text": f"Here.\n\n```python\n{code}```\n",
            "usage": wire_usage("openai", 100, 50)}


def _spec(tmp_path: Path, url: str, cpu: str, rocm: str) -> Path:
    path = write_spec(tmp_path / "shared.toml", "shared", SimpleNamespace(base_url=url),  # type: ignore[arg-type]
                      [cpu], operators=(ADD.id,), samples=2)
    text = path.read_text().replace('platforms = ["cpu"]', 'platforms = ["cpu", "rocm"]')
    text = text.replace('seed = 7', f'seed = 7\ngeneration = "shared"\nstore = "{tmp_path / "st"}"')
    path.write_text(text + f'\n[[agents]]\naddress = "{rocm}"\nplatform = "rocm"\n')
    return path


def _go(*args: str) -> None:
    p = kgb("sweep", *args, "--metrics-port", "0", "--no-progress")
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, out


def _rows(db: Path) -> list[tuple[str, str, str, int]]:
    with sqlite3.connect(db) as c:
        return sorted(c.execute("SELECT platform, trajectory, status, prompt_tokens "
                                "FROM trajectory_results").fetchall())


@pytest.mark.slow
def test_a_shared_sweep_judges_each_candidate_everywhere_and_resumes_for_free(
        tmp_path: Path) -> None:
    script = {"endpoints": {"ep": {"replies": [_reply("a"), _reply("b")],
                                   "default": _reply("c")}}}
    with fake_server(script, tmp_path) as server, \
            fake_in_thread(_passes("cpu (fake)")) as (cpu, cpu_agent), \
            fake_in_thread(_passes("rocm (fake)"), "rocm (fake)", "rocm") as (rocm, rocm_agent):
        spec = _spec(tmp_path, server.url("ep", "openai"), cpu, rocm)
        _go("run", str(spec))
        db = tmp_path / "st" / DB_NAME
        rows = _rows(db)
        keys = sorted({r[1] for r in rows})
        assert keys == [f"aten::add@{ADD.version}/sample/fake-model/{s}" for s in (0, 1)]
        assert [(r[0], r[2]) for r in rows] == [("cpu", "PASSED")] * 2 + [("rocm", "PASSED")] * 2
        assert [r[3] for r in rows] == [100, 100, 0, 0]  # tokens once, on the generating row
        assert len(server.billing()) == 2 and len(cpu_agent.calls) == len(rocm_agent.calls) == 2

        with sqlite3.connect(db) as c:  # half done: sample 1 unstored, sample 0's rocm row INFRA
            c.execute("DELETE FROM trajectory_results WHERE trajectory = ?", (keys[1],))
            c.execute("UPDATE trajectory_results SET end_reason = 'INFRA_ERROR' "
                      "WHERE platform = 'rocm' AND trajectory = ?", (keys[0],))
            c.execute("UPDATE run_states SET state = 'interrupted'")
        _go("resume", str(tmp_path / "st"))
        assert _rows(db) == rows
        assert len(server.billing()) == 2  # no new token: the stored calls were replayed
        assert len(cpu_agent.calls) == len(rocm_agent.calls) == 2  # every verdict reused
        with sqlite3.connect(db) as c:
            stored = c.execute("SELECT trajectory FROM llm_calls ORDER BY trajectory").fetchall()
        assert [s[0] for s in stored] == keys
        status = kgb("sweep", "status", str(tmp_path / "st"))
        out, _ = status.communicate(timeout=120)
        assert "trajectories: 4 of 4 finished" in out, out  # a result per platform


def test_verdicts_from_the_other_platforms_count_under_their_own_platform() -> None:
    """The driver's totals count every platform's verdicts; the metrics label each with the
    platform that judged it, not the one that generated."""
    from coordinator.cli.views import feed_metrics
    from coordinator.engine.outcomes import Outcome, SweepProgress, account
    from coordinator.sweep_spec import PlannedTrajectory

    v = Verdict(status=Status.PASSED, operator_id=ADD.id, operator_version=ADD.version,
                candidate_hash="h")
    p = PlannedTrajectory("cpu", ADD.id, "sample", "m", 0, ("cpu", "rocm", "cuda"))
    o = Outcome(p, None, verdicts=((v, False),), error="stopping",
                more_verdicts=(("rocm", v, False), ("cuda", v, True)))
    progress = SweepProgress()
    account(progress, o)
    assert (progress.evaluations, progress.verdicts_reused) == (3, 1)
    seen: list[tuple[str, bool]] = []
    metrics = SimpleNamespace(verdict=lambda v, *, source, platform, method, reused:
                              seen.append((platform, reused)))
    feed_metrics(metrics, o)  # type: ignore[arg-type]
    assert seen == [("cpu", False), ("rocm", False), ("cuda", True)]
