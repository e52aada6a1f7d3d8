"""``kgb export``: one run's rows, one file per table, read back equal to the store's rows."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from coordinator.cli import kgb
from coordinator.export import TABLES, ExportError, TableSpec, export_run, iter_batches
from coordinator.store import Store
from tests.coordinator.test_report import RESULTS, RUN, chash, populate

NAMES = ["runs", "trajectory_results", "llm_calls", "llm_intents", "verdicts", "candidates",
         "trajectories", "run_states", "trajectory_artifacts"]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.open_run(tmp_path / "runs" / RUN)
    populate(s)
    return s


@pytest.fixture
def pq() -> Any:
    """pyarrow.parquet (the dev extra installs it; only the Parquet tests need it)."""
    return pytest.importorskip("pyarrow.parquet")


def _spec(name: str) -> TableSpec:
    return next(t for t in TABLES if t.name == name)


def _store_rows(store: Store, name: str) -> list[dict[str, Any]]:
    """The run's rows straight from SQLite (every column, as stored), in primary-key order."""
    cur = store.db.execute(_spec(name).query(), (RUN,))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur]


def test_tables_and_columns_follow_the_store_schema(store: Store) -> None:
    assert [t.name for t in TABLES] == NAMES
    for t in TABLES:
        schema = [(r[1], r[2]) for r in store.db.execute(f"PRAGMA table_info({t.name})")]
        assert [c.name for c in t.columns] == [name for name, _ in schema], t.name
        sql_type = {"str": "TEXT", "int": "INTEGER", "float": "REAL"}
        assert [sql_type[c.type] for c in t.columns] == [typ for _, typ in schema], t.name


def test_rows_belong_to_the_run(store: Store) -> None:
    rows = {name: _store_rows(store, name) for name in NAMES}
    assert [r["run_id"] for r in rows["runs"]] == [RUN]
    assert len(rows["trajectory_results"]) == len(RESULTS)
    assert len(rows["llm_calls"]) == 10 and len(rows["trajectories"]) == 1
    judged = {r.best_candidate_hash for r in RESULTS if r.status is not None
              and r.status.value != "INFRA_ERROR"} | {chash("legacy")}
    assert {r["candidate_hash"] for r in rows["verdicts"]} == judged
    assert {r["candidate_hash"] for r in rows["candidates"]} == judged
    for name in NAMES:  # nothing of run r2
        assert all(r.get("run_id", RUN) == RUN for r in rows[name])
        assert all("r2" not in orjson.dumps(r).decode() for r in rows[name])


def test_jsonl_round_trip(store: Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = export_run(store, RUN, out, "jsonl", batch_rows=3)
    assert [(t.table, t.path.name) for t in done] == [(n, f"{n}.jsonl") for n in NAMES]
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{n}.jsonl" for n in NAMES)  # no leftovers
    for t in done:
        spec = _spec(t.table)
        lines = [orjson.loads(x) for x in t.path.read_bytes().splitlines()]
        expected = _store_rows(store, t.table)
        for row in expected:  # JSON text columns are embedded as JSON values
            for c in spec.columns:
                if c.json:
                    row[c.name] = orjson.loads(row[c.name])
        assert lines == expected, t.table
        assert t.rows == len(expected)
        assert all(list(x) == [c.name for c in spec.columns] for x in lines)  # stable order
    first = orjson.loads((out / "llm_calls.jsonl").read_bytes().splitlines()[0])
    assert first["call"]["usage"]["prompt_tokens"] == first["prompt_tokens"]


def test_parquet_round_trip_with_fixed_types(store: Store, tmp_path: Path, pq: Any) -> None:
    import pyarrow as pa

    out = tmp_path / "out"
    done = export_run(store, RUN, out, "parquet", batch_rows=4)
    assert [t.path.name for t in done] == [f"{n}.parquet" for n in NAMES]
    arrow = {"str": pa.string(), "int": pa.int64(), "float": pa.float64()}
    for t in done:
        spec = _spec(t.table)
        table = pq.read_table(t.path)
        assert table.schema.names == [c.name for c in spec.columns]
        assert [f.type for f in table.schema] == [arrow[c.type] for c in spec.columns]
        assert [f.nullable for f in table.schema] == [c.nullable for c in spec.columns]
        assert table.schema.metadata[b"kgb.table"] == t.table.encode()
        assert table.to_pylist() == _store_rows(store, t.table), t.table
    speedups = pq.read_table(out / "trajectory_results.parquet").column("speedup").to_pylist()
    assert None in speedups and 8.0 in speedups


def test_an_empty_table_keeps_its_schema(tmp_path: Path, pq: Any) -> None:
    s = Store(tmp_path / "kgb.sqlite")
    s.add_run("bare", {})
    done = export_run(s, "bare", tmp_path / "out", "parquet")
    assert {t.table: t.rows for t in done} == dict(zip(NAMES, [1, 0, 0, 0, 0, 0, 0, 0, 0], strict=True))
    llm = pq.read_table(tmp_path / "out" / "llm_calls.parquet")
    assert llm.num_rows == 0 and llm.schema.names == [c.name for c in _spec("llm_calls").columns]
    export_run(s, "bare", tmp_path / "j", "jsonl")
    assert (tmp_path / "j" / "llm_calls.jsonl").read_bytes() == b""


def test_rows_are_read_in_batches(store: Store) -> None:
    batches = list(iter_batches(store, RUN, _spec("trajectory_results"), batch_rows=5))
    assert [len(b) for b in batches] == [5, 5, 5, 1]


def test_parquet_without_pyarrow_names_the_extra(store: Store, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ExportError, match=r"kernelgenbench\[export\]"):
        export_run(store, RUN, tmp_path / "out", "parquet")
    assert not (tmp_path / "out").exists()
    r = CliRunner().invoke(kgb, ["export", RUN, "--runs-dir", str(tmp_path / "runs"), "--format",
                                 "parquet", "--out", str(tmp_path / "out")])
    assert r.exit_code == 1 and "pip install 'kernelgenbench[export]'" in r.stderr


def test_a_failed_write_leaves_no_partial_file(store: Store, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import coordinator.export as export

    def broken(path: Path, table: TableSpec, batches: Any) -> int:
        path.write_bytes(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "_write_jsonl", broken)
    with pytest.raises(ExportError, match="No space left"):
        export_run(store, RUN, tmp_path / "out", "jsonl")
    assert list((tmp_path / "out").iterdir()) == []


def test_kgb_export_cli(store: Store, tmp_path: Path) -> None:
    db = tmp_path / "runs" / RUN / "kgb.sqlite"
    r = CliRunner().invoke(kgb, ["export", RUN, "--store", str(db), "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.stderr
    assert f"llm_calls: 10 rows -> {tmp_path / 'o' / 'llm_calls.jsonl'}" in r.stdout
    r = CliRunner().invoke(kgb, ["export", str(db), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "holds several runs (r1, r2)" in r.stderr
    r = CliRunner().invoke(kgb, ["export", "nope", "--store", str(db), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "known runs: r1, r2" in r.stderr
    r = CliRunner().invoke(kgb, ["export", RUN, "--store", str(db), "--format", "csv",
                                 "--out", str(tmp_path / "o")])
    assert r.exit_code == 2


def test_the_export_rebuilds_the_reports_numbers(tmp_path: Path) -> None:
    """What docs/reports.md's pandas lines do, in plain Python: the headline accuracy per (model,
    method, platform, source) from ``trajectory_results.jsonl`` and the named sizes, equal to the
    report's; and the run's state is there too."""
    from coordinator.report import read_report
    from coordinator.report_metrics import SOURCE_SIZES
    from tests.coordinator.test_report_paper import RUN as PAPER
    from tests.coordinator.test_report_paper import make_store
    store = make_store(tmp_path / "s")
    store.set_run_state(PAPER, "complete", "done")
    export_run(store, PAPER, tmp_path / "out", "jsonl")
    out = tmp_path / "out"
    rows = [orjson.loads(x) for x in (out / "trajectory_results.jsonl").read_bytes().splitlines()]
    solved: dict[tuple[str, str, str, str], set[str]] = {}
    for r in rows:
        if r["status"] == "PASSED":
            key = (r["model"], r["method"], r["platform"], r["source"])
            solved.setdefault(key, set()).add(r["operator_id"])
    rebuilt = {k: len(v) / SOURCE_SIZES[k[3]] for k, v in solved.items()}
    report = {(m.model, m.method, m.platform, m.source): m.accuracy
              for m in read_report(store, PAPER).metrics if m.solved}
    assert rebuilt == {k: v for k, v in report.items() if k[3] != "all"} and len(rebuilt) == 6
    states = [orjson.loads(x) for x in (out / "run_states.jsonl").read_bytes().splitlines()]
    assert [(s["run_id"], s["state"]) for s in states] == [(PAPER, "complete")]
    store.close()
