"""cublas::cublasDasum_v2 — ``result[0] = sum_i |x_i|`` over a strided float64 vector."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.cublas import _blas, _cublas, _level1
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
    case,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _dasum_partials(x_ptr, part_ptr, n, incx, iters, BLOCK: tl.constexpr):
    # Program p sums |x| over blocks p, p + P, p + 2P, ... lane by lane, then its lanes.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    r = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float64)
    for it in range(0, iters):
        i = (it * nprog + pid).to(tl.int64) * BLOCK + r
        acc += tl.abs(tl.load(x_ptr + i * incx, mask=i < n, other=0.0))
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _sum_partials(part_ptr, out_ptr, count, BLOCK: tl.constexpr):
    # One program: the sum of count partial sums (0 when count == 0) into out[0].
    r = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float64)
    for start in range(0, count, BLOCK):
        acc += tl.load(part_ptr + start + r, mask=start + r < count, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


def cublasDasum_v2(n, x, incx, result):
    if n <= 0 or incx <= 0:  # BLAS's quick return: the result is 0, written like any other
        _sum_partials[(1,)](result, result, 0, BLOCK=128)
        return None
    on_cpu = x.device.type == "cpu"
    BLOCK = 1024 if on_cpu else 2048
    blocks = triton.cdiv(n, BLOCK)
    programs = min(blocks, 4 if on_cpu else 1024)
    partials = torch.empty(programs, dtype=torch.float64, device=x.device)
    _dasum_partials[(programs,)](x, partials, n, incx, triton.cdiv(blocks, programs),
                                 BLOCK=BLOCK, num_warps=8)
    _sum_partials[(1,)](partials, result, programs, BLOCK=1024)
    return None
'''

# Sums the elements |incx| apart when incx < 0 instead of returning 0 at once (a negative
# increment read as "the same elements, walked backwards"): right whenever incx > 0.
NEGATIVE_SUMS_NEGATIVE_INC = _blas.variant(SOLUTION, (
    "    if n <= 0 or incx <= 0:  # BLAS's quick return: the result is 0, written like any other\n",
    "    incx = abs(incx)\n    if n <= 0 or incx == 0:\n"))

# Returns at once for n <= 0 or incx <= 0, leaving result unwritten.
NEGATIVE_NO_ZERO_FOR_EMPTY = _blas.variant(SOLUTION, (
    "        _sum_partials[(1,)](result, result, 0, BLOCK=128)\n", ""))


@register("cublas::cublasDasum_v2", version=1, kind=Kind.COMPUTE)
class Dasum(_level1.Level1):
    routine, precision, two = "cublasDasum_v2", "float64", False
    incs = (*_level1.INCS, 0)
    entry_points = (
        EntryPoint(
            "cublasDasum_v2",
            "cublasDasum_v2(n: int, x: Tensor, incx: int, result: Tensor) -> None",
            "result[0] = sum over i < n of |x[i*incx]| (float64); 0 when n <= 0 or incx <= 0.",
        ),
    )
    description = (
        "cuBLAS `cublasDasum_v2` (handle omitted): the sum of the absolute values of the "
        "float64 vector x, `sum_i |x[i*incx]|` for i in 0..n-1, written into `result[0]`; "
        "returns None. `x` is a 1-D contiguous float64 tensor holding the device buffer (at "
        "least 1 + (n-1)*incx elements; the others may hold NaN and must not be read; x must "
        "not be modified); `result` is a 1-element float64 device tensor (its old contents are "
        "garbage: write it, do not return the value). As in reference BLAS, when n <= 0 or "
        "incx <= 0 the result is 0 and x is not read (a negative increment is not walked "
        "backwards here). An infinite element makes the result inf, a NaN makes it NaN. "
        "Compute in float64 (any summation order)."
    )
    solution = SOLUTION
    negatives = (
        Negative("sums_negative_inc", "sums the elements |incx| apart when incx < 0 instead of "
                 "giving 0", NEGATIVE_SUMS_NEGATIVE_INC),
        Negative("no_zero_for_empty", "returns at once for n <= 0 or incx <= 0 without writing "
                 "the result (cuBLAS writes 0)", NEGATIVE_NO_ZERO_FOR_EMPTY),
    )
    # Relative to sum |x_i| (see _blas.SUM_ULPS); an empty sum must be exactly 0.
    tolerances = {"float64": _blas.sum_tolerance("float64")}

    def edge_cases(self) -> list[Case]:
        e, d = self.routine, self.precision
        return [
            case(e, d, (71,), incx=1, cpu=True),
            case(e, d, (497,), incx=3, cpu=True),
            case(e, d, (4500,), incx=1, cpu=True),  # five blocks on four programs
            case(e, d, (1500,), incx=2, specials=True, cpu=True),
            case(e, d, (160,), incx=-1, cpu=True),
            case(e, d, (57,), incx=0, cpu=True),
            case(e, d, (0,), incx=1, cpu=True),
            case(e, d, (1000,), incx=2, std=1e300),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        e, d = self.routine, self.precision
        return [case(e, d, (64 * 2**20,), incx=1), case(e, d, (32 * 2**20,), incx=2)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        (n,) = c.shape
        incx = c["incx"]
        # A negative incx gets a buffer sized for |incx| (what a caller passing it would hold),
        # incx == 0 n finite elements: none of them may count.
        x = _level1.vector(c, abs(incx) or 1, gen, gap=None if incx <= 0 else _blas.NAN)
        result = torch.full((1,), _blas.NAN, dtype=torch.float64)  # as the harness poisons it
        return Call(c.entry, (n, x, incx, result), outputs=(Out.arg(3),),
                    mutable=frozenset({3}), out_buffers=frozenset({3}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        n, x, incx, _ = call.args
        terms = _blas.gather(x, n, incx).double().abs() if incx > 0 else torch.zeros(0)
        value = terms.sum(dtype=torch.float64).reshape(1)
        return (Expected(value, torch.float64, value.abs()),)

    def baseline(self, call: Call) -> object:
        n, x, incx, result = call.args
        if x.is_cuda and _cublas.available():
            _cublas.call("cublasDasum_v2", n, x, incx, result)
        elif n > 0 and incx > 0:
            result.copy_(x.as_strided((n,), (incx,)).abs().sum().reshape(1))
        else:
            result.zero_()
        return None

    def cost(self, c: Case) -> Cost:
        (n,) = c.shape
        work = max(n, 0) if c["incx"] > 0 else 0
        return _blas.streaming_cost(work, work + 1, "float64")
