"""Transcripts for the HTML report: each trajectory's turns (prompt, reply, tool calls, the
candidate extracted from the reply and its stored verdict) and its final verdict, read from the
store and bounded in size (docs/reports.md, "HTML report").

The bound: every text field is cut at :data:`FIELD_CHARS` characters, and trajectories are taken
evenly spread over the run (sorted by key) until :data:`BUDGET_CHARS` characters of text are
embedded; the report says how many of how many it shows. A sweep of any size thus gives a file
of at most about ``BUDGET_CHARS`` plus the tables and plots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.store import Store, TrajectoryResult
from generators.extract import extract_code
from protos.records import Verdict, candidate_id

FIELD_CHARS = 6_000
BUDGET_CHARS = 6_000_000


def clip(text: str, limit: int = FIELD_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... [{len(text) - limit:,} more characters not shown]"


@dataclass(frozen=True)
class VerdictView:
    status: str
    message: str
    mismatches: tuple[str, ...]      # failed cases: "name: mismatch"
    findings: tuple[str, ...]        # "layer/rule: evidence"
    speedup: float | None
    timings: tuple[str, ...]         # "case: median us"


@dataclass(frozen=True)
class TurnView:
    turn: int
    prompt: str                      # the prompt's last message (the new input of this turn)
    reply: str
    tool_calls: tuple[str, ...]
    candidate: str                   # the code extracted from the reply ("" when none)
    verdict: VerdictView | None      # the store's verdict on that candidate, if any
    latency_s: float
    tokens: int


@dataclass(frozen=True)
class Transcript:
    key: str
    model: str
    method: str
    problem: str
    platform: str
    status: str                      # the final verdict's status, or the end reason
    end_reason: str
    turns: tuple[TurnView, ...]
    final: VerdictView | None
    final_source: str

    def size(self) -> int:
        return len(self.final_source) + sum(len(t.prompt) + len(t.reply) + len(t.candidate)
                                            for t in self.turns)


def verdict_view(v: Verdict | None) -> VerdictView | None:
    if v is None:
        return None
    return VerdictView(
        v.status.value, clip(v.message, 2000),
        tuple(f"{c.name}: {clip(c.mismatch, 500) or 'failed'}" for c in v.cases if not c.passed),
        tuple(f"{f.layer}/{f.rule}: {clip(f.evidence, 500)}" for f in v.findings), v.speedup,
        tuple(f"{t.name}: {t.median_us:.1f} us" for t in v.timings if t.median_us is not None))


def _turns(store: Store, r: TrajectoryResult) -> tuple[TurnView, ...]:
    out = []
    for row in store.llm_calls(r.run_id, r.key):
        c = row.call
        msgs = c.prompt.messages
        ex = extract_code(c.text) if c.text else None
        code = ex.source if ex is not None and ex.ok else ""
        v = store.newest_verdict(r.key.operator_id, candidate_id(code)) if code else None
        out.append(TurnView(row.turn, clip(msgs[-1].content if msgs else ""), clip(c.text),
                            tuple(clip(f"{t.name}({t.arguments})", 2000) for t in c.tool_calls),
                            clip(code), verdict_view(v), c.latency_s,
                            c.usage.total_tokens if c.usage else 0))
    return tuple(out)


def transcript(store: Store, r: TrajectoryResult) -> Transcript:
    final = (store.newest_verdict(r.key.operator_id, r.best_candidate_hash)
             if r.best_candidate_hash else None)
    source = store.source(r.best_candidate_hash) if r.best_candidate_hash else None
    return Transcript(str(r.key), r.key.model, r.key.method,
                      f"{r.key.operator_id}@{r.key.operator_version}", r.platform,
                      r.status.value if r.status else r.end_reason, r.end_reason, _turns(store, r),
                      verdict_view(final), clip(source or ""))


def spread(n: int) -> list[int]:
    """0..n-1 in an order that covers the range evenly at every prefix (0, n/2, n/4, 3n/4 ...)."""
    order: list[int] = []
    seen: set[int] = set()
    step = n
    while step >= 1 and len(order) < n:
        for i in range(0, n, step):
            if i not in seen:
                seen.add(i)
                order.append(i)
        step //= 2
    return order + [i for i in range(n) if i not in seen]


def read_transcripts(store: Store, results: Sequence[TrajectoryResult],
                     budget: int = BUDGET_CHARS) -> list[Transcript]:
    """Transcripts of the run's trajectories, evenly spread, until ``budget`` characters; in key
    order."""
    rows = sorted(results, key=lambda r: (r.platform, str(r.key)))
    taken: list[tuple[int, Transcript]] = []
    used = 0
    for i in spread(len(rows)):
        t = transcript(store, rows[i])
        if taken and used + t.size() > budget:
            break
        taken.append((i, t))
        used += t.size()
    return [t for _i, t in sorted(taken, key=lambda x: x[0])]
