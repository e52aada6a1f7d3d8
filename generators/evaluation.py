"""Evaluators: what methods that need verdicts (``refine``) call to judge a candidate.

:class:`Evaluator` is a one-method protocol — candidate in, :class:`~protos.records.Verdict`
out — so a method does not care whether the verdict comes from a device agent, a coordinator's
store, or a test double. ``generators`` only declares it: the implementations are the
coordinator's (``coordinator.fleet``: ``AgentEvaluator`` for one agent, ``Fleet.evaluator``,
and the sweep's fleet router), which is where retries, verdict reuse and the sharing of
identical evaluations live, once for every caller. (Layers point one way: the coordinator
imports ``generators``, never the reverse.)

An evaluator never raises for what the candidate does (that is the verdict). When the *system*
cannot produce a verdict (agent unreachable, queue full past the deadline, bad request, a
verdict that answers another request), it returns a verdict with status ``INFRA_ERROR`` and the
reason in ``message`` (:func:`infra_verdict`): it is never counted against the model, and
``refine`` stops without feeding it back.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from protos.records import Status, Verdict, candidate_id


@runtime_checkable
class Evaluator(Protocol):
    async def evaluate(self, operator_id: str, source: str) -> Verdict:
        """The verdict on ``source`` as a candidate for ``operator_id``."""
        ...


def infra_verdict(operator_id: str, source: str, message: str) -> Verdict:
    """A verdict saying the system, not the candidate, failed."""
    return Verdict(status=Status.INFRA_ERROR, operator_id=operator_id, operator_version=0,
                   candidate_hash=candidate_id(source), message=message)
