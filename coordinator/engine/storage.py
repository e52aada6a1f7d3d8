"""The sweep's writes to its store: the :class:`StoreWriter` actor and the driver's
:class:`ResultSink`.

Both keep one SQLite connection on a thread of their own (a :class:`~coordinator.store.Store`
is used from one thread) and batch what arrives together into one transaction: the writer
group-commits the model-call journal — intents before their requests leave, calls before their
text is used (:mod:`coordinator.llm_calls`), one fsync per batch, not per call — and the sink
commits finished trajectories with their candidates' sources.

The writer also keeps the run's books (:class:`~coordinator.engine.books.RunBooks`): what it
commits feeds the driver's counters once, and the run's stored totals feed its gauges; and it
renews the run's lease for the driver (``kgb sweep status`` tells a dead coordinator by it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from coordinator.engine.books import RecordedCall, RunBooks, StoredTotals
from coordinator.engine.outcomes import Outcome
from coordinator.engine.process import quiet_gc
from coordinator.llm_calls import CallRecord, JournalEntry
from coordinator.store import DB_NAME, Store, TrajectoryLink
from generators.llm import LLMCall

# What the journal answers per entry: None for an intent (committed), and for a call the call
# stored for its turn with the run's billed tokens and cost after it.
JournalReply = tuple[LLMCall, int, float] | None


def store_path(store_dir: Path) -> Path:
    return Path(store_dir) / DB_NAME


def settle(batch: list[tuple[Any, asyncio.Future[Any]]], out: Sequence[Any] = (), *,
           error: BaseException | None = None) -> None:
    """Hand each waiter of a batch its result (in order), or all of them the batch's error."""
    for i, (_, fut) in enumerate(batch):
        if not fut.done():
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(out[i])


class _Batcher:
    """Collects items and applies ``fn(batch)`` to everything that arrived meanwhile, on the
    store's thread: one transaction (one fsync for calls) per batch."""

    def __init__(self, run: Callable[..., Any], fn: Callable[[list[Any]], list[Any]],
                 after: Callable[[list[Any], list[Any]], list[Any]] | None = None) -> None:
        self._run, self._fn, self._after = run, fn, after
        self._pending: list[tuple[Any, asyncio.Future[Any]]] = []
        self._busy = False

    async def submit(self, item: Any) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((item, fut))
        if not self._busy:
            self._busy = True
            asyncio.get_running_loop().create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                items = [b[0] for b in batch]
                try:
                    out = await self._run(self._fn, items)
                    if self._after is not None:
                        out = self._after(items, out)
                except Exception as exc:  # noqa: BLE001 - every waiter gets the store's error
                    settle(batch, error=exc)
                    continue
                settle(batch, out)
        finally:
            self._busy = False


class StoreWriter:
    """The run's model-call journal, states and spend, written from one thread (a Ray actor
    pinned to the driver's node). Each stored call comes back with the run's billed totals, so
    every runner's sweep budget sees what all of them spent."""

    def __init__(self, path: str, run_id: str) -> None:
        self.run_id = run_id
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kgb-store")
        self._store: Store = self._pool.submit(Store, Path(path)).result()
        self.tokens, self.cost = self._pool.submit(self._store.run_spend, run_id).result()
        self.books: RunBooks | None = None  # read when the run starts (set_state "running")
        self.commits = 0
        self._journal = _Batcher(self._run, self._store.journal, self._count)
        quiet_gc()

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def _count(self, items: list[JournalEntry],
               out: list[tuple[LLMCall, bool] | None]) -> list[JournalReply]:
        """After a commit: the run's billed totals and books grow by the calls written."""
        self.commits += 1
        replies: list[JournalReply] = []
        for entry, got in zip(items, out, strict=True):
            if not isinstance(entry, CallRecord) or got is None:
                replies.append(None)
                continue
            call, written = got
            if written and entry.run_id == self.run_id:
                if call.billed and call.usage is not None:
                    self.tokens += call.usage.total_tokens
                    self.cost += call.cost_usd
                if self.books is not None:
                    self.books.committed(entry.run_id, entry.trajectory, call)
            replies.append((call, self.tokens, self.cost))
        return replies

    async def journal(self, entries: list[JournalEntry]) -> list[JournalReply]:
        """Commit intents and calls (durably, group-committed with whatever else arrives); for
        each intent None, for each call the stored call and the run's billed totals."""
        got: list[JournalReply] = await asyncio.gather(
            *(self._journal.submit(e) for e in entries))
        return got

    async def add_run(self, config: dict[str, Any]) -> None:
        await self._run(self._store.add_run, self.run_id, config)

    async def set_state(self, state: str, detail: str = "", lease_s: float | None = None) -> None:
        """Record the run's state; ``running`` (with its lease) also reads the run's books."""
        await self._run(lambda: self._store.set_run_state(self.run_id, state, detail,
                                                          lease_s=lease_s))
        if state == "running" and self.books is None:
            self.books = await self._run(RunBooks, self._store, self.run_id)

    async def state(self) -> tuple[str, str, float] | None:
        st: tuple[str, str, float] | None = await self._run(self._store.run_state, self.run_id)
        return st

    async def renew(self, lease_s: float) -> tuple[str, str, float] | None:
        """Extend the running coordinator's lease; returns the run's state (a cancel shows)."""
        st: tuple[str, str, float] | None = await self._run(self._store.renew_lease, self.run_id,
                                                            lease_s)
        return st

    async def take_recorded(self) -> tuple[list[RecordedCall], StoredTotals | None]:
        """The calls committed since the last take (each handed out once), and the run's
        stored totals now (None before the run started)."""
        if self.books is None:
            return [], None
        return self.books.take()

    async def unfinished_intents(self) -> dict[str, dict[int, int]]:
        """The last intent attempt of each turn of the trajectories a resume runs again."""
        got: dict[str, dict[int, int]] = await self._run(
            lambda: self._store.last_intents(self.run_id, unfinished_only=True))
        return got

    async def finished(self) -> set[tuple[str, str]]:
        done: set[tuple[str, str]] = await self._run(
            lambda: self._store.finished_trajectories(self.run_id, retry_infra=True))
        return done

    async def unfinished_turns(self) -> dict[str, list[tuple[int, LLMCall]]]:
        turns: dict[str, list[tuple[int, LLMCall]]] = await self._run(
            lambda: self._store.stored_turns(self.run_id, unfinished_only=True))
        return turns

    async def spend(self) -> tuple[int, float, int]:
        return self.tokens, self.cost, self.commits

    async def close(self) -> None:
        await self._run(self._store.close)
        self._pool.shutdown(wait=True)


class ResultSink:
    """The driver's writes of finished trajectories (with their candidates' sources, agent-cli
    artifacts and, for candidate methods, their links): batched, one transaction per batch, on the store's own
    thread. A result is written after its calls and verdicts, so one lost in a crash is only
    run again (replayed calls, stored verdicts). Use with ``async with``: leaving writes what
    is pending, whatever ended the sweep."""

    FLUSH_S = 0.2

    def __init__(self, path: Path) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kgb-results")
        self._store: Store = self._pool.submit(Store, path).result()
        self._pending: list[Outcome] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ResultSink:
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def put(self, outcome: Outcome) -> None:
        self._pending.append(outcome)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush_soon())

    async def _flush_soon(self) -> None:
        await asyncio.sleep(self.FLUSH_S)
        await self.flush()

    async def flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            rows = [r for o in batch for r in o.results()]
            cands = [c for o in batch for c in o.candidates]
            links: list[TrajectoryLink] = [k for o in batch if (k := o.link()) is not None]
            artifacts = [a for o in batch for a in o.artifacts]
            await asyncio.get_running_loop().run_in_executor(
                self._pool, self._store.add_trajectory_results, rows, cands, links, artifacts)

    async def close(self) -> None:
        # Wait for a pending flush rather than cancel it: cancelling it while its batch waits
        # for the store's thread dropped that batch (19 of 200 results lost once in CI).
        if self._task is not None:
            await self._task
        await self.flush()
        await asyncio.get_running_loop().run_in_executor(self._pool, self._store.close)
        self._pool.shutdown(wait=True)
