"""Typed handles of the sweep's Ray actors.

Ray hands out actor handles whose methods are called as ``handle.method.remote(...)`` and
awaited; to the type checker they are ``Any``. These protocols say what each actor answers
(``tests/coordinator/test_engine_handles.py`` checks them against the actor classes), so a
changed method signature is a type error at every call site instead of a failure at run time.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, ParamSpec, Protocol, TypeVar, cast

import ray

from coordinator.engine.books import RecordedCall, StoredTotals
from coordinator.engine.outcomes import Outcome
from coordinator.engine.storage import JournalReply
from coordinator.llm_calls import JournalEntry
from coordinator.sweep_spec import PlannedTrajectory
from generators.llm import LLMCall
from protos.records import Verdict

P = ParamSpec("P")
R = TypeVar("R", covariant=True)


class Remote(Protocol[P, R]):
    """One method of an actor: ``.remote(...)`` sends the call; awaiting the ref gives ``R``."""

    def remote(self, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]: ...


class StoreWriterHandle(Protocol):
    """:class:`coordinator.engine.storage.StoreWriter`."""

    journal: Remote[[list[JournalEntry]], list[JournalReply]]
    add_run: Remote[[dict[str, Any]], None]
    set_state: Remote[[str, str, float | None], None]
    state: Remote[[], tuple[str, str, float] | None]
    renew: Remote[[float], tuple[str, str, float] | None]
    take_recorded: Remote[[], tuple[list[RecordedCall], StoredTotals | None]]
    finished: Remote[[], set[tuple[str, str]]]
    unfinished_turns: Remote[[], dict[str, list[tuple[int, LLMCall]]]]
    unfinished_intents: Remote[[], dict[str, dict[int, int]]]
    spend: Remote[[], tuple[int, float, int]]
    close: Remote[[], None]


class FleetRouterHandle(Protocol):
    """:class:`coordinator.engine.router.FleetRouter`."""

    start: Remote[[], str]
    wait_ready: Remote[[list[str], float], dict[str, int]]
    evaluate: Remote[[str, str | None, str, str, str, bool], tuple[Verdict, bool]]
    status: Remote[[], dict[str, Any]]
    close: Remote[[], None]


class TrajectoryRunnerHandle(Protocol):
    """:class:`coordinator.engine.runner.TrajectoryRunner`."""

    ready: Remote[[], str]
    observe_spend: Remote[[int, float], None]
    drain: Remote[[float], int]
    run: Remote[[PlannedTrajectory, list[tuple[int, LLMCall]], dict[int, int]], Outcome]
    close: Remote[[], None]


def kill(handle: object) -> None:
    """Kill the actor behind a typed handle (``ray.kill`` takes the raw handle)."""
    ray.kill(cast(Any, handle))
