"""``kgb report``: print a stored run's report; and how a command finds a run's store.

A run is named by its id under ``--runs-dir`` (``runs/<id>/kgb.sqlite``, where ``kgb run`` and
sweeps put it), by a run directory or store file, or by its id inside ``--store PATH``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict
from pathlib import Path

import click
import orjson
from click.core import ParameterSource

from coordinator.report import (
    read_report,
    render_disputes,
    render_report,
    render_table,
    result_rows,
    stdout_console,
)
from coordinator.store import DB_NAME, Store, StoreError


def known_runs(store: Store) -> list[str]:
    """Run ids the store holds: those registered in ``runs`` (oldest first), then any that only
    have rows in the tables a run writes (a sweep killed before registering, say), sorted."""
    ids = store.run_ids()
    seen = set(ids)
    extra: set[str] = set()
    for table in ("trajectory_results", "trajectories", "llm_calls"):
        extra.update(r[0] for r in store.db.execute(f"SELECT DISTINCT run_id FROM {table}"))
    return ids + sorted(extra - seen)


def _runs_under(runs_dir: Path) -> list[str]:
    if not runs_dir.is_dir():
        return []
    return sorted(p.name for p in runs_dir.iterdir() if (p / DB_NAME).is_file())


def _listing(ids: list[str]) -> str:
    return ", ".join(ids) if ids else "(none)"


def _open(db: Path) -> Store:
    try:
        store = Store(db)
        store.run_ids()
    except (StoreError, sqlite3.Error) as exc:
        raise click.UsageError(f"cannot read the store {db}: {exc}") from None
    return store


def open_runs(run: str, store_path: Path | None, runs_dir: Path) -> tuple[Store, list[str]]:
    """The store holding ``run`` and the run ids to report.

    With ``store_path``, ``run`` must be a run id in that store. Otherwise ``run`` is a store
    file, a run directory, or a run id under ``runs_dir``; a path whose store does not hold a run
    of the directory's name stands for every run in that store (as ``kgb report`` always did).
    An unknown run is a usage error that lists the runs there are."""
    if store_path is not None:
        if not store_path.is_file():
            raise click.UsageError(f"no store {store_path}: no such file")
        store = _open(store_path)
        ids = known_runs(store)
        if run not in ids:
            store.close()
            raise click.UsageError(f"no run {run!r} in {store_path}; known runs: {_listing(ids)}")
        return store, [run]
    p = Path(run)
    run_id: str | None = None
    if p.is_file():
        db = p
    elif p.is_dir() and (p / DB_NAME).is_file():
        db, run_id = p / DB_NAME, p.name
    elif (runs_dir / run / DB_NAME).is_file():
        db, run_id = runs_dir / run / DB_NAME, run
    else:
        raise click.UsageError(f"no run {run!r}: not a run id under {runs_dir}/ nor a run directory "
                               f"or store file; known runs under {runs_dir}/: "
                               f"{_listing(_runs_under(runs_dir))}")
    store = _open(db)
    ids = known_runs(store)
    if not ids:
        store.close()
        raise click.UsageError(f"{db} holds no runs")
    return store, [run_id] if run_id in ids else ids


def store_options(f: click.decorators.FC) -> click.decorators.FC:
    """``--store`` and ``--runs-dir``, shared by the commands that read a stored run."""
    f = click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
                     default=Path("runs"), show_default=True,
                     help="where run ids are looked up (runs/<id>/kgb.sqlite)")(f)
    return click.option("--store", "store_path", type=click.Path(dir_okay=False, path_type=Path),
                        default=None, help="the store file holding RUN (instead of --runs-dir)")(f)


def check_store_options(ctx: click.Context, store_path: Path | None) -> None:
    if store_path is not None and ctx.get_parameter_source("runs_dir") is not ParameterSource.DEFAULT:
        raise click.UsageError("give --store or --runs-dir, not both")


def _parse_ks(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        ks = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        ks = []
    if not ks or any(k < 1 for k in ks):
        raise click.UsageError(f"--k takes positive integers separated by commas (e.g. 1,5,10), "
                               f"got {text!r}")
    return ks


def _has_rows(store: Store, table: str, run_id: str) -> bool:
    return store.db.execute(f"SELECT 1 FROM {table} WHERE run_id = ? LIMIT 1",
                            (run_id,)).fetchone() is not None


@click.command("report")
@click.argument("run_ref", metavar="RUN")
@store_options
@click.option("--json", "as_json", is_flag=True,
              help="machine-readable: a sweep's report as one JSON object per line and run; for a "
                   "`kgb run` run, one object per trajectory")
@click.option("--k", "k_text", default=None, metavar="K,K,...",
              help="pass@k values (default: 1,5,10,20,50,100 up to the most samples of a problem)")
@click.pass_context
def report(ctx: click.Context, run_ref: str, store_path: Path | None, runs_dir: Path, as_json: bool,
           k_text: str | None) -> None:
    """Print the report of a stored run (a run id, a run directory or a store file).

    \b
    A sweep's report: accuracy and pass@k per model x method x source x platform, the status
    funnel, and tokens, cost and GPU time per solved problem (docs/reports.md defines them).
    A run of `kgb run` (no model calls): its table of trajectories and verdicts.
    Then any verdicts the fleet's spot-check disputed (docs/fleet.md).
    """
    check_store_options(ctx, store_path)
    ks = _parse_ks(k_text)
    store, ids = open_runs(run_ref, store_path, runs_dir)
    try:
        for rid in ids:
            if not _has_rows(store, "trajectory_results", rid) and _has_rows(store, "trajectories", rid):
                rows = result_rows(store.trajectories(rid))
                if as_json:
                    for r in rows:
                        click.echo(orjson.dumps({"run": rid, **asdict(r)}).decode())
                else:
                    stdout_console().print(render_table(rows, title=f"run {rid}"))
                continue
            rep = read_report(store, rid, ks)
            if as_json:
                click.echo(orjson.dumps(rep.to_json()).decode())
            else:
                stdout_console().print(render_report(rep))
        disputes = store.disputes()
        if disputes and not as_json:
            stdout_console().print(render_disputes(disputes))
    finally:
        store.close()
