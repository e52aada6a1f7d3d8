"""``kgb run``: the embedded default job (``kgb report`` prints a stored run again)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

import operators
from coordinator.report import render_table, result_rows, status_counts, stdout_console
from coordinator.store import Store, StoreError


@click.command("run")
@click.option("--platform", type=click.Choice(["auto", "cuda", "cpu"]), default="auto",
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
    from generators import MethodError, create

    try:
        ops = tuple(operators.get(i).id for i in op_ids) if op_ids else tuple(operators.ids())
    except operators.UnknownOperatorError as exc:
        raise click.UsageError(str(exc)) from None
    from coordinator.sweep import MethodSpec, SweepConfig, new_run_id

    method_specs = [MethodSpec(m) for m in methods]
    method_specs += [MethodSpec("replay", (("path", str(Path(f).resolve())),)) for f in replay_files]
    try:
        for m in method_specs:
            create(m.name, **dict(m.options))
    except MethodError as exc:
        raise click.UsageError(str(exc)) from None
    run_id = run_id or new_run_id()
    run_dir = runs_dir / run_id
    config = SweepConfig(run_id=run_id, operators=ops, methods=tuple(method_specs), platform=platform)
    sys.exit(_run(config, run_dir, platform, metrics_port, workers))


def _run(config: object, run_dir: Path, platform: str, metrics_port: int,
         workers: int | None) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from coordinator.integrity import Guard
    from coordinator.local_agent import LocalAgent
    from coordinator.metrics import SweepMetrics
    from coordinator.sweep import ResultEvent, SweepConfig, init_ray, run_sweep
    from protos.client import AgentClient, AgentUnreachable

    assert isinstance(config, SweepConfig)
    console = Console(stderr=True)
    try:
        store = Store.open_run(run_dir)
    except (StoreError, OSError) as exc:
        console.print(f"kgb run: cannot create the run store under {run_dir}: {exc}", markup=False)
        return 1
    metrics = SweepMetrics()
    port = metrics.serve(metrics_port)
    console.print(f"run {config.run_id}: results in {run_dir}/, metrics on http://127.0.0.1:{port}/metrics")
    agent = LocalAgent(platform=platform, workers=workers, log_path=run_dir / "agent.log")
    try:
        with console.status("starting Ray and a local agent ..."):
            address = agent.start()
            init_ray()
            asyncio.run(agent.wait_serving())

            async def describe() -> object:
                async with AgentClient(address) as c:
                    return await c.describe()

            desc = asyncio.run(describe())
        console.print(f"agent {address}: {desc.system.device_model} "  # type: ignore[attr-defined]
                      f"({desc.system.platform}), capacity {desc.capacity}")  # type: ignore[attr-defined]
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), TextColumn("{task.fields[last]}"), console=console) as bar:
            task_id = bar.add_task("evaluating", total=None, last="")

            def planned(n: int) -> None:
                metrics.trajectories_planned.set(n)
                bar.update(task_id, total=n)

            guard = Guard()
            metrics.integrity_alarms({}, agents=[address])

            def on_event(e: ResultEvent) -> None:
                metrics.integrity_alarms(guard.totals())
                bar.advance(task_id)
                metrics.trajectories_done.inc()
                if e.verdict is None:
                    metrics.infra_errors.inc()
                    bar.update(task_id, last=f"{e.operator_id}: infra error {e.error[:60]}")
                    return
                v = e.verdict
                metrics.verdict(v, source=v.operator_id.split("::")[0],
                                platform=v.system.platform or platform, method=e.method,
                                reused=e.reused)
                bar.update(task_id, last=f"{e.operator_id}: {v.status.value}")

            summary = run_sweep(config, address, desc, store, on_event, planned,  # type: ignore[arg-type]
                                guard)
    except AgentUnreachable as exc:
        console.print(f"kgb run: the local agent failed: {exc}", markup=False)
        return 3
    finally:
        agent.stop()
        import ray

        if ray.is_initialized():
            ray.shutdown()
    rows = result_rows(store.trajectories(config.run_id))
    stdout_console().print(render_table(rows, title=f"run {config.run_id}"))
    counts = ", ".join(f"{k} {v}" for k, v in sorted(status_counts(rows).items()))
    console.print(f"{summary.trajectories} trajectories: {counts}; {summary.evaluated} evaluated, "
                  f"{summary.reused} reused from the store, {summary.infra_errors} infra errors")
    console.print(f"report again with: kgb report {config.run_id}")
    store.close()
    return 0 if summary.infra_errors == 0 else 1
