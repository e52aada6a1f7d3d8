"""``sample`` with ``rounds`` in a sweep: the spec's option errors name their key, and the report's
sequential Pass@K (pass after round K, over the named problems) on a store with known answers."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from coordinator.cli import kgb
from coordinator.report import build_report
from coordinator.report_metrics import (
    ALL,
    MetricRow,
    method_rounds,
    metric_rows,
    problem_outcomes,
    run_scope,
)
from coordinator.store import Store, TrajectoryKey, TrajectoryResult
from coordinator.sweep_spec import SweepSpecError, parse_spec
from protos.records import Status

RUN = "seq"
HEAD = """
operators = ["aten::add"]
platforms = ["cpu"]

[sweep]
name = "t"

[[models]]
name = "m"
endpoint = "vllm"
model = "coder"

[[endpoints]]
name = "vllm"
kind = "openai"
base_url = "http://127.0.0.1:8000/v1"

[[methods]]
name = "sample"
"""
THINKING = '[[models]]\nname = "c"\nmodel = "anthropic/c"\nthinking_budget = 2048\n'


def _spec(options: str, extra: str = "") -> str:
    return HEAD.replace('name = "sample"\n', f'name = "sample"\n{options}\n') + extra


@pytest.mark.parametrize("options, path", [
    ("rounds = 0", "methods[0].rounds"),
    ("rounds = 2.5", "methods[0].rounds"),
    ('rounds = 3\nround_temperature = "hot"', "methods[0].round_temperature"),
    ("rounds = 3\nround_temperature = -1.0", "methods[0].round_temperature"),
    ('rounds = 3\nfeedback = "yes"', "methods[0].feedback"),
    ("round_temperature = 0.7", "methods[0].round_temperature"),
    ("rounds = 1\nfeedback = true", "methods[0].feedback"),
    ("rounds = 1\nround_temperature = 0.7", "methods[0].round_temperature"),
    ("round = 3", "methods[0].round"),
    ("rounds = 3\nn = 4", "methods[0].n"),  # n chains would pay n times for round 1
])
def test_bad_round_options_name_their_key(options: str, path: str) -> None:
    with pytest.raises(SweepSpecError) as info:
        parse_spec(_spec(options), "sweep.toml")
    assert info.value.path == path, str(info.value)


def test_top_level_samples_with_rounds_is_refused_saying_where_n_came_from() -> None:
    with pytest.raises(SweepSpecError) as info:
        parse_spec("samples = 3\n" + _spec("rounds = 2"), "sweep.toml")
    assert info.value.path == "methods[0].n" and "top-level samples" in info.value.message
    spec = parse_spec("samples = 3\n" + _spec("rounds = 2\nn = 1"), "sweep.toml")
    assert spec.methods[0].instance.n == 1  # type: ignore[union-attr]


def test_round_options_reach_the_method() -> None:
    spec = parse_spec(_spec('rounds = 3\nround_temperature = 0.7\nfeedback = true\nlabel = "seq"'),
                      "sweep.toml")
    (entry,) = spec.methods
    m = entry.instance
    assert (m.rounds, m.round_temperature, m.feedback, m.needs_evaluator) == (3, 0.7, True, True)  # type: ignore[union-attr]
    assert not parse_spec(_spec(""), "sweep.toml").methods[0].instance.needs_evaluator  # type: ignore[union-attr]


@pytest.mark.parametrize("options, path", [
    ("rounds = 2", "methods[0].rounds"),                      # round 1 is sent at temperature 0
    ("rounds = 2\nround_temperature = 0.5", "methods[0].round_temperature"),
])
def test_a_thinking_model_refuses_rounds(options: str, path: str) -> None:
    with pytest.raises(SweepSpecError) as info:
        parse_spec(_spec(options, THINKING), "sweep.toml")
    assert info.value.path == path and "thinking_budget" in info.value.message
    parse_spec(_spec("", THINKING), "sweep.toml")


# ---- the report ----------------------------------------------------------------------------------

SPEC = """operators = ["aten::a", "aten::b", "aten::c", "aten::d", "aten::e", "aten::z", "vllm::x"]

[[methods]]
name = "sample"
label = "seq"
rounds = 3

[[methods]]
name = "sample"

[[methods]]
name = "refine"
turns = 4
"""


def res(op: str, method: str, sample: int, status: Status | None, turns: int,
        end: str = "") -> TrajectoryResult:
    key = TrajectoryKey(op, 1, method, "m", sample)
    end = end or ("SOLVED" if status is Status.PASSED else "TURNS_EXHAUSTED")
    return TrajectoryResult(RUN, "cuda", key, op.split("::")[0], end, status,
                            f"h-{key}" if status else "", None, None, turns, turns, 10, 5, 0.0, 1.0)


# Known answers: the round each problem of "seq" was first solved in.
RESULTS = [
    res("aten::a", "seq", 0, Status.PASSED, 1),
    res("aten::b", "seq", 0, Status.PASSED, 2),
    res("aten::c", "seq", 0, Status.PASSED, 3),
    res("aten::c", "seq", 1, Status.PASSED, 2),                      # c: its best sample, round 2
    res("aten::d", "seq", 0, Status.WRONG_ANSWER, 3),                # every round failed
    res("aten::e", "seq", 0, None, 2, end="INFRA_ERROR"),            # excluded: unsolved
    res("vllm::x", "seq", 0, Status.PASSED, 1),
    res("aten::a", "sample", 0, Status.PASSED, 1, end="CANDIDATE"),
    res("aten::a", "refine", 0, Status.PASSED, 3),
]
# aten is named 6 (a b c d e z), vllm 1: by round 1 a; by 2 a b c; by 3 the same
AFTER = {"aten": (1 / 6, 3 / 6, 3 / 6), "vllm": (1.0, 1.0, 1.0), ALL: (2 / 7, 4 / 7, 4 / 7)}


def row(rows: list[MetricRow], method: str, source: str) -> MetricRow:
    return next(r for r in rows if (r.method, r.source) == (method, source))


def test_method_rounds_come_from_the_recorded_spec() -> None:
    assert method_rounds({"spec": SPEC}) == {"seq": 3}
    assert method_rounds({"spec": '[[methods]]\nname = "sample"\nrounds = 2\n'}) == {"sample": 2}
    assert method_rounds({"kind": "sweep"}) == {} and method_rounds({"spec": "x = ["}) == {}


def test_pass_after_round_k_over_the_named_problems() -> None:
    config = {"spec": SPEC}
    rows = metric_rows(problem_outcomes(RESULTS), run_scope(config, RESULTS), method_rounds(config))
    for source, want in AFTER.items():
        seq = row(rows, "seq", source)
        assert seq.pass_after_round == pytest.approx(want), source
        assert seq.pass_after_round[-1] == pytest.approx(seq.accuracy)  # the last round is accuracy
    assert row(rows, "sample", "aten").pass_after_round == ()           # one round: not reported
    assert row(rows, "refine", "aten").pass_after_round == ()
    cublas = metric_rows(problem_outcomes(RESULTS), run_scope({"spec": 'suites = ["cublas"]\n'
                                                               + SPEC.split("\n", 1)[1]}, RESULTS),
                         {"seq": 3})
    assert row(cublas, "seq", "cublas").pass_after_round == pytest.approx((0.0, 0.0, 0.0))
    assert row(cublas, "seq", "cublas").named == 50


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.open_run(tmp_path / "runs" / RUN)
    s.add_run(RUN, {"spec": SPEC})
    for r in RESULTS:
        assert s.add_trajectory_result(r)
    s.close()
    return s


def _report(tmp_path: Path, *args: str) -> str:
    r = CliRunner().invoke(kgb, ["report", RUN, "--runs-dir", str(tmp_path / "runs"), *args])
    assert r.exit_code == 0, r.stderr
    return r.stdout


def test_kgb_report_shows_pass_after_round_in_json_and_tables(store: Store, tmp_path: Path) -> None:
    doc = orjson.loads(_report(tmp_path, "--json"))
    assert doc["schema_version"] == 3                                   # a key added, none redefined
    got = {(m["method"], m["source"]): m["pass_after_round"] for m in doc["metrics"]}
    for source, want in AFTER.items():
        assert got[("seq", source)] == pytest.approx(list(want))
    assert got[("sample", "aten")] == [] and got[("refine", ALL)] == []
    out = _report(tmp_path)
    assert "Sequential Pass@K" in out and "Round 3" in out and "Round 4" not in out
    line = next(x for x in out.splitlines() if " seq " in x and " aten " in x and "16.7%" in x)
    assert [c for c in line.split() if c.endswith("%")] == ["16.7%", "50.0%", "50.0%"]


def test_no_rounds_table_without_a_sequential_method() -> None:
    from coordinator.report_view import rounds_table

    plain = [r for r in RESULTS if r.key.method != "seq"]
    assert rounds_table(build_report(RUN, plain, [], config={"spec": SPEC})) is None
    assert rounds_table(build_report(RUN, RESULTS, [], config={"kind": "sweep"})) is None


def test_paper_and_html_reports_carry_the_rounds_table(store: Store, tmp_path: Path) -> None:
    """`kgb report --paper` (Markdown) and `--html` show sequential Pass@K as the terminal does."""
    md = _report(tmp_path, "--paper", "--format", "md")
    assert "Sequential Pass@K" in md and "Round 3" in md and "Round 4" not in md
    line = next(x for x in md.splitlines() if "| seq |" in x and "| aten |" in x)
    assert [c.strip() for c in line.strip("|").split("|")][-3:] == ["16.7", "50.0", "50.0"]
    html_path = tmp_path / "r.html"
    _report(tmp_path, "--html", str(html_path))
    page = html_path.read_text()
    assert 'id="t-rounds"' in page and "<td>16.7</td><td>50.0</td><td>50.0</td>" in page
