"""Export one run's rows to JSON Lines or Parquet: one file per table (columns: docs/reports.md).

Tables and which rows belong to a run:

- ``runs``, ``trajectory_results``, ``llm_calls``, ``llm_intents``, ``trajectories``,
  ``run_states``, ``trajectory_artifacts``: rows with the run's id (every table and field
  ``kgb report`` reads, and an agent-cli trajectory's transcript, version and checked kernels);
- ``verdicts``: every stored verdict (any device) of a candidate the run's rows name — the best
  candidate of a ``trajectory_results`` row (same operator and version) or the candidate of a
  ``trajectories`` row (same operator, as ``Store.trajectories`` joins them);
- ``candidates``: the sources of those candidates.

Column order and types are fixed here (:data:`TABLES`), not taken from whatever SQLite returns,
so files of different runs concatenate. Rows are read in primary-key order and in batches
(``fetchmany``), never a whole table at once, inside one read transaction, so the files are one
consistent snapshot even while a sweep writes. Each file is written beside its final name and
renamed into place, so a failed export leaves no half-written file under a final name.

JSON text columns (``runs.config``, ``llm_calls.call``, ``verdicts.verdict``) are embedded as
JSON values in JSON Lines and kept as text in Parquet (Parquet has no schemaless JSON type).
Parquet needs pyarrow, the ``export`` extra; JSON Lines needs only orjson.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from coordinator.store import Store

FORMATS = ("jsonl", "parquet")
BATCH_ROWS = 10_000


class ExportError(RuntimeError):
    pass


@dataclass(frozen=True)
class Column:
    name: str
    type: str                 # "str", "int" or "float"
    nullable: bool = False
    json: bool = False        # holds JSON text


def _c(spec: str) -> Column:
    """``"name:type"``, with ``?`` after the type for nullable and ``json`` as a text type."""
    name, kind = spec.split(":")
    nullable = kind.endswith("?")
    kind = kind.rstrip("?")
    return Column(name, "str" if kind == "json" else kind, nullable, kind == "json")


@dataclass(frozen=True)
class TableSpec:
    """One exported table: its columns in order, and the SQL that selects a run's rows (each
    ``?`` is bound to the run id)."""

    name: str
    columns: tuple[Column, ...]
    where: str
    order: str

    def query(self) -> str:
        cols = ", ".join(c.name for c in self.columns)
        return f"SELECT {cols} FROM {self.name} {self.where} ORDER BY {self.order}"


_RUN_CANDIDATES = ("SELECT best_candidate_hash FROM trajectory_results WHERE run_id = ?1 "
                   "AND best_candidate_hash != '' "
                   "UNION SELECT candidate_hash FROM trajectories WHERE run_id = ?1")

TABLES: tuple[TableSpec, ...] = (
    TableSpec("runs", tuple(map(_c, ("run_id:str", "created:float", "config:json"))),
              "WHERE run_id = ?1", "run_id"),
    TableSpec("trajectory_results", tuple(map(_c, (
        "run_id:str", "platform:str", "trajectory:str", "operator_id:str", "operator_version:int",
        "source:str", "method:str", "model:str", "sample:int", "end_reason:str", "status:str",
        "best_candidate_hash:str", "speedup:float?", "sol_percent:float?", "turns:int",
        "candidates:int", "prompt_tokens:int", "completion_tokens:int", "cost_usd:float",
        "gpu_seconds:float", "detail:str", "created:float", "reused_verdicts:int",
        "reused_gpu_seconds:float", "wall_s:float", "verify_calls:int",
        "public_pass_hidden_fail:int", "baseline:str"))),
        "WHERE run_id = ?1", "platform, trajectory"),
    TableSpec("llm_calls", tuple(map(_c, (
        "run_id:str", "trajectory:str", "turn:int", "provider:str", "model:str", "method:str",
        "status:str", "billed:int", "prompt_tokens:int", "completion_tokens:int",
        "cached_tokens:int", "reasoning_tokens:int", "cost_usd:float", "latency_s:float",
        "attempts:int", "call:json", "created:float", "idempotency_key:str", "intent:int",
        "unconfirmed_attempts:int", "cache_write_tokens:int"))),
        "WHERE run_id = ?1", "trajectory, turn"),
    TableSpec("llm_intents", tuple(map(_c, (
        "run_id:str", "trajectory:str", "turn:int", "attempt:int", "idempotency_key:str",
        "request_hash:str", "model:str", "est_prompt_tokens:int", "max_tokens:int?",
        "prompt_price:float?", "completion_price:float?", "created:float", "completed:float?"))),
        "WHERE run_id = ?1", "trajectory, turn, attempt"),
    TableSpec("verdicts", tuple(map(_c, (
        "operator_id:str", "operator_version:int", "candidate_hash:str", "device_model:str",
        "harness_version:str", "baseline:str", "status:str", "verdict:json", "created:float"))),
        "WHERE (operator_id, operator_version, candidate_hash) IN (SELECT operator_id, "
        "operator_version, best_candidate_hash FROM trajectory_results WHERE run_id = ?1) "
        "OR (operator_id, candidate_hash) IN (SELECT operator_id, candidate_hash FROM trajectories "
        "WHERE run_id = ?1)",
        "operator_id, operator_version, candidate_hash, device_model, harness_version, baseline"),
    TableSpec("candidates", tuple(map(_c, ("candidate_hash:str", "source:str", "created:float"))),
              f"WHERE candidate_hash IN ({_RUN_CANDIDATES})", "candidate_hash"),
    TableSpec("trajectories", tuple(map(_c, (
        "run_id:str", "operator_id:str", "method:str", "model:str", "sample:int", "label:str",
        "candidate_hash:str", "created:float"))),
        "WHERE run_id = ?1", "operator_id, method, model, sample"),
    TableSpec("run_states", tuple(map(_c, (
        "run_id:str", "state:str", "detail:str", "updated:float", "started:float?",
        "lease_until:float?"))),
        "WHERE run_id = ?1", "run_id"),
    TableSpec("trajectory_artifacts", tuple(map(_c, (
        "run_id:str", "platform:str", "trajectory:str", "name:str", "text:str", "created:float"))),
        "WHERE run_id = ?1", "platform, trajectory, name"),
)


@dataclass(frozen=True)
class ExportedTable:
    table: str
    path: Path
    rows: int


def iter_batches(store: Store, run_id: str, table: TableSpec,
                 batch_rows: int = BATCH_ROWS) -> Generator[list[tuple[Any, ...]], None, None]:
    """A run's rows of one table, at most ``batch_rows`` at a time, in primary-key order."""
    cur = store.db.execute(table.query(), (run_id,))
    try:
        while batch := cur.fetchmany(batch_rows):
            yield batch
    finally:
        cur.close()


def _converter(c: Column, for_json: bool) -> Callable[[Any], Any]:
    base: Callable[[Any], Any] = {"str": str, "int": int, "float": float}[c.type]
    if c.json and for_json:
        base = orjson.loads
    if not c.nullable:
        return base

    def nullable(v: Any) -> Any:
        return None if v is None else base(v)
    return nullable


def _write_jsonl(path: Path, table: TableSpec, batches: Iterator[list[tuple[Any, ...]]]) -> int:
    names = [c.name for c in table.columns]
    convs = [_converter(c, True) for c in table.columns]
    n = 0
    with path.open("wb") as f:
        for batch in batches:
            f.write(b"".join(
                orjson.dumps({k: conv(v) for k, conv, v in zip(names, convs, row, strict=True)},
                             option=orjson.OPT_APPEND_NEWLINE)
                for row in batch))
            n += len(batch)
    return n


def _pyarrow() -> tuple[Any, Any]:
    """(pyarrow, pyarrow.parquet), or an error naming the extra that installs them."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ExportError("Parquet export needs pyarrow, which is not installed: "
                          "pip install 'kernelgenbench[export]'") from None
    return pyarrow, pyarrow.parquet


def arrow_schema(table: TableSpec, run_id: str = "") -> Any:
    """The Parquet schema of a table: utf8 / int64 / float64, nullable only where the store is."""
    pa, _pq = _pyarrow()
    types = {"str": pa.string(), "int": pa.int64(), "float": pa.float64()}
    return pa.schema([pa.field(c.name, types[c.type], nullable=c.nullable) for c in table.columns],
                     metadata={"kgb.table": table.name, "kgb.run_id": run_id})


def _write_parquet(path: Path, table: TableSpec, run_id: str,
                   batches: Iterator[list[tuple[Any, ...]]]) -> int:
    pa, pq = _pyarrow()
    schema = arrow_schema(table, run_id)
    convs = [_converter(c, False) for c in table.columns]
    n = 0
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for batch in batches:
            arrays = [pa.array([conv(row[i]) for row in batch], type=schema.field(i).type)
                      for i, conv in enumerate(convs)]
            writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))
            n += len(batch)
    return n


def export_run(store: Store, run_id: str, out_dir: Path, fmt: str,
               batch_rows: int = BATCH_ROWS) -> list[ExportedTable]:
    """Write ``<table>.<fmt>`` under ``out_dir`` for every table in :data:`TABLES`."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r} (choose {', '.join(FORMATS)})")
    if fmt == "parquet":
        _pyarrow()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create {out_dir}: {exc.strerror}") from None
    done = []
    store.db.execute("BEGIN")   # one read snapshot for every table
    try:
        for table in TABLES:
            final = out_dir / f"{table.name}.{fmt}"
            tmp = out_dir / f".{table.name}.{fmt}.partial"
            try:
                with closing(iter_batches(store, run_id, table, batch_rows)) as batches:
                    if fmt == "jsonl":
                        rows = _write_jsonl(tmp, table, batches)
                    else:
                        rows = _write_parquet(tmp, table, run_id, batches)
                os.replace(tmp, final)
            except OSError as exc:
                tmp.unlink(missing_ok=True)
                raise ExportError(f"cannot write {final}: {exc.strerror or exc}") from None
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            done.append(ExportedTable(table.name, final, rows))
    finally:
        store.db.execute("ROLLBACK")
    return done
