"""``agent-cli``: an external coding-agent CLI (Claude Code, Codex, OpenCode ...) in a throw-away
workspace, its model metered, its ``verify`` command answered on public cases only.

Per trajectory: a workspace (:mod:`generators.agent_cli.workspace`: ``PROMPT.md``,
``kernel.py``, ``bin/verify``, a private uid where the coordinator is root), a gateway on
loopback (:mod:`generators.agent_cli.proxy`) that meters the CLI's model calls into the run's
books and answers ``verify`` through a :class:`~generators.verify.VerifyBroker`, and the CLI's
process under its working-time limit (:mod:`generators.agent_cli.process`). When the process
ends (or is killed), ``kernel.py`` is the trajectory's ``final`` candidate, scored by the normal
path; every kernel ``verify`` saw, the CLI's transcript and version are its artifacts.

Options: ``command`` (list; ``{prompt}``, ``{model}``, ``{workspace}`` expand; ``command[0]``
must be found when the spec loads), ``log_format`` (``claude-stream-json``, ``codex-json``,
``opencode-json``), ``env`` (names passed through), ``time_limit_s`` (default 1800),
``max_verify_calls`` (default 10), ``max_tokens``, ``n``, ``workspace_root``.

Ends: ``TIME_LIMIT``, ``BUDGET_SPENT`` (the proxy refused a call; the CLI is stopped),
``INFRA_ERROR`` (a check could not run), ``AGENT_ERROR`` (the CLI could not start, exited
non-zero, or printed lines that are not JSON), ``EXTRACTION_FAILED`` (kernel.py never written),
else ``CANDIDATE``. None of them is the fleet's failure but ``INFRA_ERROR``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
import os
import re
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from generators.agent_cli import process
from generators.agent_cli.logs import LOG_FORMATS, disagreement, summarize
from generators.agent_cli.proxy import Answer, Gateway, error_answer
from generators.agent_cli.workspace import RESERVED_ENV, Workspace, cli_environment, default_root
from generators.base import MethodError
from generators.llm import CallStatus, LLMCall, Prompt, Role, ToolCall, Usage
from generators.prompts import build_prompt
from generators.providers.wire import WireRequest
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
)
from generators.verify import VerifyBroker
from operators.spec import OperatorSpec
from protos.records import Status

MAX_KERNEL_CHARS = 200_000
TRANSCRIPT_CHARS = 4_000_000
RULES = """
## How to work here

You are in a workspace with `PROMPT.md` (this file) and `kernel.py`. Write the complete kernel
module to `kernel.py`. Check it with the `verify` command (`verify` or `verify FILE`): it runs the
public cases and prints the verdict, mismatches, the compile log's end and timings; it exits 0
only when they pass. You have at most {verifies} verify calls. When you stop, whatever
`kernel.py` holds is scored on the public cases and on hidden ones.
"""


@dataclass
class _Live:
    """One trajectory's moving parts, shared by the gateway's handlers and the run."""

    run: TrajectoryRun
    broker: VerifyBroker
    clock: process.WorkClock = field(default_factory=process.WorkClock)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    why: list[str] = field(default_factory=list)
    end: EndReason | None = None
    failure: BaseException | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    uses: list[tuple[int, ToolUse]] = field(default_factory=list)   # (steps then, check)

    def halt(self, end: EndReason, why: str) -> None:
        if self.end is None:
            self.end, self.why = end, [why]
        self.stop.set()


def _expand(arg: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(prompt|model|workspace)\}", lambda m: values[m.group(1)], arg)


@register_method("agent-cli")
class AgentCliMethod(TrajectoryMethod):
    needs_verifier = True

    def __init__(self, command: list[str], log_format: str = "claude-stream-json",
                 env: list[str] | None = None, time_limit_s: float = 1800.0,
                 max_verify_calls: int = 10, max_tokens: int | None = None, n: int = 1,
                 workspace_root: str | None = None) -> None:
        if not isinstance(command, list) or not command or not all(
                isinstance(c, str) and c for c in command):
            raise MethodError(f"agent-cli: command must be a non-empty list of strings, got {command!r}")
        if shutil.which(command[0]) is None:
            raise MethodError(f"agent-cli: command[0] {command[0]!r} is not an executable on PATH "
                              "(install the CLI, or give its full path)")
        if log_format not in LOG_FORMATS:
            raise MethodError(f"agent-cli: log_format must be one of {', '.join(LOG_FORMATS)}, "
                              f"got {log_format!r}")
        env = [] if env is None else env
        if not isinstance(env, list) or not all(isinstance(e, str) and e.isidentifier() for e in env):
            raise MethodError(f"agent-cli: env must be a list of variable names, got {env!r}")
        if reserved := sorted(set(env) & set(RESERVED_ENV)):
            raise MethodError(f"agent-cli: env may not pass {', '.join(reserved)}: the workspace "
                              "sets them itself")
        if isinstance(time_limit_s, bool) or not isinstance(time_limit_s, int | float) \
                or not math.isfinite(time_limit_s) or time_limit_s <= 0:
            raise MethodError(f"agent-cli: time_limit_s must be a number > 0, got {time_limit_s!r}")
        if isinstance(max_verify_calls, bool) or not isinstance(max_verify_calls, int) \
                or max_verify_calls < 0:
            raise MethodError(f"agent-cli: max_verify_calls must be an int >= 0, got {max_verify_calls!r}")
        if max_tokens is not None:
            check_count("agent-cli", "max_tokens", max_tokens)
        check_count("agent-cli", "n", n)
        self.command, self.log_format, self.env = list(command), log_format, list(env)
        self.time_limit_s, self.max_verify_calls = float(time_limit_s), max_verify_calls
        self.max_tokens, self.n = max_tokens, n
        self.workspace_root = Path(workspace_root) if workspace_root else None

    def __repr__(self) -> str:
        return (f"AgentCliMethod(command={self.command[0]!r}, log_format={self.log_format!r}, "
                f"time_limit_s={self.time_limit_s}, max_verify_calls={self.max_verify_calls}, "
                f"n={self.n})")

    def samples(self, spec: OperatorSpec) -> int:
        return self.n

    def _passed_env(self, ctx: TrajectoryContext) -> dict[str, str]:
        key_env = ctx.provider.config.api_key_env
        if key_env and key_env in self.env:
            raise MethodError(f"agent-cli: env passes {key_env}, the endpoint's API key: the CLI "
                              "reaches its model through the metering proxy and never gets the key")
        return {k: os.environ[k] for k in self.env if k in os.environ}

    async def run(self, spec: OperatorSpec, sample: int, ctx: TrajectoryContext) -> Trajectory:
        verifier = ctx.verifier
        if verifier is None:
            raise MethodError("agent-cli needs a public-case verifier in its TrajectoryContext")
        if self.max_tokens is not None:
            limit = ctx.trajectory_max_tokens
            ctx = dataclasses.replace(ctx, trajectory_max_tokens=self.max_tokens if limit is None
                                      else min(limit, self.max_tokens))
        passed = self._passed_env(ctx)
        base = build_prompt(spec, ctx.platform, template_version=ctx.template_version)
        text = "\n\n".join(m.content for m in base.messages if m.role in (Role.SYSTEM, Role.USER))
        text += RULES.format(verifies=self.max_verify_calls)
        live = _Live(TrajectoryRun(self, spec, sample, ctx, None),
                     VerifyBroker(verifier, spec.id, self.max_verify_calls))
        root = self.workspace_root or default_root()
        name = f"{re.sub(r'[^A-Za-z0-9_.-]', '_', spec.id)}-{sample}-{secrets.token_hex(6)}"
        gateway = Gateway(ctx.provider.config.kind, ctx.model, secrets.token_urlsafe(24),
                          secrets.token_urlsafe(24), lambda r, p: self._model(live, r, p),
                          lambda s: self._verify(live, s))
        ws = await asyncio.to_thread(Workspace.create, root, name, text)
        logs = Path(tempfile.mkdtemp(prefix="kgb-agent-cli-log-"))
        try:
            url = await gateway.start()
            env = cli_environment(ws, passed, url, gateway.model_token, gateway.verify_token)
            argv = [_expand(a, {"prompt": text, "model": ctx.model, "workspace": str(ws.path)})
                    for a in self.command]
            return await self._work(live, ws, argv, env, logs)
        finally:
            await gateway.close()
            await asyncio.to_thread(ws.remove)
            shutil.rmtree(logs, ignore_errors=True)

    async def _work(self, live: _Live, ws: Workspace, argv: list[str], env: dict[str, str],
                    logs: Path) -> Trajectory:
        """Run the CLI to its end; the trajectory it leaves."""
        version = await process.version_of(argv[0], ws, env)
        artifacts = [("cli_version", version)]
        try:
            proc = process.spawn(argv, ws, env, logs / "stdout", logs / "stderr")
        except OSError as exc:
            return self._finish(live, EndReason.AGENT_ERROR, f"the CLI could not start: {exc}",
                                None, artifacts)
        ended = await process.supervise(proc, live.clock, self.time_limit_s, live.stop, live.why)
        if live.failure is not None:
            raise live.failure
        transcript = (logs / "stdout").read_bytes()[:TRANSCRIPT_CHARS].decode(errors="replace")
        stderr = (logs / "stderr").read_bytes()[-20_000:].decode(errors="replace")
        artifacts += [("transcript", transcript), ("stderr", stderr)]
        kernel = await asyncio.to_thread(ws.read_kernel, MAX_KERNEL_CHARS)
        summary = summarize(self.log_format, transcript)
        differs = disagreement(_metered(live), summary.usage)
        artifacts.append(("usage_check", differs or "agrees"))
        end, detail = self._ending(live, ended, kernel, summary.malformed, summary.first_malformed)
        if differs:
            detail = f"{detail}; the CLI's log disagrees with the proxy: {differs}"
        return self._finish(live, end, detail, kernel, artifacts)

    def _ending(self, live: _Live, ended: process.Exit, kernel: str | None, malformed: int,
                first_bad: str) -> tuple[EndReason, str]:
        if live.end is not None:
            return live.end, live.why[0]
        if ended.timed_out:
            return EndReason.TIME_LIMIT, f"{self.time_limit_s:g} s of working time used"
        if ended.code != 0:
            return EndReason.AGENT_ERROR, f"the CLI exited with code {ended.code}"
        if malformed:
            return EndReason.AGENT_ERROR, (f"the CLI's log has {malformed} line(s) that are not "
                                           f"{self.log_format} JSON; first: {first_bad!r}")
        if kernel is None:
            return EndReason.EXTRACTION_FAILED, "the CLI ended without writing kernel.py"
        return EndReason.CANDIDATE, "the CLI ended"

    @staticmethod
    def _finish(live: _Live, end: EndReason, detail: str, kernel: str | None,
                artifacts: list[tuple[str, str]]) -> Trajectory:
        run = live.run
        steps = list(run.steps)
        for at, use in live.uses:
            if steps:
                i = max(min(at, len(steps)) - 1, 0)
                steps[i] = dataclasses.replace(steps[i], tools=(*steps[i].tools, use))
        run.steps = steps
        artifacts += [(f"verify/{i + 1}", c.source) for i, c in enumerate(live.broker.checks)]
        traj = run.finish(end, detail, kernel)
        return dataclasses.replace(traj, artifacts=tuple(artifacts))

    async def _model(self, live: _Live, request: WireRequest, prompt: Prompt) -> Answer:
        """One metered model call (one at a time: the books number them as turns)."""
        run, ctx = live.run, live.run.ctx
        kind = ctx.provider.config.kind
        if live.stop.is_set():
            return error_answer(kind, 503, "the workspace is stopping")
        async with live.lock:
            try:
                return await self._metered(live, run, ctx, request, prompt)
            except BaseException as exc:  # a system failure: stop the CLI, raise it after
                live.failure = live.failure or exc
                live.stop.set()
                return error_answer(kind, 503, "the metering proxy failed")

    async def _metered(self, live: _Live, run: TrajectoryRun, ctx: TrajectoryContext,
                       request: WireRequest, prompt: Prompt) -> Answer:
        prompt = dataclasses.replace(prompt, operator_id=run.spec.id)
        reason = run.spent()
        if reason is not None:
            call = LLMCall(provider=ctx.provider.config.name, model=ctx.model, prompt=prompt,
                           status=CallStatus.BUDGET, error=reason, attempts=0)
            await _record(ctx, call, self.name, run.sample)
            run.add(Step(run.turn, call))
            live.halt(EndReason.BUDGET_SPENT, reason)
            return error_answer(ctx.provider.config.kind, 429, f"budget spent: {reason}")
        left = max(self.time_limit_s - live.clock.used(), 1.0)
        call, relayed = await ctx.provider.relay(request, prompt, model=ctx.model,
                                                 deadline_s=min(ctx.call_deadline_s, left))
        run.budget.charge(call)
        if ctx.sweep_budget is not None:
            ctx.sweep_budget.charge(call)
        call = await _record(ctx, call, self.name, run.sample)
        run.add(Step(run.turn, call))
        if relayed.http_status == 0:
            return error_answer(ctx.provider.config.kind, 502, f"the endpoint did not answer: "
                                f"{call.error}")
        return Answer(relayed.http_status, relayed.body, relayed.content_type or "application/json")

    async def _verify(self, live: _Live, source: str) -> tuple[str, str]:
        if live.stop.is_set():
            return "REFUSED", "verify: the workspace is stopping"
        with live.clock.paused():
            check = await live.broker.verify(source)
        n = len(live.broker.checks)
        use = ToolUse(ToolCall(f"verify-{n}", "verify", "{}"), check.text,
                      refused=check.verdict is None, verdict=check.verdict)
        live.uses.append((len(live.run.steps), use))
        if check.verdict is None:
            return "REFUSED", check.text
        if check.verdict.status is Status.INFRA_ERROR:
            live.halt(EndReason.INFRA_ERROR, check.verdict.message)
        return check.verdict.status.value, check.text


def _metered(live: _Live) -> Usage:
    """What the proxy's ledger holds for this run of the CLI."""
    total = Usage()
    for s in live.run.steps:
        if s.call.usage is not None:
            total = total + s.call.usage
    return total


async def _record(ctx: TrajectoryContext, call: LLMCall, method: str, sample: int) -> LLMCall:
    call = dataclasses.replace(call, extra={**call.extra, "method": method, "sample": str(sample)})
    done = ctx.record(call)
    if inspect.isawaitable(done):
        await done
    return call
