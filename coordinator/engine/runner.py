"""The :class:`TrajectoryRunner` actor: runs trajectories of one model endpoint (or of the
candidate methods) as asyncio tasks, many at once.

Each model call is journalled through the store writer: its intent is committed before the
request leaves and its call before the trajectory uses it (what arrives together goes as one
Ray call, :class:`_RemoteBatch`, and one durable commit); a trajectory resumed with calls the
store holds replays them without sending
(:class:`~coordinator.recorded_provider.RecordedProvider`). Candidates are judged through the
fleet router (:class:`_RouterEvaluator`), which reuses stored verdicts. While the sweep stops
(:meth:`TrajectoryRunner.drain`), no new model call starts and the calls on the wire are awaited:
they are paid for. When the driver is gone (its lifeline, :mod:`coordinator.engine.lifeline`,
closes), the runner's process ends at once: nothing calls a model after its coordinator.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from dataclasses import replace
from typing import Any

import ray

import operators
from coordinator.engine.handles import FleetRouterHandle, Remote, StoreWriterHandle
from coordinator.engine.lifeline import watch
from coordinator.engine.outcomes import Outcome, failure, slim_verdict, trajectory_result
from coordinator.engine.placement import CANDIDATES, shard_limits
from coordinator.engine.process import quiet_gc
from coordinator.engine.storage import settle
from coordinator.llm_calls import CallIntent, CallRecord
from coordinator.recorded_provider import RecordedProvider
from coordinator.store import TrajectoryKey, TrajectoryResult
from coordinator.sweep_spec import PlannedTrajectory, parse_spec
from coordinator.trajectory_artifacts import Artifact, artifacts_of
from generators.base import Candidate, Method
from generators.budget import Budget
from generators.llm import CallStatus, LLMCall, Prompt
from generators.providers.base import Provider, Relayed, WireRequest
from generators.trajectory import EndReason, Trajectory, TrajectoryContext, TrajectoryMethod
from protos.records import Verdict

log = logging.getLogger(__name__)

CALL_BATCH_S = 0.02  # a runner's journal entries go to the store writer in 20 ms batches


class SweepStopped(Exception):
    """A trajectory was abandoned because the sweep is stopping (it is resumable)."""


class _RemoteBatch:
    """Calls to one actor method that arrive within ``window_s`` of each other go as one list:
    with a thousand trajectories in flight, one Ray call carries several model calls."""

    def __init__(self, method: Remote[[list[Any]], list[Any]], window_s: float) -> None:
        self.method = method
        self.window_s = window_s
        self._pending: list[tuple[Any, asyncio.Future[Any]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, item: Any) -> Any:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._pending.append((item, fut))
        if self._timer is None:
            self._timer = loop.call_later(self.window_s, self._send)
        return await fut

    def _send(self) -> None:
        self._timer = None
        batch, self._pending = self._pending, []
        task = asyncio.get_running_loop().create_task(self._go(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _go(self, batch: list[tuple[Any, asyncio.Future[Any]]]) -> None:
        try:
            out = await self.method.remote([item for item, _ in batch])
        except Exception as exc:  # noqa: BLE001 - every waiter gets the actor's error
            settle(batch, error=exc)
            return
        settle(batch, out)


class _RemoteCalls:
    """A trajectory's :class:`~coordinator.recorded_provider.CallLog` over the store writer's
    journal, with the turns and the intents the store already holds for it (a resume) handed
    over up front."""

    def __init__(self, journal: _RemoteBatch, stored: dict[int, LLMCall], intents: dict[int, int],
                 budget: Budget | None) -> None:
        self.journal = journal
        self.stored = stored
        self.intents = intents
        self.budget = budget

    async def llm_call(self, run_id: str, trajectory: TrajectoryKey, turn: int) -> LLMCall | None:
        return self.stored.get(turn)

    async def last_intent(self, run_id: str, trajectory: TrajectoryKey, turn: int) -> int:
        return self.intents.get(turn, 0)

    async def add_intent(self, intent: CallIntent) -> None:
        await self.journal.submit(intent)
        self.intents[intent.turn] = intent.attempt

    async def add_llm_call(self, run_id: str, trajectory: TrajectoryKey, turn: int,
                           call: LLMCall, *, intent: int = 0, idempotency_key: str = "") -> LLMCall:
        stored, tokens, cost = await self.journal.submit(
            CallRecord(run_id, str(trajectory), turn, call, intent, idempotency_key))
        self.stored[turn] = stored
        if self.budget is not None:
            self.budget.observe(tokens, cost)  # the sweep's totals, from every runner
        assert isinstance(stored, LLMCall)
        return stored


class _SweepProvider(RecordedProvider):
    """Records like its parent; refuses to start a call once the sweep is stopping, and counts
    the calls on the wire (the stop waits for them: they are paid for)."""

    def __init__(self, owner: TrajectoryRunner, calls: _RemoteCalls, *args: Any) -> None:
        super().__init__(*args)
        self.owner = owner
        self.calls = calls

    async def complete(self, prompt: Prompt, *, model: str, temperature: float | None,
                       max_tokens: int | None, deadline_s: float,
                       idempotency_key: str | None = None) -> LLMCall:
        stored = self.calls.stored.get(self.turn + 1)
        if self.owner.draining and (stored is None or stored.status is CallStatus.BUDGET):
            raise SweepStopped("the sweep is stopping")
        self.owner.calls_on_wire += 1
        try:
            return await super().complete(prompt, model=model, temperature=temperature,
                                          max_tokens=max_tokens, deadline_s=deadline_s,
                                          idempotency_key=idempotency_key)
        finally:
            self.owner.calls_on_wire -= 1


    async def relay(self, request: WireRequest, prompt: Prompt, *, model: str,
                    deadline_s: float, idempotency_key: str | None = None
                    ) -> tuple[LLMCall, Relayed]:
        if self.owner.draining:
            raise SweepStopped("the sweep is stopping")
        self.owner.calls_on_wire += 1
        try:
            return await super().relay(request, prompt, model=model, deadline_s=deadline_s,
                                       idempotency_key=idempotency_key)
        finally:
            self.owner.calls_on_wire -= 1


class _RouterEvaluator:
    """:class:`generators.evaluation.Evaluator` over the fleet router; remembers what it saw.
    ``public_only``: an agent's verifier (public cases only, kept under that mode)."""

    def __init__(self, router: FleetRouterHandle, platform: str, device: str | None,
                 label: str, public_only: bool = False) -> None:
        self.router, self.platform, self.device, self.label = router, platform, device, label
        self.public_only = public_only
        self.seen: list[tuple[Verdict, bool]] = []

    async def evaluate(self, operator_id: str, source: str) -> Verdict:
        v, reused = await self.router.evaluate.remote(self.platform, self.device, operator_id,
                                                      source, self.label, self.public_only)
        self.seen.append((v, reused))
        return v


class TrajectoryRunner:
    """Runs trajectories of one endpoint (or of the candidate methods); see the module doc.
    ``shards`` runners share an endpoint; this one gets share ``shard`` of its limits."""

    def __init__(self, spec_text: str, spec_source: str, spec_dir: str, run_id: str,
                 endpoint: str, writer: StoreWriterHandle, router: FleetRouterHandle,
                 lifeline: str, shards: int = 1, shard: int = 0) -> None:
        watch(lifeline, _orphaned)  # first: no driver to answer to, no runner
        self.spec = parse_spec(spec_text, spec_source, base_dir=spec_dir)
        self.run_id = run_id
        self.router = router
        self.endpoint = endpoint
        self.provider: Provider | None = None
        if endpoint != CANDIDATES:
            from generators.providers import create as create_provider

            self.provider = create_provider(shard_limits(self.spec.endpoint(endpoint), shards, shard),
                                            self.spec.price_table(endpoint))
        self.methods = {m.label: m.build() for m in self.spec.methods}
        b = self.spec.budgets
        self.sweep_budget = (Budget(b.sweep_max_tokens, b.sweep_max_cost_usd, scope="sweep")
                             if b.sweep_max_tokens is not None or b.sweep_max_cost_usd is not None
                             else None)
        self.draining = False
        self.calls_on_wire = 0
        self.journal = _RemoteBatch(writer.journal, CALL_BATCH_S)
        self.node = str(ray.get_runtime_context().get_node_id())
        quiet_gc()

    def ready(self) -> str:
        """The node it runs on (answering at all says it has started)."""
        return self.node

    def observe_spend(self, tokens: int, cost: float) -> None:
        if self.sweep_budget is not None:
            self.sweep_budget.observe(tokens, cost)

    async def drain(self, timeout_s: float) -> int:
        """Start no new call; wait (up to ``timeout_s``) for the calls on the wire to be stored.
        Returns how many are still out."""
        self.draining = True
        end = time.monotonic() + timeout_s
        while self.calls_on_wire and time.monotonic() < end:
            await asyncio.sleep(0.05)
        return self.calls_on_wire

    async def run(self, p: PlannedTrajectory, stored: list[tuple[int, LLMCall]],
                  intents: dict[int, int]) -> Outcome:
        """Run one trajectory; ``stored``: its calls the store holds, ``intents``: the last
        intent attempt of each of its turns (a resume)."""
        try:
            spec = operators.get(p.operator_id)
            key = TrajectoryKey(spec.id, spec.version, p.method, p.model, p.sample, p.key_platform)
            evaluator = _RouterEvaluator(self.router, p.platform, self._device(p.platform),
                                         f"{p.method}/{p.sample}")
            method = self.methods[p.method]
            if isinstance(method, Method):
                outcome = await self._candidate(p, key, method, evaluator)
            else:
                outcome = await self._trajectory(p, key, method, evaluator, stored, intents)
            return await self._elsewhere(p, key, outcome)
        except SweepStopped as exc:
            return Outcome(p, None, error=str(exc), node=self.node)
        except Exception as exc:  # noqa: BLE001 - a system error ends this trajectory, not the sweep
            log.exception("trajectory %s failed", p)
            return failure(p, exc, self.node)

    def _device(self, platform: str) -> str | None:
        """The device model the spec's agents of ``platform`` must report, if it names one."""
        return next((a.device for a in self.spec.agents if a.platform == platform and a.device),
                    None)

    async def _elsewhere(self, p: PlannedTrajectory, key: TrajectoryKey, o: Outcome) -> Outcome:
        """Shared generation: the trajectory's final candidate (its result's best) judged on
        each other platform, a result row per platform under the same key. Those rows carry no
        model call: the trajectory's tokens are counted once, on its first platform's row."""
        if o.result is None or len(p.platforms) < 2:
            return o
        r = o.result
        source = dict(o.candidates).get(r.best_candidate_hash)
        more: list[TrajectoryResult] = []
        verdicts: list[tuple[str, Verdict, bool]] = []
        for platform in p.platforms[1:]:
            if self.draining:
                raise SweepStopped("the sweep is stopping")
            ev = _RouterEvaluator(self.router, platform, self._device(platform),
                                  f"{p.method}/{p.sample}")
            pairs: list[tuple[Candidate, Verdict | None]] = []
            if source is not None:
                final = Candidate(p.operator_id, source, p.method, p.sample, model=p.model,
                                  label="final")
                pairs.append((final, await ev.evaluate(p.operator_id, source)))
            more.append(trajectory_result(self.run_id, platform, key, r.source, pairs,
                                          EndReason(r.end_reason), turns=r.turns, calls=(),
                                          seen=ev.seen))
            verdicts += [(platform, slim_verdict(v), reused) for v, reused in ev.seen]
        return replace(o, more=tuple(more), more_verdicts=tuple(verdicts))

    async def _candidate(self, p: PlannedTrajectory, key: TrajectoryKey, method: Method,
                         evaluator: _RouterEvaluator) -> Outcome:
        """A candidate method's trajectory: one candidate, judged."""
        if self.draining:
            raise SweepStopped("the sweep is stopping")
        spec = operators.get(p.operator_id)
        cand = method.generate(spec, p.sample)
        v = await evaluator.evaluate(spec.id, cand.source)
        result = trajectory_result(self.run_id, p.platform, key, spec.source.value, [(cand, v)],
                                   EndReason.CANDIDATE, turns=0, calls=(), seen=evaluator.seen)
        return self._finish(p, result, [cand], evaluator.seen, label=cand.label)

    async def _trajectory(self, p: PlannedTrajectory, key: TrajectoryKey,
                          method: TrajectoryMethod, evaluator: _RouterEvaluator,
                          stored: list[tuple[int, LLMCall]], intents: dict[int, int]) -> Outcome:
        """An LLM trajectory: its calls persisted (or replayed), its candidates judged."""
        assert self.provider is not None
        spec = operators.get(p.operator_id)
        model = self.spec.model(p.model)
        calls = _RemoteCalls(self.journal, dict(stored), dict(intents), self.sweep_budget)
        rp = _SweepProvider(self, calls, self.provider, calls, self.run_id, key)
        b = self.spec.budgets
        verifier = _RouterEvaluator(self.router, p.platform, evaluator.device,
                                    f"{p.method}/{p.sample}/verify", public_only=True)
        ctx = TrajectoryContext(
            provider=rp, model=model.model, record=rp.record, platform=p.platform,
            temperature=model.temperature, max_tokens=model.max_tokens,
            evaluator=evaluator if method.needs_evaluator else None,
            trajectory_max_tokens=b.trajectory_max_tokens,
            trajectory_max_cost_usd=b.trajectory_max_cost_usd, sweep_budget=self.sweep_budget,
            verifier=verifier if method.needs_verifier else None)
        started = time.monotonic()
        traj = await method.run(spec, p.sample, ctx)
        pairs = await self._judged(p, traj, evaluator)
        seen = evaluator.seen + verifier.seen
        result = trajectory_result(self.run_id, p.platform, key, spec.source.value, pairs,
                                   traj.end, turns=len(traj.steps), calls=traj.calls, seen=seen,
                                   detail=traj.detail, checks=len(verifier.seen),
                                   wall_s=time.monotonic() - started)
        checked = [Candidate(traj.operator_id, text, p.method, p.sample, model=p.model, label=name)
                   for name, text in traj.artifacts if name.startswith("verify/")]
        return self._finish(p, result, [c for c, _ in pairs] + checked, seen,
                            artifacts=artifacts_of(self.run_id, p.platform, key, traj.artifacts))

    async def _judged(self, p: PlannedTrajectory, traj: Trajectory,
                      evaluator: _RouterEvaluator) -> list[tuple[Candidate, Verdict | None]]:
        """The trajectory's candidates with their verdicts: an agent's ``final`` candidate alone,
        judged now by the normal path (its verify verdicts are never a score); otherwise each
        step's, the last judged now when the method left it to the sweep (``sample`` without an
        evaluator)."""
        if traj.final is not None:
            final = Candidate(traj.operator_id, traj.final, p.method, p.sample, model=p.model,
                              label="final")
            if self.draining:
                raise SweepStopped("the sweep is stopping")
            return [(final, await evaluator.evaluate(traj.operator_id, final.source))]
        pairs: list[tuple[Candidate, Verdict | None]] = [
            (Candidate(traj.operator_id, s.candidate, p.method, p.sample, model=p.model,
                       label=f"turn {s.turn}"), s.verdict)
            for s in traj.steps if s.candidate is not None]
        if traj.end is EndReason.CANDIDATE and pairs and pairs[-1][1] is None:
            # sample without an evaluator: the sweep judges the trajectory's candidate
            if self.draining:
                raise SweepStopped("the sweep is stopping")
            pairs[-1] = (pairs[-1][0], await evaluator.evaluate(traj.operator_id,
                                                                pairs[-1][0].source))
        return pairs

    def _finish(self, p: PlannedTrajectory, result: TrajectoryResult, cands: list[Candidate],
                seen: list[tuple[Verdict, bool]], label: str = "",
                artifacts: tuple[Artifact, ...] = ()) -> Outcome:
        """The driver stores the result (its calls and verdicts are stored already)."""
        return Outcome(p, result, tuple((slim_verdict(v), r) for v, r in seen),
                       tuple((c.candidate_hash, c.source) for c in cands), label=label,
                       node=self.node, artifacts=artifacts)

    async def close(self) -> None:
        if self.provider is not None:
            await self.provider.aclose()


def _orphaned(why: str) -> None:
    """The driver is gone: end this process before it sends another request (its calls on the
    wire stay unconfirmed intents; Ray would kill it anyway, seconds later)."""
    print(f"kgb trajectory runner: {why}; exiting", file=sys.stderr, flush=True)
    os._exit(70)
