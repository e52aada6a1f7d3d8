"""LLM trajectories: the async method API that ``sample`` and ``refine`` implement.

A *trajectory* is one sample of one method on one problem: a sequence of model calls, each
followed by code extraction and (for methods with an :class:`~generators.evaluation.Evaluator`)
a verdict. :class:`TrajectoryMethod` is the plug-in interface::

    method = generators.create_trajectory("refine", turns=4)
    for sample in range(method.samples(spec)):
        traj = await method.run(spec, sample, ctx)

:class:`TrajectoryContext` carries what the sweep decides and the method does not: the provider
and model, sampling settings, the platform the prompt targets, the evaluator, the budgets and
``record``. :class:`Trajectory` is the frozen result: every step, why it ended, usage and cost.

Persist before use: every :class:`~generators.llm.LLMCall` — sent or not (``BUDGET``) — is passed
to ``ctx.record`` (and awaited when it returns an awaitable) **before** its text is extracted,
evaluated or sent back to the model; a crash or resume then never pays for tokens twice. The
call handed to ``record`` carries ``extra`` keys ``method``, ``sample`` and ``turn`` so a store
can file it. If ``record`` raises, the trajectory raises: text that could not be stored is not
used.

End reasons (closed set, bare names in JSON) — see :class:`EndReason`. Two are additions to the
list in issue #5: ``CANDIDATE`` (``sample`` without an evaluator: a candidate was produced and the
sweep judges it) and ``INFRA_ERROR`` (the evaluator could not judge a candidate: the system's
failure, never counted against the model). Issue #26 added ``AGENT_ERROR`` and ``TIME_LIMIT``
for agent methods.

Agent methods (``agent``): a step's tool calls are :class:`ToolUse` records; ``verify`` verdicts
(public cases only, from ``TrajectoryContext.verifier``) live there and never in
``Step.verdict``, so nothing takes them for a score. Such a trajectory names its
``Trajectory.final`` candidate, which the sweep judges by the normal path (hidden cases, every
anti-cheat layer) whatever the end reason.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar

from generators.base import Candidate, MethodError
from generators.budget import Budget
from generators.evaluation import Evaluator
from generators.extract import Extraction, extract_code
from generators.llm import CallStatus, LLMCall, Message, Prompt, Role, ToolCall, Usage
from generators.providers.base import Provider
from operators.spec import OperatorSpec
from protos.records import Status, Verdict

RecordFn = Callable[[LLMCall], Awaitable[None] | None]


class EndReason(str, enum.Enum):
    """Why a trajectory ended (closed set)."""

    SOLVED = "SOLVED"                  # a candidate PASSED (and no speed target applies)
    TARGET_REACHED = "TARGET_REACHED"  # a candidate PASSED with speedup >= the target
    TURNS_EXHAUSTED = "TURNS_EXHAUSTED"  # every turn used without reaching the goal
    BUDGET_SPENT = "BUDGET_SPENT"      # the trajectory's or sweep's budget was spent
    EXTRACTION_FAILED = "EXTRACTION_FAILED"  # sample: no candidate in the reply
    LLM_ERROR = "LLM_ERROR"            # the call failed (429/5xx after retries, timeout, malformed)
    CANDIDATE = "CANDIDATE"            # sample without evaluator: a candidate, judged by the sweep
    INFRA_ERROR = "INFRA_ERROR"        # the evaluator could not judge a candidate
    AGENT_ERROR = "AGENT_ERROR"        # an agent kept misusing its tools (unknown, bad arguments)
    TIME_LIMIT = "TIME_LIMIT"          # an agent's working time ran out


@dataclass(frozen=True)
class ToolUse:
    """One tool call of an agent's turn and what went back to the model. ``refused``: the call
    did nothing (unknown tool, arguments that do not fit, nothing to verify, no verify calls
    left); ``verdict``: what ``verify`` got — public cases only, never a score."""

    call: ToolCall
    result: str
    refused: bool = False
    verdict: Verdict | None = None


@dataclass(frozen=True)
class Step:
    """One turn: the call, what was extracted, the candidate, its verdict, the feedback sent on.

    ``extraction`` is None when the call produced no reply to extract from (not sent, or an
    error); ``candidate`` is the evaluated source, None when extraction failed; ``verdict`` is None
    when nothing was evaluated; ``feedback`` is the user message appended for the next turn.
    """

    turn: int                          # 1-based
    call: LLMCall
    extraction: Extraction | None = None
    candidate: str | None = None
    verdict: Verdict | None = None
    feedback: Message | None = None
    tools: tuple[ToolUse, ...] = ()    # agent methods: the turn's tool calls, in order


@dataclass(frozen=True)
class Trajectory:
    operator_id: str
    method: str
    sample: int
    model: str
    steps: tuple[Step, ...]
    end: EndReason
    detail: str = ""                   # for people: the budget reason, the LLM error ...
    final: str | None = None           # agent methods: the candidate the sweep scores
    artifacts: tuple[tuple[str, str], ...] = ()  # agent-cli: (name, text): transcript, version ...

    @property
    def verifications(self) -> tuple[ToolUse, ...]:
        """Every ``verify`` call that reached the verifier (refused ones left out)."""
        return tuple(t for s in self.steps for t in s.tools if t.verdict is not None)

    @property
    def calls(self) -> tuple[LLMCall, ...]:
        return tuple(s.call for s in self.steps)

    @property
    def usage(self) -> Usage:
        """Total billed usage of the trajectory's calls."""
        total = Usage()
        for c in self.calls:
            if c.usage is not None:
                total = total + c.usage
        return total

    @property
    def cost_usd(self) -> float:
        return sum(c.cost_usd for c in self.calls)

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        """Every extracted candidate, in turn order (label ``turn N``)."""
        return tuple(Candidate(self.operator_id, s.candidate, self.method, self.sample,
                               model=self.model, label=f"turn {s.turn}")
                     for s in self.steps if s.candidate is not None)

    @property
    def best(self) -> Candidate | None:
        """An agent's ``final`` candidate; else the passing candidate with the highest speedup
        (the latest among equals), else the last candidate, else None."""
        if self.final is not None:
            return Candidate(self.operator_id, self.final, self.method, self.sample,
                             model=self.model, label="final")
        best: tuple[float, int] | None = None
        chosen: Step | None = None
        for s in self.steps:
            if s.candidate is not None and s.verdict is not None and s.verdict.status is Status.PASSED:
                key = (s.verdict.speedup or 0.0, s.turn)
                if best is None or key >= best:
                    best, chosen = key, s
        if chosen is None:
            return self.candidates[-1] if self.candidates else None
        assert chosen.candidate is not None
        return Candidate(self.operator_id, chosen.candidate, self.method, self.sample,
                         model=self.model, label=f"turn {chosen.turn}")


@dataclass(frozen=True)
class TrajectoryContext:
    """What the sweep fixes for a method's trajectories.

    ``temperature``/``max_tokens`` are sent with every call (None: the endpoint's default; a
    method's own ``temperature`` option overrides ``temperature``). ``trajectory_max_tokens`` and
    ``trajectory_max_cost_usd`` make a fresh :class:`Budget` for each trajectory;
    ``sweep_budget`` is one budget shared by all of them. ``call_deadline_s`` bounds each call,
    retries included. ``template_version`` pins the prompt template (None: the latest).
    """

    provider: Provider
    model: str
    record: RecordFn
    platform: str = "cuda"
    temperature: float | None = None
    max_tokens: int | None = None
    evaluator: Evaluator | None = None
    trajectory_max_tokens: int | None = None
    trajectory_max_cost_usd: float | None = None
    sweep_budget: Budget | None = None
    call_deadline_s: float = 1800.0
    template_version: str | None = None
    verifier: Evaluator | None = None  # public cases only: the agent's ``verify`` tool


class TrajectoryMethod(abc.ABC):
    """A way of producing candidates with a model: ``samples(spec)`` trajectories per problem,
    each run by ``await run(spec, sample, ctx)``. Registered with
    :func:`generators.register_method` like the candidate methods (see :mod:`generators.registry`).
    """

    name: ClassVar[str]
    #: an instance may set it from its options (``sample`` with ``rounds`` > 1): the sweep reads
    #: it per configured method to decide whether the context gets the evaluator
    needs_evaluator: bool = False
    needs_verifier: ClassVar[bool] = False   # agent methods: a public-case verifier

    @abc.abstractmethod
    def samples(self, spec: OperatorSpec) -> int: ...

    @abc.abstractmethod
    async def run(self, spec: OperatorSpec, sample: int, ctx: TrajectoryContext) -> Trajectory: ...


class TrajectoryRun:
    """The bookkeeping one trajectory shares between methods: budgets, recording, steps.

    ``ask`` sends a prompt (or records a ``BUDGET`` call when a budget is spent), charges both
    budgets and records the call before returning it; ``extract`` applies the problem's entry
    points; ``finish`` builds the :class:`Trajectory`.
    """

    def __init__(self, method: TrajectoryMethod, spec: OperatorSpec, sample: int,
                 ctx: TrajectoryContext, temperature: float | None) -> None:
        self.method = method
        self.spec = spec
        self.sample = sample
        self.ctx = ctx
        self.temperature = temperature
        self.budget = Budget(ctx.trajectory_max_tokens, ctx.trajectory_max_cost_usd, scope="trajectory")
        self.steps: list[Step] = []
        self.entry_points = tuple(e.name for e in spec.entry_points)

    @property
    def turn(self) -> int:
        """The number the next step will have."""
        return len(self.steps) + 1

    def spent(self) -> str | None:
        reason = self.budget.check()
        if reason is None and self.ctx.sweep_budget is not None:
            reason = self.ctx.sweep_budget.check()
        return reason

    async def ask(self, prompt: Prompt, deadline_s: float | None = None) -> LLMCall:
        """One model call, recorded (persist before use) and charged; a ``BUDGET`` call when a
        budget is spent (not sent). ``deadline_s`` (at most the context's) bounds this call."""
        ctx = self.ctx
        reason = self.spent()
        if reason is not None:
            call = LLMCall(provider=ctx.provider.config.name, model=ctx.model, prompt=prompt,
                           status=CallStatus.BUDGET, error=reason, temperature=self.temperature,
                           max_tokens=ctx.max_tokens, attempts=0)
        else:
            call = await ctx.provider.complete(prompt, model=ctx.model, temperature=self.temperature,
                                               max_tokens=ctx.max_tokens,
                                               deadline_s=ctx.call_deadline_s if deadline_s is None
                                               else min(deadline_s, ctx.call_deadline_s))
            self.budget.charge(call)
            if ctx.sweep_budget is not None:
                ctx.sweep_budget.charge(call)
        call = dataclasses.replace(call, extra={**call.extra, "method": self.method.name,
                                                "sample": str(self.sample), "turn": str(self.turn)})
        done = ctx.record(call)
        if inspect.isawaitable(done):
            await done
        return call

    def extract(self, call: LLMCall) -> Extraction:
        return extract_code(call.text, self.entry_points,
                            truncated=call.status is CallStatus.TRUNCATED)

    def add(self, step: Step) -> None:
        self.steps.append(step)

    def finish(self, end: EndReason, detail: str = "", final: str | None = None) -> Trajectory:
        return Trajectory(operator_id=self.spec.id, method=self.method.name, sample=self.sample,
                          model=self.ctx.model, steps=tuple(self.steps), end=end, detail=detail,
                          final=final)


def replied(call: LLMCall) -> bool:
    """Whether the call brought a reply to extract from (complete or cut off)."""
    return call.status in (CallStatus.OK, CallStatus.TRUNCATED)


def llm_error_detail(call: LLMCall) -> str:
    return f"{call.status.value}: {call.error}" if call.error else call.status.value


def finish_unanswered(run: TrajectoryRun, call: LLMCall) -> Trajectory | None:
    """The end of a trajectory whose call brought no reply (a spent budget: BUDGET_SPENT; a
    failed call: LLM_ERROR), the call recorded as its last step; None when it was answered."""
    if call.status is CallStatus.BUDGET:
        run.add(Step(run.turn, call))
        return run.finish(EndReason.BUDGET_SPENT, call.error)
    if not replied(call):
        run.add(Step(run.turn, call))
        return run.finish(EndReason.LLM_ERROR, llm_error_detail(call))
    return None


def continue_conversation(prompt: Prompt, reply: str, feedback: Message) -> Prompt:
    """``prompt`` followed by the model's reply and the feedback on it."""
    return Prompt(messages=(*prompt.messages, Message(Role.ASSISTANT, reply), feedback),
                  template=prompt.template, operator_id=prompt.operator_id)


def check_temperature(name: str, temperature: float | None, what: str = "temperature") -> None:
    if temperature is not None and (isinstance(temperature, bool)
                                    or not isinstance(temperature, int | float) or temperature < 0):
        raise MethodError(f"{name}: {what} must be a number >= 0, got {temperature!r}")


def check_count(name: str, what: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MethodError(f"{name}: {what} must be an int >= 1, got {value!r}")
