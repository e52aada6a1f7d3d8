"""``kgb report`` shows the per-platform accuracy and speed-up table whenever several platforms
ran (issue #28, point 4), with tokens per platform under per-platform generation and once under
shared generation."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from coordinator.cli import kgb
from coordinator.report import read_report
from coordinator.report_paper import multi_chip_tokens
from coordinator.store import Store, TrajectoryKey, TrajectoryResult
from generators.llm import Usage
from protos.records import Status
from tests.coordinator.test_report_paper import _call

RUN = "chips"
P, W = Status.PASSED, Status.WRONG_ANSWER


def _store(path: Path, shared: bool) -> Store:
    """Two problems, one method, judged on cuda and rocm; a sweep spec with the mode."""
    spec = ('suites = ["mc"]\nplatforms = ["cuda", "rocm"]\n\n[sweep]\nname = "chips"\n'
            + ('generation = "shared"\n' if shared else ""))
    store = Store.open_run(path)
    store.add_run(RUN, {"kind": "sweep", "spec": spec})
    rows = [("cuda", "aten::a", P, 2.0), ("cuda", "aten::b", P, 1.0),
            ("rocm", "aten::a", P, 0.5), ("rocm", "aten::b", W, None)]
    for platform, op, status, speedup in rows:
        key = TrajectoryKey(op, 1, "sample", "m1", 0, "" if shared else platform)
        assert store.add_trajectory_result(TrajectoryResult(
            RUN, platform, key, "aten", "CANDIDATE", status, "h", speedup, None, 1, 1, 0, 0, 0.0,
            1.0))
    for op in ("aten::a", "aten::b"):  # shared: one trajectory per problem, its calls once
        for platform in ("",) if shared else ("cuda", "rocm"):
            key = TrajectoryKey(op, 1, "sample", "m1", 0, platform)
            store.add_llm_call(RUN, str(key), 1, _call(Usage(1000, 200), 0.01))
    return store


def test_per_platform_generation_shows_tokens_per_platform(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", shared=False)
    t = multi_chip_tokens(read_report(store, RUN))
    store.close()
    assert t is not None and "per-platform generation" in t.title
    assert t.header[-2:] == ("cuda tokens", "rocm tokens")
    # cuda: 2/110 at geomean(2, 1); rocm: 1/110 at 0.5; each platform's two trajectories
    assert t.rows == (("m1", "sample", "1.8", "1.41", "0.9", "0.50", "-0.9", "2,400", "2,400"),)


def test_shared_generation_counts_tokens_once(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", shared=True)
    rep = read_report(store, RUN)
    t = multi_chip_tokens(rep)
    store.close()
    assert rep.scope.generation == "shared"
    assert t is not None and "tokens counted once" in t.title
    assert t.header[-1] == "Tokens (once)" and "cuda tokens" not in t.header
    assert t.rows == (("m1", "sample", "1.8", "1.41", "0.9", "0.50", "-0.9", "2,400"),)
    assert rep.cost_total.total_tokens == 2400  # the run's tokens: two trajectories, once each


def test_kgb_report_shows_the_multi_chip_table(tmp_path: Path) -> None:
    """Not only with --paper: the default report has it when several platforms ran, and none
    when one did."""
    store = _store(tmp_path / "s", shared=True)
    db = str(store.path)
    store.close()
    out = CliRunner().invoke(kgb, ["report", "--store", db, RUN], env={"COLUMNS": "250"})
    assert out.exit_code == 0, out.output
    assert "Multi-Chip" in out.output and "Tokens (once)" in out.output
    assert "(shared generation: each" in out.output  # the token table says so too
    store = Store(Path(db))
    store.db.execute("DELETE FROM trajectory_results WHERE platform = 'rocm'")
    store.db.commit()
    store.close()
    out = CliRunner().invoke(kgb, ["report", "--store", db, RUN], env={"COLUMNS": "250"})
    assert out.exit_code == 0 and "Multi-Chip" not in out.output
