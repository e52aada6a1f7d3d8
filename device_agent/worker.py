"""The sandbox worker: a separate process that imports one candidate, runs it, and exits.

Forked by the agent's forkserver — a separate process started by exec, with torch, triton and
the suite preloaded and no device initialised; the gRPC server itself never forks — then
pre-warmed (device initialised, a kernel run) before any candidate exists, and used for exactly
one candidate. Everything here runs beside untrusted code, so the
agent trusts nothing it says: it only sends raw outputs back over the channel (framed by
``device_agent.codec``, never pickled), and the agent compares them with references it keeps to
itself. Hidden seeds and expected outputs never enter this process.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import inspect
import os
import resource
import socket
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import asdict
from types import ModuleType
from typing import Any

from device_agent.codec import CodecError, encode, read_message_blocking, to_host

TRACEBACK_LIMIT = 6000


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.nonce = ""

    def send(self, msg: dict[str, Any]) -> None:
        msg["nonce"] = self.nonce
        self.sock.sendall(encode(msg))

    def recv(self) -> dict[str, Any]:
        return read_message_blocking(self.sock)


def _tb(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text[-TRACEBACK_LIMIT:]


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


def _output(value: Any) -> Any:
    """What travels back for one checked output: a plain tensor, a Python number, or a note."""
    from operators.invoke import wire_output

    return wire_output(value)


def _snapshot(t: Any) -> Any:
    """A copy of ``t`` that keeps its strides, overlapping ones included (``clone`` makes a
    non-dense view contiguous, and a view's strides are part of its answer)."""
    if t.numel() == 0:
        return t.clone()
    from operators.invoke import span

    flat = t.as_strided((span(t),), (1,), t.storage_offset()).clone()
    return flat.as_strided(tuple(t.shape), tuple(t.stride()), 0)


def _call_from_wire(w: dict[str, Any]) -> Any:
    from operators.spec import Call, Out

    return Call(entry=w["entry"], args=tuple(w["args"]), kwargs=dict(w["kwargs"]),
                outputs=tuple(Out(o[0], o[1]) for o in w["outputs"]),
                mutable=frozenset(w["mutable"]), out_buffers=frozenset(w["out_buffers"]))


def _ghost_run(fn: Any, call: Any, device: str, module_name: str) -> list[Any] | None:
    """The case again on fresh copies, with the candidate's own Triton launches skipped.
    Outputs come back for the agent to compare with the reference (None if the call failed,
    which is what an honest candidate may well do without its kernels)."""
    from device_agent import triton_hooks
    from operators.invoke import collect, invoke, prepare, synchronize

    dev_call = prepare(call, device)
    try:
        with triton_hooks.suppressed(module_name):
            result = invoke(fn, dev_call)
            synchronize(device)
        return [_output(o) for o in collect(dev_call, result)]
    except BaseException:  # noqa: BLE001 - failing without its kernels is no evidence
        return None


POISON_PATTERN = 0x5A  # bytes of freed device memory between the two determinism runs


def _repeat_run(fn: Any, call: Any, device: str) -> list[Any] | None:
    """The case again after refilling freed memory with a different pattern: a kernel that
    reads memory it never wrote (or races) gives a different answer the second time."""
    import torch

    from operators.invoke import collect, invoke, prepare, synchronize

    nbytes = sum(v.numel() * v.element_size() for _, v in call.tensor_args())
    junk = torch.empty(min(max(4 * nbytes, 1 << 20), 1 << 30), dtype=torch.uint8, device=device)
    junk.fill_(POISON_PATTERN)
    del junk  # back to the allocator's free list, full of the pattern
    dev_call = prepare(call, device)
    try:
        result = invoke(fn, dev_call)
        synchronize(device)
        return [_output(o) for o in collect(dev_call, result)]
    except BaseException:  # noqa: BLE001 - a crash on the second run is a difference too
        return None


def _replay_run(fn: Any, dev_call: Any, alt: Any) -> list[Any] | None:
    """The case again in the first run's own buffers (same addresses, same tensor objects),
    refilled in place with ``alt``'s contents and out-buffers poisoned again."""
    from operators.invoke import collect, invoke, poison, synchronize

    new = dict(alt.tensor_args())
    try:
        for key, t in dev_call.tensor_args():
            t.copy_(new[key])
        poison(dev_call)
        device = next((t.device for _, t in dev_call.tensor_args()), "cpu")
        result = invoke(fn, dev_call)
        synchronize(str(device))
        return [_output(o) for o in collect(dev_call, result)]
    except BaseException:  # noqa: BLE001 - a crash on the second call is a difference too
        return None


def send_case_reply(ch: Channel, reply: dict[str, Any], index: int) -> bool:
    """Send a case's reply; one too large for a frame (a result that views a huge buffer sends
    all the storage it spans) becomes the candidate's case error, not a crashed worker."""
    try:
        ch.send(reply)
    except CodecError as exc:
        ch.send({"type": "case_error", "index": index,
                 "message": f"the case's results cannot be returned: {exc} (a returned tensor "
                            "carries all the storage it spans; return tensors of the expected "
                            "size)", "traceback": ""})
        return False
    return True


def run_job(ch: Channel, job: dict[str, Any], platform: Any) -> None:
    import torch

    import operators
    from operators.invoke import collect, invoke, layouts, prepare, synchronize

    device = platform.torch_device
    spec = operators.get(job["operator_id"])

    layers = set(job.get("layers", []))
    from device_agent import integrity

    snapshot = integrity.capture() if "integrity" in layers else None

    def tampering() -> list[str]:
        return integrity.violations(snapshot) if snapshot is not None else []

    # ---- load --------------------------------------------------------------------------------
    try:
        module = _load(job["path"], job["module_name"])
    except SyntaxError as exc:
        ch.send({"type": "load_error", "kind": "syntax", "message": str(exc), "traceback": _tb(exc)})
        return
    except BaseException as exc:  # noqa: BLE001 - anything the import does is the candidate's
        ch.send({"type": "load_error", "kind": "import",
                 "message": f"{type(exc).__name__}: {exc}"[:500], "traceback": _tb(exc)})
        return
    missing = [e.name for e in spec.entry_points if not callable(getattr(module, e.name, None))]
    if missing:
        ch.send({"type": "load_error", "kind": "missing_entry",
                 "message": "missing entry point(s): " + ", ".join(missing), "traceback": ""})
        return
    ch.send({"type": "loaded"})

    # ---- correctness -------------------------------------------------------------------------
    # Uninitialised memory (torch.empty & co.) is filled with NaN / max-int while checking, so an
    # output the kernel never wrote cannot pass by inheriting a stale correct answer.
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
    from device_agent import dry_run, launchers, triton_hooks
    from device_agent.dispatch_guard import DispatchGuard

    guard_on = "runtime" in layers
    for i in range(int(job["n_calls"])):
        msg = ch.recv()  # one case per frame keeps frames bounded by the largest case
        if msg.get("type") != "call" or msg.get("index") != i:
            return
        call = _call_from_wire(msg["call"])
        fn = getattr(module, call.entry)
        try:
            inspect.signature(fn).bind(*call.args, **call.kwargs)
        except TypeError as exc:
            expected = spec.entry_point(call.entry).signature
            ch.send({"type": "case_error", "index": i, "signature": True,
                     "message": f"entry point {call.entry} has the wrong signature ({exc}); "
                                f"expected {expected}", "traceback": ""})
            return
        except ValueError:
            pass  # no introspectable signature (e.g. a builtin): the call itself will tell
        # Dry first, without the device's gate: its kernels compile now, not under the gate.
        warm_s, stopped = dry_run.warm(fn, call, device) if msg.get("warm") else (0.0, "")
        ch.send({"type": "warmed", "index": i, "seconds": warm_s, "stopped": stopped,
                 "launchers": launchers.take_misses()})
        go = ch.recv()
        if go.get("type") != "run" or go.get("index") != i:
            return
        dev_call = prepare(call, device)
        synchronize(device)
        guard = DispatchGuard(spec.kind) if guard_on else None
        t0 = time.perf_counter()
        try:
            triton_hooks.start_recording()
            with guard if guard is not None else contextlib.nullcontext():
                result = invoke(fn, dev_call)
                synchronize(device)
            own_launches = sum(1 for m in triton_hooks.launches() if m == module.__name__)
        except BaseException as exc:  # noqa: BLE001 - SystemExit etc. are candidate faults too
            ch.send({"type": "case_error", "index": i, "compile": _is_compile_error(exc),
                     "platform_limit": bool(platform.is_platform_limit(exc)),
                     "message": f"{type(exc).__name__}: {exc}"[:1000], "traceback": _tb(exc)})
            return
        elapsed = time.perf_counter() - t0
        produced = collect(dev_call, result)
        outs = [_output(o) for o in produced]
        shared = [None if lay is None else [lay.view_of, lay.offset]
                  for lay in layouts(dev_call, produced)]
        post = {str(k): v.detach() for k, v in dev_call.tensor_args()}
        reply: dict[str, Any] = {
            "type": "case", "index": i, "outputs": outs, "layouts": shared, "post_inputs": post,
            "seconds": elapsed, "own_launches": own_launches,
            "guard": sorted(guard.violations) if guard is not None else [],
            "integrity": tampering()}
        if msg.get("ghost"):
            reply["ghost_outputs"] = _ghost_run(fn, call, device, module.__name__)
        if msg.get("repeat"):
            reply["repeat_outputs"] = _repeat_run(fn, call, device)
        if msg.get("replay"):
            # The replay refills these very buffers: keep what the first run produced.
            reply["outputs"] = [_snapshot(o) if isinstance(o, torch.Tensor) else o for o in outs]
            reply["post_inputs"] = {k: v.clone() for k, v in post.items()}
            reply["replay_outputs"] = _replay_run(fn, dev_call, _call_from_wire(msg["replay"]))
        # The device's part is over once the reply is in host memory: say so, so the agent can
        # let timers in while the reply is encoded, sent and checked.
        reply = to_host(reply)
        synchronize(device)
        ch.send({"type": "ran", "index": i})
        if not send_case_reply(ch, reply, i):
            return
    torch.use_deterministic_algorithms(False)

    # ---- timing ------------------------------------------------------------------------------
    # Per case: "prepare", "upload" (input sets made on the device and copied while other workers
    # may use it; on the cpu platform made at "prepare"), "go" (measured while the agent holds
    # the device for this worker alone), then "recheck" (one more call on pristine inputs,
    # compared with the reference, with the device shared).
    cmd = ch.recv()
    if cmd.get("type") != "time":
        return
    from device_agent.timing import build_sets, measure, recheck, timer_for, upload_sets

    timer = timer_for(device)
    l2_bytes = int(cmd["l2_bytes"]) or timer.l2_bytes()
    for _ in range(int(cmd["n_cases"])):
        msg = ch.recv()
        if msg.get("type") != "prepare":
            return
        index = int(msg["index"])
        case = spec.benchmark_cases()[index]
        fn = getattr(module, case.entry)
        try:
            source: list[Any] = []
            warm_s, stopped = 0.0, ""
            if device == "cpu":  # host memory: no need to wait for the gate
                source = build_sets(spec, case, seed=int(msg["seed"]), l2_bytes=l2_bytes)
            elif msg.get("warm"):  # compile for the benchmark shapes now, not while timed
                warm_s, stopped = dry_run.warm_made(
                    fn, functools.partial(spec.make_call, case, torch.Generator(device)), device)
            ch.send({"type": "built", "index": index, "seconds": warm_s, "stopped": stopped,
                     "launchers": launchers.take_misses()})
            if ch.recv().get("type") != "upload":
                return
            if not source:  # made on the device, with the device shared
                source = build_sets(spec, case, seed=int(msg["seed"]), l2_bytes=l2_bytes,
                                    device=device)
            sets = upload_sets(spec, case, source, device=device, l2_bytes=l2_bytes,
                               timer=timer)
            ch.send({"type": "prepared", "index": index})
            if ch.recv().get("type") != "go":
                return
            result = measure(sets, fn, budget_s=float(cmd["budget_s"]))
            result["integrity"] = tampering()
            del sets
            ch.send({"type": "timing", "index": index, **result})
            # The re-check runs once the device is shared again (profiled when asked).
            ask = ch.recv()
            if ask.get("type") != "recheck":
                return
            checked = recheck(spec, case, source[0], fn, device=device, timer=timer,
                              own_module=module.__name__ if ask.get("profile") else None)
            del source
        except BaseException as exc:  # noqa: BLE001
            ch.send({"type": "timing_error", "index": index,
                     "message": f"{type(exc).__name__}: {exc}"[:1000], "traceback": _tb(exc)})
            return
        ch.send({"type": "rechecked", "index": index, "drift": checked.drift,
                 "device_time": None if checked.device_time is None
                 else checked.device_time.to_wire(),
                 "integrity": tampering()})


def worker_entry(sock: socket.socket, platform_name: str, env: dict[str, str], log_path: str,
                 plan: Any) -> None:
    """Body of a worker process forked by the agent's forkserver (torch and triton preloaded).

    Builds the sandbox's first phase (``sandbox.isolate``: descriptors, import path, cgroup,
    no_new_privs, namespaces, private mounts, PID 1 of its own namespace), takes the environment
    the agent built for it, and serves one candidate.
    """
    from device_agent import sandbox

    ch = Channel(sock)
    try:
        sandbox.isolate(plan, sock.fileno(), log_path)
    except BaseException as exc:  # noqa: BLE001 - a broken start is reported, not raised
        with contextlib.suppress(OSError):
            ch.send({"type": "start_error", "message": f"sandbox: {type(exc).__name__}: {exc}",
                     "traceback": _tb(exc)})
        os._exit(70)
    os.environ.clear()
    os.environ.update(env)
    code = serve(ch, platform_name, plan)
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without running the candidate's atexit hooks or finalisers.
    os._exit(code)


def _measure_peaks_if_asked(ch: Channel, platform: Any, system: dict[str, Any]) -> dict[str, Any]:
    """The agent asks one worker to measure when its peak cache has no entry for this device."""
    cache_dir = os.environ.get("KGB_PEAKS_CACHE_DIR")
    if not cache_dir or not platform.timings_meaningful:
        return {}
    from device_agent import peaks

    os.environ["KGB_CACHE_DIR"] = cache_dir
    if peaks.load(system["device_model"], system["driver"]) is not None:
        return {}
    try:
        with _device_section(ch):
            return {"peaks": peaks.measure(platform.torch_device)}
    except Exception as exc:  # noqa: BLE001 - the datasheet stays in use
        return {"peaks_error": f"{type(exc).__name__}: {exc}"[:500]}


@contextlib.contextmanager
def _device_section(ch: Channel) -> Iterator[None]:
    """Start-up work that uses the device waits for the agent's word, which it gives only while
    no case is being timed there; the host work of a start (imports, compiles, the sandbox) goes
    on meanwhile, so a timer never waits for a whole start."""
    ch.send({"type": "device_wanted"})
    msg = ch.recv()
    if msg.get("type") != "device_granted":
        raise RuntimeError(f"the agent did not grant the device (sent {msg.get('type')!r})")
    try:
        yield
    finally:
        ch.send({"type": "device_released"})


def serve(ch: Channel, platform_name: str, plan: Any) -> int:
    """Warm up, lock the sandbox down, report ready, then run one job. Returns an exit code."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core dumps from crashing candidates
    try:
        from device_agent.platforms import resolve

        platform = resolve(platform_name)
        with _device_section(ch):  # the context and a first kernel
            platform.init_worker()
        import operators
        from device_agent.warmup import compile_warm_kernel, warm_imports, warm_kernel

        operators.all_specs()
        warm_imports()
        from device_agent import triton_hooks

        triton_hooks.install()  # before any candidate exists
        system = asdict(platform.system_info())  # NVML etc. before privileges are dropped
        peaks = _measure_peaks_if_asked(ch, platform, system)
        from device_agent import sandbox

        applied = sandbox.lock_down(plan)
        try:
            if platform.compiles_kernels:
                compile_warm_kernel(platform.torch_device)  # host work: off the device's gate
            with _device_section(ch):
                warm_kernel(platform.torch_device)
        except Exception as exc:
            hint = (" (agent option --unsafe-sandbox runs trusted code without the sandbox)"
                    if plan.isolate else "")
            raise RuntimeError(f"warm-up kernel failed inside the sandbox: {exc}{hint}") from exc
        ch.send({"type": "ready", "pid": os.getpid(), "system": system,
                 "sandbox": asdict(applied), **peaks})
    except BaseException as exc:  # noqa: BLE001 - reported to the agent as a broken start
        with contextlib.suppress(OSError):
            ch.send({"type": "start_error", "message": f"{type(exc).__name__}: {exc}",
                     "traceback": _tb(exc)})
        return 70
    try:
        job = ch.recv()
    except EOFError:
        return 0
    ch.nonce = str(job.get("nonce", ""))
    ch.send({"type": "accepted"})  # before any candidate code: a death before this is ours
    run_job(ch, job, platform)
    return 0
