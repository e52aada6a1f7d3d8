"""Does a verdict answer the request it was sent for?

The store keys a verdict by what the verdict itself says (operator id, version, candidate hash,
device model), so a verdict taken on trust lets an agent write a result for any candidate:
a rogue agent that answers ``PASSED`` for anything, or a confused one that replays the verdict of
another request, would both be recorded as the candidate's. Every client that accepts a verdict
from an agent therefore compares it with what it sent (:func:`mismatches`) and, when they
differ, replaces it by :func:`refusal` — an ``INFRA_ERROR`` verdict about the request that was
sent, never counted against the candidate and never stored. What else to do about the agent
(alarm, quarantine) is the caller's business.

The check cannot catch an agent that echoes the right fields and lies about the result; that is
what the coordinator's spot-check is for (docs/fleet.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from protos.records import EvalRequest, Status, Verdict, candidate_id

SHOWN_CHARS = 80  # how much of a mismatched value a message quotes (the agent chose it)


@dataclass(frozen=True)
class Expected:
    """What a verdict must say about itself to answer a request. ``device_model`` is the model
    the agent described itself as when the call was routed (None: not known, not checked)."""

    operator_id: str
    operator_version: int
    candidate_hash: str
    device_model: str | None = None
    public_only: bool = False

    @classmethod
    def of(cls, req: EvalRequest, device_model: str | None = None) -> Expected:
        """From the request as sent; its version must be pinned, or any version would do."""
        if req.operator_version is None:
            raise ValueError(f"request {req.request_id!r} does not pin the operator version")
        return cls(req.operator_id, req.operator_version, candidate_id(req.source),
                   device_model or None, req.public_only)


@dataclass(frozen=True)
class Mismatch:
    """One field where the verdict differs from the request."""

    field: str
    sent: str
    got: str

    def __str__(self) -> str:
        return f"{self.field}: sent {_shown(self.sent)}, got {_shown(self.got)}"


def _shown(value: str) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def mismatches(expected: Expected, verdict: Verdict) -> tuple[Mismatch, ...]:
    """Every field where ``verdict`` does not answer ``expected``; empty when it does."""
    out = []
    if verdict.candidate_hash != expected.candidate_hash:
        out.append(Mismatch("candidate_hash", expected.candidate_hash, verdict.candidate_hash))
    if verdict.operator_id != expected.operator_id:
        out.append(Mismatch("operator_id", expected.operator_id, verdict.operator_id))
    if verdict.operator_version != expected.operator_version:
        out.append(Mismatch("operator_version", str(expected.operator_version),
                            str(verdict.operator_version)))
    if verdict.public_only != expected.public_only:  # a check must never pass for a score
        out.append(Mismatch("public_only", str(expected.public_only), str(verdict.public_only)))
    model = expected.device_model
    if model is not None and verdict.device_model.casefold() != model.casefold():
        out.append(Mismatch("device_model", model, verdict.device_model))
    return tuple(out)


def refusal(expected: Expected, verdict: Verdict, agent: str,
            found: tuple[Mismatch, ...]) -> Verdict:
    """The ``INFRA_ERROR`` verdict that replaces one answering another request: it names the
    request that was sent (not what the agent claimed) and says what differed."""
    what = "; ".join(str(m) for m in found)
    message = (f"agent {agent} answered for another request ({what}); its "
               f"{verdict.status.value} verdict was discarded")
    return Verdict(status=Status.INFRA_ERROR, operator_id=expected.operator_id,
                   operator_version=expected.operator_version,
                   candidate_hash=expected.candidate_hash, message=message)
