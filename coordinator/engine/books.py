"""The run's books as the store holds them, kept by the store writer as it commits calls.

:class:`RunBooks` is read from the store when the writer starts (every call of the run, by
every coordinator that ran it before, and the unconfirmed calls they left) and grows with each
call the writer commits, so it equals the store's totals at every commit: the ``kgb_run_*``
gauges (docs/metrics.md) show the true spend after any number of restarts. The calls committed
since the driver last asked (:meth:`RunBooks.take`) feed the per-process counters and the
progress bar, each once: a call stored by an earlier process is in the totals, never in
the feed.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field

from coordinator.llm_calls import Unconfirmed
from coordinator.store import Store
from generators.llm import LLMCall, Prompt
from generators.providers.attempts import attempt_records

TOKEN_KINDS = ("prompt", "completion", "cached", "reasoning")


@dataclass(frozen=True)
class RecordedCall:
    """A call this process committed: its trajectory's model label and method, and the call
    without prompt, text or extras (what metrics read)."""

    model: str
    method: str
    call: LLMCall


@dataclass
class StoredTotals:
    """The run's stored calls: tokens by (model, method, kind), cost by (model, method), calls
    by (model, status), unconfirmed calls by (model, method) — model and method as the
    trajectory keys name them."""

    tokens: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    cost: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    calls: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    unconfirmed: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))

    def add(self, model: str, method: str, call: LLMCall) -> None:
        u = call.usage
        tokens = (0, 0, 0, 0) if u is None else (u.prompt_tokens, u.completion_tokens,
                                                 u.cached_tokens, u.reasoning_tokens)
        lost = sum(1 for a in attempt_records(call) if a.unconfirmed)
        self.add_sums(model, method, call.status.value, 1, tokens, call.cost_usd, lost)

    def add_sums(self, model: str, method: str, status: str, calls: int,
                 tokens: tuple[int, int, int, int], cost: float, unconfirmed: int) -> None:
        self.calls[(model, status)] += calls
        self.cost[(model, method)] += cost
        for kind, n in zip(TOKEN_KINDS, tokens, strict=True):
            self.tokens[(model, method, kind)] += n
        if unconfirmed:
            self.unconfirmed[(model, method)] += unconfirmed

    def copy(self) -> StoredTotals:
        return StoredTotals(defaultdict(int, self.tokens), defaultdict(float, self.cost),
                            defaultdict(int, self.calls), defaultdict(int, self.unconfirmed))


def slim(call: LLMCall) -> LLMCall:
    """A call without its prompt messages, text and extras: what metrics read, cheap to ship."""
    return dataclasses.replace(call, prompt=Prompt(messages=(), template=call.prompt.template,
                                                   operator_id=call.prompt.operator_id),
                               text="", extra={})


class RunBooks:
    """What the writer has committed for its run: the totals and the calls not yet taken."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.run_id = run_id
        self.totals = StoredTotals()
        self._new: list[RecordedCall] = []
        for traj, status, n, p, c, cached, r, cost, lost in store.db.execute(
                "SELECT trajectory, status, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), "
                "SUM(cached_tokens), SUM(reasoning_tokens), SUM(cost_usd), "
                "SUM(unconfirmed_attempts) FROM llm_calls WHERE run_id = ? "
                "GROUP BY trajectory, status", (run_id,)):
            model, method = _label_and_method(traj)
            self.totals.add_sums(model, method, status, int(n), (int(p), int(c), int(cached), int(r)),
                                 float(cost), int(lost))
        started, _ = store.run_lease(run_id)
        for u in store.unconfirmed_calls(run_id, before=started):
            self.totals.unconfirmed[(u.model, u.method)] += u.intents

    def committed(self, run_id: str, trajectory: str, call: LLMCall) -> None:
        """A call this writer has just committed (written, not kept from before)."""
        if run_id != self.run_id:
            return
        model, method = _label_and_method(trajectory)
        self.totals.add(model, method, call)
        self._new.append(RecordedCall(model, method, slim(call)))

    def take(self) -> tuple[list[RecordedCall], StoredTotals]:
        """The calls committed since the last take, and the totals now."""
        new, self._new = self._new, []
        return new, self.totals.copy()


def _label_and_method(trajectory: str) -> tuple[str, str]:
    """(model, method) of a trajectory key string, without building the key (a resume of a
    large run reads a row per trajectory): ``op@version/method/model/sample[@platform]``."""
    _, method, rest = trajectory.split("/", 2)
    return rest.rsplit("/", 1)[0], method


__all__ = ["RecordedCall", "RunBooks", "StoredTotals", "Unconfirmed", "slim"]
