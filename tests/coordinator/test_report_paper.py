"""``kgb report --paper``: the published tables from a synthetic store whose every cell is known
by hand (docs/reports.md, "Headline metrics"; shape: shared/reference/published-benchmark.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from coordinator.cli import kgb
from coordinator.report import read_report
from coordinator.report_paper import latex_escape, paper_tables, to_latex, to_markdown
from coordinator.store import Store, TrajectoryKey, TrajectoryResult
from generators.llm import CallStatus, LLMCall, Message, Prompt, Role, Usage
from protos.records import Status

RUN = "paper"
SPEC = 'suites = ["ms"]\nplatforms = ["cuda", "rocm"]\n'
P, W, T = Status.PASSED, Status.WRONG_ANSWER, Status.TOOLCHAIN_ERROR
WALL = {"sample": 360.0, "agent": 720.0}
# (platform, method, problem, status, speedup)
ROWS = [
    ("cuda", "sample", "aten::a", P, 2.0), ("cuda", "sample", "aten::b", W, None),
    ("cuda", "sample", "vllm::v", P, 0.5), ("cuda", "sample", "cublas::g", P, 8.0),
    ("cuda", "agent", "aten::a", P, 4.0), ("cuda", "agent", "aten::b", P, 1.0),
    ("cuda", "agent", "vllm::v", W, None),
    ("rocm", "sample", "aten::a", P, 1.0),
    ("rocm", "agent", "aten::a", T, None), ("rocm", "agent", "aten::b", P, 0.25),
]


def _result(platform: str, method: str, op: str, status: Status, speedup: float | None) -> TrajectoryResult:
    key = TrajectoryKey(op, 1, method, "m1", 0)
    return TrajectoryResult(RUN, platform, key, op.split("::")[0], "CANDIDATE", status, "h",
                            speedup, None, 1, 1, 0, 0, 0.0, 1.0, wall_s=WALL[method])


def _call(usage: Usage, cost: float) -> LLMCall:
    prompt = Prompt((Message(Role.USER, "write"),), "aten/v1", "aten::a")
    return LLMCall("ep", "m1-id", prompt, CallStatus.OK, text="x", usage=usage, cost_usd=cost)


def make_store(path: Path) -> Store:
    store = Store.open_run(path)
    store.add_run(RUN, {"kind": "sweep", "spec": SPEC})
    for row in ROWS:
        assert store.add_trajectory_result(_result(*row))
    store.add_llm_call(RUN, "aten::a@1/sample/m1/0", 1, _call(Usage(1000, 200), 0.01))
    store.add_llm_call(RUN, "aten::a@1/agent/m1/0", 1, _call(Usage(3000, 1000), 0.04))
    return store


@pytest.fixture
def tables(tmp_path: Path) -> dict[str, tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]]:
    store = make_store(tmp_path / RUN)
    got = {t.name: (t.header, t.rows) for t in paper_tables(read_report(store, RUN))}
    store.close()
    return got


def test_multi_source_table(tables: dict) -> None:  # type: ignore[type-arg]
    header, rows = tables["multi-source"]
    assert header == ("Model", "Method", "ATen Acc", "ATen Spd", "cuBLAS Acc", "cuBLAS Spd",
                      "vLLM Acc", "vLLM Spd", "Overall Acc", "Overall Spd")
    assert rows == (
        # agent: aten 2/110, geomean(4, 1); nothing on cublas; vllm failed; overall 2/210
        ("m1", "agent", "1.8", "2.00", "0.0", "-", "0.0", "-", "1.0", "2.00"),
        # sample: aten 1/110 at 2x; cublas 1/50 at 8x; vllm 1/50 at 0.5x; overall 3/210, cbrt(8)
        ("m1", "sample", "0.9", "2.00", "2.0", "8.00", "2.0", "0.50", "1.4", "2.00"))


def test_multi_chip_table(tables: dict) -> None:  # type: ignore[type-arg]
    header, rows = tables["multi-chip"]
    assert header == ("Model", "Method", "cuda Acc", "cuda Spd", "rocm Acc", "rocm Spd",
                      "rocm dAcc vs cuda")
    assert rows == (("m1", "agent", "1.8", "2.00", "0.9", "0.25", "-0.9"),
                    ("m1", "sample", "0.9", "2.00", "0.9", "1.00", "+0.0"))


def test_cost_table(tables: dict) -> None:  # type: ignore[type-arg]
    header, rows = tables["cost"]
    assert header == ("Model", "Method", "Total tokens", "Tokens / success", "Total hours", "Cost")
    # agent: 4000 tokens over 3 solved (cuda a, b; rocm b), 5 x 720 s; sample: 1200 over 4
    assert rows == (("m1", "agent", "4,000", "1,333", "1.00", "$0.04"),
                    ("m1", "sample", "1,200", "300", "0.50", "$0.01"))


def test_problem_matrix(tables: dict) -> None:  # type: ignore[type-arg]
    header, rows = tables["problems"]
    assert header == ("Problem", "m1 agent cuda", "m1 agent rocm", "m1 sample cuda",
                      "m1 sample rocm")
    assert rows == (("aten::a", "4.00x", "toolchain", "2.00x", "1.00x"),
                    ("aten::b", "1.00x", "0.25x", "fail", "-"),
                    ("cublas::g", "-", "-", "8.00x", "-"),
                    ("vllm::v", "fail", "-", "0.50x", "-"))


def test_one_platform_has_no_multi_chip_table(tmp_path: Path) -> None:
    store = make_store(tmp_path / RUN)
    store.db.execute("DELETE FROM trajectory_results WHERE platform = 'rocm'")
    names = [t.name for t in paper_tables(read_report(store, RUN))]
    assert names == ["multi-source", "cost", "problems"]


def test_markdown_and_latex_writers(tmp_path: Path) -> None:
    store = make_store(tmp_path / RUN)
    store.close()
    db = str(tmp_path / RUN / "kgb.sqlite")
    r = CliRunner().invoke(kgb, ["report", RUN, "--store", db, "--paper", "--format", "md"])
    assert r.exit_code == 0, r.stderr
    assert "| m1 | sample | 0.9 | 2.00 | 2.0 | 8.00 | 2.0 | 0.50 | 1.4 | 2.00 |" in r.stdout
    assert "| --- | --- | --: |" in r.stdout and "**Multi-Chip (ATen)" in r.stdout
    r = CliRunner().invoke(kgb, ["report", RUN, "--store", db, "--paper", "--format", "latex"])
    assert r.exit_code == 0, r.stderr
    assert r"m1 & agent & 1.8 & 2.00 & 0.0 & - & 0.0 & - & 1.0 & 2.00 \\" in r.stdout
    assert r"aten::a & 4.00x & toolchain & 2.00x & 1.00x \\" in r.stdout
    assert r.stdout.count(r"\begin{tabular}") == 4 and r"Total hours & Cost \\" in r.stdout
    assert latex_escape("a_b & 5% $") == r"a\_b \& 5\% \$"
    r = CliRunner().invoke(kgb, ["report", RUN, "--store", db, "--paper"])
    assert r.exit_code == 0 and "Multi-Source (cuda)" in r.stdout
    r = CliRunner().invoke(kgb, ["report", RUN, "--store", db, "--format", "md"])
    assert r.exit_code == 2 and "--format applies to --paper" in r.stderr


def test_writers_escape_cells() -> None:
    from coordinator.report_paper import PaperTable
    t = PaperTable("cost", "t", ("Model", "Method", "x"), (("a|b", "m_1", "5%"),))
    assert "| a\\|b | m_1 | 5% |" in to_markdown(t)
    assert r"a|b & m\_1 & 5\% \\" in to_latex(t)
