"""The headline metrics (coordinator/report_metrics.py) against answers computed by hand: accuracy
over the named denominator with its parts shown apart, fast_p, the paper's speed-up and the
speed-up over commonly solved problems, and the fixed-seed bootstrap."""

from __future__ import annotations

import math

import pytest

from coordinator.report_metrics import (
    ALL,
    MetricRow,
    bootstrap_ci,
    metric_rows,
    problem_outcomes,
    run_scope,
)
from coordinator.store import TrajectoryKey, TrajectoryResult
from protos.records import Status

MS_SPEC = {"spec": 'suites = ["ms"]\nplatforms = ["cuda"]\n'}


def res(op: str, method: str, sample: int, status: Status | None, *, speedup: float | None = None,
        sol: float | None = None, end: str = "", model: str = "m",
        platform: str = "cuda") -> TrajectoryResult:
    key = TrajectoryKey(op, 1, method, model, sample)
    end = end or ("CANDIDATE" if status is not None else "EXTRACTION_FAILED")
    return TrajectoryResult("r", platform, key, op.split("::")[0], end, status,
                            "h" if status else "", speedup, sol, 1, 1, 10, 5, 0.0, 1.0)


RESULTS = [
    res("aten::a", "sample", 0, Status.PASSED, speedup=2.0, sol=40.0),
    res("aten::a", "sample", 1, Status.PASSED, speedup=0.5, sol=20.0),
    res("aten::b", "sample", 0, Status.PASSED, speedup=4.0, sol=50.0),
    res("aten::c", "sample", 0, None, end="INFRA_ERROR"),             # excluded
    res("aten::c", "sample", 1, Status.INFRA_ERROR),                   # excluded
    res("aten::d", "sample", 0, Status.TOOLCHAIN_ERROR),               # the compiler's failure
    res("aten::e", "sample", 0, Status.WRONG_ANSWER),
    res("aten::e", "sample", 1, None),                                 # no candidate: scored
    res("vllm::x", "sample", 0, Status.PASSED, speedup=1.2, sol=10.0),
    res("aten::a", "refine", 0, Status.PASSED, speedup=3.0),
    res("aten::e", "refine", 0, Status.PASSED, speedup=0.9),
]


def row(rows: list[MetricRow], method: str, source: str, platform: str = "cuda") -> MetricRow:
    return next(r for r in rows if (r.method, r.source, r.platform) == (method, source, platform))


def test_scope_of_a_suite_is_its_published_size() -> None:
    scope = run_scope(MS_SPEC, RESULTS)
    assert scope.recorded and scope.suites == ("ms",)
    assert dict(scope.sizes) == {"aten": 110, "vllm": 50, "cublas": 50}
    assert scope.size(ALL) == 210


def test_scope_of_a_listed_subset_and_of_a_run_without_a_spec() -> None:
    listed = run_scope({"spec": 'operators = ["aten::a", "aten::z", "cublas::g"]'}, RESULTS[:3])
    assert dict(listed.sizes) == {"aten": 3, "cublas": 1}   # a and z named, and b, which ran
    assert listed.listed == ("aten::a", "aten::z", "cublas::g")
    grown = run_scope({"spec": 'operators = ["aten::a"]'}, RESULTS[:3])
    assert dict(grown.sizes) == {"aten": 2}                 # never fewer than attempted
    none = run_scope({"kind": "sweep"}, RESULTS)
    assert not none.recorded and "no sweep spec" in none.why
    assert dict(none.sizes) == {"aten": 5, "vllm": 1}
    bad = run_scope({"spec": "suites = ["}, RESULTS)
    assert not bad.recorded and "does not parse" in bad.why


def test_problem_outcomes_state_and_speed() -> None:
    outs = {(o.method, o.problem): o for o in problem_outcomes(RESULTS)}
    a = outs[("sample", "aten::a")]
    assert (a.scored, a.passed, a.state) == (2, 2, "solved")
    assert a.speedup == pytest.approx(1.0) and a.sol_percent == pytest.approx(30.0)
    assert outs[("sample", "aten::c")].state == "excluded"
    assert outs[("sample", "aten::d")].state == "toolchain"
    assert outs[("sample", "aten::e")].state == "failed"


def test_accuracy_over_the_named_problems_with_its_parts_apart() -> None:
    rows = metric_rows(problem_outcomes(RESULTS), run_scope(MS_SPEC, RESULTS))
    a = row(rows, "sample", "aten")
    assert (a.named, a.attempted, a.solved, a.failed, a.excluded, a.toolchain, a.unattempted) == \
        (110, 5, 2, 1, 1, 1, 105)
    assert a.accuracy == pytest.approx(2 / 110)
    assert a.speedup == pytest.approx(2.0)                  # geomean(1.0, 4.0), per problem
    assert a.sol_percent == pytest.approx(40.0)             # mean(30, 50)
    assert [a.fast(p) for p in (0, 0.8, 1, 1.5, 2)] == pytest.approx(
        [2 / 110, 2 / 110, 1 / 110, 1 / 110, 1 / 110])     # 1.0 is not above 1; 4.0 is above 2
    every = row(rows, "sample", ALL)
    assert (every.named, every.solved, every.unattempted) == (210, 3, 204)
    assert every.speedup == pytest.approx(4.8 ** (1 / 3))
    cublas = row(rows, "sample", "cublas")
    assert (cublas.named, cublas.attempted, cublas.accuracy, cublas.speedup) == (50, 0, 0.0, None)


def test_speedup_over_problems_every_compared_method_solved() -> None:
    rows = metric_rows(problem_outcomes(RESULTS), run_scope(MS_SPEC, RESULTS))
    s, r = row(rows, "sample", "aten"), row(rows, "refine", "aten")
    assert s.common_problems == r.common_problems == 1      # only aten::a is solved by both
    assert s.common_speedup == pytest.approx(1.0) and r.common_speedup == pytest.approx(3.0)
    assert r.speedup == pytest.approx(math.sqrt(3.0 * 0.9))


def test_fast_p_is_unknown_when_nothing_solved_was_timed() -> None:
    cpu = [res("aten::a", "sample", 0, Status.PASSED, platform="cpu")]
    m = row(metric_rows(problem_outcomes(cpu), run_scope(MS_SPEC, cpu)), "sample", "aten", "cpu")
    assert m.fast(0) == pytest.approx(1 / 110) and m.fast(1) is None and m.speedup is None


def test_bootstrap_intervals_are_fixed_by_the_seed_and_cover_the_estimate() -> None:
    values = [1.0] * 100 + [0.0] * 100
    ci = bootstrap_ci(values, "mean")
    assert ci == bootstrap_ci(values, "mean")               # a pure function of the rows
    assert ci is not None and ci[0] < 0.5 < ci[1] and 0.10 < ci[1] - ci[0] < 0.16  # 4 * 0.035
    assert bootstrap_ci(values, "mean", seed=1) != ci
    assert bootstrap_ci([0.0] * 5, "mean") == (0.0, 0.0)
    assert bootstrap_ci([1.0], "mean") is None
    g = bootstrap_ci([2.0, 8.0, 4.0, 4.0], "geomean")
    assert g is not None and 2.0 <= g[0] < 4.0 < g[1] <= 8.0
    rows = metric_rows(problem_outcomes(RESULTS), run_scope(MS_SPEC, RESULTS))
    a = row(rows, "sample", "aten")
    assert a.accuracy_ci is not None and a.accuracy_ci[0] <= a.accuracy <= a.accuracy_ci[1]  # type: ignore[operator]
