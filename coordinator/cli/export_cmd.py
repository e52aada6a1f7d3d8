"""``kgb export``: one run's rows as JSON Lines or Parquet files, one per table."""

from __future__ import annotations

from pathlib import Path

import click

from coordinator.cli.report_cmd import check_store_options, open_runs, store_options
from coordinator.export import FORMATS, ExportError, export_run


@click.command("export")
@click.argument("run_ref", metavar="RUN")
@store_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="jsonl", show_default=True,
              help="parquet needs the export extra: pip install 'kernelgenbench[export]'")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="directory for <table>.jsonl / <table>.parquet (created; files are replaced)")
@click.pass_context
def export(ctx: click.Context, run_ref: str, store_path: Path | None, runs_dir: Path, fmt: str,
           out_dir: Path) -> None:
    """Export a stored run: runs, trajectory_results, llm_calls, verdicts, candidates and
    trajectories, one file each (columns: docs/reports.md)."""
    check_store_options(ctx, store_path)
    store, ids = open_runs(run_ref, store_path, runs_dir)
    try:
        if len(ids) != 1:
            raise click.UsageError(f"{run_ref} holds several runs ({', '.join(ids)}); name one, "
                                   f"e.g. kgb export {ids[0]} --store {store.path}")
        try:
            written = export_run(store, ids[0], out_dir, fmt)
        except ExportError as exc:
            raise click.ClickException(str(exc)) from None
    finally:
        store.close()
    for t in written:
        click.echo(f"{t.table}: {t.rows} rows -> {t.path}")
