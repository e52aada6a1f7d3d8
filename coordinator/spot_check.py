"""Spot-checks: a sample of PASSED verdicts judged again by a second agent, and the rule that
decides the candidate's verdict when the two disagree.

The echo check (:mod:`protos.integrity`) stops an agent that answers for another request; it
cannot stop one that echoes the request and says ``PASSED`` regardless. With ``[fleet]
spot_check = f`` in the sweep spec, the fleet sends a fraction ``f`` of PASSED verdicts, under a
fresh request id, to another agent of the same platform and device model (never the first one)
and hands both verdicts to :func:`judge`.

The rule (docs/fleet.md, "Spot-checks"): a PASSED stands only if the second agent also says
PASSED. When it says anything else (a candidate status, not ``INFRA_ERROR``), the candidate's
verdict is the second agent's, and a :class:`Dispute` naming both agents and both statuses is
recorded and alarmed. Why the non-PASSED one: ``PASSED`` claims that every case is right, and one
concrete failure on the same device model refutes it (the second agent draws its own hidden
cases, so it may legitimately find a failure the first did not test); and the harms are unequal
— a false PASSED inflates a published score unseen, while a false failure lowers one and stays
visible as a dispute in the store and the report. When no second agent can give a verdict the
check is inconclusive and the first verdict stands.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, replace

from protos.records import Status, Verdict


class SpotOutcome(str, enum.Enum):
    CONFIRMED = "confirmed"        # the second agent also said PASSED
    DISAGREED = "disagreed"        # it said something else: its verdict is kept, a dispute recorded
    INCONCLUSIVE = "inconclusive"  # no second verdict (no other agent, or INFRA_ERROR)


@dataclass(frozen=True)
class Dispute:
    """A PASSED that a second agent of the same device model did not confirm."""

    operator_id: str
    operator_version: int
    candidate_hash: str
    device_model: str
    passed_by: str         # the first agent's address
    refuted_by: str        # the second agent's address
    second_status: Status  # what the second agent said (the candidate's verdict now)


def sampled(fraction: float, rng: random.Random) -> bool:
    """Whether to spot-check this PASSED (never draws from ``rng`` when the fraction is 0, so
    a fleet without spot-checks routes exactly as before)."""
    return fraction > 0 and rng.random() < fraction


def judge(first: Verdict, first_agent: str, second: Verdict,
          second_agent: str | None) -> tuple[Verdict, SpotOutcome, Dispute | None]:
    """The candidate's verdict, the outcome, and the dispute to record (see the module doc)."""
    if second_agent is None or second.status is Status.INFRA_ERROR:
        return first, SpotOutcome.INCONCLUSIVE, None
    if second.status is Status.PASSED:
        return first, SpotOutcome.CONFIRMED, None
    dispute = Dispute(first.operator_id, first.operator_version, first.candidate_hash,
                      first.device_model, first_agent, second_agent, second.status)
    note = (f"disputed: agent {first_agent} said PASSED, agent {second_agent} said "
            f"{second.status.value} (spot-check)")
    kept = replace(second, message=f"{note}; {second.message}" if second.message else note)
    return kept, SpotOutcome.DISAGREED, dispute
