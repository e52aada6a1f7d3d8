"""The job inside the sandboxed worker: load one candidate, check its cases, time it.

Worker side (it runs beside the candidate, in the process ``device_agent.sandboxed_worker``
starts); the agent drives each step over ``device_agent.protocol``'s messages and trusts none
of the replies: it compares the raw outputs sent here with references it keeps to itself.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import inspect
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

import torch

import operators
from device_agent import dry_run, integrity, launchers, triton_hooks
from device_agent import resample as resample_probe
from device_agent.codec import CodecError, to_host
from device_agent.dispatch_guard import DispatchGuard
from device_agent.harness_faults import HarnessFault
from device_agent.platforms.toolchain import stage_of_exception
from device_agent.protocol import (
    AgentChannel,
    BuildInputs,
    Built,
    CaseError,
    CaseOutputs,
    CheckCase,
    Job,
    Loaded,
    LoadError,
    Measure,
    Ran,
    Recheck,
    Rechecked,
    RunCase,
    StartTiming,
    Timed,
    TimingError,
    Unexpected,
    Upload,
    Uploaded,
    Warmed,
)
from device_agent.timing import (
    Measurement,
    TimingSets,
    build_sets,
    measure,
    recheck,
    upload_sets,
)
from operators.invoke import (
    collect,
    invoke,
    layouts,
    poison,
    prepare,
    span,
    synchronize,
    wire_output,
)
from operators.spec import Call, Case, Kind, OperatorSpec

TRACEBACK_LIMIT = 6000
_T = TypeVar("_T")


def traceback_of(exc: BaseException) -> str:
    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except BaseException as err:  # noqa: BLE001 - a candidate's exception object, see _describe
        text = f"(no traceback: formatting it raised {type(err).__name__})"
    return text[-TRACEBACK_LIMIT:]


def _text(exc: BaseException) -> str:
    """``str(exc)`` of an exception the candidate raised. The exception is the candidate's own
    object: its ``__str__`` may raise, return a non-string or exit, which must not take the
    worker's report (and the verdict's reason) down with it."""
    try:
        text = str(exc)
        if not isinstance(text, str):
            raise TypeError("__str__ returned a non-string")
    except BaseException as err:  # noqa: BLE001
        text = f"(its str() raised {type(err).__name__})"
    return text


def describe(exc: BaseException, limit: int) -> str:
    """``Type: message`` of a candidate's exception (see :func:`_text`), cut to ``limit``."""
    return f"{type(exc).__name__}: {_text(exc)}"[:limit]


def _safely(check: Any, exc: BaseException) -> bool:
    """``check(exc)``, or False when walking the candidate's exception raises."""
    try:
        return bool(check(exc))
    except BaseException:  # noqa: BLE001
        return False


def _load(path: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _is_compile_error(exc: BaseException) -> bool:
    """Kernel compilation failures (and their interpreter equivalents) vs runtime faults."""
    try:
        from triton.compiler.errors import CompilationError
    except ImportError:  # pragma: no cover - triton always present in workers
        return False
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, CompilationError) or _raised_in_triton_compiler(e):
            return True
        e = e.__cause__ or e.__context__
    return False


def _raised_in_triton_compiler(exc: BaseException) -> bool:
    """Failures inside Triton's lowering (MLIR's ``PassManager::run failed`` surfaces as a plain
    RuntimeError from the backend's compile stages, seen on the H200 with Triton 3.6) are the
    kernel failing to compile, not a runtime fault."""
    tb = exc.__traceback__
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename.replace("\\", "/")
        if "/triton/" in path and path.endswith("/compiler.py") and (
                "/triton/compiler/" in path or "/triton/backends/" in path):
            return True
        tb = tb.tb_next
    return False


def _snapshot(t: Any) -> Any:
    """A copy of ``t`` that keeps its strides, overlapping ones included (``clone`` makes a
    non-dense view contiguous, and a view's strides are part of its answer)."""
    if t.numel() == 0:
        return t.clone()
    flat = t.as_strided((span(t),), (1,), t.storage_offset()).clone()
    return flat.as_strided(tuple(t.shape), tuple(t.stride()), 0)


def _ghost_run(fn: Any, call: Any, device: str, module_name: str) -> list[Any] | None:
    """The case again on fresh copies, with the candidate's own Triton launches skipped.
    Outputs come back for the agent to compare with the reference (None if the call failed,
    which is what an honest candidate may well do without its kernels)."""
    dev_call = prepare(call, device)
    try:
        with triton_hooks.suppressed(module_name):
            result = invoke(fn, dev_call)
            synchronize(device)
        return [wire_output(o) for o in collect(dev_call, result)]
    except BaseException:  # noqa: BLE001 - failing without its kernels is no evidence
        return None


POISON_PATTERN = 0x5A  # bytes of freed device memory between the two determinism runs


def _repeat_run(fn: Any, call: Any, device: str) -> list[Any] | None:
    """The case again after refilling freed memory with a different pattern: a kernel that
    reads memory it never wrote (or races) gives a different answer the second time."""
    nbytes = sum(v.numel() * v.element_size() for _, v in call.tensor_args())
    junk = torch.empty(min(max(4 * nbytes, 1 << 20), 1 << 30), dtype=torch.uint8, device=device)
    junk.fill_(POISON_PATTERN)
    del junk  # back to the allocator's free list, full of the pattern
    dev_call = prepare(call, device)
    try:
        result = invoke(fn, dev_call)
        synchronize(device)
        return [wire_output(o) for o in collect(dev_call, result)]
    except BaseException:  # noqa: BLE001 - a crash on the second run is a difference too
        return None


def _replay_run(fn: Any, dev_call: Any, alt: Any) -> list[Any] | None:
    """The case again in the first run's own buffers (same addresses, same tensor objects),
    refilled in place with ``alt``'s contents and out-buffers poisoned again."""
    new = dict(alt.tensor_args())
    try:
        for key, t in dev_call.tensor_args():
            t.copy_(new[key])
        poison(dev_call)
        device = next((t.device for _, t in dev_call.tensor_args()), "cpu")
        result = invoke(fn, dev_call)
        synchronize(str(device))
        return [wire_output(o) for o in collect(dev_call, result)]
    except BaseException:  # noqa: BLE001 - a crash on the second call is a difference too
        return None


def send_case_reply(ch: AgentChannel, reply: CaseOutputs) -> bool:
    """Send a case's reply; one too large for a frame (a result that views a huge buffer sends
    all the storage it spans) becomes the candidate's case error, not a crashed worker."""
    try:
        ch.send(reply)
    except CodecError as exc:
        ch.send(CaseError(index=reply.index, message=f"the case's results cannot be returned: "
                          f"{exc} (a returned tensor carries all the storage it spans; return "
                          "tensors of the expected size)", traceback=""))
        return False
    return True


@dataclass
class _Candidate:
    """The job's candidate as the worker holds it, with what every stage needs."""

    ch: AgentChannel
    module: ModuleType
    spec: OperatorSpec
    platform: Any
    layers: frozenset[str]
    snapshot: integrity.Snapshot | None  # the harness before the candidate was imported

    @property
    def device(self) -> str:
        return str(self.platform.torch_device)

    def tampering(self) -> tuple[str, ...]:
        return tuple(integrity.violations(self.snapshot)) if self.snapshot is not None else ()

    def attempt(self, index: int, step: Callable[..., _T], *args: Any, **kwargs: Any) -> _T | None:
        """``step(*args, **kwargs)`` for timing case ``index``; whatever it raises (the
        candidate's code runs there) is reported as the case's timing error, and the result
        is None. What the harness's own code raised there is reported as such while the
        harness is intact (a candidate that changed it owns what then fails)."""
        try:
            return step(*args, **kwargs)
        except HarnessFault as fault:
            exc = fault.cause
            self.ch.send(TimingError(index=index, message=describe(exc, 1000),
                                     traceback=traceback_of(exc),
                                     harness_fault=None if self.tampering() else fault.part))
            return None
        except BaseException as exc:  # noqa: BLE001
            self.ch.send(TimingError(index=index, message=describe(exc, 1000),
                                     traceback=traceback_of(exc),
                                     toolchain_stage=self.toolchain_stage(exc)))
            return None

    def toolchain_stage(self, exc: BaseException) -> str | None:
        """The platform's compiler stage ``exc`` was raised in (None: not the toolchain's)."""
        try:
            return stage_of_exception(exc, self.platform.toolchain)
        except BaseException:  # noqa: BLE001 - a candidate's exception that breaks the walk
            return None


def run_job(ch: AgentChannel, job: Job, platform: Any) -> None:
    """The stages of one job: load, check every case, then time. Each stage ends the job when
    the candidate fails it; the agent ends it with :class:`Stop` (or by closing the channel)."""
    spec = operators.get(job.operator_id)
    layers = frozenset(job.layers)
    snapshot = integrity.capture() if "integrity" in layers else None
    module = _load_stage(ch, job, spec)
    if module is None:
        return
    candidate = _Candidate(ch, module, spec, platform, layers, snapshot)
    try:
        if _check_stage(candidate, job.n_calls):
            _timing_stage(candidate)
    except Unexpected:  # Stop, or the verdict was decided without one
        return


# ---- load ----------------------------------------------------------------------------------------

def _load_stage(ch: AgentChannel, job: Job, spec: OperatorSpec) -> ModuleType | None:
    """Import the candidate: its module, or None after reporting why it cannot be used."""
    try:
        module = _load(job.path, job.module_name)
    except SyntaxError as exc:
        ch.send(LoadError(kind="syntax", message=_text(exc), traceback=traceback_of(exc)))
        return None
    except BaseException as exc:  # noqa: BLE001 - anything the import does is the candidate's
        ch.send(LoadError(kind="import", message=describe(exc, 500), traceback=traceback_of(exc)))
        return None
    missing = [e.name for e in spec.entry_points if not callable(getattr(module, e.name, None))]
    if missing:
        ch.send(LoadError(kind="missing_entry", traceback="",
                          message="missing entry point(s): " + ", ".join(missing)))
        return None
    ch.send(Loaded())
    return module


# ---- correctness ---------------------------------------------------------------------------------

def _check_stage(c: _Candidate, n_calls: int) -> bool:
    """Every correctness case, one per frame (frames stay bounded by the largest case). False
    once a case could not be run or reported."""
    # Uninitialised memory (torch.empty & co.) is filled with NaN / max-int while checking, so an
    # output the kernel never wrote cannot pass by inheriting a stale correct answer.
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
    for i in range(n_calls):
        if not _check_case(c, c.ch.expect(CheckCase, index=i)):
            return False
    torch.use_deterministic_algorithms(False)
    return True


def _check_case(c: _Candidate, ask: CheckCase) -> bool:
    """Dry run (off the device's gate), then the real call when the agent says so, then the
    probes it asked for; the outputs go back once the device's part is over."""
    i, call = ask.index, ask.call
    fn = getattr(c.module, call.entry)
    if not _binds(c, fn, call, i):
        return False
    # Dry first, without the device's gate: its kernels compile now, not under the gate.
    warm_s, stopped = dry_run.warm(fn, call, c.device) if ask.warm else (0.0, "")
    c.ch.send(Warmed(index=i, seconds=warm_s, stopped=stopped, launchers=launchers.take_misses()))
    c.ch.expect(RunCase, index=i)
    reply = _run_case(c, fn, ask)
    if reply is None:
        return False
    # The device's part is over once the reply is in host memory: say so, so the agent can let
    # timers in while the reply is encoded, sent and checked.
    synchronize(c.device)
    c.ch.send(Ran(index=i))
    return send_case_reply(c.ch, reply)


def _binds(c: _Candidate, fn: Any, call: Call, i: int) -> bool:
    """Whether the entry point can take the call's arguments (reported as the case's error)."""
    try:
        inspect.signature(fn).bind(*call.args, **call.kwargs)
    except TypeError as exc:
        expected = c.spec.entry_point(call.entry).signature
        c.ch.send(CaseError(index=i, message=f"entry point {call.entry} has the wrong signature "
                            f"({exc}); expected {expected}", traceback="", signature=True))
        return False
    except ValueError:
        pass  # no introspectable signature (e.g. a builtin): the call itself will tell
    return True


def _run_case(c: _Candidate, fn: Any, ask: CheckCase) -> CaseOutputs | None:
    """The checked call on fresh device copies, watched by the runtime layers, then the probes;
    the reply in host memory, or None once the call's failure is reported."""
    i = ask.index
    dev_call = prepare(ask.call, c.device)
    synchronize(c.device)
    guard = (DispatchGuard(c.spec.kind, c.module.__name__, [t for _, t in dev_call.tensor_args()])
             if "runtime" in c.layers else None)
    t0 = time.perf_counter()
    try:
        triton_hooks.start_recording()
        with guard if guard is not None else contextlib.nullcontext():
            result = invoke(fn, dev_call)
            synchronize(c.device)
        own_launches = sum(1 for m in triton_hooks.launches() if m == c.module.__name__)
    except BaseException as exc:  # noqa: BLE001 - SystemExit etc. are candidate faults too
        c.ch.send(CaseError(index=i, message=describe(exc, 1000), traceback=traceback_of(exc),
                            compile=_safely(_is_compile_error, exc),
                            platform_limit=_safely(c.platform.is_platform_limit, exc),
                            toolchain_stage=c.toolchain_stage(exc)))
        return None
    elapsed = time.perf_counter() - t0
    produced = collect(dev_call, result)
    del result  # a random case's resample may be given its outputs' storage back
    outs = [wire_output(o) for o in produced]
    post = {str(k): v.detach() for k, v in dev_call.tensor_args()}
    shared, tampered = layouts(dev_call, produced), c.tampering()
    resample = ask.repeat and c.spec.kind is Kind.RANDOM
    freed = resample_probe.freed_storages(dev_call, produced) if resample else []
    del produced
    ghost = _ghost_run(fn, ask.call, c.device, c.module.__name__) if ask.ghost else None
    repeat = _repeat_run(fn, ask.call, c.device) if ask.repeat and not resample else None
    replay = None
    if ask.replay is not None or resample:
        # The probe refills these very buffers: keep what the first run produced.
        outs = [_snapshot(o) if isinstance(o, torch.Tensor) else o for o in outs]
        post = {k: v.clone() for k, v in post.items()}
    if resample:
        repeat = resample_probe.resample_run(fn, ask.call, dev_call, freed)
    if ask.replay is not None:
        replay = _replay_run(fn, dev_call, ask.replay)
    return CaseOutputs(
        index=i, outputs=to_host(outs), layouts=shared, post_inputs=to_host(post),
        seconds=elapsed, own_launches=own_launches,
        guard=tuple(sorted(guard.violations)) if guard is not None else (), integrity=tampered,
        ghost_outputs=to_host(ghost), repeat_outputs=to_host(repeat),
        replay_outputs=to_host(replay))


# ---- timing --------------------------------------------------------------------------------------
# Per case: BuildInputs, Upload (input sets made on the device, the baseline's copies and a
# pristine copy of set 0 made while other workers may use it; on the cpu platform made at
# BuildInputs), Measure (while the agent holds the device for this worker alone), then Recheck
# (one more call on set 0's pristine copy, compared with the reference, with the device shared).

def _timing_stage(c: _Candidate) -> None:
    start = c.ch.expect(StartTiming)
    timer = c.platform.timer(c.device)
    l2_bytes = start.l2_bytes or timer.l2_bytes()
    for _ in range(start.n_cases):
        if not _time_case(c, c.ch.expect(BuildInputs), timer, l2_bytes, start.budget_s):
            return


def _time_case(c: _Candidate, ask: BuildInputs, timer: Any, l2_bytes: int,
               budget_s: float) -> bool:
    """One benchmark case through build, upload, measure and re-check; False once the
    candidate failed it (reported)."""
    index = ask.index
    case = c.spec.benchmark_cases()[index]
    fn = getattr(c.module, case.entry)
    built = c.attempt(index, _build, c, case, fn, ask, l2_bytes)
    if built is None:
        return False
    source, warm_s, stopped = built
    del built
    c.ch.send(Built(index=index, seconds=warm_s, stopped=stopped,
                    launchers=launchers.take_misses()))
    c.ch.expect(Upload, index=index)
    # The candidate may time on the built sets themselves: no reference to them outlives
    # TimingSets, so ``del sets`` frees both rotations before the re-check.
    sets = c.attempt(index, _upload, c, case, source, ask.seed, l2_bytes, timer)
    del source
    if sets is None:
        return False
    c.ch.send(Uploaded(index=index))
    c.ch.expect(Measure, index=index)
    measured = c.attempt(index, _measure, c, sets, fn, budget_s)
    pristine = sets.pristine  # set 0 as built (on the host when large), untouched by the candidate
    del sets
    if measured is None:
        return False
    c.ch.send(Timed(index=index, measurement=measured[0], integrity=measured[1]))
    # The re-check runs once the device is shared again (profiled when asked).
    profile = c.ch.expect(Recheck, index=index).profile
    checked = c.attempt(index, recheck, c.spec, case, pristine, fn, device=c.device,
                        timer=timer, own_module=c.module.__name__ if profile else None)
    del pristine
    if checked is None:
        return False
    c.ch.send(Rechecked(index=index, drift=checked.drift, device_time=checked.device_time,
                        integrity=c.tampering()))
    return True


def _build(c: _Candidate, case: Case, fn: Any, ask: BuildInputs,
           l2_bytes: int) -> tuple[list[Call], float, str]:
    """(input sets made on the host, dry-run seconds, why the dry run stopped early)."""
    if c.device == "cpu":  # host memory: no need to wait for the gate
        return build_sets(c.spec, case, seed=ask.seed, l2_bytes=l2_bytes), 0.0, ""
    if ask.warm:  # compile for the benchmark shapes now, not while timed
        make = functools.partial(c.spec.make_call, case, torch.Generator(c.device))
        return [], *dry_run.warm_made(fn, make, c.device)
    return [], 0.0, ""


def _upload(c: _Candidate, case: Case, source: list[Call], seed: int, l2_bytes: int,
            timer: Any) -> TimingSets:
    """The input sets (made on the device, with the device shared, unless made already) as
    :func:`upload_sets` arranges them for timing."""
    if not source:
        source = build_sets(c.spec, case, seed=seed, l2_bytes=l2_bytes, device=c.device)
    return upload_sets(c.spec, case, source, device=c.device, l2_bytes=l2_bytes, timer=timer)


def _measure(c: _Candidate, sets: TimingSets, fn: Any,
             budget_s: float) -> tuple[Measurement, tuple[str, ...]]:
    return measure(sets, fn, budget_s=budget_s), c.tampering()
