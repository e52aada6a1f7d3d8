"""cublas::cublasSscal_v2 — ``x_i = alpha * x_i`` for i < n over a strided float32 vector."""

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
    Tolerance,
    case,
)

SOLUTION = r'''
import triton
import triton.language as tl


@triton.jit
def _sscal_kernel(x_ptr, n, alpha, incx, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    p = x_ptr + i * incx
    tl.store(p, alpha * tl.load(p, mask=mask), mask=mask)


def cublasSscal_v2(n, alpha, x, incx):
    if n <= 0 or incx <= 0:  # BLAS's quick return: x is left as it is
        return None
    BLOCK = 1024 if x.device.type == "cpu" else 4096
    _sscal_kernel[(triton.cdiv(n, BLOCK),)](x, n, alpha, incx, BLOCK=BLOCK, num_warps=8)
    return None
'''

# Scales the elements |incx| apart when incx < 0 instead of returning at once (a negative
# increment read as "the same elements, walked backwards"): right whenever incx > 0.
NEGATIVE_SCALES_NEGATIVE_INC = _blas.variant(SOLUTION, (
    "    if n <= 0 or incx <= 0:  # BLAS's quick return: x is left as it is\n        return None\n",
    "    if n <= 0 or incx == 0:\n        return None\n    incx = abs(incx)\n"))

# Ignores incx and scales x[0..n-1]: right whenever incx == 1.
NEGATIVE_DENSE_X = _blas.variant(SOLUTION, ("    p = x_ptr + i * incx\n", "    p = x_ptr + i\n"))


@register("cublas::cublasSscal_v2", version=1, kind=Kind.COMPUTE)
class Sscal(_level1.Level1):
    routine, precision, two = "cublasSscal_v2", "float32", False
    alphas, incs = (0.0, 1.0, -1.5, 0.3), (*_level1.INCS, 0)
    hidden_alphas = (0.0, 1.0, -1.0, 0.1, -2.75, 7.5)
    entry_points = (
        EntryPoint(
            "cublasSscal_v2",
            "cublasSscal_v2(n: int, alpha: float, x: Tensor, incx: int) -> None",
            "For i in 0..n-1: x[i*incx] = alpha * x[i*incx], in place; nothing when incx <= 0.",
        ),
    )
    description = (
        "cuBLAS `cublasSscal_v2` (handle omitted): scales the float32 vector x by alpha, "
        "`x[i*incx] = alpha * x[i*incx]` for i in 0..n-1, updating `x` in place and returning "
        "None. `x` is a 1-D contiguous float32 tensor holding the device buffer (at least "
        "1 + (n-1)*incx elements); `alpha` is a Python float used as a float32 (a C float in "
        "cuBLAS). As in reference BLAS, the routine returns at once, leaving x untouched, when "
        "n <= 0 or incx <= 0 (a negative increment is not walked backwards here). The elements "
        "of x that are not the vector's must be left untouched. alpha == 0 gives zeros (x is "
        "finite in every case). Compute in float32: one rounded product per element."
    )
    solution = SOLUTION
    negatives = (
        Negative("scales_negative_inc", "scales the elements |incx| apart when incx < 0 "
                 "instead of returning at once", NEGATIVE_SCALES_NEGATIVE_INC),
        Negative("dense_x", "ignores incx and scales x[0..n-1]; right only when incx == 1",
                 NEGATIVE_DENSE_X),
    )
    # One rounded product: <= 1 u of |alpha * x|; untouched elements have scale 0 (exact).
    tolerances = {"float32": Tolerance.ulps("float32", 1)}

    def edge_cases(self) -> list[Case]:
        e, d = self.routine, self.precision
        return [
            case(e, d, (71,), alpha=-1.5, incx=1, cpu=True),
            case(e, d, (497,), alpha=0.3, incx=3, cpu=True),
            case(e, d, (1500,), alpha=2.0, incx=2, cpu=True),
            case(e, d, (33,), alpha=0.0, incx=1, cpu=True),
            case(e, d, (160,), alpha=-1.5, incx=-1, cpu=True),
            case(e, d, (57,), alpha=3.0, incx=0, cpu=True),
            case(e, d, (0,), alpha=2.0, incx=1, cpu=True),
            case(e, d, (1000,), alpha=1e20, incx=2, std=1e15),
            case(e, d, (1000,), alpha=-1e-20, incx=1, std=1e10),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        e, d = self.routine, self.precision
        return [case(e, d, (64 * 2**20,), alpha=1.5, incx=1),
                case(e, d, (32 * 2**20,), alpha=-0.5, incx=2)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        (n,) = c.shape
        incx = c["incx"]
        # Random gaps and one element past the end: alpha * NaN would hide a write to a NaN
        # gap. A negative incx gets a buffer sized for |incx| (what a caller passing it would
        # hold), which the routine must not touch; incx == 0, n + 1 elements.
        x = _level1.vector(c, abs(incx) or 1, gen, gap=None, tail=1)
        return Call(c.entry, (n, c["alpha"], x, incx), outputs=(Out.arg(2),),
                    mutable=frozenset({2}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        n, alpha, x, incx = call.args
        if n <= 0 or incx <= 0:
            untouched = torch.zeros(x.shape, dtype=torch.float64)
            return (Expected(_blas.hp(x), torch.float32, untouched),)
        scaled = _blas.as_real(alpha, "float32") * _blas.gather(x, n, incx).double()
        return (Expected(_level1.updated(x, n, incx, scaled), torch.float32,
                         _level1.at(x, n, incx, scaled.abs())),)

    def baseline(self, call: Call) -> object:
        n, alpha, x, incx = call.args
        if x.is_cuda and _cublas.available():
            _cublas.call("cublasSscal_v2", n, _cublas.scalar(alpha, torch.float32, x.device), x,
                         incx)
        elif n > 0 and incx > 0:
            x.as_strided((n,), (incx,)).mul_(alpha)
        return None

    def cost(self, c: Case) -> Cost:
        (n,) = c.shape
        work = max(n, 0) if c["incx"] > 0 else 0
        return _blas.streaming_cost(work, 2 * work, "float32")
