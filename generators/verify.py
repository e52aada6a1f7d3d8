"""The verify broker: public-case checks for one agent trajectory, bounded and kept.

Both agent methods share it — ``agent`` calls it from its ``verify`` tool; ``agent-cli``'s
``verify`` command reaches it through the coordinator — so the rules are written once:

* it judges only its trajectory's problem, through a **verifier**, an
  :class:`~generators.evaluation.Evaluator` that runs the public cases only (the coordinator's
  public-only evaluation mode: its verdicts are kept under that mode and never taken for a
  score; hidden cases stay unseen however often an agent asks);
* at most ``max_calls`` checks; one more is refused without reaching the fleet;
* every check is kept (:attr:`VerifyBroker.checks`): the kernels it saw and their verdicts;
* its answer is text for a model: the verdict, the public cases' mismatch summaries, the end of
  the compile or runtime log, the findings and the timings — the feedback ``refine`` sends
  (:func:`generators.feedback.verdict_message`) with a closing line for an agent.

An ``INFRA_ERROR`` verdict is the system's failure: it is returned (and kept) like any other, and
the caller ends its trajectory ``INFRA_ERROR`` (resumable, never the model's fault).
"""

from __future__ import annotations

from dataclasses import dataclass

from generators.evaluation import Evaluator
from generators.feedback import verdict_message
from protos.records import Status, Verdict

FIX = ("Fix the kernel (write it again in full) and verify again, or submit. Only the public "
       "cases were run; the final score also runs hidden cases.")
FASTER = ("It passes the public cases. The final score also runs hidden cases (other shapes and "
          "values): keep it general. Make it faster and verify again, or submit it.")


@dataclass(frozen=True)
class Check:
    """One verify request: the kernel, and its public-case verdict (None: refused)."""

    source: str
    verdict: Verdict | None
    text: str


class VerifyBroker:
    """Public-case checks of ``operator_id`` through ``verifier``, at most ``max_calls``."""

    def __init__(self, verifier: Evaluator, operator_id: str, max_calls: int) -> None:
        if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 0:
            raise ValueError(f"max_calls must be an int >= 0, got {max_calls!r}")
        self.verifier = verifier
        self.operator_id = operator_id
        self.max_calls = max_calls
        self.checks: list[Check] = []

    @property
    def used(self) -> int:
        """Checks that reached the verifier."""
        return sum(1 for c in self.checks if c.verdict is not None)

    @property
    def left(self) -> int:
        return self.max_calls - self.used

    async def verify(self, source: str) -> Check:
        if self.left <= 0:
            check = Check(source, None, f"No verify calls left: all {self.max_calls} are used. "
                          "Submit the kernel you have, or improve it without verifying.")
        else:
            verdict = await self.verifier.evaluate(self.operator_id, source)
            check = Check(source, verdict, verify_text(verdict, self.left - 1))
        self.checks.append(check)
        return check


def verify_text(verdict: Verdict, left: int) -> str:
    """What the model reads after a check (``left``: verify calls remaining after it)."""
    if verdict.status is Status.INFRA_ERROR:
        return f"The check could not run (the system failed, not your kernel): {verdict.message}"
    body = verdict_message(verdict, FIX, FASTER).content
    return f"Public cases only. {body}\n({left} verify call{'s' if left != 1 else ''} left.)"
