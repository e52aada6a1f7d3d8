"""``refine``: multi-turn repair and speed-up with execution feedback.

Turn 1 sends the problem's prompt. After each reply the candidate is extracted and evaluated
with the context's :class:`~generators.evaluation.Evaluator` (required), and the conversation
grows by the model's reply and :func:`~generators.feedback.feedback_message` of the verdict
(compile error and log tail, mismatch summaries of public cases, anti-cheat evidence, speedup and
% of speed-of-light). A reply with no usable candidate is fed back too
(:func:`~generators.feedback.extraction_feedback`: no code block, cut off, split). It stops:

* ``SOLVED`` — a candidate PASSED and there is no speed target, or the platform's timings are
  not meaningful (``cpu``: there is no speed to improve on);
* ``TARGET_REACHED`` — a candidate PASSED with speedup >= ``target_speedup``;
* ``TURNS_EXHAUSTED`` — ``turns`` calls made without either (a passing candidate below the target
  may exist: see :attr:`~generators.trajectory.Trajectory.best`);
* ``BUDGET_SPENT`` — a budget was spent before the next call (recorded, not sent);
* ``LLM_ERROR`` — a call failed (after the provider's retries);
* ``INFRA_ERROR`` — the evaluator could not judge a candidate (not fed back to the model).

Options: ``turns`` (calls per trajectory, default 4), ``target_speedup`` (None: stop at the first
PASSED), ``n`` (independent trajectories per problem, default 1), ``temperature`` (overrides the
context's).
"""

from __future__ import annotations

import math

from generators.base import MethodError
from generators.feedback import extraction_feedback, feedback_message
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


@register_method("refine")
class RefineMethod(TrajectoryMethod):
    needs_evaluator = True

    def __init__(self, turns: int = 4, target_speedup: float | None = None, n: int = 1,
                 temperature: float | None = None) -> None:
        check_count("refine", "turns", turns)
        check_count("refine", "n", n)
        check_temperature("refine", temperature)
        if target_speedup is not None and (isinstance(target_speedup, bool)
                                           or not isinstance(target_speedup, int | float)
                                           or not math.isfinite(target_speedup) or target_speedup <= 0):
            raise MethodError(f"refine: target_speedup must be a number > 0 or None, "
                              f"got {target_speedup!r}")
        self.turns = turns
        self.target_speedup = None if target_speedup is None else float(target_speedup)
        self.n = n
        self.temperature = temperature

    def __repr__(self) -> str:
        return (f"RefineMethod(turns={self.turns}, target_speedup={self.target_speedup}, "
                f"n={self.n}, temperature={self.temperature})")

    def samples(self, spec: OperatorSpec) -> int:
        return self.n

    async def run(self, spec: OperatorSpec, sample: int, ctx: TrajectoryContext) -> Trajectory:
        evaluator = ctx.evaluator
        if evaluator is None:
            raise MethodError("refine needs an evaluator in its TrajectoryContext")
        temperature = self.temperature if self.temperature is not None else ctx.temperature
        run = TrajectoryRun(self, spec, sample, ctx, temperature)
        prompt = build_prompt(spec, ctx.platform, template_version=ctx.template_version)
        while True:
            last_turn = run.turn >= self.turns
            call = await run.ask(prompt)
            ended = finish_unanswered(run, call)
            if ended is not None:
                return ended
            extraction = run.extract(call)
            source = extraction.candidate
            if source is None:
                feedback = None if last_turn else extraction_feedback(extraction)
                run.add(Step(run.turn, call, extraction, feedback=feedback))
            else:
                verdict = await evaluator.evaluate(spec.id, source)
                if verdict.status is Status.INFRA_ERROR:
                    run.add(Step(run.turn, call, extraction, source, verdict))
                    return run.finish(EndReason.INFRA_ERROR, verdict.message)
                if verdict.status is Status.PASSED:
                    speedup = verdict.speedup
                    if self.target_speedup is None or speedup is None:
                        run.add(Step(run.turn, call, extraction, source, verdict))
                        return run.finish(EndReason.SOLVED)
                    if speedup >= self.target_speedup:
                        run.add(Step(run.turn, call, extraction, source, verdict))
                        return run.finish(EndReason.TARGET_REACHED,
                                          f"speedup {speedup:.3g}x >= {self.target_speedup:.3g}x")
                feedback = None if last_turn else feedback_message(verdict)
                run.add(Step(run.turn, call, extraction, source, verdict, feedback))
            if feedback is None:
                return run.finish(EndReason.TURNS_EXHAUSTED, f"{self.turns} turns used")
            prompt = continue_conversation(prompt, call.text, feedback)
