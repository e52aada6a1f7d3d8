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
* otherwise (nothing stored, or only a ``BUDGET`` placeholder, which was never sent) an
  **intent** is committed first (:class:`~coordinator.llm_calls.CallIntent`: trajectory, turn,
  attempt, idempotency key, request hash, time), then the inner provider is called, and its
  call is committed — completing the intent — before it is returned: persist before use. A
  crash between the two leaves the intent without a reply: an unconfirmed call, possibly billed,
  which reports show. The resumed turn is sent as the intent's next attempt (2 after one
  unconfirmed intent: the link) and its call says so in ``extra["resends"]``.

One key rule: every call of (run, trajectory, turn) carries the idempotency key
:func:`idempotency_key_of` derives from them — on every HTTP attempt, and again when a resume
re-sends the turn, so an endpoint that honours keys hands back the reply it billed instead of
billing a second one. A caller may pass that key; any other is refused. If the store write
fails the call is not returned (its tokens are paid but its text is never used — the failure is
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

import orjson

from coordinator.llm_calls import CallIntent
from coordinator.store import Store, StoreError, TrajectoryKey
from generators.llm import CallStatus, LLMCall, Prompt, Usage
from generators.providers.base import Provider, Relayed, WireReply, WireRequest
from generators.providers.wire import estimate_prompt_tokens


class CallLog(Protocol):
    """Where a trajectory's calls are kept: a :class:`~coordinator.store.Store`, or a sweep's
    remote store writer (whose methods are coroutines)."""

    def llm_call(self, run_id: str, trajectory: TrajectoryKey, turn: int
                 ) -> LLMCall | None | Awaitable[LLMCall | None]: ...

    def add_llm_call(self, run_id: str, trajectory: TrajectoryKey, turn: int, call: LLMCall, *,
                     intent: int = 0, idempotency_key: str = ""
                     ) -> LLMCall | Awaitable[LLMCall]: ...

    def add_intent(self, intent: CallIntent) -> None | Awaitable[None]: ...

    def last_intent(self, run_id: str, trajectory: TrajectoryKey, turn: int
                    ) -> int | Awaitable[int]: ...


T = TypeVar("T")


async def _maybe(value: T | Awaitable[T]) -> T:
    return await value if inspect.isawaitable(value) else value


def idempotency_key_of(run_id: str, trajectory: TrajectoryKey, turn: int) -> str:
    """The key of one model call: the same for the same turn of the same trajectory of the same
    run (so a resume repeats it), different for anything else (a new run asks afresh)."""
    digest = hashlib.sha256(f"{run_id}\0{trajectory}\0{turn}".encode()).hexdigest()
    return f"kgb-{digest[:40]}"


def request_hash(request: WireRequest) -> str:
    """sha256 of what is sent (the body, keys sorted): an intent's fingerprint of its request."""
    return hashlib.sha256(orjson.dumps(request.body, option=orjson.OPT_SORT_KEYS)).hexdigest()


class ResumeMismatchError(StoreError):
    """A resumed trajectory sent a different prompt for a turn already stored."""


def _first_difference(stored: Prompt, now: Prompt) -> str:
    a, b = stored.messages, now.messages
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            what = ("role" if x.role != y.role else "content" if x.content != y.content
                    else "tool calls or the call answered")
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
        """Replay turn k from the store, or write its intent, send it and store the call (see
        the module doc). ``idempotency_key``: None, or the key the turn has anyway."""
        self.turn += 1
        turn = self.turn
        key = idempotency_key_of(self.run_id, self.key, turn)
        if idempotency_key is not None and idempotency_key != key:
            raise StoreError(f"trajectory {str(self.key)!r} turn {turn}: idempotency key "
                             f"{idempotency_key!r} is not the turn's own ({key}); a recorded call "
                             "carries the key derived from run, trajectory and turn")
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
        request = self.inner.build_request(prompt, model=model, temperature=temperature,
                                           max_tokens=max_tokens)
        attempt = await self._write_intent(request, prompt, model, turn, key)
        call = await self.inner.complete(prompt, model=model, temperature=temperature,
                                         max_tokens=max_tokens, deadline_s=deadline_s,
                                         idempotency_key=key)
        if attempt > 1:  # the link: this send follows attempt - 1 intents that got no reply
            call = dataclasses.replace(call, extra={**call.extra, "resends": str(attempt - 1)})
        self.sent += 1
        return await _maybe(self.store.add_llm_call(self.run_id, self.key, turn, call,
                                                    intent=attempt, idempotency_key=key))

    async def relay(self, request: WireRequest, prompt: Prompt, *, model: str,
                    deadline_s: float, idempotency_key: str | None = None
                    ) -> tuple[LLMCall, Relayed]:
        """A request of an agent CLI, metered: it takes the next turn the store does not hold (a
        CLI run again after a resume sends what it likes; its earlier turns stay in the books,
        paid), writes the intent, relays the request and stores the call before returning it."""
        self.turn += 1
        while True:
            stored = await _maybe(self.store.llm_call(self.run_id, self.key, self.turn))
            if stored is None or stored.status is CallStatus.BUDGET:
                break
            self.turn += 1
        turn = self.turn
        key = idempotency_key_of(self.run_id, self.key, turn)
        attempt = await self._write_intent(request, prompt, model, turn, key)
        call, relayed = await self.inner.relay(request, prompt, model=model,
                                               deadline_s=deadline_s, idempotency_key=key)
        self.sent += 1
        call = await _maybe(self.store.add_llm_call(self.run_id, self.key, turn, call,
                                                    intent=attempt, idempotency_key=key))
        return call, relayed

    async def _write_intent(self, request: WireRequest, prompt: Prompt, model: str, turn: int,
                            key: str) -> int:
        """Commit the intent of the request about to leave; returns its attempt number."""
        attempt = await _maybe(self.store.last_intent(self.run_id, self.key, turn)) + 1
        price = self.prices.models.get(model)
        await _maybe(self.store.add_intent(CallIntent(
            self.run_id, str(self.key), turn, attempt, key, request_hash(request), model,
            estimate_prompt_tokens(prompt), request.max_tokens,
            price.prompt if price is not None else None,
            price.completion if price is not None else None)))
        return attempt

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
