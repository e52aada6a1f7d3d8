"""``agent``: a tool-calling loop over the providers, with a public-case ``verify`` tool.

The model gets the problem and four tools (OpenAI ``tools``, Anthropic ``tool_use``):

* ``show_problem`` — the problem statement again (entry points, signatures, rules);
* ``write_kernel(source)`` — replaces ``kernel.py`` with the complete file;
* ``verify`` — judges ``kernel.py`` on the **public cases only**
  (:class:`~generators.verify.VerifyBroker`): verdict, mismatch summaries, log tail, findings,
  timings; at most ``max_verify_calls``;
* ``submit`` — ends the trajectory with ``kernel.py`` as its candidate.

Each turn is one model call, recorded before its reply is used (:class:`TrajectoryRun`); the
tool calls it asks for run in order and their results go back as tool messages. The trajectory's
``final`` candidate is the last kernel written, whatever ends it; the sweep scores it by the
normal path (hidden cases, every anti-cheat layer) — ``verify`` verdicts never count.

Ends (see docs/reports.md for how each is scored): ``CANDIDATE`` (submitted, or a reply without
tool calls once a kernel exists: the agent ended its turn); ``EXTRACTION_FAILED`` (no kernel was
written: a model that never calls a tool gets one reminder); ``TURNS_EXHAUSTED``;
``BUDGET_SPENT`` (tokens or cost); ``TIME_LIMIT`` (``time_limit_s`` of the agent's own time —
model calls and tools; waiting on ``verify`` does not count); ``AGENT_ERROR`` (``MAX_REFUSALS``
turns in a row whose every tool call was refused: unknown tools, arguments that do not fit,
verify calls past the limit); ``LLM_ERROR``; ``INFRA_ERROR`` (a check could not be run).

Options: ``turns`` (model calls, default 30), ``max_verify_calls`` (default 10),
``time_limit_s`` (default 1800), ``max_tokens`` (this trajectory's billed tokens; the smaller of
it and the sweep's ``trajectory_max_tokens`` applies), ``n`` (trajectories per problem),
``temperature``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import orjson

from generators.base import MethodError
from generators.llm import CallStatus, LLMCall, Message, Prompt, Role, ToolCall, ToolSpec
from generators.prompts import build_prompt
from generators.registry import register_method
from generators.trajectory import (
    EndReason,
    Step,
    ToolUse,
    Trajectory,
    TrajectoryContext,
    TrajectoryMethod,
    TrajectoryRun,
    check_count,
    check_temperature,
    llm_error_detail,
    replied,
)
from generators.verify import VerifyBroker
from operators.spec import OperatorSpec
from protos.records import Status

MAX_REFUSALS = 3           # turns in a row whose every tool call was refused: AGENT_ERROR
MAX_KERNEL_CHARS = 200_000
TEMPLATE = "agent/v1"

_NO_ARGS = {"type": "object", "properties": {}, "additionalProperties": False}
TOOLS = (
    ToolSpec("show_problem", "Show the problem statement again: entry points with their exact "
             "signatures, inputs, tolerances and rules.", _NO_ARGS),
    ToolSpec("write_kernel", "Write kernel.py: the complete Python file (imports, every "
             "@triton.jit kernel, every entry point). Replaces the previous kernel.py.",
             {"type": "object", "properties": {"source": {
                 "type": "string", "description": "the complete file"}},
              "required": ["source"], "additionalProperties": False}),
    ToolSpec("verify", "Run kernel.py on the public correctness cases and time it: the verdict, "
             "mismatches, the end of the compile log, timings. Limited number of calls.", _NO_ARGS),
    ToolSpec("submit", "Submit kernel.py as your final answer and stop.", _NO_ARGS),
)
TOOL_NAMES = tuple(t.name for t in TOOLS)

AGENT_RULES = (
    "You work as an agent with tools. The rules above about replying with a code block do not "
    "apply: deliver the complete file with write_kernel (each call replaces kernel.py), check it "
    "with verify (public cases only; at most {verifies} calls), and call submit when it is done. "
    "Whatever ends your work — submit, or running out of turns, tokens or time — the last "
    "kernel.py you wrote is scored on the public cases and on hidden ones.")
NUDGE = ("You have not written a kernel yet. Use the tools: write_kernel with the complete file, "
         "then verify, then submit. Text replies without tool calls are not read as kernels.")


def agent_prompt(base: Prompt, max_verify_calls: int) -> Prompt:
    """The problem's own prompt, with the agent's rules in its system message and the tools."""
    rules = AGENT_RULES.format(verifies=max_verify_calls)
    messages = [Message(m.role, f"{m.content}\n\n{rules}") if m.role is Role.SYSTEM else m
                for m in base.messages]
    if not any(m.role is Role.SYSTEM for m in base.messages):
        messages.insert(0, Message(Role.SYSTEM, rules))
    return Prompt(tuple(messages), f"{base.template}+{TEMPLATE}", base.operator_id, TOOLS)


def tool_arguments(call: ToolCall) -> dict[str, object] | str:
    """The call's arguments as an object fitting its tool, or why they do not fit."""
    if call.name not in TOOL_NAMES:
        return f"unknown tool {call.name!r}; the tools are {', '.join(TOOL_NAMES)}"
    try:
        args = orjson.loads(call.arguments) if call.arguments.strip() else {}
    except orjson.JSONDecodeError as exc:
        return f"{call.name}: arguments are not valid JSON ({exc}); send a JSON object"
    if not isinstance(args, dict):
        return f"{call.name}: arguments must be a JSON object, got {type(args).__name__}"
    if call.name == "write_kernel":
        source = args.get("source")
        if not isinstance(source, str) or not source.strip():
            return "write_kernel: needs `source`, the complete file as a non-empty string"
        if len(source) > MAX_KERNEL_CHARS:
            return f"write_kernel: source has {len(source)} characters; the limit is {MAX_KERNEL_CHARS}"
        if set(args) != {"source"}:
            return f"write_kernel: unexpected arguments {sorted(set(args) - {'source'})}"
    elif args:
        return f"{call.name}: takes no arguments, got {sorted(args)}"
    return args


class _Clock:
    """The agent's own working time: paused while a check waits for the fleet."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self._start = time.monotonic()
        self._paused = 0.0

    def used(self) -> float:
        return time.monotonic() - self._start - self._paused

    def left(self) -> float:
        return self.limit_s - self.used()

    @contextmanager
    def paused(self) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self._paused += time.monotonic() - t0


@dataclass
class _Work:
    """One trajectory's workspace: kernel.py, the problem text, the broker, the counters."""

    problem: str
    broker: VerifyBroker
    clock: _Clock
    kernel: str | None = None
    idle: int = 0          # replies in a row without a tool call
    refusals: int = 0      # turns in a row whose every tool call was refused
    submitted: bool = False
    infra: str = ""        # a check that could not run


async def _use(work: _Work, call: ToolCall) -> ToolUse:
    """Run one tool call."""
    args = tool_arguments(call)
    if isinstance(args, str):
        return ToolUse(call, args, refused=True)
    if call.name == "show_problem":
        return ToolUse(call, work.problem)
    if call.name == "write_kernel":
        source = str(args["source"])
        work.kernel = source
        return ToolUse(call, f"kernel.py written ({source.count(chr(10)) + 1} lines, "
                             f"{len(source)} characters).")
    if work.kernel is None:
        return ToolUse(call, f"{call.name}: no kernel.py yet; write one with write_kernel first.",
                       refused=True)
    if call.name == "submit":
        work.submitted = True
        return ToolUse(call, "Submitted.")
    with work.clock.paused():
        check = await work.broker.verify(work.kernel)
    if check.verdict is not None and check.verdict.status is Status.INFRA_ERROR:
        work.infra = check.verdict.message
    return ToolUse(call, check.text, refused=check.verdict is None, verdict=check.verdict)


@register_method("agent")
class AgentMethod(TrajectoryMethod):
    needs_verifier = True

    def __init__(self, turns: int = 30, max_verify_calls: int = 10, time_limit_s: float = 1800.0,
                 max_tokens: int | None = None, n: int = 1,
                 temperature: float | None = None) -> None:
        check_count("agent", "turns", turns)
        check_count("agent", "n", n)
        check_temperature("agent", temperature)
        if isinstance(max_verify_calls, bool) or not isinstance(max_verify_calls, int) \
                or max_verify_calls < 0:
            raise MethodError(f"agent: max_verify_calls must be an int >= 0, got {max_verify_calls!r}")
        if isinstance(time_limit_s, bool) or not isinstance(time_limit_s, int | float) \
                or not math.isfinite(time_limit_s) or time_limit_s <= 0:
            raise MethodError(f"agent: time_limit_s must be a number > 0, got {time_limit_s!r}")
        if max_tokens is not None:
            check_count("agent", "max_tokens", max_tokens)
        self.turns, self.max_verify_calls, self.n = turns, max_verify_calls, n
        self.time_limit_s = float(time_limit_s)
        self.max_tokens = max_tokens
        self.temperature = temperature

    def __repr__(self) -> str:
        return (f"AgentMethod(turns={self.turns}, max_verify_calls={self.max_verify_calls}, "
                f"time_limit_s={self.time_limit_s}, max_tokens={self.max_tokens}, n={self.n})")

    def samples(self, spec: OperatorSpec) -> int:
        return self.n

    def _context(self, ctx: TrajectoryContext) -> TrajectoryContext:
        """The context with this method's token budget (the smaller one applies)."""
        if self.max_tokens is None:
            return ctx
        limit = ctx.trajectory_max_tokens
        return dataclasses.replace(ctx, trajectory_max_tokens=self.max_tokens if limit is None
                                   else min(limit, self.max_tokens))

    async def run(self, spec: OperatorSpec, sample: int, ctx: TrajectoryContext) -> Trajectory:
        verifier = ctx.verifier
        if verifier is None:
            raise MethodError("agent needs a public-case verifier in its TrajectoryContext")
        ctx = self._context(ctx)
        temperature = self.temperature if self.temperature is not None else ctx.temperature
        run = TrajectoryRun(self, spec, sample, ctx, temperature)
        base = build_prompt(spec, ctx.platform, template_version=ctx.template_version)
        prompt = agent_prompt(base, self.max_verify_calls)
        problem = "\n\n".join(m.content for m in base.messages if m.role is Role.USER)
        work = _Work(problem, VerifyBroker(verifier, spec.id, self.max_verify_calls),
                     _Clock(self.time_limit_s))
        while True:
            if run.turn > self.turns:
                return run.finish(EndReason.TURNS_EXHAUSTED, f"{self.turns} turns used", work.kernel)
            if work.clock.left() <= 0:
                return run.finish(EndReason.TIME_LIMIT, f"{self.time_limit_s:g} s of working "
                                  "time used", work.kernel)
            call = await run.ask(prompt, work.clock.left())
            ended = await self._turn(run, work, call)
            if ended is not None:
                return run.finish(ended[0], ended[1], work.kernel)
            prompt = _continued(prompt, call, run.steps[-1])

    async def _turn(self, run: TrajectoryRun, work: _Work,
                    call: LLMCall) -> tuple[EndReason, str] | None:
        """Act on one reply; how the trajectory ends, or None to go on."""
        if not replied(call):
            run.add(Step(run.turn, call))
            if call.status is CallStatus.BUDGET:
                return EndReason.BUDGET_SPENT, call.error
            if work.clock.left() <= 0:
                return EndReason.TIME_LIMIT, f"a model call ran past the time limit: {call.error}"
            return EndReason.LLM_ERROR, llm_error_detail(call)
        if not call.tool_calls:
            return self._idle(run, work, call)
        before = work.kernel
        uses: list[ToolUse] = []
        for tool_call in call.tool_calls:
            uses.append(await _use(work, tool_call))
            if work.submitted or work.infra:
                break
        written = work.kernel if work.kernel is not before else None
        run.add(Step(run.turn, call, candidate=written, tools=tuple(uses)))
        work.idle = 0
        work.refusals = work.refusals + 1 if all(u.refused for u in uses) else 0
        if work.infra:
            return EndReason.INFRA_ERROR, work.infra
        if work.submitted:
            return EndReason.CANDIDATE, "submitted"
        if work.refusals >= MAX_REFUSALS:
            return EndReason.AGENT_ERROR, (f"{MAX_REFUSALS} turns in a row with every tool call "
                                           f"refused; last: {uses[-1].result[:300]}")
        return None

    @staticmethod
    def _idle(run: TrajectoryRun, work: _Work, call: LLMCall) -> tuple[EndReason, str] | None:
        """A reply without tool calls: the agent ended its turn (its kernel is the candidate),
        or, with no kernel yet, gets one reminder."""
        work.idle += 1
        if work.kernel is not None:
            run.add(Step(run.turn, call))
            return EndReason.CANDIDATE, "the model ended its turn without calling submit"
        if work.idle >= 2:
            run.add(Step(run.turn, call))
            return EndReason.EXTRACTION_FAILED, (f"no kernel written: {work.idle} replies in a row "
                                                 "without a tool call")
        run.add(Step(run.turn, call, feedback=Message(Role.USER, NUDGE)))
        return None


def _continued(prompt: Prompt, call: LLMCall, step: Step) -> Prompt:
    """``prompt`` followed by the model's reply, its tool results and any reminder."""
    messages = [*prompt.messages, Message(Role.ASSISTANT, call.text, call.tool_calls)]
    messages += [Message(Role.TOOL, u.result, tool_call_id=u.call.id) for u in step.tools]
    answered = {u.call.id for u in step.tools}
    messages += [Message(Role.TOOL, "not run: an earlier call in this turn ended it",
                         tool_call_id=c.id) for c in call.tool_calls if c.id not in answered]
    if step.feedback is not None:
        messages.append(step.feedback)
    return Prompt(tuple(messages), prompt.template, prompt.operator_id, prompt.tools)
