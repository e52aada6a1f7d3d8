"""cublas::cublasSdot_v2 — ``result[0] = sum_i x_i * y_i`` over strided float32 vectors."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _level1
from operators.registry import register
from operators.spec import (
    Case,
    EntryPoint,
    Kind,
    Negative,
    case,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _sdot_partials(x_ptr, y_ptr, part_ptr, n, incx, incy, x0, y0, iters, BLOCK: tl.constexpr):
    # Program p sums blocks p, p + P, p + 2P, ... lane by lane, then reduces its lanes.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    r = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for it in range(0, iters):
        i = (it * nprog + pid).to(tl.int64) * BLOCK + r
        mask = i < n
        x = tl.load(x_ptr + x0 + i * incx, mask=mask, other=0.0)
        y = tl.load(y_ptr + y0 + i * incy, mask=mask, other=0.0)
        acc += x * y
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _sum_partials(part_ptr, out_ptr, count, BLOCK: tl.constexpr):
    # One program: the sum of count partial sums (0 when count == 0) into out[0].
    r = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, count, BLOCK):
        acc += tl.load(part_ptr + start + r, mask=start + r < count, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


def _start(n, inc):
    # A negative increment starts at the far end: element i is at (n - 1 - i) * |inc|.
    return (n - 1) * -inc if inc < 0 else 0


def cublasSdot_v2(n, x, incx, y, incy, result):
    if n <= 0:  # the result of an empty dot is 0, written like any other
        _sum_partials[(1,)](result, result, 0, BLOCK=128)
        return None
    on_cpu = x.device.type == "cpu"
    BLOCK = 1024 if on_cpu else 4096
    blocks = triton.cdiv(n, BLOCK)
    programs = min(blocks, 4 if on_cpu else 1024)
    partials = torch.empty(programs, dtype=torch.float32, device=x.device)
    _sdot_partials[(programs,)](x, y, partials, n, incx, incy, _start(n, incx), _start(n, incy),
                                triton.cdiv(blocks, programs), BLOCK=BLOCK, num_warps=8)
    _sum_partials[(1,)](partials, result, programs, BLOCK=1024)
    return None
'''

# Returns at once for n <= 0 like the other BLAS-1 routines, leaving result unwritten.
NEGATIVE_NO_ZERO_FOR_EMPTY = _blas.variant(SOLUTION, (
    "        _sum_partials[(1,)](result, result, 0, BLOCK=128)\n", ""))

# Takes |inc| and walks forward from x[0]: right when both increments have the same sign (the
# same pairs, summed in the other order).
NEGATIVE_ABS_INCREMENT = _blas.variant(SOLUTION, (
    "n, incx, incy, _start(n, incx), _start(n, incy),", "n, abs(incx), abs(incy), 0, 0,"))


@register("cublas::cublasSdot_v2", version=1, kind=Kind.COMPUTE)
class Sdot(_level1.Dot):
    routine, precision = "cublasSdot_v2", "float32"
    entry_points = (
        EntryPoint(
            "cublasSdot_v2",
            "cublasSdot_v2(n: int, x: Tensor, incx: int, y: Tensor, incy: int, result: Tensor) "
            "-> None",
            "result[0] = sum over i < n of x_i * y_i (float32 strided vectors).",
        ),
    )
    description = (
        "cuBLAS `cublasSdot_v2` (handle omitted): the dot product of the float32 vectors x and "
        "y, `sum_i x_i * y_i` for i in 0..n-1, written into `result[0]`; returns None. `x` and "
        "`y` are 1-D contiguous float32 tensors holding the device buffers; `result` is a "
        "1-element float32 device tensor (its old contents are garbage: write it, do not "
        "return the value). Element i of x is `x[i*incx]` when incx > 0; a negative increment "
        "starts at the far end, element i being `x[(n-1-i)*|incx|]`; likewise for y with incy "
        "(increments are never 0). Each buffer holds at least 1 + (n-1)*|inc| elements; the "
        "others may hold NaN and must not be read; x and y must not be modified. When n <= 0 "
        "the result is 0. Compute in float32 (any summation order)."
    )
    solution = SOLUTION
    negatives = (
        Negative("no_zero_for_empty", "returns at once for n <= 0 without writing the result "
                 "(cuBLAS writes 0)", NEGATIVE_NO_ZERO_FOR_EMPTY),
        Negative("abs_increment", "walks forward from x[0] and y[0] by |inc| for negative "
                 "increments; right only when both increments have the same sign",
                 NEGATIVE_ABS_INCREMENT),
    )
    # Relative to sum |x_i y_i| (see _blas.SUM_ULPS); an empty dot must be exactly 0.
    tolerances = {"float32": _blas.sum_tolerance("float32")}

    def edge_cases(self) -> list[Case]:
        e, d = self.routine, self.precision
        return [
            case(e, d, (71,), incx=1, incy=1, cpu=True),
            case(e, d, (497,), incx=2, incy=3, cpu=True),
            case(e, d, (4500,), incx=1, incy=1, cpu=True),  # five blocks on four programs
            case(e, d, (160,), incx=-1, incy=-2, cpu=True),
            case(e, d, (1500,), incx=-3, incy=1, cpu=True),
            case(e, d, (0,), incx=1, incy=1, cpu=True),
            case(e, d, (-2,), incx=1, incy=1, cpu=True),
            case(e, d, (1000,), incx=2, incy=-1, std=1e15),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        e, d = self.routine, self.precision
        return [case(e, d, (64 * 2**20,), incx=1, incy=1),
                case(e, d, (32 * 2**20,), incx=-1, incy=1)]
