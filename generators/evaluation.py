"""Evaluators: what methods that need verdicts (``refine``) call to judge a candidate.

:class:`Evaluator` is a one-method protocol — candidate in, :class:`~protos.records.Verdict`
out — so a method does not care whether the verdict comes from a device agent over gRPC, a
coordinator's store, or a test double. :class:`AgentEvaluator` satisfies it with
:class:`protos.client.AgentClient`.

An evaluator never raises for what the candidate does (that is the verdict). When the *system*
cannot produce a verdict (agent unreachable, queue full past the deadline, bad request), it
returns a verdict with status ``INFRA_ERROR`` and the reason in ``message``: it is never counted
against the model, and ``refine`` stops without feeding it back. Nor does it accept a verdict
that answers another request (:mod:`protos.integrity`): that is ``INFRA_ERROR`` as well.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import operators
from protos.integrity import Expected, mismatches, refusal, source_digest
from protos.records import EvalRequest, Status, Verdict
from protos.request_ids import RequestIds

if TYPE_CHECKING:
    from protos.client import AgentClient

log = logging.getLogger(__name__)


@runtime_checkable
class Evaluator(Protocol):
    async def evaluate(self, operator_id: str, source: str) -> Verdict:
        """The verdict on ``source`` as a candidate for ``operator_id``."""
        ...


def candidate_hash(source: str) -> str:
    """The content address of a candidate (as :attr:`generators.base.Candidate.candidate_hash`)."""
    return source_digest(source.encode("utf-8", "surrogateescape"))


def infra_verdict(operator_id: str, source: str, message: str) -> Verdict:
    """A verdict saying the system, not the candidate, failed."""
    return Verdict(status=Status.INFRA_ERROR, operator_id=operator_id, operator_version=0,
                   candidate_hash=candidate_hash(source), message=message)


class AgentEvaluator:
    """Evaluates candidates on one device agent (one gRPC channel, reused for every call).

    The request id is derived from the problem, its version, the candidate's content, the
    timing mode and ``run`` with the coordinator's secret (:class:`protos.request_ids.RequestIds`,
    loaded on first use unless given), so the agent's idempotency makes two trajectories that
    produce the same file share one evaluation, while nobody without the secret can predict the
    id and bind a verdict to it first. A busy agent (``RESOURCE_EXHAUSTED``) is retried after
    the delay it asks for until ``timeout_s`` has passed; other agent failures give an
    ``INFRA_ERROR`` verdict. An agent that answers for another request is not asked again.
    """

    def __init__(self, address: str, timeout_s: float = 600.0, *, skip_timing: bool = False,
                 run: str = "", request_ids: RequestIds | None = None) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.address = address
        self.timeout_s = timeout_s
        self.skip_timing = skip_timing
        self.run = run
        self._ids = request_ids
        self._client: AgentClient | None = None
        self._untrusted = ""  # why this agent's verdicts are no longer accepted

    def __repr__(self) -> str:
        return f"AgentEvaluator({self.address!r}, timeout_s={self.timeout_s})"

    def _get_client(self) -> AgentClient:
        if self._client is None:
            from protos.client import AgentClient  # grpc only where an agent is used

            self._client = AgentClient(self.address)
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def __aenter__(self) -> AgentEvaluator:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _request(self, operator_id: str, source: str) -> EvalRequest:
        version = operators.get(operator_id).version
        if self._ids is None:
            self._ids = RequestIds.load()
        rid = self._ids.derive(operator_id=operator_id, operator_version=version,
                               candidate_hash=candidate_hash(source),
                               mode="notime" if self.skip_timing else "timed", run=self.run,
                               prefix="gen")
        return EvalRequest(request_id=rid, operator_id=operator_id, operator_version=version,
                           source=source.encode("utf-8", "surrogateescape"),
                           skip_timing=self.skip_timing)

    def _vet(self, req: EvalRequest, verdict: Verdict) -> Verdict:
        """The verdict, or INFRA_ERROR when it answers another request (then the agent is
        not trusted again: a rogue agent must not keep feeding results)."""
        expected = Expected.of(req)
        found = mismatches(expected, verdict)
        if not found:
            return verdict
        refused = refusal(expected, verdict, self.address, found)
        self._untrusted = "it answered for another request"
        log.error("INTEGRITY ALARM (mismatch) agent %s: %s; not asked again", self.address,
                  refused.message)
        return refused

    async def evaluate(self, operator_id: str, source: str) -> Verdict:
        from protos.client import AgentBusy, AgentError

        if self._untrusted:
            return infra_verdict(operator_id, source,
                                 f"agent at {self.address} is not trusted: {self._untrusted}")
        try:
            req = self._request(operator_id, source)
        except operators.UnknownOperatorError as exc:
            return infra_verdict(operator_id, source, f"not in this suite: {exc}")
        client = self._get_client()
        end = time.monotonic() + self.timeout_s
        while True:
            remaining = end - time.monotonic()
            if remaining <= 0:
                return infra_verdict(operator_id, source,
                                     f"agent at {self.address} gave no verdict within {self.timeout_s:.0f}s")
            try:
                return self._vet(req, await client.evaluate(req, timeout=remaining))
            except AgentBusy as exc:
                wait = max(exc.retry_after_s, 0.05)
                if time.monotonic() + wait >= end:
                    return infra_verdict(operator_id, source, f"agent busy: {exc}")
                await asyncio.sleep(wait)
            except AgentError as exc:
                return infra_verdict(operator_id, source, f"{type(exc).__name__}: {exc}")
