"""``kgb run``: the embedded default job (``kgb report`` prints a stored run again).

A local agent (:mod:`coordinator.local_agent`) and a sweep of candidate methods through the one
sweep engine (:mod:`coordinator.local_run` writes its spec): no pipeline of its own.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

import operators
from coordinator.report import render_table, result_rows, status_counts, stdout_console
from coordinator.store import Store, StoreError
from operators.spec import PLATFORMS

if TYPE_CHECKING:
    from rich.console import Console

    from coordinator.cli.views import RunView
    from coordinator.engine import SweepOptions, SweepProgress
    from coordinator.sweep_spec import SweepSpec
    from protos.records import AgentDescription

EXIT_INTERRUPTED = 130


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


@click.command("run")
@click.option("--platform", type=click.Choice(["auto", *sorted(PLATFORMS)]), default="auto",
              show_default=True, help="platform of the local agent")
@click.option("--op", "op_ids", multiple=True, metavar="ID",
              help="problems to run (repeatable; default: every problem)")
@click.option("--method", "methods", multiple=True, default=("reference",), show_default=True,
              help="generation methods (repeatable)")
@click.option("--replay", "replay_files", multiple=True, type=click.Path(dir_okay=False),
              help="also evaluate candidates recorded in this JSONL file (repeatable)")
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("runs"),
              show_default=True, help="where runs/<run-id>/ is created")
@click.option("--run-id", default=None, help="name of the run (default: timestamp)")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Prometheus /metrics port on 127.0.0.1 (0 picks a free one)")
@click.option("--workers", type=click.IntRange(1, 64), default=None,
              help="warm workers of the local agent")
def run(platform: str, op_ids: tuple[str, ...], methods: tuple[str, ...],
        replay_files: tuple[str, ...], runs_dir: Path, run_id: str | None, metrics_port: int,
        workers: int | None) -> None:
    """Run a sweep on this machine: Ray locally, a local agent, results under runs/<run-id>/.

    With no options: the `reference` solutions of every problem, on the GPU if present.
    """
    from coordinator.sweep_spec import NAME_RE
    from generators import MethodError, create

    try:
        ops = tuple(operators.get(i).id for i in op_ids) if op_ids else tuple(operators.ids())
    except operators.UnknownOperatorError as exc:
        raise click.UsageError(str(exc)) from None
    chosen: list[tuple[str, dict[str, str]]] = [(m, {}) for m in methods]
    chosen += [("replay", {"path": str(Path(f).resolve())}) for f in replay_files]
    try:
        for name, options in chosen:
            create(name, **options)
    except MethodError as exc:
        raise click.UsageError(str(exc)) from None
    run_id = run_id or new_run_id()
    if not NAME_RE.match(run_id):
        raise click.UsageError(f"--run-id {run_id!r}: use letters, digits, '.', '_' and '-', "
                               "starting with a letter or digit")
    sys.exit(_run(run_id, ops, chosen, runs_dir / run_id, platform, metrics_port, workers))


def _run(run_id: str, ops: tuple[str, ...], methods: list[tuple[str, dict[str, str]]],
         run_dir: Path, platform: str, metrics_port: int, workers: int | None) -> int:
    from rich.console import Console

    from coordinator.cli.views import RunView, drive
    from coordinator.local_agent import LocalAgent
    from coordinator.metrics import SweepMetrics
    from protos.client import AgentUnreachable

    console = Console(stderr=True)
    try:
        store = Store.open_run(run_dir)
    except (StoreError, OSError) as exc:
        console.print(f"kgb run: cannot create the run store under {run_dir}: {exc}", markup=False)
        return 1
    metrics = SweepMetrics()
    port = metrics.serve(metrics_port)
    console.print(f"run {run_id}: results in {run_dir}/, metrics on http://127.0.0.1:{port}/metrics")
    agent = LocalAgent(platform=platform, workers=workers, log_path=run_dir / "agent.log")
    try:
        with console.status("starting Ray and a local agent ..."):
            desc = _start(agent)
        console.print(f"agent {agent.address}: {desc.system.device_model} "
                      f"({desc.system.platform}), capacity {desc.capacity}")
        sweep = _spec(console, run_id, run_dir, ops, methods, desc.system.platform, agent.address)
        if sweep is None:
            return 2
        view = RunView(console, metrics)
        try:
            state, progress = asyncio.run(drive(*sweep, view, owner="kgb run"))
        finally:
            view.close()
    except AgentUnreachable as exc:
        console.print(f"kgb run: the local agent failed: {exc}", markup=False)
        return 3
    finally:
        agent.stop()
        import ray

        if ray.is_initialized():
            ray.shutdown()
    return _report(console, store, run_id, state, progress, view)


def _start(agent: Any) -> AgentDescription:
    """Start the agent, Ray (while the agent warms up) and wait until the agent serves."""
    from coordinator.engine import init_ray
    from protos.client import AgentClient

    address = agent.start()
    init_ray()
    asyncio.run(agent.wait_serving())

    async def describe() -> AgentDescription:
        async with AgentClient(address) as c:
            return await c.describe()

    return asyncio.run(describe())


def _spec(console: Console, run_id: str, run_dir: Path, ops: tuple[str, ...],
          methods: list[tuple[str, dict[str, str]]], platform: str, address: str
          ) -> tuple[SweepSpec, SweepOptions] | None:
    from coordinator.local_run import local_sweep
    from coordinator.sweep_spec import SweepSpecError

    try:
        spec, options = local_sweep(run_id, run_dir, ops, methods, platform, address)
    except SweepSpecError as exc:
        console.print(f"kgb run: {exc}", markup=False)
        return None
    for w in spec.warnings:
        console.print(f"warning: {w}", markup=False)
    return spec, options


def _report(console: Console, store: Store, run_id: str, state: str, p: SweepProgress,
            view: RunView) -> int:
    """The results table (stdout), the summary line, the exit code."""
    try:
        rows = result_rows(store.trajectories(run_id))
    finally:
        store.close()
    stdout_console().print(render_table(rows, title=f"run {run_id}"))
    counts = ", ".join(f"{k} {v}" for k, v in sorted(status_counts(rows).items()))
    infra = p.infra + p.failed
    console.print(f"{p.planned} trajectories: {counts}; {view.evaluated} evaluated, "
                  f"{view.reused + p.skipped} reused from the store, {infra} infra errors")
    console.print(f"report again with: kgb report {run_id}")
    if state == "interrupted":
        return EXIT_INTERRUPTED
    return 0 if state == "complete" and infra == 0 else 1
