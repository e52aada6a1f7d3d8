"""The DeviceAgent gRPC service: a thin shell around :class:`~device_agent.evaluation.Evaluator`.

Candidate failures are successful RPCs; system errors map to status codes in
:func:`_abort_for`, the one place that does so. Who may call and how much is
``device_agent/tenancy.py``: TLS, bearer tokens (each a tenant), per-tenant quotas and the audit
log. Request ids are per tenant and bound to their content.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import grpc

import operators
from device_agent import tenancy
from device_agent.evaluation import Evaluator, InvalidRequest
from device_agent.rpc_guard import clip_details
from device_agent.tenancy import Access, AccessSettings, Admitted, Binding, Caller, RequestKey
from device_agent.worker_pool import WorkerPool
from protos import convert
from protos.client import SERVICE_NAME
from protos.kgb.agent.v1 import agent_pb2, agent_pb2_grpc
from protos.records import (
    AgentDescription,
    DeviceInfo,
    EvalRequest,
    Progress,
    Verdict,
    candidate_id,
)
from protos.security import current_tenant

if TYPE_CHECKING:
    from device_agent.metrics import AgentMetrics

log = logging.getLogger(__name__)

VERDICT_CACHE = 4096


class DeviceAgentService(agent_pb2_grpc.DeviceAgentServicer):  # type: ignore[misc]
    """The DeviceAgent RPCs: admission (deadlines, the queue's bound, quotas, draining),
    idempotent request ids per tenant, one evaluation shared by every call with its id, and
    the audit log. ``metrics`` (None: not exported) counts refusals and watches the queue."""

    def __init__(self, evaluator: Evaluator, pools: list[WorkerPool], agent_id: str,
                 access: Access | None = None, *, max_queue: int = 256,
                 metrics: AgentMetrics | None = None) -> None:
        self.evaluator = evaluator
        self.pools = pools
        self.agent_id = agent_id
        self.access = access or Access(AccessSettings())
        self.max_queue = max_queue
        self.draining = False
        self._tasks: dict[RequestKey, tuple[Binding, asyncio.Task[Verdict]]] = {}
        self._waiters: collections.Counter[RequestKey] = collections.Counter()
        self._done: collections.OrderedDict[RequestKey, tuple[Binding, Verdict]] = collections.OrderedDict()
        self._progress: dict[RequestKey, Callable[[Progress], None]] = {}
        self.metrics = metrics
        if metrics is not None:
            metrics.watch(pools, lambda: self.active, max_queue)

    def _count_rejection(self, exc: BaseException) -> None:
        """Count an Evaluate call refused before admission (for metrics)."""
        reason = ("invalid_argument" if isinstance(exc, InvalidRequest) else
                  "queue_full" if isinstance(exc, tenancy.QueueFull) else
                  "quota" if isinstance(exc, tenancy.QuotaExceeded) else
                  "draining" if isinstance(exc, tenancy.Draining) else None)
        if self.metrics is not None and reason is not None:
            self.metrics.rejected(reason)

    # ---- audit -------------------------------------------------------------------------------
    @staticmethod
    def _caller(context: grpc.aio.ServicerContext, rpc: str) -> Caller:
        return Caller(current_tenant(), context.peer() or "", rpc)

    def _audit(self, caller: Caller, req: EvalRequest, admitted: Admitted | None, *,
               verdict: Verdict | None = None, refused: BaseException | None = None) -> None:
        """One audit line for one Evaluate call: its verdict, or why it got none."""
        if self.access.audit is not None:
            self.access.record(tenancy.audit_record(caller, req, admitted, verdict, refused))

    # ---- admission ---------------------------------------------------------------------------
    @property
    def active(self) -> int:
        return len(self._tasks)

    @property
    def queue_depth(self) -> int:
        """Accepted evaluations not yet on a worker: waiting to be admitted, being checked,
        their inputs being made, or waiting for a worker of a device. A pool's own ``waiting``
        counts only the last kind, so a loaded agent would look idle to its clients."""
        return max(0, self.active - sum(p.busy for p in self.pools))

    def _admit(self, req: EvalRequest, caller: Caller, context: grpc.aio.ServicerContext,
               progress: Callable[[Progress], None] | None) -> Admitted:
        tenancy.check_request_id(req.request_id)
        spec = self.evaluator.resolve(req)  # unknown operator, bad version, oversize: INVALID_ARGUMENT
        binding = Binding(spec.id, spec.version, candidate_id(req.source), req.skip_timing,
                          req.public_only)
        key = (caller.tenant, req.request_id)
        earlier = self._done.get(key) or self._tasks.get(key)
        if earlier is not None:
            tenancy.check_repeat(req.request_id, earlier[0], binding)
            return Admitted(key, binding, earlier[1], repeat=True)
        if self.draining:
            raise tenancy.Draining()
        remaining = context.time_remaining()
        if remaining is None:
            raise InvalidRequest("a deadline is required on Evaluate calls")
        if remaining <= self.evaluator.budgets.margin_s:
            raise InvalidRequest(f"deadline too short ({remaining:.1f}s)")
        if self.active >= self.max_queue:
            raise tenancy.QueueFull()
        self.access.quotas.admit(caller.tenant)
        return Admitted(key, binding, self._start(key, binding, req, time.monotonic() + remaining,
                                                  progress), repeat=False)

    def _start(self, key: RequestKey, binding: Binding, req: EvalRequest, deadline: float,
               progress: Callable[[Progress], None] | None) -> asyncio.Task[Verdict]:
        if progress is not None:
            self._progress[key] = progress

        def emit(p: Progress) -> None:
            cb = self._progress.get(key)
            if cb is not None:
                cb(p)

        task = asyncio.get_running_loop().create_task(self.evaluator.evaluate(req, deadline, emit))
        self._tasks[key] = (binding, task)

        def finished(t: asyncio.Task[Verdict]) -> None:
            self._tasks.pop(key, None)
            self._progress.pop(key, None)
            self.access.quotas.release(key[0])
            if not t.cancelled() and t.exception() is None:
                self._done[key] = (binding, t.result())
                while len(self._done) > VERDICT_CACHE:
                    self._done.popitem(last=False)

        task.add_done_callback(finished)
        return task

    async def _await(self, rid: RequestKey, task: asyncio.Task[Verdict]) -> Verdict:
        """Wait for a shared evaluation; the last waiter to leave cancels it (frees the worker)."""
        self._waiters[rid] += 1
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if self._waiters[rid] <= 1 and not task.done():
                task.cancel()
            raise
        finally:
            self._waiters[rid] -= 1
            if self._waiters[rid] <= 0:
                del self._waiters[rid]

    # ---- RPCs --------------------------------------------------------------------------------
    async def Describe(self, request: agent_pb2.DescribeRequest,
                       context: grpc.aio.ServicerContext) -> agent_pb2.DescribeResponse:
        return convert.description_to_proto(self.describe())

    def describe(self) -> AgentDescription:
        model = self.evaluator.system.device_model or self.evaluator.platform.name
        devices = tuple(DeviceInfo(index=p.device_index, model=model, capacity=p.size, busy=p.busy,
                                   queued=p.waiting) for p in self.pools)
        return AgentDescription(
            agent_id=self.agent_id, harness_version=self.evaluator.harness_version,
            system=self.evaluator.system,
            devices=devices, suite=tuple((s.id, s.version) for s in operators.all_specs()),
            capacity=sum(p.size for p in self.pools),
            queue_depth=self.queue_depth, max_queue=self.max_queue,
            timings_meaningful=self.evaluator.platform.timings_meaningful)

    async def Evaluate(self, request: agent_pb2.EvaluateRequest,
                       context: grpc.aio.ServicerContext) -> agent_pb2.Verdict:
        req = convert.request_from_proto(request)
        caller, admitted = self._caller(context, f"/{SERVICE_NAME}/Evaluate"), None
        try:
            admitted = self._admit(req, caller, context, None)
            got = admitted.got
            verdict = got if isinstance(got, Verdict) else await self._await(admitted.key, got)
        except asyncio.CancelledError as exc:
            self._audit(caller, req, admitted, refused=exc)
            raise
        except Exception as exc:  # noqa: BLE001 - mapped to a status code in one place
            self._count_rejection(exc)
            self._audit(caller, req, admitted, refused=exc)
            await _abort_for(exc, context)
            raise
        self._audit(caller, req, admitted, verdict=verdict)
        return convert.verdict_to_proto(verdict)

    async def EvaluateStream(self, request: agent_pb2.EvaluateRequest,
                             context: grpc.aio.ServicerContext) -> AsyncIterator[agent_pb2.EvaluateEvent]:
        req = convert.request_from_proto(request)
        caller = self._caller(context, f"/{SERVICE_NAME}/EvaluateStream")
        events: asyncio.Queue[Progress] = asyncio.Queue()
        try:
            admitted = self._admit(req, caller, context, events.put_nowait)
        except Exception as exc:  # noqa: BLE001
            self._count_rejection(exc)
            self._audit(caller, req, None, refused=exc)
            await _abort_for(exc, context)
            raise
        got = admitted.got
        if isinstance(got, Verdict):
            self._audit(caller, req, admitted, verdict=got)
            yield convert.verdict_event(got)
            return
        waiter = asyncio.ensure_future(self._await(admitted.key, got))
        try:
            while not waiter.done():
                getter = asyncio.ensure_future(events.get())
                done, _ = await asyncio.wait({getter, waiter}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield convert.progress_event(getter.result())
                else:
                    getter.cancel()
            while not events.empty():
                yield convert.progress_event(events.get_nowait())
            verdict = waiter.result()
        except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001
            self._audit(caller, req, admitted, refused=exc)
            await _abort_for(exc, context)
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
        self._audit(caller, req, admitted, verdict=verdict)
        yield convert.verdict_event(verdict)


async def _abort_for(exc: BaseException, context: grpc.aio.ServicerContext) -> None:
    """The one mapping from system exceptions to gRPC status codes. (Requests whose bytes do
    not parse never get here: :class:`UndecodableRequests` answers them INVALID_ARGUMENT.)
    Details are clipped: they may echo client input, and an oversize trailer reaches the client
    as RESOURCE_EXHAUSTED, which means "retry"."""
    if isinstance(exc, asyncio.CancelledError):
        return
    if isinstance(exc, InvalidRequest):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, clip_details(str(exc)))
    if isinstance(exc, tenancy.QuotaExceeded):
        context.set_trailing_metadata((("retry-after-ms", str(max(1, round(exc.retry_after_s * 1000)))),))
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{exc} (trailer retry-after-ms)")
    if isinstance(exc, tenancy.QueueFull):
        context.set_trailing_metadata((("retry-after-ms", "1000"),))
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                            "agent queue is full; retry after about 1 s (trailer retry-after-ms)")
    if isinstance(exc, tenancy.Draining):
        await context.abort(grpc.StatusCode.UNAVAILABLE, "agent is shutting down; use another agent")
    log.exception("internal error")
    await context.abort(grpc.StatusCode.INTERNAL,
                        clip_details(f"internal error: {type(exc).__name__}: {exc}"))
