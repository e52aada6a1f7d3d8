"""The ``cpu`` platform: Triton's interpreter on CPU tensors, for correctness only.

Timings measured here are never reported as performance (``timings_meaningful`` is False).
The worker starts with ``TRITON_INTERPRET=1`` so every candidate kernel is decorated in
interpreter mode, and this plugin owns the interpreter's gaps, so that an interpreter limit is
never the candidate's fault:

- ``@triton.autotune`` with several configs (and ``triton.testing.do_bench``) get a CPU timer;
- libdevice calls (``tl.extra.libdevice``, ``tl.extra.cuda.libdevice``) are mapped onto numpy;
- ``tl.dot`` on bfloat16 inputs (the interpreter multiplies the raw bits) widens the operands to
  float32 exactly and accumulates in float32, as the GPU does;
- the gaps where the interpreter runs a kernel differently from compiled Triton (``and``/``or``
  on tensors, ``~`` on unsigned ints, bf16 comparisons, float arguments, constexpr dtypes, fp8
  casts, bf16 arithmetic, constants, reductions and atomics) are shimmed in ``interpreter_gaps``;
- anything else the interpreter cannot run (``NotImplementedError`` raised inside it) is
  reported as a platform limit (``INFRA_ERROR``), never as a candidate failure.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from device_agent.platforms.base import Peaks, base_system_info, cpu_model_name
from device_agent.platforms.registry import register_platform
from device_agent.platforms.toolchain import NO_TOOLCHAIN, ToolchainFrames
from protos.records import SystemInfo

if TYPE_CHECKING:
    from device_agent.timing import Timer


@register_platform("cpu", auto_rank=100)  # auto's fallback: always available
class CpuPlatform:
    name: str = "cpu"
    torch_device: str = "cpu"
    visibility_env: str | None = None
    timings_meaningful: bool = False
    compiles_kernels: bool = False
    profiles_device: bool = False
    baseline_library: str = "PyTorch's CPU kernels (ATen), for correctness only"
    compiler_limits: tuple[str, ...] = (
        "Triton's interpreter: what it cannot run (NotImplementedError inside it) is INFRA_ERROR",
    )
    toolchain: ToolchainFrames = NO_TOOLCHAIN  # nothing compiles: the interpreter runs the AST

    def available(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def worker_env(self, device_index: int) -> dict[str, str]:
        return {"TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

    def import_env(self) -> dict[str, str]:
        return {"TRITON_INTERPRET": "1"}

    def init_worker(self) -> None:
        import torch

        torch.set_num_threads(1)
        torch.zeros(16).add_(1)
        install_interpreter_support()

    def device_model(self) -> str:
        return f"cpu ({cpu_model_name()})"

    def system_info(self) -> SystemInfo:
        return SystemInfo(device_model=self.device_model(), driver="triton-interpreter",
                          **base_system_info(self.name))  # type: ignore[arg-type]

    def is_platform_limit(self, exc: BaseException) -> bool:
        return is_interpreter_limit(exc)

    def peaks(self) -> Peaks | None:
        return None  # no speed-of-light: nothing timed here is reported

    def timer(self, device: str) -> Timer:
        from device_agent.timing import WallTimer

        return WallTimer()


# ---- the interpreter's gaps ------------------------------------------------------------------

def cpu_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100,
              grad_to_none: Any = None, quantiles: Any = None, return_mode: str = "mean",
              **_: Any) -> Any:
    """A CPU stand-in for ``do_bench`` with its meaning: ``warmup`` and ``rep`` are budgets in
    milliseconds, turned into run counts from one first timed run, and the result is in ms
    (the quantiles, or the ``return_mode`` statistic).

    Under the interpreter one run of a kernel takes tens of ms to seconds, so an autotuner
    running three configs costs one run each instead of four; its pick steers only
    which config the correctness check sees, not any reported time."""
    t0 = time.perf_counter()
    fn()
    first = (time.perf_counter() - t0) * 1e3
    per_run = max(first, 1e-3)
    n_rep = min(_MAX_BENCH_RUNS, int(rep / per_run))
    if n_rep == 0:  # one run already spent the whole budget: it is the sample
        times = [first]
    else:
        for _i in range(min(_MAX_BENCH_RUNS, int(warmup / per_run))):
            fn()
        times = []
        for _i in range(n_rep):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()

    def q(p: float) -> float:
        return times[min(len(times) - 1, int(p * len(times)))]

    if quantiles:
        return [q(p) for p in quantiles]
    if return_mode == "all":
        return times
    if return_mode in ("min", "max", "median"):
        return {"min": times[0], "max": times[-1], "median": q(0.5)}[return_mode]
    return sum(times) / len(times)


_MAX_BENCH_RUNS = 1000  # a cap on runs per call, whatever a too-fast clock suggests


def _lgamma(x: float) -> float:
    """lgamma as the GPU's: +inf at the poles (0, -1, -2 …), where Python's raises."""
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):
        return math.inf


def _tgamma(x: float) -> float:
    """tgamma as the GPU's: ±inf at ±0, NaN at negative integers, inf on overflow."""
    try:
        return math.gamma(x)
    except OverflowError:
        return math.inf
    except ValueError:
        return math.copysign(math.inf, x) if x == 0 else math.nan


def _np_unary(name: str) -> Callable[[Any], Any]:
    import numpy as np

    special: dict[str, Callable[[Any], Any]] = {
        "rsqrt": lambda x: 1.0 / np.sqrt(x),
        "exp10": lambda x: np.power(10.0, x),
        "erf": np.vectorize(math.erf, otypes=[np.float64]),
        "erfc": np.vectorize(math.erfc, otypes=[np.float64]),
        "lgamma": np.vectorize(_lgamma, otypes=[np.float64]),
        "tgamma": np.vectorize(_tgamma, otypes=[np.float64]),
        "round": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
        "nearbyint": np.rint,
        "fabs": np.abs,
        "abs": np.abs,
        "saturatef": lambda x: np.clip(x, 0.0, 1.0),
    }
    fn: Callable[[Any], Any] = special.get(name) or getattr(np, name)
    return fn


_UNARY = ("abs", "fabs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "ceil", "cos",
          "cosh", "erf", "erfc", "exp", "exp2", "exp10", "expm1", "floor", "lgamma", "log", "log10",
          "log1p", "log2", "rint", "nearbyint", "round", "rsqrt", "sin", "sinh", "sqrt", "tan",
          "tanh", "trunc", "tgamma", "saturatef")
_FAST_UNARY = {"fast_expf": "exp", "fast_logf": "log", "fast_log2f": "log2", "fast_log10f": "log10",
               "fast_sinf": "sin", "fast_cosf": "cos", "fast_tanf": "tan", "fast_exp10f": "exp10",
               "fast_tanhf": "tanh"}
_BINARY = {"pow": "power", "powf": "power", "fast_powf": "power", "atan2": "arctan2",
           "fmax": "fmax", "fmin": "fmin", "fmod": "fmod", "hypot": "hypot",
           "copysign": "copysign", "nextafter": "nextafter", "div_rn": "true_divide",
           "fast_dividef": "true_divide", "add_rn": "add", "mul_rn": "multiply", "sub_rn": "subtract"}


def _as_array(x: Any) -> Any:
    import numpy as np

    handle = getattr(x, "handle", None)
    if handle is not None and hasattr(handle, "data"):
        return handle.data
    value = getattr(x, "value", x)  # constexpr
    return np.asarray(value, dtype=np.float64)


def _wrap(result: Any, like: Any) -> Any:
    import triton.language as tl
    from triton.runtime import interpreter as interp

    h = like.handle
    out = result.astype(h.data.dtype) if hasattr(result, "astype") else result
    return tl.core.tensor(interp.TensorHandle(out, h.dtype.scalar), like.type)


def _make_unary(fn: Callable[[Any], Any]) -> Callable[..., Any]:
    def op(x: Any, *_: Any, **__: Any) -> Any:
        return _wrap(fn(_as_array(x).astype("float64")), x)

    return op


def _make_binary(fn: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    import numpy as np

    def op(a: Any, b: Any, *_: Any, **__: Any) -> Any:
        da, db = _as_array(a), _as_array(b)
        like = a if hasattr(a, "handle") and np.ndim(da) >= np.ndim(db) else b
        return _wrap(fn(da.astype("float64"), db.astype("float64")), like)

    return op


def _patch_libdevice() -> None:
    import importlib

    import numpy as np

    modules = []
    for name in ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice",
                 "triton.language.extra.hip.libdevice", "triton.language.math"):
        try:
            modules.append(importlib.import_module(name))
        except ImportError:
            continue
    table: dict[str, Callable[..., Any]] = {}
    for n in _UNARY:
        table[n] = _make_unary(_np_unary(n))
    for fast, n in _FAST_UNARY.items():
        table[fast] = _make_unary(_np_unary(n))
    for n, npname in _BINARY.items():
        table[n] = _make_binary(getattr(np, npname))
    for mod in modules:
        if mod.__name__ == "triton.language.math":
            continue  # core math builtins are the interpreter's own
        for n, fn in table.items():
            if hasattr(mod, n):
                setattr(mod, n, fn)


def f32_to_bf16_rne(data: Any) -> Any:
    """float32 values (any numpy float array) to bfloat16 bits, rounding to nearest even as
    the GPU does; NaN stays a (quiet) NaN. The interpreter truncates instead."""
    import numpy as np

    bits = np.ascontiguousarray(data, dtype=np.float32).view(np.uint32)
    rounded = ((bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))))
               >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(data)
    if np.any(nan):
        rounded[nan] = ((bits[nan] >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return rounded


def f32_to_tf32(data: Any) -> Any:
    """float32 values rounded to TF32 (10 mantissa bits, nearest even), as tensor cores read
    float32 ``tl.dot`` inputs under the default ``input_precision="tf32"``."""
    import numpy as np

    bits = np.ascontiguousarray(data, dtype=np.float32).view(np.uint32)
    finite = np.isfinite(data)
    rounded = (bits + (np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1)))) \
        & np.uint32(0xFFFFE000)
    return np.where(finite, rounded, bits).view(np.float32).reshape(np.shape(data))


def _patch_numerics() -> None:
    """Make the interpreter round like the GPU where it does not: bf16 ``tl.dot`` (it multiplies
    raw bits), casts to and from bfloat16 (it truncates float32 and bit-casts every other type)
    and float32 ``tl.dot`` (the GPU's
    default precision is TF32, the interpreter's full float32) — so a candidate's numerics are
    judged the same on ``cpu`` as on a GPU."""
    import numpy as np
    import triton.language as tl
    from triton._C.libtriton import ir
    from triton.runtime import interpreter as interp

    builder = interp.InterpreterBuilder
    if getattr(builder.create_dot, "_kgb_patched", False):
        return
    original_dot = builder.create_dot
    original_cast = builder.cast_impl
    original_fp_to_fp = builder.create_fp_to_fp

    def widen(h: Any) -> Any:
        if h.dtype.scalar == tl.bfloat16 or str(h.dtype) == "bf16":
            bits = h.data.astype(np.uint32) << np.uint32(16)
            return interp.TensorHandle(bits.view(np.float32), tl.float32)
        return h

    def to_tf32(h: Any) -> Any:
        return interp.TensorHandle(f32_to_tf32(h.data), h.dtype.scalar)

    def create_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any,
                   max_num_imprecise_acc: Any) -> Any:
        if (a.dtype.scalar == tl.float32 and b.dtype.scalar == tl.float32
                and input_precision == ir.INPUT_PRECISION.TF32):
            a, b = to_tf32(a), to_tf32(b)
        return original_dot(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        s, d = src.dtype.scalar, dst_type.scalar
        # numpy has no bfloat16: the interpreter keeps its bits as uint16 and converts other
        # types to and from it as if they were integers. Go through float32 instead (exact
        # from bf16; ints, bools and fp16 to float32 then RNE to bf16).
        if d == tl.bfloat16 and s != tl.bfloat16:
            return interp.TensorHandle(f32_to_bf16_rne(src.data.astype(np.float32)), d)
        if s == tl.bfloat16 and d not in (tl.bfloat16, tl.float32):
            wide = widen(src).data
            return interp.TensorHandle(wide.astype(interp._get_np_dtype(dst_type)), d)
        return original_cast(self, src, dst_type)

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        if (src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16
                and rounding_mode != ir.ROUNDING_MODE.RTZ):
            return interp.TensorHandle(f32_to_bf16_rne(src.data), dst_type.scalar)
        return original_fp_to_fp(self, src, dst_type, rounding_mode)

    create_dot._kgb_patched = True  # type: ignore[attr-defined]
    builder.create_dot = create_dot
    builder.cast_impl = cast_impl
    builder.create_fp_to_fp = create_fp_to_fp
    # create_fp_trunc & co. are lambdas calling self.cast_impl: they pick up the patch.


def _patch_benchmarking() -> None:
    import triton
    import triton.testing
    from triton.runtime import autotuner

    def do_bench(self: Any) -> Any:
        return self._do_bench if self._do_bench is not None else cpu_bench

    autotuner.Autotuner.do_bench = property(do_bench)
    triton.testing.do_bench = cpu_bench


def install_interpreter_support() -> None:
    """Install the patches (idempotent). Called in cpu workers before any candidate import."""
    from device_agent.platforms import interpreter_gaps

    _patch_libdevice()
    _patch_numerics()
    _patch_benchmarking()
    interpreter_gaps.install()  # after _patch_numerics: it wraps the casts patched there


def is_interpreter_limit(exc: BaseException) -> bool:
    """True when ``exc`` is the interpreter refusing something it cannot run
    (``NotImplementedError`` raised inside Triton's interpreter), not the candidate's bug."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, NotImplementedError):
            frames = traceback.extract_tb(e.__traceback__)
            if frames and frames[-1].filename.replace("\\", "/").endswith("triton/runtime/interpreter.py"):
                return True
        e = e.__cause__ or e.__context__
    return False
