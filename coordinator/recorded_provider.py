"""Persist-before-use and zero-token resume for one trajectory's model calls.

:class:`RecordedProvider` wraps the endpoint's :class:`~generators.providers.Provider` for **one
trajectory run** of one sweep run::

    rp = RecordedProvider(provider, store, run_id, TrajectoryKey("aten::add", 1, "refine", model, 0))
    ctx = TrajectoryContext(provider=rp, model=model, record=rp.record, ...)
    traj = await method.run(spec, 0, ctx)

Turn numbers: the wrapper counts the calls of its trajectory — the k-th ``complete`` (or the
k-th ``BUDGET`` call handed to :meth:`RecordedProvider.record`: those are made by
:class:`~generators.trajectory.TrajectoryRun` without calling the provider) is turn k, which is
what ``TrajectoryRun`` writes in ``extra["turn"]``. A trajectory's calls are sequential, so the
counter needs no lock; one wrapper must therefore serve exactly one trajectory run (a fresh one
on resume), never two trajectories and never two runs of the same one.

``complete`` for turn k:

* the store holds turn k and its prompt has the same messages as the prompt being sent: the
  stored call is returned **without calling the endpoint** (zero tokens), marked
  ``extra["replayed"] = "1"`` on the returned copy (the stored row is unchanged);
* the store holds turn k with different messages: the run being resumed did not ask what it
  asked before (a changed template, platform, method option or evaluator verdict) —
  :class:`ResumeMismatchError`; nothing is sent, nothing paid;
* otherwise (nothing stored, or only a ``BUDGET`` placeholder, which was never sent) the inner
  provider is called and its call is committed to the store before it is returned: persist
  before use. The call carries an idempotency key derived from (run, trajectory, turn)
  (:func:`idempotency_key_of`): when a ``kill -9`` lands after a reply arrived but before it was
  committed, the resumed run asks again under the same key, and an endpoint that honours keys
  hands back the reply it billed instead of billing a second one. If the store write fails
  the call is not returned (its tokens are paid but its text is never used — the failure is
  loud, never silent).

A stored failure (timeout, 5xx after retries ...) is replayed like any other call: the resumed
trajectory ends as the original did. Whether to retry failed trajectories is a sweep decision
(a new run id), not a resume's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
from collections.abc import Awaitable
from typing import Any, ClassVar, Protocol, TypeVar

from coordinator.store import Store, StoreError, TrajectoryKey
from generators.llm import CallStatus, LLMCall, Prompt, Usage
from generators.providers.base import Provider, WireReply, WireRequest


class CallLog(Protocol):
    """Where a trajectory's calls are kept: a :class:`~coordinator.store.Store`, or a sweep's
    remote store writer (whose methods are coroutines)."""

    def llm_call(self, run_id: str, trajectory: TrajectoryKey, turn: int
                 ) -> LLMCall | None | Awaitable[LLMCall | None]: ...

    def add_llm_call(self, run_id: str, trajectory: TrajectoryKey, turn: int, call: LLMCall
                     ) -> LLMCall | Awaitable[LLMCall]: ...


T = TypeVar("T")


async def _maybe(value: T | Awaitable[T]) -> T:
    return await value if inspect.isawaitable(value) else value


def idempotency_key_of(run_id: str, trajectory: TrajectoryKey, turn: int) -> str:
    """The key of one model call: the same for the same turn of the same trajectory of the same
    run (so a resume repeats it), different for anything else (a new run asks afresh)."""
    digest = hashlib.sha256(f"{run_id}\0{trajectory}\0{turn}".encode()).hexdigest()
    return f"kgb-{digest[:40]}"


class ResumeMismatchError(StoreError):
    """A resumed trajectory sent a different prompt for a turn already stored."""


def _first_difference(stored: Prompt, now: Prompt) -> str:
    a, b = stored.messages, now.messages
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            what = "role" if x.role != y.role else "content"
            return (f"message {i} differs in {what} (stored {x.role.value}: {x.content[:80]!r}..., "
                    f"now {y.role.value}: {y.content[:80]!r}...)")
    return f"stored prompt has {len(a)} messages, the new one {len(b)}"


class RecordedProvider(Provider):
    """A :class:`Provider` that stores every call before returning it and replays stored turns.

    It shares the inner provider's ``config`` and ``prices`` (so ``LLMCall.provider`` and the
    limits are the endpoint's); the inner provider's HTTP client, concurrency and rate limits
    are shared by every wrapper around it. :meth:`aclose` does not close the inner provider —
    it belongs to the sweep, not to one trajectory.
    """

    kind: ClassVar[str] = "recorded"

    def __init__(self, inner: Provider, store: Store | CallLog, run_id: str,
                 trajectory_key: TrajectoryKey) -> None:
        # Provider.__init__ is not called: the wrapper has no client or key of its own.
        self.inner = inner
        self.config = inner.config
        self.prices = inner.prices
        self._state = None
        self.store = store
        self.run_id = run_id
        self.key = trajectory_key
        self.turn = 0          # the number of the last turn taken (sent, replayed or BUDGET)
        self.replayed = 0      # how many turns came from the store
        self.sent = 0          # how many turns were sent to the endpoint

    def __repr__(self) -> str:
        return f"RecordedProvider({self.inner!r}, run={self.run_id!r}, trajectory={str(self.key)!r})"

    # -- the wire-format methods belong to the inner provider -----------------------------------

    def build_request(self, prompt: Prompt, *, model: str, temperature: float | None,
                      max_tokens: int | None) -> WireRequest:
        return self.inner.build_request(prompt, model=model, temperature=temperature,
                                        max_tokens=max_tokens)

    def auth_headers(self, key: str) -> dict[str, str]:
        return self.inner.auth_headers(key)

    def parse_reply(self, data: Any) -> WireReply:
        return self.inner.parse_reply(data)

    def parse_usage(self, usage: Any) -> Usage | None:
        return self.inner.parse_usage(usage)

    async def aclose(self) -> None:
        """Nothing to close: the inner provider is the sweep's."""

    # -- the call ---------------------------------------------------------------------------------

    async def complete(self, prompt: Prompt, *, model: str, temperature: float | None,
                       max_tokens: int | None, deadline_s: float,
                       idempotency_key: str | None = None) -> LLMCall:
        """``idempotency_key`` is ignored: the wrapper derives the call's key itself."""
        self.turn += 1
        turn = self.turn
        stored = await _maybe(self.store.llm_call(self.run_id, self.key, turn))
        if stored is not None and stored.status is not CallStatus.BUDGET:
            if stored.prompt.messages != prompt.messages:
                raise ResumeMismatchError(
                    f"resume of run {self.run_id!r}, trajectory {str(self.key)!r}: turn {turn} is "
                    f"stored with a different prompt than the one being sent now "
                    f"({_first_difference(stored.prompt, prompt)}); refusing to pay for a call "
                    "the run already made — resume with the original settings, or start a new run")
            self.replayed += 1
            return dataclasses.replace(stored, extra={**stored.extra, "replayed": "1"})
        call = await self.inner.complete(prompt, model=model, temperature=temperature,
                                         max_tokens=max_tokens, deadline_s=deadline_s,
                                         idempotency_key=idempotency_key_of(self.run_id, self.key,
                                                                            turn))
        self.sent += 1
        return await _maybe(self.store.add_llm_call(self.run_id, self.key, turn, call))

    async def record(self, call: LLMCall) -> None:
        """The trajectory's ``record`` callback: stores ``BUDGET`` calls (made without the
        provider) at the next turn; every other call was stored by :meth:`complete` already,
        which this checks."""
        if call.status is CallStatus.BUDGET:
            self.turn += 1
            await _maybe(self.store.add_llm_call(self.run_id, self.key, self.turn,
                                                 dataclasses.replace(call, extra={})))
            return
        turn = call.extra.get("turn")
        if turn is not None and turn != str(self.turn):
            raise StoreError(f"trajectory {str(self.key)!r}: recording turn {turn}, but the "
                             f"provider's last turn is {self.turn} (one RecordedProvider per "
                             "trajectory run)")
        if await _maybe(self.store.llm_call(self.run_id, self.key, self.turn)) is None:
            raise StoreError(f"trajectory {str(self.key)!r}: call for turn {self.turn} was not "
                             "stored before use")
