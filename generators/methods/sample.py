"""``sample``: n independent samples at one temperature (for pass@k).

Each trajectory is one model call on the problem's prompt, then code extraction; the extracted
file is the trajectory's candidate. With an evaluator in the context the candidate is judged
too (``SOLVED`` when it passed, else ``TURNS_EXHAUSTED``: its single turn is used); without one
the trajectory ends ``CANDIDATE`` and the sweep judges the candidate. A reply without a usable
candidate ends ``EXTRACTION_FAILED``; a failed call ``LLM_ERROR``; a spent budget ``BUDGET_SPENT``
(the call is recorded but not sent).

Options: ``n`` (trajectories per problem, default 1) and ``temperature`` (overrides the
context's; None keeps it).
"""

from __future__ import annotations

from generators.llm import CallStatus
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
    llm_error_detail,
    replied,
)
from operators.spec import OperatorSpec
from protos.records import Status


@register_method("sample")
class SampleMethod(TrajectoryMethod):
    def __init__(self, n: int = 1, temperature: float | None = None) -> None:
        check_count("sample", "n", n)
        check_temperature("sample", temperature)
        self.n = n
        self.temperature = temperature

    def __repr__(self) -> str:
        return f"SampleMethod(n={self.n}, temperature={self.temperature})"

    def samples(self, spec: OperatorSpec) -> int:
        return self.n

    async def run(self, spec: OperatorSpec, sample: int, ctx: TrajectoryContext) -> Trajectory:
        temperature = self.temperature if self.temperature is not None else ctx.temperature
        run = TrajectoryRun(self, spec, sample, ctx, temperature)
        prompt = build_prompt(spec, ctx.platform, template_version=ctx.template_version)
        call = await run.ask(prompt)
        if call.status is CallStatus.BUDGET:
            run.add(Step(run.turn, call))
            return run.finish(EndReason.BUDGET_SPENT, call.error)
        if not replied(call):
            run.add(Step(run.turn, call))
            return run.finish(EndReason.LLM_ERROR, llm_error_detail(call))
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
