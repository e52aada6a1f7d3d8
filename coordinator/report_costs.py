"""A sweep report's cost rows: tokens, cost and GPU time per solved problem, and the calls the
books cannot confirm (definitions: docs/reports.md, "Tokens, cost and GPU time").

Every number comes from stored rows: calls, tokens and cost from ``llm_calls`` (every call of the
run, finished trajectory or not), unconfirmed calls from ``llm_intents`` and the calls' lost
attempts (:meth:`~coordinator.llm_calls.LLMCallTables.unconfirmed_calls`), trajectories, GPU
seconds, reused verdicts and solved problems from ``trajectory_results``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from coordinator.llm_calls import Unconfirmed
from coordinator.store import Store, TrajectoryKey, TrajectoryResult


@dataclass(frozen=True)
class TrajectoryUsage:
    """A trajectory's rows of ``llm_calls``, summed. Tokens and cost are the columns' sums (only
    billed calls carry any); ``unpriced_calls`` are billed calls whose model had no price, whose
    cost is unknown rather than 0."""

    key: TrajectoryKey
    calls: int
    billed_calls: int
    unpriced_calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cost_usd: float
    cache_write_tokens: int = 0


def llm_usage(store: Store, run_id: str) -> list[TrajectoryUsage]:
    """Every trajectory's model calls of a run, summed in SQL (one row per trajectory), read-only.

    The trajectory key, not the call's model column, names model and method, so calls group
    exactly as ``trajectory_results`` does. Whether a call was priced lives in the call's JSON
    (``extra.price``); it is parsed only for billed calls that cost 0."""
    rows = store.db.execute(
        "SELECT trajectory, COUNT(*), SUM(billed), "
        "SUM(CASE WHEN billed AND cost_usd = 0 AND json_extract(call, '$.extra.price') = 'unknown' "
        "THEN 1 ELSE 0 END), SUM(prompt_tokens), SUM(completion_tokens), SUM(cached_tokens), "
        "SUM(reasoning_tokens), SUM(cost_usd), SUM(cache_write_tokens) FROM llm_calls "
        "WHERE run_id = ? "
        "GROUP BY trajectory ORDER BY trajectory", (run_id,)).fetchall()
    return [TrajectoryUsage(TrajectoryKey.parse(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]),
                            int(r[5]), int(r[6]), int(r[7]), float(r[8]), int(r[9]))
            for r in rows]


@dataclass(frozen=True)
class CostRow:
    """What one (model, method) spent (both "all" for the run's total).

    Calls, tokens and cost come from ``llm_calls`` (every call of the run, finished trajectory
    or not, so they equal that table's totals); ``unconfirmed_calls`` are calls sent without a
    stored reply (possibly billed: never in the tokens and cost, estimated apart);
    ``trajectories``, ``gpu_seconds`` (agent time of the evaluations made, each once),
    ``reused_verdicts`` (verdicts taken from the store or shared with an identical evaluation)
    and ``solved_problems`` from ``trajectory_results``. A solved problem is a (platform,
    problem) with at least one passing sample; the total row sums the rows' solved problems.
    ``cache_write_tokens`` (part of the prompt tokens, as ``cached_tokens``) is None when none of
    the calls recorded a cache write: a provider that does not report them, and a store older
    than the column, both leave 0, which cannot be told from "none written"."""

    model: str
    method: str
    calls: int
    billed_calls: int
    unpriced_calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cost_usd: float
    trajectories: int
    gpu_seconds: float
    solved_problems: int
    unconfirmed_calls: int = 0
    unconfirmed_tokens_estimate: int = 0
    unconfirmed_cost_usd_estimate: float = 0.0
    reused_verdicts: int = 0
    reused_gpu_seconds: float = 0.0
    wall_s: float = 0.0
    cache_write_tokens: int | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def fresh_prompt_tokens(self) -> int:
        """Prompt tokens not served from the provider's cache."""
        return self.prompt_tokens - self.cached_tokens

    @property
    def wall_hours(self) -> float:
        """The trajectories' own wall time summed, in hours (0 where it was not recorded)."""
        return self.wall_s / 3600

    @property
    def cost_known(self) -> bool:
        """False when some billed call was not priced: ``cost_usd`` is then a lower bound."""
        return self.unpriced_calls == 0

    def _per_solved(self, value: float) -> float | None:
        return value / self.solved_problems if self.solved_problems else None

    @property
    def tokens_per_solved(self) -> float | None:
        return self._per_solved(self.total_tokens)

    @property
    def cost_per_solved(self) -> float | None:
        return self._per_solved(self.cost_usd)

    @property
    def gpu_seconds_per_solved(self) -> float | None:
        return self._per_solved(self.gpu_seconds)

    def to_json(self) -> dict[str, Any]:
        """The fields, the derived totals, and every per-solved value (``cache_write_tokens``
        and its per-solved value null where no cache write was recorded)."""
        per = {f"{name}_per_solved": None if getattr(self, name) is None
               else self._per_solved(float(getattr(self, name)))
               for name in ("fresh_prompt_tokens", "cached_tokens", "cache_write_tokens",
                            "completion_tokens", "reasoning_tokens", "wall_hours")}
        return {**asdict(self), "total_tokens": self.total_tokens, "cost_known": self.cost_known,
                "fresh_prompt_tokens": self.fresh_prompt_tokens,
                "wall_hours": self.wall_hours, "tokens_per_solved": self.tokens_per_solved,
                "cost_per_solved": self.cost_per_solved,
                "gpu_seconds_per_solved": self.gpu_seconds_per_solved, **per}


_USAGE_FIELDS = ("calls", "billed_calls", "unpriced_calls", "prompt_tokens", "completion_tokens",
                 "cached_tokens", "reasoning_tokens", "cost_usd", "cache_write_tokens")
_RESULT_FIELDS = ("trajectories", "gpu_seconds", "reused_verdicts", "reused_gpu_seconds", "wall_s")
_UNCONFIRMED_FIELDS = ("unconfirmed_calls", "unconfirmed_tokens_estimate",
                       "unconfirmed_cost_usd_estimate")


def cost_rows(results: Iterable[TrajectoryResult], usage: Iterable[TrajectoryUsage],
              unconfirmed: Iterable[Unconfirmed] = ()) -> list[CostRow]:
    """One row per (model, method) seen in any of the three, sorted."""
    sums: dict[tuple[str, str], dict[str, float]] = defaultdict(
        lambda: dict.fromkeys(_USAGE_FIELDS + _RESULT_FIELDS + _UNCONFIRMED_FIELDS, 0))
    for u in usage:
        acc = sums[(u.key.model, u.key.method)]
        for f in _USAGE_FIELDS:
            acc[f] += getattr(u, f)
    for x in unconfirmed:
        acc = sums[(x.model, x.method)]
        acc["unconfirmed_calls"] += x.calls
        acc["unconfirmed_tokens_estimate"] += x.est_tokens
        acc["unconfirmed_cost_usd_estimate"] += x.est_cost_usd
    solved: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    counts: Counter[tuple[str, str]] = Counter()
    for r in results:
        key = (r.key.model, r.key.method)
        counts[key] += 1
        acc = sums[key]
        acc["gpu_seconds"] += r.gpu_seconds
        acc["reused_verdicts"] += r.reused_verdicts
        acc["reused_gpu_seconds"] += r.reused_gpu_seconds
        acc["wall_s"] += r.wall_s
        if r.solved:
            solved[key].add((r.platform, f"{r.key.operator_id}@{r.key.operator_version}"))
    out = []
    for key in sorted(sums):
        acc = sums[key]
        out.append(CostRow(
            key[0], key[1], int(acc["calls"]), int(acc["billed_calls"]), int(acc["unpriced_calls"]),
            int(acc["prompt_tokens"]), int(acc["completion_tokens"]), int(acc["cached_tokens"]),
            int(acc["reasoning_tokens"]), float(acc["cost_usd"]), counts[key],
            float(acc["gpu_seconds"]), len(solved[key]), int(acc["unconfirmed_calls"]),
            int(acc["unconfirmed_tokens_estimate"]), float(acc["unconfirmed_cost_usd_estimate"]),
            int(acc["reused_verdicts"]), float(acc["reused_gpu_seconds"]), float(acc["wall_s"]),
            int(acc["cache_write_tokens"]) or None))
    return out


def cost_total(rows: Sequence[CostRow]) -> CostRow:
    """The sum of cost rows (model and method "all")."""
    numeric = {name: sum(getattr(r, name) or 0 for r in rows)
               for name in CostRow.__dataclass_fields__ if name not in ("model", "method")}
    numeric["cache_write_tokens"] = numeric["cache_write_tokens"] or None
    return CostRow("all", "all", **numeric)
