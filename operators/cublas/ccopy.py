"""cublas::cublasCcopy_v2 — ``y_i = x_i`` for i < n over strided complex64 vectors."""

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
def _ccopy_kernel(x_ptr, y_ptr, n, incx, incy, x0, y0, BLOCK: tl.constexpr):
    # x_ptr, y_ptr: the float32 views; a complex element is two floats (real, imaginary).
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    part = tl.arange(0, 2)
    mask = (i < n)[:, None]
    px = 2 * (x0 + i * incx)
    py = 2 * (y0 + i * incy)
    v = tl.load(x_ptr + px[:, None] + part[None, :], mask=mask)
    tl.store(y_ptr + py[:, None] + part[None, :], v, mask=mask)


def _start(n, inc):
    # A negative increment starts at the far end: element i is at (n - 1 - i) * |inc|.
    return (n - 1) * -inc if inc < 0 else 0


def cublasCcopy_v2(n, x, incx, y, incy):
    if n <= 0:
        return None
    xr = torch.view_as_real(x)
    yr = torch.view_as_real(y)
    BLOCK = 512 if x.device.type == "cpu" else 1024
    _ccopy_kernel[(triton.cdiv(n, BLOCK),)](xr, yr, n, incx, incy, _start(n, incx),
                                            _start(n, incy), BLOCK=BLOCK, num_warps=8)
    return None
'''

# Takes |inc| and walks forward from x[0]: right when both increments have the same sign.
NEGATIVE_ABS_INCREMENT = _blas.variant(SOLUTION, (
    "xr, yr, n, incx, incy, _start(n, incx),\n"
    "                                            _start(n, incy),",
    "xr, yr, n, abs(incx), abs(incy), 0, 0,"))

# Indexes the float32 views in elements, forgetting that a complex element is two floats:
# right only for n == 1.
NEGATIVE_ELEMENT_STRIDE = _blas.variant(
    SOLUTION,
    ("    px = 2 * (x0 + i * incx)\n    py = 2 * (y0 + i * incy)\n",
     "    px = x0 + i * incx\n    py = y0 + i * incy\n"))


@register("cublas::cublasCcopy_v2", version=1, kind=Kind.COMPUTE)
class Ccopy(_level1.Copy):
    routine, precision = "cublasCcopy_v2", "complex64"
    entry_points = (
        EntryPoint(
            "cublasCcopy_v2",
            "cublasCcopy_v2(n: int, x: Tensor, incx: int, y: Tensor, incy: int) -> None",
            "For i in 0..n-1: y_i = x_i, over strided complex64 vectors; y written in place.",
        ),
    )
    description = (
        "cuBLAS `cublasCcopy_v2` (handle omitted): copies the single-precision complex vector x "
        "into y, `y_i = x_i` for i in 0..n-1, writing `y` in place and returning None. `x` and "
        "`y` are 1-D contiguous complex64 tensors holding the device buffers; "
        "`torch.view_as_real` gives their float32 view, element k's real part at [k, 0] and "
        "imaginary part at [k, 1]. Element i of x is `x[i*incx]` when incx > 0; a negative "
        "increment starts at the far end, element i being `x[(n-1-i)*|incx|]`; likewise for y "
        "with incy (increments are never 0). Each buffer holds at least 1 + (n-1)*|inc| "
        "elements; the elements of y that are not the vector's must be left untouched, and x "
        "must not be modified. When n <= 0 nothing is done. The copy is exact, bit for bit, "
        "both parts: inf and NaN included."
    )
    solution = SOLUTION
    negatives = (
        Negative("abs_increment", "walks forward from x[0] and y[0] by |inc| for negative "
                 "increments; right only when both increments have the same sign",
                 NEGATIVE_ABS_INCREMENT),
        Negative("element_stride", "indexes the float32 views by element, not by two floats "
                 "per complex element; right only for n == 1", NEGATIVE_ELEMENT_STRIDE),
    )
    tolerances = {"complex64": _blas.exact()}

    def edge_cases(self) -> list[Case]:
        e, d = self.routine, self.precision
        return [
            case(e, d, (1,), incx=1, incy=1, cpu=True),
            case(e, d, (71,), incx=1, incy=1, cpu=True),
            case(e, d, (497,), incx=2, incy=3, cpu=True),
            case(e, d, (160,), incx=-1, incy=-2, cpu=True),
            case(e, d, (33,), incx=-3, incy=1, cpu=True),
            case(e, d, (1025,), incx=1, incy=-1, specials=True, cpu=True),
            case(e, d, (0,), incx=1, incy=1, cpu=True),
            case(e, d, (1000,), incx=3, incy=2, std=1e37),
            case(e, d, (1000,), incx=1, incy=-1, subnormal=True),  # copied exactly, no flush
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        e, d = self.routine, self.precision
        return [case(e, d, (32 * 2**20,), incx=1, incy=1),
                case(e, d, (32 * 2**20,), incx=1, incy=-1),
                case(e, d, (16 * 2**20,), incx=1, incy=2)]
