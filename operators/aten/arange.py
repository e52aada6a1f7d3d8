"""aten::arange — ``start, start + step, …`` up to (not including) ``end`` (overloads default,
start_step, start_out)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from operators.aten._alloc import HERE, AllocProblem, write_cost
from operators.registry import register
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    Out,
    Tolerance,
    case,
)

SOLUTION = r'''
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _arange_float(out_ptr, n, start, step, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    # start + i * step in float64, rounded once to the output dtype
    v = tl.load(start + tl.zeros([BLOCK], tl.int32)) + i.to(tl.float64) * \
        tl.load(step + tl.zeros([BLOCK], tl.int32))
    tl.store(out_ptr + i, v.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _arange_int(out_ptr, n, start, step, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    v = tl.load(start + tl.zeros([BLOCK], tl.int32)) + i.to(tl.int64) * \
        tl.load(step + tl.zeros([BLOCK], tl.int32))
    tl.store(out_ptr + i, v.to(out_ptr.dtype.element_ty), mask=mask)


def _length(start, end, step):
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (step > 0 and start > end) or (step < 0 and start < end):
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    return int(math.ceil((end - start) / step))


def _write(out, start, end, step):
    n = out.numel()
    if n == 0:
        return out
    floating = out.dtype.is_floating_point
    kind = torch.float64 if floating else torch.int64
    start_t = torch.tensor([start], dtype=kind, device=out.device)
    step_t = torch.tensor([step], dtype=kind, device=out.device)
    BLOCK = 1024
    kernel = _arange_float if floating else _arange_int
    kernel[(triton.cdiv(n, BLOCK),)](out, n, start_t, step_t, BLOCK=BLOCK)
    return out


def _dtype(*values):
    return torch.float32 if any(isinstance(v, float) for v in values) else torch.int64


def arange_start_step(start, end, step=1, *, dtype=None, device=None):
    n = _length(start, end, step)
    out = torch.empty((n,), dtype=dtype or _dtype(start, end, step), device=device)
    return _write(out, start, end, step)


def arange(end, *, dtype=None, device=None):
    return arange_start_step(0, end, 1, dtype=dtype, device=device)


def arange_start_out(start, end, step=1, *, out):
    return _write(out, start, end, step)
'''

# Counts the elements with floor instead of ceil: one short whenever (end - start) / step is
# not a whole number.
NEGATIVE_FLOOR = SOLUTION.replace("    return int(math.ceil((end - start) / step))",
                                  "    return int(math.floor((end - start) / step))")


@register("aten::arange", version=1, kind=Kind.ALLOC)
class Arange(AllocProblem):
    entry_points = (
        EntryPoint("arange", "arange(end: Scalar, *, dtype: Optional[torch.dtype] = None, "
                   "device: Optional[torch.device] = None) -> Tensor", "0, 1, …, up to end."),
        EntryPoint("arange_start_step", "arange_start_step(start: Scalar, end: Scalar, step: "
                   "Scalar = 1, *, dtype: Optional[torch.dtype] = None, device: "
                   "Optional[torch.device] = None) -> Tensor", "start, start+step, …, up to end."),
        EntryPoint("arange_start_out", "arange_start_out(start: Scalar, end: Scalar, step: "
                   "Scalar = 1, *, out: Tensor) -> Tensor",
                   "Writes start, start+step, … into out (already of the right length)."),
    )
    description = (
        "Following `torch.arange`: a 1-D tensor of `ceil((end - start) / step)` elements "
        "`start + i * step` (computed in float64 for floating dtypes, then rounded once; exact "
        "in int64 for integer dtypes), on `device`. Without `dtype` the result is float32 if "
        "any of start, end, step is a Python float, else int64. `step` may be negative; a zero "
        "step or a step of the wrong sign is an error. `arange_start_out` writes into `out`."
    )
    solution = SOLUTION
    negatives = (Negative("floor_length", "counts elements with floor instead of ceil",
                          NEGATIVE_FLOOR),)

    def tolerance(self, c: Case, dtype: torch.dtype) -> Tolerance:
        if not dtype.is_floating_point:
            return Tolerance(0.0, 0.0)
        # one rounding of start + i*step (scale below) to the output dtype
        return Tolerance.ulps(dtype, 1)

    def cases(self) -> Sequence[Case]:
        return [
            case("arange", "int64", (), end=145, cpu=True),
            case("arange", "float32", (), end=100.5, cpu=True),
            case("arange_start_step", "int64", (), start=-7, end=50, step=3, cpu=True),
            case("arange_start_step", "float32", (), start=0.0, end=1.0, step=0.1, cpu=True),
            case("arange_start_step", "float16", (), start=-3.0, end=2.5, step=0.25,
                 dtype_arg=True, cpu=True),
            case("arange_start_step", "bfloat16", (), start=10.0, end=-10.0, step=-0.75,
                 dtype_arg=True, cpu=True),
            case("arange_start_step", "int32", (), start=5, end=5, step=1, dtype_arg=True,
                 cpu=True),
            case("arange_start_out", "float64", (), start=1.0, end=2.0, step=1 / 64, cpu=True),
            case("arange_start_step", "float32", (), start=0, end=4097, step=1, dtype_arg=True),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        return [case("arange_start_step", "float32", (), start=0.0, end=2.0**26, step=1.0),
                case("arange_start_step", "int64", (), start=0, end=3 * 2**25, step=3)]

    def _params(self, c: Case) -> tuple[float | int, float | int, float | int]:
        if c.entry == "arange":
            return 0, c["end"], 1
        return c["start"], c["end"], c["step"]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        start, end, step = self._params(c)
        if c.entry == "arange":
            return Call(c.entry, (end,), {"device": HERE})
        if c.entry == "arange_start_out":
            n = math.ceil((end - start) / step)
            out = torch.empty((n,), dtype=c.torch_dtype)
            return Call(c.entry, (start, end, step), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        kwargs: dict[str, object] = {"device": HERE}
        if c.get("dtype_arg"):
            kwargs["dtype"] = c.torch_dtype
        return Call(c.entry, (start, end, step), kwargs)

    def _call_params(self, call: Call) -> tuple[float | int, float | int, float | int]:
        if call.entry == "arange":
            return 0, call.args[0], 1
        start, end, step = call.args
        return start, end, step

    def reference(self, call: Call) -> tuple[Expected, ...]:
        start, end, step = self._call_params(call)
        if call.entry == "arange_start_out":
            dtype = call.kwargs["out"].dtype
        else:
            dtype = call.kwargs.get("dtype") or (
                torch.float32 if any(isinstance(v, float) for v in (start, end, step))
                else torch.int64)
        n = math.ceil((end - start) / step)
        i = torch.arange(n, dtype=torch.float64 if dtype.is_floating_point else torch.int64)
        value = start + i * step
        scale = (abs(start) + i.abs() * abs(step)) if dtype.is_floating_point else None
        return (Expected(value, dtype, scale),)

    def baseline(self, call: Call) -> object:
        if call.entry == "arange":
            return torch.arange(call.args[0], **call.kwargs)
        return torch.arange(*call.args, **call.kwargs)

    def cost(self, c: Case) -> Cost:
        start, end, step = self._params(c)
        return write_cost((math.ceil((end - start) / step),), c.dtype)
