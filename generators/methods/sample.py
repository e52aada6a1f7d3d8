"""``sample``: n independent samples at one temperature (for pass@k), or sequential rounds.

Each trajectory is one model call on the problem's prompt, then code extraction; the extracted
file is the trajectory's candidate. With an evaluator in the context the candidate is judged
too (``SOLVED`` when it passed, else ``TURNS_EXHAUSTED``: its single turn is used); without one
the trajectory ends ``CANDIDATE`` and the sweep judges the candidate. A reply without a usable
candidate ends ``EXTRACTION_FAILED``; a failed call ``LLM_ERROR``; a spent budget ``BUDGET_SPENT``
(the call is recorded but not sent).

**Sequential rounds** (the paper's sequential Pass@K; ``rounds`` > 1): round 1 is sent at
temperature 0, each later round at ``round_temperature``. Every round's candidate is judged by
the context's evaluator (required: the sweep gives one because :attr:`needs_evaluator` is then
true), and the trajectory stops at the first round whose candidate PASSED (``SOLVED``): only a
problem still failing is sampled again. Without ``feedback`` each round is the problem's prompt
afresh; with it, a round after the first is the problem's prompt, the previous round's reply and
the feedback on it (:func:`~generators.feedback.feedback_message` of its verdict, or
:func:`~generators.feedback.extraction_feedback` when it held no candidate) — the last verdict
only, never the whole history (that is ``refine``). After ``rounds`` rounds without a pass it
ends ``TURNS_EXHAUSTED``; a failed call ends ``LLM_ERROR``, a spent budget ``BUDGET_SPENT``, an
evaluator that could not judge ``INFRA_ERROR``. Round k is the trajectory's turn k.

Options: ``n`` (trajectories per problem, default 1), ``temperature`` (overrides the context's;
None keeps it), ``rounds`` (default 1: one call, as above), ``round_temperature`` (rounds 2 on;
None: ``temperature``, else the context's) and ``feedback`` (default false).
"""

from __future__ import annotations

from generators.base import MethodError
from generators.evaluation import Evaluator
from generators.feedback import extraction_feedback, feedback_message
from generators.llm import LLMCall
from generators.prompts import build_prompt
from generators.registry import register_method
from generators.trajectory import (
    EndReason,
    Step,
    Trajectory,
    TrajectoryContext,
    TrajectoryMethod,
    TrajectoryRun,
    check_count,
    check_temperature,
    continue_conversation,
    finish_unanswered,
)
from operators.spec import OperatorSpec
from protos.records import Status

#: The temperature of round 1 when there are several rounds (the paper's greedy first round).
FIRST_ROUND_TEMPERATURE = 0.0


@register_method("sample")
class SampleMethod(TrajectoryMethod):
    def __init__(self, n: int = 1, temperature: float | None = None, rounds: int = 1,
                 round_temperature: float | None = None, feedback: bool = False) -> None:
        check_count("sample", "n", n)
        check_temperature("sample", temperature)
        check_count("sample", "rounds", rounds)
        check_temperature("sample", round_temperature, "round_temperature")
        if not isinstance(feedback, bool):
            raise MethodError(f"sample: feedback must be true or false, got {feedback!r}")
        if rounds == 1 and round_temperature is not None:
            raise MethodError("sample: round_temperature has no effect with a single round (it is "
                              "the temperature of round 2 on)")
        if rounds > 1 and n > 1:
            raise MethodError(f"sample: n = {n} with more than one round sends round 1, a "
                              f"temperature-0 request, {n} times for the same answer (and pays "
                              f"{n} times); sequential Pass@K is one chain per problem: keep n = 1, "
                              "or sample n at a temperature in a single round")
        if rounds == 1 and feedback:
            raise MethodError("sample: feedback has no effect with a single round (it goes to "
                              "round 2 on)")
        self.n = n
        self.temperature = temperature
        self.rounds = rounds
        self.round_temperature = round_temperature
        self.feedback = feedback
        self.needs_evaluator = rounds > 1

    def __repr__(self) -> str:
        rounds = (f", rounds={self.rounds}, round_temperature={self.round_temperature}, "
                  f"feedback={self.feedback}" if self.rounds > 1 else "")
        return f"SampleMethod(n={self.n}, temperature={self.temperature}{rounds})"

    def samples(self, spec: OperatorSpec) -> int:
        return self.n

    async def run(self, spec: OperatorSpec, sample: int, ctx: TrajectoryContext) -> Trajectory:
        if self.rounds > 1:
            return await self._rounds(spec, sample, ctx)
        temperature = self.temperature if self.temperature is not None else ctx.temperature
        run = TrajectoryRun(self, spec, sample, ctx, temperature)
        prompt = build_prompt(spec, ctx.platform, template_version=ctx.template_version)
        call = await run.ask(prompt)
        ended = finish_unanswered(run, call)
        if ended is not None:
            return ended
        extraction = run.extract(call)
        source = extraction.candidate
        if source is None:
            run.add(Step(run.turn, call, extraction))
            return run.finish(EndReason.EXTRACTION_FAILED,
                              f"{extraction.status.value}: {extraction.note}".rstrip(": "))
        if ctx.evaluator is None:
            run.add(Step(run.turn, call, extraction, source))
            return run.finish(EndReason.CANDIDATE)
        verdict = await ctx.evaluator.evaluate(spec.id, source)
        run.add(Step(run.turn, call, extraction, source, verdict))
        if verdict.status is Status.PASSED:
            return run.finish(EndReason.SOLVED)
        if verdict.status is Status.INFRA_ERROR:
            return run.finish(EndReason.INFRA_ERROR, verdict.message)
        return run.finish(EndReason.TURNS_EXHAUSTED, verdict.status.value)

    def later_temperature(self, ctx: TrajectoryContext) -> float | None:
        """The temperature of rounds 2 on: ``round_temperature``, else ``temperature``, else the
        context's (None: the endpoint's default)."""
        for t in (self.round_temperature, self.temperature):
            if t is not None:
                return t
        return ctx.temperature

    async def _rounds(self, spec: OperatorSpec, sample: int, ctx: TrajectoryContext) -> Trajectory:
        """Sequential rounds: round 1 at temperature 0, the rest at :meth:`later_temperature`,
        until a candidate passes."""
        evaluator = ctx.evaluator
        if evaluator is None:
            raise MethodError("sample with rounds > 1 needs an evaluator in its TrajectoryContext "
                              "(each round is judged before the next; a sweep gives it one)")
        run = TrajectoryRun(self, spec, sample, ctx, FIRST_ROUND_TEMPERATURE)
        base = prompt = build_prompt(spec, ctx.platform, template_version=ctx.template_version)
        for number in range(1, self.rounds + 1):
            run.temperature = FIRST_ROUND_TEMPERATURE if number == 1 else self.later_temperature(ctx)
            call = await run.ask(prompt)
            ended = finish_unanswered(run, call)
            if ended is not None:
                return ended
            step = await self._judged(run, spec.id, call, evaluator, last=number == self.rounds)
            run.add(step)
            status = step.verdict.status if step.verdict is not None else None
            if status is Status.PASSED:
                return run.finish(EndReason.SOLVED)
            if status is Status.INFRA_ERROR:
                assert step.verdict is not None
                return run.finish(EndReason.INFRA_ERROR, step.verdict.message)
            prompt = base if step.feedback is None else continue_conversation(base, call.text,
                                                                              step.feedback)
        return run.finish(EndReason.TURNS_EXHAUSTED, f"{self.rounds} rounds used")

    async def _judged(self, run: TrajectoryRun, operator_id: str, call: LLMCall,
                      evaluator: Evaluator, *, last: bool) -> Step:
        """One round's step: its candidate judged, and the feedback for the next round when
        ``feedback`` is on, a next round follows and the verdict is one to improve on."""
        extraction = run.extract(call)
        source = extraction.candidate
        give = self.feedback and not last
        if source is None:
            return Step(run.turn, call, extraction,
                        feedback=extraction_feedback(extraction) if give else None)
        verdict = await evaluator.evaluate(operator_id, source)
        if verdict.status in (Status.PASSED, Status.INFRA_ERROR):
            give = False
        return Step(run.turn, call, extraction, source, verdict,
                    feedback_message(verdict) if give else None)
