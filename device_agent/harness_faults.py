"""Faults of the harness itself, told apart from the candidate's.

A failing candidate is a result; a failing harness is the system's (docs/architecture.md). The
problem's input generation, reference and baseline, the harness's copies of inputs and the
output checker run next to the candidate, on the agent and in the worker while timing; what they
raise goes through :func:`blamed` as a :class:`HarnessFault`. On the agent (trusted) a run turns
it into an ``INFRA_ERROR`` verdict naming the part and its exception, never the candidate's
``RUNTIME_ERROR`` or ``WRONG_ANSWER``. In the worker while timing, the worker reports the part in
``TimingError.harness_fault``; the worker is the candidate's process, so that report is only a
claim (:class:`WorkerClaim`): it names the part in the candidate's ``RUNTIME_ERROR`` unless the
problem's own solution meets the same fault on a fresh worker
(:mod:`device_agent.fault_reproduction`), which makes it ``INFRA_ERROR``.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

# The parts of the harness whose exceptions are the harness's, as a verdict names them.
PARTS: dict[str, str] = {
    "input generation": "the problem's input generation (make_call)",
    "input upload": "the harness's copies of the inputs",
    "reference": "the problem's reference",
    "baseline": "the problem's baseline",
    "checker": "the output checker (operators.checking)",
}
TRACEBACK_LIMIT = 6000


@dataclass(frozen=True)
class WorkerClaim:
    """A worker's report that ``part`` of the harness raised ``error`` while timing benchmark
    case ``case`` (``where`` names it): unverified until the problem's own solution meets it
    too (:mod:`device_agent.fault_reproduction`)."""

    part: str
    case: int
    where: str
    error: str

    def describe(self, *, reproduced: bool = False) -> str:
        return describe(self.part, self.where, self.error, claimed_by_worker=not reproduced)


class HarnessFault(Exception):
    """``part`` of the harness raised ``cause`` at ``where`` (a case, say)."""

    def __init__(self, part: str, where: str, cause: BaseException) -> None:
        super().__init__(f"{where}: {part}: {type(cause).__name__}: {cause}")
        self.part = part
        self.where = where
        self.cause = cause

    def describe(self) -> str:
        return describe(self.part, self.where, f"{type(self.cause).__name__}: {self.cause}")

    def trace(self) -> str:
        c = self.cause
        return "".join(traceback.format_exception(type(c), c, c.__traceback__))[-TRACEBACK_LIMIT:]


@contextlib.contextmanager
def blamed(part: str, where: str = "") -> Iterator[None]:
    """What raises inside is ``part`` of the harness failing: a :class:`HarnessFault` (one
    raised already, by a part inside, keeps its own part)."""
    if part not in PARTS:
        raise ValueError(f"unknown harness part {part!r}")
    try:
        yield
    except HarnessFault:
        raise
    except Exception as exc:
        raise HarnessFault(part, where, exc) from exc


@contextlib.contextmanager
def candidate_code() -> Iterator[None]:
    """The candidate's code runs inside: a :class:`HarnessFault` out of it (raised by the
    candidate itself, or by harness code it called) is the candidate's exception, never the
    harness's fault."""
    try:
        yield
    except HarnessFault as fault:
        raise RuntimeError(f"the candidate's code raised the harness's fault type ({fault})") \
            from None


def describe(part: str, where: str, error: str, *, claimed_by_worker: bool = False) -> str:
    """The verdict's message: where, which part of the harness, its exception. ``part`` may come
    from a worker (untrusted): an unknown one is shown clipped. ``claimed_by_worker``: only the
    worker reports it, and the worker runs the candidate, so its word cannot make the verdict
    the system's; the message says so."""
    what = PARTS.get(part, f"the harness ({part[:40]!r})")
    prefix = f"{where}: " if where else ""
    if claimed_by_worker:
        return (f"{prefix}the worker reports the harness failed (unverified: the worker runs the "
                f"candidate, so this stays the candidate's result): {what} raised {error}; the "
                f"problem's code or the harness needs fixing")[:1500]
    return (f"{prefix}the harness failed, not the candidate: {what} raised {error}; the "
            f"problem's code or the harness needs fixing (the candidate was not judged)")[:1500]
