"""The record of one HTTP request of a call: what came back and what it billed.

A call's attempts are stored with it, as JSON in ``LLMCall.extra["attempts"]``, so every billed
attempt of a retried call stays visible (the billing rule is in :mod:`generators.providers.base`).
Rows written before a field existed still load: every field but ``attempt`` and ``status`` has a
default, and ``usage`` takes the :class:`~generators.llm.Usage` fields it finds.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import orjson

from generators.llm import CallStatus, LLMCall, Usage

_USAGE_FIELDS = tuple(f.name for f in fields(Usage))


@dataclass(frozen=True)
class AttemptRecord:
    """One HTTP request of a call: what came back and what it billed."""

    attempt: int                   # 1-based
    status: CallStatus
    http_status: int = 0           # 0: no HTTP response (timeout, connection failure)
    usage: Usage | None = None
    cost_usd: float = 0.0
    latency_s: float = 0.0
    retry_after_s: float | None = None
    error: str = ""
    sent: bool = True              # False: the connection was never made, nothing left

    def to_json(self) -> dict[str, Any]:
        u = self.usage
        return {"attempt": self.attempt, "status": self.status.value,
                "http_status": self.http_status,
                "usage": None if u is None else {name: getattr(u, name) for name in _USAGE_FIELDS},
                "cost_usd": self.cost_usd, "latency_s": self.latency_s,
                "retry_after_s": self.retry_after_s, "error": self.error, "sent": self.sent}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AttemptRecord:
        usage = data.get("usage")
        return cls(attempt=int(data["attempt"]), status=CallStatus(data["status"]),
                   http_status=int(data.get("http_status", 0)),
                   usage=Usage(**{k: int(v) for k, v in usage.items() if k in _USAGE_FIELDS})
                   if isinstance(usage, dict) else None,
                   cost_usd=float(data.get("cost_usd", 0.0)), latency_s=float(data.get("latency_s", 0.0)),
                   retry_after_s=data.get("retry_after_s"), error=str(data.get("error", "")),
                   sent=bool(data.get("sent", True)))

    @property
    def unconfirmed(self) -> bool:
        """Sent (or maybe sent) without a whole reply and without usage: the server may have
        billed it, the client cannot know. A transport failure or timeout before any response
        (``http_status`` 0: a connection lost mid-reply, a server that billed and then dropped
        it), or a 2xx stream cut off before its terminator that carried no usage. What the
        books count as unconfirmed, beside the billed attempts (docs/generators.md, "Billing
        rule"). An attempt whose connection was never made (``sent`` False: refused, no such
        host, a failed TLS handshake) left nothing to bill and is not unconfirmed."""
        if self.usage is not None or not self.sent:
            return False
        cut_stream = 200 <= self.http_status < 300 and self.status in (
            CallStatus.SERVER_ERROR, CallStatus.TIMEOUT, CallStatus.RATE_LIMITED)
        return self.http_status == 0 or cut_stream

    def with_latency(self, latency_s: float) -> AttemptRecord:
        return AttemptRecord(self.attempt, self.status, self.http_status, self.usage, self.cost_usd,
                             latency_s, self.retry_after_s, self.error, self.sent)


def attempts_json(records: list[AttemptRecord]) -> str:
    """What a call stores in ``extra["attempts"]``."""
    return orjson.dumps([r.to_json() for r in records]).decode()


def attempt_records(call: LLMCall) -> tuple[AttemptRecord, ...]:
    """The per-attempt records a provider stored in ``call.extra["attempts"]``."""
    raw = call.extra.get("attempts")
    if not raw:
        return ()
    return tuple(AttemptRecord.from_json(item) for item in orjson.loads(raw))
