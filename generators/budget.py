"""Token and cost budgets for a trajectory and for a whole sweep.

A :class:`Budget` caps the tokens (prompt + completion, as billed) and the cost in USD that calls
may spend. A trajectory has its own budget; a sweep-wide budget is one object shared by every
trajectory of the sweep. Before each model call the trajectory asks :meth:`Budget.check` of
both; once either is spent the call is **not sent**: it is recorded as an
:class:`~generators.llm.LLMCall` with ``CallStatus.BUDGET`` (no usage, not billed) and the
trajectory ends with ``BUDGET_SPENT`` and the reason. After each call the trajectory charges
both budgets with what the call billed (:meth:`Budget.charge`; a call without usage costs
nothing, per the billing rule in :mod:`generators.llm`).

A budget is checked before a call and charged after it, so it can be overshot by the calls
already in flight when it runs out (at most one per trajectory for the trajectory budget; at
most the number of concurrent trajectories for a sweep budget) — a model's reply length is not
known before it is sent, and a call that was paid for is always counted, never dropped.

Concurrency: ``charge`` and ``check`` never await, so they are atomic on one asyncio event
loop; a lock makes them safe across threads as well (a Ray actor with a thread pool).
"""

from __future__ import annotations

import math
import threading
from typing import Literal

from generators.llm import LLMCall

Scope = Literal["trajectory", "sweep"]


class Budget:
    """At most ``max_tokens`` billed tokens and ``max_cost_usd`` dollars (None: no limit)."""

    def __init__(self, max_tokens: int | None = None, max_cost_usd: float | None = None, *,
                 scope: Scope = "trajectory") -> None:
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or max_tokens < 0):
            raise ValueError(f"{scope} max_tokens must be an int >= 0 or None, got {max_tokens!r}")
        if max_cost_usd is not None and (isinstance(max_cost_usd, bool)
                                         or not isinstance(max_cost_usd, int | float)
                                         or not math.isfinite(max_cost_usd) or max_cost_usd < 0):
            raise ValueError(f"{scope} max_cost_usd must be a finite number >= 0 or None, "
                             f"got {max_cost_usd!r}")
        self.max_tokens = max_tokens
        self.max_cost_usd = None if max_cost_usd is None else float(max_cost_usd)
        self.scope: Scope = scope
        self._tokens = 0
        self._cost = 0.0
        self._calls = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"Budget({self.scope}, tokens {self._tokens}/{self.max_tokens}, "
                f"cost {self._cost:.6g}/{self.max_cost_usd})")

    @property
    def used_tokens(self) -> int:
        return self._tokens

    @property
    def used_cost_usd(self) -> float:
        return self._cost

    @property
    def charged_calls(self) -> int:
        """How many billed calls were charged."""
        return self._calls

    def charge(self, call: LLMCall) -> None:
        """Count what ``call`` billed (nothing when it carried no usage)."""
        if call.usage is None:
            return
        with self._lock:
            self._tokens += call.usage.total_tokens
            self._cost += call.cost_usd
            self._calls += 1

    def observe(self, tokens: int, cost_usd: float) -> None:
        """Raise the counts to totals seen elsewhere (never lower them): a sweep whose budget is
        shared by several processes tells each one the sweep's stored totals, and a resumed
        sweep starts from what its earlier runs spent."""
        with self._lock:
            self._tokens = max(self._tokens, int(tokens))
            self._cost = max(self._cost, float(cost_usd))

    def check(self) -> str | None:
        """None while calls may be sent; else why not, e.g.
        ``"trajectory token budget of 20000 spent (20480 used)"``."""
        with self._lock:
            if self.max_tokens is not None and self._tokens >= self.max_tokens:
                return f"{self.scope} token budget of {self.max_tokens} spent ({self._tokens} used)"
            if self.max_cost_usd is not None and self._cost >= self.max_cost_usd:
                return (f"{self.scope} cost budget of ${self.max_cost_usd:.4f} spent "
                        f"(${self._cost:.4f} used)")
        return None

    @property
    def spent(self) -> bool:
        return self.check() is not None
