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
    RunReport,
    read_report,
    render_disputes,
    render_table,
    result_rows,
    stdout_console,
)
from coordinator.report_compare import CompareError, compare, operator_versions, render_comparison
from coordinator.report_html import render_html
from coordinator.report_paper import FORMATS as PAPER_FORMATS
from coordinator.report_paper import paper_tables, to_latex, to_markdown, to_rich
from coordinator.report_transcripts import read_transcripts
from coordinator.report_view import render_report
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


def _is_local_run(store: Store, run_id: str) -> bool:
    """A run of ``kgb run`` (its table of candidates), not an LLM sweep (its report): recorded
    as kind ``run``; runs stored before ``kgb run`` became a sweep have no results table."""
    config = store.run_config(run_id) or {}
    if config.get("kind") == "run":
        return True
    return not _has_rows(store, "trajectory_results", run_id) and _has_rows(store, "trajectories", run_id)


def _print_paper(rep: RunReport, fmt: str) -> None:
    """The published tables of one sweep, in ``fmt`` (text, md or latex)."""
    for t in paper_tables(rep):
        if fmt == "md":
            click.echo(to_markdown(t))
        elif fmt == "latex":
            click.echo(to_latex(t))
        else:
            stdout_console().print(to_rich(t))


def _print_sweep(rep: RunReport, as_json: bool, paper: bool, fmt: str) -> None:
    if as_json:
        click.echo(orjson.dumps(rep.to_json()).decode())
    elif paper:
        if rep.state_why:
            click.echo(f"state {rep.state}: {rep.state_why}")
        _print_paper(rep, fmt)
    else:
        stdout_console().print(render_report(rep))


def _html_target(path: Path, run_id: str, runs: int) -> Path:
    """``path``, or ``path`` with the run id before its suffix when a store holds several runs."""
    return path if runs == 1 else path.with_name(f"{path.stem}-{run_id}{path.suffix}")


def _write_html(store: Store, rep: RunReport, path: Path) -> None:
    """Write the report's HTML under a temporary name and rename it into place."""
    results = store.trajectory_results(rep.run_id)
    page = render_html(rep, read_transcripts(store, results), len(results))
    tmp = path.with_name(f".{path.name}.partial")
    try:
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise click.ClickException(f"cannot write {path}: {exc.strerror or exc}") from None
    click.echo(f"wrote {path} ({len(page.encode()):,} bytes)", err=True)


def _one_sweep(ref: str, store_path: Path | None, runs_dir: Path,
               ks: list[int] | None) -> tuple[RunReport, dict[str, set[int]]]:
    """The report of one sweep named by ``ref`` and its operators' versions."""
    store, ids = open_runs(ref, store_path, runs_dir)
    try:
        if len(ids) != 1:
            raise click.UsageError(f"{ref} holds several runs ({', '.join(ids)}): name one with "
                                   "--store PATH")
        if _is_local_run(store, ids[0]):
            raise click.UsageError(f"run {ids[0]} is a `kgb run` run, not a sweep: nothing to compare")
        return read_report(store, ids[0], ks), operator_versions(store.trajectory_results(ids[0]))
    finally:
        store.close()


def _compare_runs(base_ref: str, other_ref: str, store_path: Path | None, runs_dir: Path,
                  ks: list[int] | None, as_json: bool, fail_on_regression: bool) -> None:
    base, base_versions = _one_sweep(base_ref, store_path, runs_dir, ks)
    other, other_versions = _one_sweep(other_ref, store_path, runs_dir, ks)
    try:
        c = compare(base, other, (base_versions, other_versions))
    except CompareError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        click.echo(orjson.dumps(c.to_json()).decode())
    else:
        for rep in (base, other):
            if rep.state_why:
                click.echo(f"{rep.run_id}: state {rep.state}: {rep.state_why}")
        stdout_console().print(render_comparison(c))
    if fail_on_regression and c.regressions:
        raise SystemExit(1)


@click.command("report")
@click.argument("run_ref", metavar="RUN")
@store_options
@click.option("--json", "as_json", is_flag=True,
              help="machine-readable: a sweep's report as one JSON object per line and run; for a "
                   "`kgb run` run, one object per trajectory")
@click.option("--k", "k_text", default=None, metavar="K,K,...",
              help="pass@k values (default: 1,5,10,20,50,100 up to the most samples of a problem)")
@click.option("--paper", is_flag=True,
              help="the published tables: Multi-Source, Multi-Chip, sequential Pass@K "
                   "(sample with rounds), cost, per problem")
@click.option("--format", "fmt", type=click.Choice(PAPER_FORMATS), default="text", show_default=True,
              help="how --paper writes its tables (md, latex: for papers)")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="also write one self-contained HTML file: tables, plots, transcripts")
@click.option("--compare", "compare_ref", default=None, metavar="RUN2",
              help="compare RUN2 with RUN: deltas with intervals, flipped problems, regressions")
@click.option("--fail-on-regression", is_flag=True,
              help="with --compare: exit 1 when RUN2 has a significant regression (for CI)")
@click.pass_context
def report(ctx: click.Context, run_ref: str, store_path: Path | None, runs_dir: Path, as_json: bool,
           k_text: str | None, paper: bool, fmt: str, html_path: Path | None,
           compare_ref: str | None, fail_on_regression: bool) -> None:
    """Print the report of a stored run (a run id, a run directory or a store file).

    \b
    A sweep's report: accuracy over the problems the sweep named, speed-up and fast_p with 95%
    intervals; pass@k per model x method x source x platform, the status funnel, and tokens,
    cost and GPU time per solved problem (docs/reports.md defines them).
    A run of `kgb run` (no model calls): its table of trajectories and verdicts.
    Then any verdicts the fleet's spot-check disputed (docs/fleet.md).
    """
    check_store_options(ctx, store_path)
    if paper and as_json:
        raise click.UsageError("give --paper or --json, not both")
    if fmt != "text" and not paper:
        raise click.UsageError("--format applies to --paper")
    ks = _parse_ks(k_text)
    if fail_on_regression and compare_ref is None:
        raise click.UsageError("--fail-on-regression applies to --compare")
    if compare_ref is not None:
        if paper or html_path is not None:
            raise click.UsageError("--compare takes neither --paper nor --html")
        _compare_runs(run_ref, compare_ref, store_path, runs_dir, ks, as_json, fail_on_regression)
        return
    store, ids = open_runs(run_ref, store_path, runs_dir)
    try:
        for rid in ids:
            if _is_local_run(store, rid):
                rows = result_rows(store.trajectories(rid))
                if as_json:
                    for r in rows:
                        click.echo(orjson.dumps({"run": rid, **asdict(r)}).decode())
                else:
                    stdout_console().print(render_table(rows, title=f"run {rid}"))
                continue
            rep = read_report(store, rid, ks)
            _print_sweep(rep, as_json, paper, fmt)
            if html_path is not None:
                _write_html(store, rep, _html_target(html_path, rid, len(ids)))
        disputes = store.disputes()
        if disputes and not as_json and not paper:
            stdout_console().print(render_disputes(disputes))
    finally:
        store.close()
