"""The books, stated by idempotency key: what the scripted LLM server billed against the store.

For every idempotency key K (one per turn of a trajectory of a run):

* every billed attempt the store recorded under K was billed by the server under K (the same
  usage: a multiset inclusion), and
* every response the server billed under K is either recorded or unconfirmed: the server's
  billed responses beyond the recorded ones are at most the store's unconfirmed calls of K
  (intents without a reply, plus attempts sent without a whole reply).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import orjson

from coordinator.llm_calls import llm_call_from_json
from coordinator.store import Store
from generators.llm import Usage
from generators.providers.attempts import attempt_records
from tests.generators.fake_llm_server import FakeServer
from tests.generators.llm_helpers import server_usage


@dataclass
class Books:
    billed: dict[str, Counter[Usage]] = field(default_factory=dict)
    recorded: dict[str, Counter[Usage]] = field(default_factory=dict)
    unconfirmed: Counter[str] = field(default_factory=Counter)

    def problems(self) -> list[str]:
        """What breaks the rule (empty: the books balance)."""
        out = []
        for key in sorted(set(self.billed) | set(self.recorded) | set(self.unconfirmed)):
            billed = self.billed.get(key, Counter())
            recorded = self.recorded.get(key, Counter())
            never_billed = recorded - billed
            if never_billed:
                out.append(f"{key}: recorded as billed, not billed by the server: {never_billed}")
            missing = sum((billed - recorded).values())
            if missing > self.unconfirmed[key]:
                out.append(f"{key}: {missing} billed responses neither recorded nor unconfirmed "
                           f"({self.unconfirmed[key]} unconfirmed)")
        return out

    @property
    def billed_unrecorded(self) -> int:
        """Responses the server billed that no stored call records (a crash's)."""
        return sum(sum((b - self.recorded.get(k, Counter())).values())
                   for k, b in self.billed.items())


def books(server: FakeServer, store: Store, run_id: str, wire: str = "openai") -> Books:
    b = Books()
    for row in server.billing():
        usage = server_usage(wire, row["usage"])
        if usage is not None:
            b.billed.setdefault(row["idempotency_key"] or "", Counter())[usage] += 1
    for key, raw in store.db.execute("SELECT idempotency_key, call FROM llm_calls WHERE run_id = ?",
                                     (run_id,)):
        counter = b.recorded.setdefault(key, Counter())
        for attempt in attempt_records(llm_call_from_json(orjson.loads(raw))):
            if attempt.usage is not None:
                counter[attempt.usage] += 1
            elif attempt.unconfirmed:
                b.unconfirmed[key] += 1
    for (key,) in store.db.execute("SELECT idempotency_key FROM llm_intents WHERE run_id = ? "
                                   "AND completed IS NULL", (run_id,)):
        b.unconfirmed[key] += 1
    return b


def usage_total(counters: dict[str, Counter[Usage]]) -> Usage:
    total = Usage()
    for c in counters.values():
        for u, n in c.items():
            for _ in range(n):
                total = total + u
    return total
