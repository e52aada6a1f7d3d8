"""cublas::cublasDcopy_v2 — ``y_i = x_i`` for i < n over strided float64 vectors."""

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
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, incx, incy, x0, y0, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    v = tl.load(x_ptr + x0 + i * incx, mask=mask)
    tl.store(y_ptr + y0 + i * incy, v, mask=mask)


def _start(n, inc):
    # A negative increment starts at the far end: element i is at (n - 1 - i) * |inc|.
    return (n - 1) * -inc if inc < 0 else 0


def cublasDcopy_v2(n, x, incx, y, incy):
    if n <= 0:
        return None
    BLOCK = 1024 if x.device.type == "cpu" else 2048
    _copy_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, incx, incy, _start(n, incx), _start(n, incy),
                                           BLOCK=BLOCK, num_warps=8)
    return None
'''

# Takes |inc| and walks forward from x[0]: right when both increments are positive, and when
# both are negative (the same pairs, visited in the other order).
NEGATIVE_ABS_INCREMENT = _blas.variant(SOLUTION, (
    "x, y, n, incx, incy, _start(n, incx), _start(n, incy),",
    "x, y, n, abs(incx), abs(incy), 0, 0,"))

# Steps y by incx too, bounded by y's buffer: right when incx == incy.
NEGATIVE_ONE_INCREMENT = _blas.variant(
    SOLUTION,
    ("def _copy_kernel(x_ptr, y_ptr, n, incx, incy, x0, y0, BLOCK: tl.constexpr):",
     "def _copy_kernel(x_ptr, y_ptr, n, incx, incy, x0, y0, y_len, BLOCK: tl.constexpr):"),
    ("    mask = i < n\n", "    mask = (i < n) & (y0 + i * incx < y_len) & (y0 + i * incx >= 0)\n"),
    ("    tl.store(y_ptr + y0 + i * incy, v, mask=mask)",
     "    tl.store(y_ptr + y0 + i * incx, v, mask=mask)"),
    ("_start(n, incx), _start(n, incy),\n", "_start(n, incx), _start(n, incx), y.numel(),\n"))


@register("cublas::cublasDcopy_v2", version=1, kind=Kind.COMPUTE)
class Dcopy(_level1.Copy):
    routine, precision = "cublasDcopy_v2", "float64"
    entry_points = (
        EntryPoint(
            "cublasDcopy_v2",
            "cublasDcopy_v2(n: int, x: Tensor, incx: int, y: Tensor, incy: int) -> None",
            "For i in 0..n-1: y_i = x_i, over strided float64 vectors; y written in place.",
        ),
    )
    description = (
        "cuBLAS `cublasDcopy_v2` (handle omitted): copies the float64 vector x into y, "
        "`y_i = x_i` for i in 0..n-1, writing `y` in place and returning None. `x` and `y` are "
        "1-D contiguous float64 tensors holding the device buffers. Element i of x is "
        "`x[i*incx]` when incx > 0; a negative increment starts at the far end, element i being "
        "`x[(n-1-i)*|incx|]`; likewise for y with incy (increments are never 0). Each buffer "
        "holds at least 1 + (n-1)*|inc| elements; the elements of y that are not the vector's "
        "must be left untouched, and x must not be modified. When n <= 0 nothing is done. The "
        "copy is exact, bit for bit: inf, NaN and subnormal values included."
    )
    solution = SOLUTION
    negatives = (
        Negative("abs_increment", "walks forward from x[0] and y[0] by |inc| for negative "
                 "increments; right only when both increments have the same sign",
                 NEGATIVE_ABS_INCREMENT),
        Negative("one_increment", "steps y by incx (bounded by y's buffer); right only when "
                 "incx == incy", NEGATIVE_ONE_INCREMENT),
    )
    tolerances = {"float64": _blas.exact()}

    def edge_cases(self) -> list[Case]:
        e, d = self.routine, self.precision
        return [
            case(e, d, (71,), incx=1, incy=1, cpu=True),
            case(e, d, (497,), incx=2, incy=3, cpu=True),
            case(e, d, (160,), incx=-1, incy=-2, cpu=True),
            case(e, d, (33,), incx=-3, incy=1, cpu=True),
            case(e, d, (1500,), incx=1, incy=-1, cpu=True),
            case(e, d, (2049,), incx=2, incy=2, specials=True, cpu=True),
            case(e, d, (0,), incx=1, incy=1, cpu=True),
            case(e, d, (1000,), incx=1, incy=2, std=1e300),
            case(e, d, (1000,), incx=-2, incy=1, subnormal=True),  # copied exactly, no flush
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        e, d = self.routine, self.precision
        return [case(e, d, (32 * 2**20,), incx=1, incy=1),
                case(e, d, (32 * 2**20,), incx=-1, incy=1),
                case(e, d, (16 * 2**20,), incx=2, incy=1)]
