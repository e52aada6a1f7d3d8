"""Sweep reports: pass@k, accuracy, the status funnel and cost per solved problem, checked
against numbers computed by hand from a store with known rows; and ``kgb report``."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from coordinator.cli import kgb
from coordinator.report import (
    CostRow,
    FunnelRow,
    GroupRow,
    build_report,
    default_ks,
    funnel,
    funnel_depth,
    is_excluded,
    llm_usage,
    mean_pass_at_k,
    pass_at_k,
    read_report,
)
from coordinator.store import Store, TrajectoryKey, TrajectoryResult
from generators.llm import CallStatus, LLMCall, Message, Prompt, Role, Usage
from protos.records import CaseTiming, Status, Verdict

RUN = "r1"
CODER = "org/coder"   # a model with "/" in its name, as hosted models have


def chash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def res(ref: str, method: str, model: str, sample: int, status: Status | None, *, end: str = "",
        platform: str = "cuda", speedup: float | None = None, sol: float | None = None,
        candidates: int | None = None, gpu: float = 1.0, run: str = RUN,
        baseline: str = "") -> TrajectoryResult:
    op, version = ref.split("@")
    key = TrajectoryKey(op, int(version), method, model, sample)
    end = end or ("SOLVED" if status is Status.PASSED else "TURNS_EXHAUSTED")
    ncand = candidates if candidates is not None else (1 if status is not None else 0)
    best = chash(f"{run}/{platform}/{key}") if status is not None else ""
    return TrajectoryResult(run, platform, key, op.split("::")[0], end, status, best, speedup, sol,
                            1, ncand, 0, 0, 0.0, gpu, "", baseline=baseline)


# Group A: (org/coder, sample, aten, cuda). aten::add: 4 samples, 2 pass; aten::mul: 3 scored
# samples, none passes, plus one INFRA_ERROR trajectory that is not scored.
GROUP_A = [
    res("aten::add@1", "sample", CODER, 0, Status.PASSED, speedup=2.0, sol=40.0, gpu=1.5,
        baseline="torch"),
    res("aten::add@1", "sample", CODER, 1, Status.PASSED, speedup=0.5, sol=20.0, gpu=1.5,
        baseline="torch"),
    res("aten::add@1", "sample", CODER, 2, Status.WRONG_ANSWER, gpu=1.5),
    res("aten::add@1", "sample", CODER, 3, Status.COMPILE_ERROR, gpu=1.5),
    res("aten::mul@1", "sample", CODER, 0, Status.WRONG_ANSWER, gpu=1.5),
    res("aten::mul@1", "sample", CODER, 1, None, end="LLM_ERROR", gpu=1.5),
    res("aten::mul@1", "sample", CODER, 2, Status.REJECTED, gpu=1.5),
    res("aten::mul@1", "sample", CODER, 3, None, end="INFRA_ERROR", candidates=1, gpu=1.5),
]
# Group B: (org/coder, sample, vllm, cuda): one sample, solved.
GROUP_B = [res("vllm::rms_norm@2", "sample", CODER, 0, Status.PASSED, speedup=8.0, sol=80.0, gpu=2.0,
              baseline="vllm")]
# Group C: (org/coder, refine, aten, cpu): no timings on cpu; a solved trajectory whose run then
# ended on an infra error still counts as solved.
GROUP_C = [
    res("aten::add@1", "refine", CODER, 0, Status.PASSED, platform="cpu", gpu=0.25),
    res("aten::add@1", "refine", CODER, 1, Status.CHEAT_DETECTED, platform="cpu", gpu=0.25),
    res("aten::mul@1", "refine", CODER, 0, Status.PASSED, end="INFRA_ERROR", platform="cpu", gpu=0.25),
]
# Group D: (m2, sample, cublas, cuda): nothing solved; one candidate never judged (budget);
# one INFRA_ERROR verdict (not scored).
GROUP_D = [
    res("cublas::cublasSgemm_v2@1", "sample", "m2", 0, Status.TIMEOUT),
    res("cublas::cublasSgemm_v2@1", "sample", "m2", 1, Status.RUNTIME_ERROR),
    res("cublas::cublasSgemm_v2@1", "sample", "m2", 2, None, end="BUDGET_SPENT", candidates=1),
    res("cublas::cublasSgemm_v2@1", "sample", "m2", 3, Status.INFRA_ERROR),
]
RESULTS = GROUP_A + GROUP_B + GROUP_C + GROUP_D


def call(model: str, status: CallStatus, usage: Usage | None, cost: float,
         extra: dict[str, str] | None = None) -> LLMCall:
    prompt = Prompt((Message(Role.USER, "write a kernel"),), "aten/v1", "aten::add")
    return LLMCall("endpoint", model, prompt, status, text="```python\npass\n```", usage=usage,
                   cost_usd=cost, extra=extra or {})


UNPRICED = {"price": "unknown"}
# (trajectory key, turn, call). The call's own model string is the endpoint's model id; reports
# group by the trajectory key's model (the sweep's label).
CALLS = [
    ("aten::add@1/sample/org/coder/0", 1, call("coder-v1", CallStatus.OK, Usage(1000, 200, 100, 50), 0.01)),
    ("aten::add@1/sample/org/coder/1", 1, call("coder-v1", CallStatus.TRUNCATED, Usage(1000, 500), 0.02)),
    ("aten::mul@1/sample/org/coder/1", 1, call("coder-v1", CallStatus.SERVER_ERROR, None, 0.0)),
    ("vllm::rms_norm@2/sample/org/coder/0", 1, call("coder-v1", CallStatus.OK, Usage(2000, 300), 0.03)),
    # a trajectory that has not finished: its tokens were paid for all the same
    ("aten::add@1/sample/org/coder/9", 1, call("coder-v1", CallStatus.OK, Usage(500, 100), 0.005)),
    ("aten::add@1/refine/org/coder/0", 1, call("coder-v1", CallStatus.OK, Usage(100, 10), 0.001)),
    ("aten::add@1/refine/org/coder/0", 2, call("coder-v1", CallStatus.OK, Usage(100, 10), 0.001)),
    ("aten::add@1/refine/org/coder/0", 3, call("coder-v1", CallStatus.BUDGET, None, 0.0)),
    ("cublas::cublasSgemm_v2@1/sample/m2/0", 1, call("m2", CallStatus.OK, Usage(300, 30), 0.0, UNPRICED)),
    ("cublas::cublasSgemm_v2@1/sample/m2/1", 1, call("m2", CallStatus.OK, Usage(300, 30), 0.0, UNPRICED)),
]


def populate(store: Store) -> None:
    """Run r1 (RESULTS, CALLS, verdicts and sources of its best candidates, and one legacy
    ``trajectories`` row), and a run r2 whose rows must never show up in r1's report or export."""
    store.add_run(RUN, {"spec": "test"})
    for r in RESULTS:
        assert store.add_trajectory_result(r)
        if r.best_candidate_hash and r.status is not Status.INFRA_ERROR:
            store.add_candidate(r.best_candidate_hash, f"# source of {r.key}\n")
            store.add_verdict(Verdict(r.status, r.key.operator_id, r.key.operator_version,  # type: ignore[arg-type]
                                      r.best_candidate_hash, device_model="NVIDIA H200",
                                      harness_version="0.1.0"))
    for key, turn, c in CALLS:
        store.add_llm_call(RUN, key, turn, c)
    store.add_candidate(chash("legacy"), "# legacy\n")
    store.add_trajectory(RUN, "aten::add", "reference", "", 0, "reference", chash("legacy"))
    store.add_verdict(Verdict(Status.PASSED, "aten::add", 1, chash("legacy"), device_model="cpu",
                              harness_version="0.1.0"))
    other = res("aten::add@1", "sample", CODER, 0, Status.PASSED, run="r2")
    store.add_run("r2", {"spec": "other"})
    store.add_trajectory_result(other)
    store.add_candidate(other.best_candidate_hash, "# r2\n")
    store.add_verdict(Verdict(Status.PASSED, "aten::add", 1, other.best_candidate_hash,
                              device_model="NVIDIA H200", harness_version="0.1.0"))
    store.add_llm_call("r2", str(other.key), 1, call("coder-v1", CallStatus.OK, Usage(7, 7), 7.0))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.open_run(tmp_path / "runs" / RUN)
    populate(s)
    return s


def _group(groups: tuple[GroupRow, ...], model: str, method: str, source: str) -> GroupRow:
    return next(g for g in groups if (g.model, g.method, g.source) == (model, method, source))


def _stages(f: FunnelRow) -> list[int]:
    return [s.count for s in f.stages]


# ---- pass@k -------------------------------------------------------------------------------------

def test_pass_at_k_is_the_unbiased_estimator() -> None:
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)          # c / n
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)   # 1 - C(3,2)/C(5,2)
    assert pass_at_k(10, 1, 5) == pytest.approx(1 - 126 / 252)
    assert pass_at_k(4, 2, 4) == 1.0                         # C(2,4) = 0: all 4 drawn include a pass
    assert pass_at_k(5, 0, 3) == 0.0 and pass_at_k(5, 5, 1) == 1.0
    assert pass_at_k(3, 1, 5) is None                        # n < k: no unbiased estimate
    # agrees with the product form of Chen et al. for large n
    n, c, k = 200, 13, 50
    assert pass_at_k(n, c, k) == pytest.approx(1 - math.prod(1 - k / i for i in range(n - c + 1, n + 1)))
    for bad in ((3, 4, 1), (3, 1, 0), (3, -1, 1)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_mean_pass_at_k_leaves_out_problems_with_fewer_than_k_samples() -> None:
    counts = [(5, 2), (3, 3), (2, 0)]
    p1 = mean_pass_at_k(counts, 1)
    assert p1.value == pytest.approx((0.4 + 1.0 + 0.0) / 3) and p1.problems == 3
    p3 = mean_pass_at_k(counts, 3)  # (2, 0) has too few samples
    assert p3.value == pytest.approx(((1 - 1 / 10) + 1.0) / 2) and p3.problems == 2
    p10 = mean_pass_at_k(counts, 10)
    assert p10.value is None and p10.problems == 0


def test_default_ks_stop_at_the_most_samples_of_a_problem() -> None:
    assert default_ks(RESULTS) == (1,)  # aten::add has 4 scored samples, the most
    many = [res("aten::add@1", "sample", CODER, i, Status.PASSED) for i in range(12)]
    assert default_ks(many) == (1, 5, 10)
    assert default_ks([]) == (1,)
    # excluded trajectories are not samples
    infra = [res("aten::add@1", "sample", CODER, i, None, end="INFRA_ERROR") for i in range(6)]
    assert default_ks(many[:4] + infra) == (1,)


# ---- accuracy per (model, method, source, platform) ---------------------------------------------

def test_group_accuracy_pass_at_k_and_speed() -> None:
    rep = build_report(RUN, RESULTS, [], ks=(1, 2, 4, 5))
    assert rep.ks == (1, 2, 4, 5)
    assert [(g.model, g.method, g.source, g.platform) for g in rep.groups] == [
        ("m2", "sample", "cublas", "cuda"), (CODER, "refine", "aten", "cpu"),
        (CODER, "sample", "aten", "cuda"), (CODER, "sample", "vllm", "cuda")]

    a = _group(rep.groups, CODER, "sample", "aten")
    assert (a.trajectories, a.excluded, a.scored) == (8, 1, 7)
    assert (a.problems, a.solved_problems, a.solved_trajectories) == (2, 1, 2)
    assert a.attempted_accuracy == 0.5
    p = {x.k: x for x in a.pass_at}
    assert p[1].value == pytest.approx((2 / 4 + 0 / 3) / 2) and p[1].problems == 2
    assert p[2].value == pytest.approx(((1 - 1 / 6) + 0.0) / 2)      # add: 1 - C(2,2)/C(4,2)
    assert p[4].value == 1.0 and p[4].problems == 1                  # mul has 3 samples < 4
    assert p[5].value is None and p[5].problems == 0
    assert a.speedup_geomean == pytest.approx(1.0)                   # sqrt(2.0 * 0.5)
    assert a.sol_percent_mean == pytest.approx(30.0) and a.timed == 2
    assert a.fast_1 == pytest.approx(1 / 7)                          # one of 7 scored beats PyTorch
    assert a.baseline == "torch"                                     # what the speed-ups are over

    b = _group(rep.groups, CODER, "sample", "vllm")
    assert (b.attempted_accuracy, b.pass_at[0].value, b.fast_1) == (1.0, 1.0, 1.0)
    assert b.speedup_geomean == pytest.approx(8.0) and b.baseline == "vllm"
    assert b.pass_at[1].value is None  # one sample: no pass@2

    c = _group(rep.groups, CODER, "refine", "aten")
    assert (c.problems, c.solved_problems, c.excluded, c.attempted_accuracy) == (2, 2, 0, 1.0)
    assert c.pass_at[0].value == pytest.approx((1 / 2 + 1 / 1) / 2)
    assert c.speedup_geomean is None and c.sol_percent_mean is None
    assert c.fast_1 is None and c.baseline == ""  # solved, but nothing was timed (cpu)

    d = _group(rep.groups, "m2", "sample", "cublas")
    assert (d.trajectories, d.excluded, d.scored, d.problems) == (4, 1, 3, 1)
    assert d.attempted_accuracy == 0.0 and d.pass_at[0].value == 0.0
    assert d.fast_1 == 0.0 and d.speedup_geomean is None


def test_a_group_whose_speed_ups_are_over_different_baselines_names_each() -> None:
    rows = [res("cublas::cublasSgemm_v2@1", "sample", "m2", i, Status.PASSED, speedup=1.5,
                baseline=b) for i, b in enumerate(("cublas", "torch", "cublas"))]
    (g,) = build_report(RUN, rows, [], ks=(1,)).groups
    assert g.baseline == "cublas+torch"


def test_only_unsolved_system_failures_are_excluded() -> None:
    assert is_excluded(GROUP_A[7]) and is_excluded(GROUP_D[3])
    assert not is_excluded(GROUP_C[2])                     # PASSED, then an infra error
    assert not is_excluded(GROUP_A[5]) and not is_excluded(GROUP_D[2])  # LLM error, budget
    only_infra = [res("aten::add@1", "sample", CODER, 0, None, end="INFRA_ERROR")]
    g = build_report(RUN, only_infra, []).groups[0]
    assert (g.problems, g.attempted_accuracy, g.fast_1, g.pass_at[0].value) == (0, None, None, None)


# ---- the funnel -----------------------------------------------------------------------------------

def test_funnel_depth_maps_each_status_to_the_stage_it_failed() -> None:
    depth = {s: funnel_depth(res("aten::add@1", "m", "x", 0, s)) for s in Status
             if s is not Status.INFRA_ERROR}
    assert depth == {Status.REJECTED: 2, Status.COMPILE_ERROR: 3, Status.TOOLCHAIN_ERROR: 3,
                     Status.RUNTIME_ERROR: 4,
                     Status.TIMEOUT: 4, Status.WRONG_ANSWER: 5, Status.CHEAT_DETECTED: 6,
                     Status.PASSED: 8}
    assert funnel_depth(res("aten::add@1", "m", "x", 0, None, end="LLM_ERROR")) == 1
    assert funnel_depth(res("aten::add@1", "m", "x", 0, None, candidates=2)) == 2


def test_funnel_counts_per_model_method_and_total() -> None:
    rep = build_report(RUN, RESULTS, [])
    assert [s.stage for s in rep.funnel_total.stages] == [
        "trajectories", "candidate", "static_ok", "compiled", "ran", "correct", "not_cheating",
        "passed"]
    f = {(x.model, x.method): x for x in rep.funnels}
    # A + B: depths 8 8 5 3 5 1 2 | 8, one excluded
    assert _stages(f[(CODER, "sample")]) == [8, 7, 6, 5, 5, 3, 3, 3]
    assert f[(CODER, "sample")].excluded == 1
    assert f[(CODER, "sample")].stages[1].fraction == pytest.approx(7 / 8)
    assert _stages(f[(CODER, "refine")]) == [3, 3, 3, 3, 3, 3, 2, 2]
    assert _stages(f[("m2", "sample")]) == [3, 3, 2, 2, 0, 0, 0, 0]
    assert _stages(rep.funnel_total) == [14, 13, 11, 10, 8, 6, 5, 5]
    assert rep.funnel_total.excluded == 2
    assert rep.funnel_total.count("passed") == sum(g.solved_trajectories for g in rep.groups)
    assert dict(rep.funnel_total.end_reasons) == {
        "SOLVED": 4, "TURNS_EXHAUSTED": 8, "LLM_ERROR": 1, "INFRA_ERROR": 2, "BUDGET_SPENT": 1}
    empty = funnel([])
    assert _stages(empty) == [0] * 8 and empty.stages[0].fraction is None


# ---- tokens, cost and GPU time per solved problem -------------------------------------------------

def test_llm_usage_sums_calls_per_trajectory_for_one_run(store: Store) -> None:
    usage = {str(u.key): u for u in llm_usage(store, RUN)}
    assert len(usage) == 8 and "aten::add@1/sample/org/coder/9" in usage
    refine = usage["aten::add@1/refine/org/coder/0"]
    assert (refine.calls, refine.billed_calls) == (3, 2)
    assert (refine.prompt_tokens, refine.completion_tokens) == (200, 20)
    assert refine.cost_usd == pytest.approx(0.002) and refine.unpriced_calls == 0
    assert usage["cublas::cublasSgemm_v2@1/sample/m2/0"].unpriced_calls == 1
    first = usage["aten::add@1/sample/org/coder/0"]
    assert (first.cached_tokens, first.reasoning_tokens) == (100, 50)


def test_cost_per_solved_problem_and_totals_equal_the_llm_calls_table(store: Store) -> None:
    rep = read_report(store, RUN)
    c = {(x.model, x.method): x for x in rep.costs}
    s = c[(CODER, "sample")]
    assert (s.calls, s.billed_calls, s.unpriced_calls) == (5, 4, 0)
    assert (s.prompt_tokens, s.completion_tokens, s.total_tokens) == (4500, 1100, 5600)
    assert s.cost_usd == pytest.approx(0.065)
    assert (s.trajectories, s.solved_problems) == (9, 2)  # cuda aten::add@1 and vllm::rms_norm@2
    assert s.gpu_seconds == pytest.approx(8 * 1.5 + 2.0)
    assert s.tokens_per_solved == 2800 and s.cost_per_solved == pytest.approx(0.0325)
    assert s.gpu_seconds_per_solved == pytest.approx(7.0)
    r = c[(CODER, "refine")]
    assert (r.calls, r.billed_calls, r.total_tokens, r.solved_problems) == (3, 2, 220, 2)
    assert r.tokens_per_solved == 110 and r.cost_per_solved == pytest.approx(0.001)
    m = c[("m2", "sample")]
    assert (m.unpriced_calls, m.billed_calls, m.cost_known) == (2, 2, False)
    assert m.solved_problems == 0 and m.tokens_per_solved is None and m.cost_per_solved is None

    # The totals are those of the llm_calls table (the store's own query), run r2 left out.
    t = rep.cost_total
    db = store.llm_totals(RUN)
    assert t.calls == sum(x.calls for x in db) == store.llm_call_count(RUN) == 10
    assert t.billed_calls == sum(x.billed_calls for x in db) == 8
    assert t.prompt_tokens == sum(x.prompt_tokens for x in db) == 5300
    assert t.completion_tokens == sum(x.completion_tokens for x in db) == 1180
    assert t.cached_tokens == sum(x.cached_tokens for x in db)
    assert t.reasoning_tokens == sum(x.reasoning_tokens for x in db)
    assert t.cost_usd == pytest.approx(sum(x.cost_usd for x in db)) and t.cost_usd == pytest.approx(0.067)
    assert t.solved_problems == 4 and t.unpriced_calls == 2 and t.trajectories == len(RESULTS)
    assert t.gpu_seconds == pytest.approx(sum(x.gpu_seconds for x in RESULTS))


def test_cost_rows_cover_models_with_calls_but_no_finished_trajectory() -> None:
    from coordinator.report import TrajectoryUsage

    u = TrajectoryUsage(TrajectoryKey("aten::add", 1, "sample", "late", 0), 1, 1, 0, 10, 5, 0, 0, 0.5)
    rep = build_report(RUN, [], [u])
    assert rep.costs == (CostRow("late", "sample", 1, 1, 0, 10, 5, 0, 0, 0.5, 0, 0.0, 0),)
    assert rep.groups == () and rep.cost_total.total_tokens == 15


def test_bad_k_values_are_refused() -> None:
    for ks in ((), (0,), (1, -2)):
        with pytest.raises(ValueError):
            build_report(RUN, RESULTS, [], ks=ks)
    assert build_report(RUN, RESULTS, [], ks=(5, 1, 5)).ks == (1, 5)


# ---- kgb report -------------------------------------------------------------------------------------

def invoke(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(kgb, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_report_json_shape(store: Store, tmp_path: Path) -> None:
    code, out, err = invoke("report", RUN, "--runs-dir", str(tmp_path / "runs"), "--json", "--k", "1,2")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 1
    doc = orjson.loads(lines[0])
    assert set(doc) == {"schema_version", "run", "report", "ks", "groups", "funnels",
                        "funnel_total", "costs", "cost_total", "track", "warnings", "state",
                        "state_why", "scope", "bootstrap", "metrics"}
    assert (doc["schema_version"], doc["run"], doc["report"], doc["ks"]) == (3, RUN, "sweep", [1, 2])
    assert "accuracy" not in doc["groups"][0]   # renamed in schema 3, never redefined
    for row in (*doc["costs"], doc["cost_total"]):  # unconfirmed calls beside the billed ones
        assert {"billed_calls", "unconfirmed_calls", "unconfirmed_tokens_estimate",
                "unconfirmed_cost_usd_estimate", "reused_verdicts", "reused_gpu_seconds"} <= set(row)
    assert doc["cost_total"]["unconfirmed_calls"] == 0
    g = next(x for x in doc["groups"] if (x["model"], x["source"]) == (CODER, "aten")
             and x["method"] == "sample")
    assert g["attempted_accuracy"] == 0.5 and g["problems"] == 2 and g["excluded"] == 1
    assert g["baseline"] == "torch"  # through the store's trajectory_results
    assert g["pass_at"][1] == {"k": 2, "value": pytest.approx(5 / 12), "problems": 2}
    assert [s["count"] for s in doc["funnel_total"]["stages"]] == [14, 13, 11, 10, 8, 6, 5, 5]
    assert doc["funnel_total"]["end_reasons"][0] == ["BUDGET_SPENT", 1]
    assert doc["cost_total"]["calls"] == 10 and doc["cost_total"]["tokens_per_solved"] == (5300 + 1180) / 4
    assert {c["model"] for c in doc["costs"]} == {CODER, "m2"}
    assert all("cost_per_solved" in c and "cost_known" in c for c in doc["costs"])


def test_report_tables(store: Store, tmp_path: Path) -> None:
    db = tmp_path / "runs" / RUN / "kgb.sqlite"
    code, out, err = invoke("report", RUN, "--store", str(db))
    assert code == 0, err
    for text in ("pass@1", "status funnel", "produced a candidate", "not cheating", "cost/solved",
                 "unknown", "$0.0325", "2,800", "50.0%", "1.00x", "end reasons: BUDGET_SPENT 1",
                 " vs ", "vllm"):
        assert text in out, text
    code, out, _ = invoke("report", RUN, "--store", str(db), "--k", "4")
    assert code == 0 and "pass@4" in out and "100.0% (1/2)" in out  # mul has too few samples


def test_report_of_a_kgb_run_run_keeps_its_per_trajectory_output(tmp_path: Path) -> None:
    s = Store.open_run(tmp_path / "runs" / "legacy")
    s.add_run("legacy", {})
    s.add_trajectory("legacy", "aten::add", "reference", "", 0, "reference", chash("a"))
    s.add_verdict(Verdict(Status.PASSED, "aten::add", 1, chash("a"), device_model="cpu"))
    s.close()
    code, out, _ = invoke("report", "legacy", "--runs-dir", str(tmp_path / "runs"), "--json")
    assert code == 0
    assert [orjson.loads(x)["status"] for x in out.splitlines()] == ["PASSED"]
    assert [orjson.loads(x)["baseline"] for x in out.splitlines()] == [""]
    code, out, _ = invoke("report", str(tmp_path / "runs" / "legacy"))
    assert code == 0 and "aten::add" in out and "PASSED" in out
    assert " vs " not in out  # nothing timed: no column for what speed-ups are over


def test_a_kgb_run_table_says_what_each_speed_up_is_over(tmp_path: Path) -> None:
    s = Store.open_run(tmp_path / "runs" / "timed")
    s.add_run("timed", {"kind": "run"})
    s.add_trajectory("timed", "cublas::cublasSgemm_v2", "reference", "", 0, "reference", chash("g"))
    s.add_verdict(Verdict(Status.PASSED, "cublas::cublasSgemm_v2", 1, chash("g"),
                          device_model="NVIDIA H200", baseline="torch",
                          timings=(CaseTiming("c", True, 10.0, speedup=0.9),)))
    s.close()
    code, out, _ = invoke("report", "timed", "--runs-dir", str(tmp_path / "runs"), "--json")
    assert code == 0 and [orjson.loads(x)["baseline"] for x in out.splitlines()] == ["torch"]
    code, out, _ = invoke("report", "timed", "--runs-dir", str(tmp_path / "runs"))
    assert code == 0 and " vs " in out and "torch" in out and "0.90x" in out


def test_unknown_run_lists_the_known_runs(store: Store, tmp_path: Path) -> None:
    code, _, err = invoke("report", "nope", "--runs-dir", str(tmp_path / "runs"))
    assert code == 2 and "no run 'nope'" in err and f"known runs under {tmp_path / 'runs'}/: {RUN}" in err
    db = str(tmp_path / "runs" / RUN / "kgb.sqlite")
    code, _, err = invoke("report", "nope", "--store", db)
    assert code == 2 and "no run 'nope'" in err and "known runs: r1, r2" in err
    code, _, err = invoke("report", "nope", "--runs-dir", str(tmp_path / "empty"))
    assert code == 2 and "(none)" in err
    code, _, err = invoke("report", RUN, "--store", str(tmp_path / "missing.sqlite"))
    assert code == 2 and "no store" in err


def test_report_usage_errors(store: Store, tmp_path: Path) -> None:
    db = str(tmp_path / "runs" / RUN / "kgb.sqlite")
    code, _, err = invoke("report", RUN, "--store", db, "--runs-dir", str(tmp_path))
    assert code == 2 and "not both" in err
    for bad in ("0", "1,x", ","):
        code, _, err = invoke("report", RUN, "--store", db, "--k", bad)
        assert code == 2 and "--k takes positive integers" in err
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    code, _, err = invoke("report", str(junk))
    assert code == 2 and "cannot read the store" in err


def test_report_of_a_store_file_reports_every_run(store: Store, tmp_path: Path) -> None:
    code, out, _ = invoke("report", str(tmp_path / "runs" / RUN / "kgb.sqlite"), "--json")
    assert code == 0
    assert [orjson.loads(x)["run"] for x in out.splitlines()] == [RUN, "r2"]


def test_warnings_are_counted_per_method_from_the_best_candidates_verdicts(store: Store) -> None:
    """A PASSED candidate with warning-level static findings shows them in the report, per
    (model, method); decisive findings are not warnings."""
    from protos.records import WARNING, Finding

    def verdict(r: TrajectoryResult, findings: tuple[Finding, ...]) -> Verdict:
        assert r.status is not None
        return Verdict(r.status, r.key.operator_id, r.key.operator_version, r.best_candidate_hash,
                       device_model="cpu", harness_version="t", findings=findings)

    warn = Finding("static", "torch-call", "line 9: `torch.equal` ...", WARNING)
    store.add_verdict(verdict(GROUP_C[0], (warn, warn)))
    store.add_verdict(verdict(GROUP_C[1], (Finding("runtime", "dispatch-guard", "x"), warn)))
    store.add_verdict(verdict(GROUP_A[0], ()))
    rep = read_report(store, RUN)
    rows = {(w.model, w.method): w for w in rep.warnings}
    refine, sample = rows[(CODER, "refine")], rows[(CODER, "sample")]
    assert refine.judged >= 2 and (refine.warned, refine.warnings) == (2, 3)
    assert sample.judged >= 1 and (sample.warned, sample.warnings) == (0, 0)
    assert rep.to_json()["warnings"][0]["warnings"] in (0, 3)
