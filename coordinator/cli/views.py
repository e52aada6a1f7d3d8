"""What ``kgb sweep`` and ``kgb run`` show while the engine runs, and the one way both drive it.

:func:`drive` runs :func:`coordinator.engine.run_sweep` with Ctrl-C and SIGTERM wired to a
clean stop; a view (:class:`SweepProgressView` for sweeps, :class:`RunView` for ``kgb run``)
takes the engine's callbacks: the progress bar and the Prometheus metrics.
"""

from __future__ import annotations

import asyncio
import signal
import time
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.console import Console

    from coordinator.engine import Outcome, SweepOptions, SweepProgress, SweepStop
    from coordinator.engine.books import RecordedCall, StoredTotals
    from coordinator.metrics import SweepMetrics
    from coordinator.sweep_spec import SweepSpec


class SweepView(Protocol):
    """What a command shows while the engine runs: its callbacks, and the stop requested."""

    def progress(self, p: SweepProgress) -> None: ...
    def outcome(self, o: Outcome, p: SweepProgress) -> None: ...
    def calls(self, new: list[RecordedCall], totals: StoredTotals) -> None: ...
    def fleet(self, status: dict[str, Any]) -> None: ...
    def stopping(self, stop: SweepStop) -> None: ...


async def drive(spec: SweepSpec, options: SweepOptions, view: SweepView,
                owner: str) -> tuple[str, SweepProgress]:
    """Run the sweep engine, feeding ``view``; Ctrl-C or SIGTERM stops it cleanly (a second one
    at once). Used by ``kgb sweep run|resume`` and ``kgb run``."""
    from coordinator.engine import SweepStop, run_sweep

    stop = SweepStop()
    loop = asyncio.get_running_loop()

    def on_signal(why: str) -> None:
        stop.request(why)
        view.stopping(stop)

    for sig, why in ((signal.SIGINT, "interrupted (Ctrl-C)"), (signal.SIGTERM, "terminated")):
        loop.add_signal_handler(sig, on_signal, why)
    try:
        return await run_sweep(spec, options, on_progress=view.progress, on_outcome=view.outcome,
                               on_fleet=view.fleet, on_calls=view.calls, stop=stop, owner=owner)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def feed_calls(metrics: SweepMetrics, new: list[RecordedCall], totals: StoredTotals) -> None:
    """The model calls this process stored since the last feed (the counters, each call once)
    and the run's stored totals (the gauges)."""
    for r in new:
        metrics.llm_call(r.model, r.method, r.call)
    metrics.stored(totals.tokens, totals.cost, totals.calls, totals.unconfirmed)


def feed_metrics(metrics: SweepMetrics, o: Outcome) -> None:
    """One finished trajectory's verdicts and end into the metrics."""
    planned = o.planned
    source = planned.operator_id.split("::")[0]
    judged = [(planned.platform, v, r) for v, r in o.verdicts] + list(o.more_verdicts)
    for platform, v, reused in judged:
        metrics.verdict(v, source=source, platform=platform, method=planned.method,
                        reused=reused)
    if o.result is not None:
        metrics.trajectory_finished(method=planned.method, end_reason=o.result.end_reason,
                                    solved=o.result.solved)


def feed_fleet(metrics: SweepMetrics, status: dict[str, Any]) -> None:
    """The fleet router's status (agents, alarms) into the metrics."""
    metrics.fleet(status.get("rows", []))
    metrics.integrity_alarms(status.get("alarms", {}),
                             agents=[a[0] for a in status.get("agents", [])])


class SweepProgressView:
    """``kgb sweep``: the progress bar with ETA, tokens and cost (or a line a minute)."""

    def __init__(self, console: Console, metrics: SweepMetrics, *, enabled: bool) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console, self.metrics = console, metrics
        self.bar = (Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                             MofNCompleteColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                             TimeElapsedColumn(), TextColumn("{task.fields[info]}"),
                             console=console, refresh_per_second=4) if enabled else None)
        self.task: Any = None
        self.last_line = time.monotonic()
        self.eval_in_flight = 0
        self.last: SweepProgress | None = None
        if self.bar is not None:
            self.bar.start()
            self.task = self.bar.add_task("trajectories", total=None, info="")

    def _info(self, p: SweepProgress) -> str:
        return (f"solved {p.solved} | in flight {p.in_flight} | {p.tokens:,} tok "
                f"${p.cost_usd:,.2f}" + (f" | failed {p.failed}" if p.failed else ""))

    def progress(self, p: SweepProgress) -> None:
        self.last = p
        self.metrics.progress(p.planned, p.skipped + p.done)
        self.metrics.in_flight(p.in_flight, self.eval_in_flight)
        if self.bar is not None:
            self.bar.update(self.task, total=p.planned - p.skipped, completed=p.done + p.failed,
                            info=self._info(p))
        elif time.monotonic() - self.last_line > 60:
            self.last_line = time.monotonic()
            self.console.print(f"{p.skipped + p.done}/{p.planned} trajectories; {self._info(p)}",
                               markup=False)

    def outcome(self, o: Outcome, p: SweepProgress) -> None:
        feed_metrics(self.metrics, o)

    def calls(self, new: list[RecordedCall], totals: StoredTotals) -> None:
        feed_calls(self.metrics, new, totals)

    def fleet(self, status: dict[str, Any]) -> None:
        self.eval_in_flight = int(status.get("in_flight", 0))
        feed_fleet(self.metrics, status)
        if self.last is not None:
            self.metrics.in_flight(self.last.in_flight, self.eval_in_flight)

    def stopping(self, stop: SweepStop) -> None:
        msg = ("stopping at once" if stop.hard else
               "stopping: waiting for calls already sent (Ctrl-C again to stop at once)")
        self.console.print(msg, markup=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


class RunView:
    """``kgb run``: the bar with the last candidate's status, and the counts of its summary
    line (one finished trajectory is one candidate here)."""

    def __init__(self, console: Console, metrics: SweepMetrics) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console, self.metrics = console, metrics
        self.evaluated = self.reused = 0
        self.bar: Progress | None = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("{task.fields[last]}"), console=console)
        self.bar.start()
        self.task = self.bar.add_task("evaluating", total=None, last="")

    def progress(self, p: SweepProgress) -> None:
        self.metrics.progress(p.planned, p.skipped + p.done)
        if self.bar is not None:
            self.bar.update(self.task, total=p.planned - p.skipped, completed=p.done + p.failed)

    def outcome(self, o: Outcome, p: SweepProgress) -> None:
        feed_metrics(self.metrics, o)
        for v, reused in [*o.verdicts, *((v, r) for _, v, r in o.more_verdicts)]:
            if v.status.value != "INFRA_ERROR":
                self.reused += int(reused)
                self.evaluated += int(not reused)
        if o.result is None:
            self.metrics.infra_errors.inc()
            last = f"infra error {o.error[:60]}"
        elif o.result.end_reason == "INFRA_ERROR":
            last = f"infra error {o.result.detail[:60]}"
        else:
            last = o.result.status.value if o.result.status is not None else "no verdict"
        if self.bar is not None:
            self.bar.update(self.task, last=f"{o.planned.operator_id}: {last}")

    def calls(self, new: list[RecordedCall], totals: StoredTotals) -> None:
        feed_calls(self.metrics, new, totals)

    def fleet(self, status: dict[str, Any]) -> None:
        feed_fleet(self.metrics, status)

    def stopping(self, stop: SweepStop) -> None:
        self.console.print("stopping at once" if stop.hard else
                           "stopping: waiting for the candidates being evaluated "
                           "(Ctrl-C again to stop at once)", markup=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
