"""The rank-1 updates ``A = alpha * x * op(y)^T + A`` (``Sger``, ``Cgeru``, ``Zgerc``): their
Triton reference solutions (one text per kind, precision and conjugation filled in, so the
solutions cannot drift apart; each complete and standalone, as a candidate's must be) and the
spec behaviour they share. Registers nothing.

A case's shape is ``(m, n)``; params ``alpha``, the layout (``incx``, ``incy``, ``pad``: lda is
``m + pad``), and optionally ``real_y`` (y with zero imaginary parts: a conjugation changes
nothing), ``std`` (large magnitudes) and ``specials`` (inf in x and NaN in y, real routines
only). alpha == 0 poisons x and y with NaN: the quick return must not read them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import ClassVar

import torch

from operators.cublas import _blas, _cublas, _level2
from operators.spec import Call, Case, Cost, EntryPoint, Expected, Out, Tier, case

REAL_SOLUTION = r'''
import triton
import triton.language as tl


@triton.jit
def _ger_kernel(x_ptr, y_ptr, a_ptr, m, n, alpha, incx, incy, x0, y0, lda,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # One BLOCK_M x BLOCK_N tile of the column-major A: A[i + j*lda] += alpha * x_i * y_j.
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = rm < m
    n_ok = rn < n
    x = tl.load(x_ptr + x0 + rm * incx, mask=m_ok, other=0.0)
    y = tl.load(y_ptr + y0 + rn * incy, mask=n_ok, other=0.0)
    ptrs = a_ptr + rm[:, None] + rn[None, :] * lda
    mask = m_ok[:, None] & n_ok[None, :]
    a = tl.load(ptrs, mask=mask)
    tl.store(ptrs, a + (alpha * x)[:, None] * y[None, :], mask=mask)


def _start(n, inc):
    # A negative increment starts at the far end: element i is at (n - 1 - i) * |inc|.
    return (n - 1) * -inc if inc < 0 else 0


def {entry}(m, n, alpha, x, incx, y, incy, A, lda):
    if m <= 0 or n <= 0 or alpha == 0:  # BLAS's quick returns: A is left as it is
        return None
    BLOCK_M, BLOCK_N = (64, 64) if A.device.type == "cpu" else (128, 32)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    _ger_kernel[grid](x, y, A, m, n, alpha, incx, incy, _start(m, incx), _start(n, incy), lda,
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=4)
    return None
'''

COMPLEX_SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _ger_kernel(x_ptr, y_ptr, a_ptr, m, n, alpha_re{scalar}, alpha_im{scalar}, incx, incy, x0,
                y0, lda, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # x_ptr, y_ptr, a_ptr: {real} views of the complex buffers (real, imaginary interleaved).
    # One BLOCK_M x BLOCK_N tile of the column-major A: A(i, j) += (alpha * x_i) * {y_term}.
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = rm < m
    n_ok = rn < n
    px = 2 * (x0 + rm * incx)
    xr = tl.load(x_ptr + px, mask=m_ok, other=0.0)
    xi = tl.load(x_ptr + px + 1, mask=m_ok, other=0.0)
    py = 2 * (y0 + rn * incy)
    yr = tl.load(y_ptr + py, mask=n_ok, other=0.0)
{load_yi}    axr = alpha_re * xr - alpha_im * xi
    axi = alpha_re * xi + alpha_im * xr
    pa = a_ptr + 2 * (rm[:, None] + rn[None, :] * lda)
    mask = m_ok[:, None] & n_ok[None, :]
    ar = tl.load(pa, mask=mask)
    ai = tl.load(pa + 1, mask=mask)
    tl.store(pa, ar + (axr[:, None] * yr[None, :] - axi[:, None] * yi[None, :]), mask=mask)
    tl.store(pa + 1, ai + (axr[:, None] * yi[None, :] + axi[:, None] * yr[None, :]), mask=mask)


def _start(n, inc):
    # A negative increment starts at the far end: element i is at (n - 1 - i) * |inc|.
    return (n - 1) * -inc if inc < 0 else 0


def {entry}(m, n, alpha, x, incx, y, incy, A, lda):
    if m <= 0 or n <= 0 or alpha == 0:  # BLAS's quick returns: A is left as it is
        return None
    alpha = complex(alpha)
    BLOCK_M, BLOCK_N = (64, 64) if A.device.type == "cpu" else (64, 32)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    _ger_kernel[grid](torch.view_as_real(x), torch.view_as_real(y), torch.view_as_real(A), m, n,
                      alpha.real, alpha.imag, incx, incy, _start(m, incx), _start(n, incy), lda,
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=4)
    return None
'''

# y_j's imaginary part as loaded, or negated: y_j, or conj(y_j) for gerc.
PLAIN_YI = "    yi = tl.load(y_ptr + py + 1, mask=n_ok, other=0.0)\n"
CONJUGATED_YI = "    yi = -tl.load(y_ptr + py + 1, mask=n_ok, other=0.0)\n"


def real_solution(entry: str) -> str:
    """The float32 ger's solution (``Sger``)."""
    return REAL_SOLUTION.replace("{entry}", entry)


def complex_solution(entry: str, real: str, *, conjugate_y: bool) -> str:
    """The solution of a complex ger of ``real`` ("float32", "float64") parts. Python floats
    reach a Triton kernel as fp32 unless annotated: the float64 routine's alpha is annotated
    ``tl.float64`` (honoured since Triton 3.4)."""
    return (COMPLEX_SOLUTION.replace("{entry}", entry).replace("{real}", real)
            .replace("{scalar}", ": tl.float64" if real == "float64" else "")
            .replace("{y_term}", "conj(y_j)" if conjugate_y else "y_j")
            .replace("{load_yi}", CONJUGATED_YI if conjugate_y else PLAIN_YI))


# (m, n) of the grid: square and both skinny ways, odd sizes, one past a power of two.
SHAPES = ((1, 1), (32, 71), (71, 32), (160, 497), (497, 160), (1024, 1024), (2049, 33),
          (33, 2049))


class Ger(_level2.Level2):
    """``cublas?ger[uc]``: ``A = alpha * x * y^T + A`` (``y^H`` for gerc) over the ``m x n``
    column-major A, in place; quick returns when m or n is 0 or alpha == 0 (x and y unread).
    Each element of A is one product added once: judged within ``ulps`` of
    ``|alpha| |x_i| |y_j| + |A_ij|``; what is not A's (padding) must come back exactly."""

    conjugate_y: ClassVar[bool] = False
    alphas: ClassVar[tuple[complex, ...]]  # the grid's; alpha == 0 cases are added
    large: ClassVar[float]  # the std of the large-magnitude edge case
    bench_shapes: ClassVar[tuple[tuple[int, int], ...]]  # each timed with two layouts

    def c(self, m: int, n: int, alpha: complex, incx: int, incy: int, pad: int, *,
          cpu: bool = False, **extra: object) -> Case:
        a: complex | float = complex(alpha)
        if not self.precision.startswith("complex"):
            a = a.real
        return case(self.routine, self.precision, (m, n), alpha=a,
                    **_level2.layout(incx, incy, pad), **extra, cpu=cpu)

    def grid(self) -> list[Case]:
        out = []
        for m, n in SHAPES:
            out += [self.c(m, n, a, *lay) for a in self.alphas for lay in _level2.LAYOUTS]
            out.append(self.c(m, n, 0, 2, -1, 3))
        for m, n in ((0, 5), (5, 0)):
            out += [self.c(m, n, self.alphas[1], *lay) for lay in _level2.LAYOUTS]
        return out

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        hi = 100 if small else 3000
        out = [self.c(0, rng.randrange(1, 9), self.alphas[0], 1, 1, 0, cpu=small)]
        for _ in range(3 if small else 7):
            alpha = rng.choice([*self.alphas, 0.25, -2.0])
            lay = _level2.pick_layout(rng, two=True)
            out.append(self.c(rng.randrange(1, hi), rng.randrange(1, hi), alpha, lay["incx"],
                              lay["incy"], lay["pad"], cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # Unit strides, then x walked backwards and y strided.
        return [self.c(m, n, self.alphas[1], *lay)
                for m, n in self.bench_shapes for lay in ((1, 1, 0), (-1, 2, 0))]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        m, n = c.shape
        std = float(c.get("std", 1.0))
        unread = c["alpha"] == 0  # the quick return must not read x and y
        x = _level2.vector(m, c["incx"], self.precision, gen, std=std, nan=unread)
        y = _level2.vector(n, c["incy"], self.precision, gen, std=std, nan=unread,
                           real=bool(c.get("real_y")))
        if c.get("specials") and m > 1 and n > 1:
            x[_level2.start(m, c["incx"])] = float("inf")  # x_0: row 0 of the update is inf
            y[_blas.vector_index(n, c["incy"])[-1]] = float("nan")  # y_{n-1}: a NaN column
        lda = max(m, 1) + c["pad"]
        a = _blas.make_matrix(max(m, 0), max(n, 0), lda, self.precision, gen, std=std)
        if m <= 0:  # an empty A: its buffer is all padding, here values a write would change
            a = _blas.random_values(a.numel(), self.precision, gen)
        return Call(c.entry, (m, n, c["alpha"], x, c["incx"], y, c["incy"], a, lda),
                    outputs=(Out.arg(7),), mutable=frozenset({7}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        m, n, alpha, x, incx, y, incy, a, lda = call.args
        alpha = _blas.as_c(alpha, self.precision)
        value = _blas.hp(a)
        scale = torch.zeros_like(value)  # padding rows: exact
        if m > 0 and n > 0 and alpha != 0:
            xv = _blas.hp(_blas.gather(x, m, incx))
            yv = _blas.hp(_blas.gather(y, n, incy))
            if not value.is_complex():
                alpha = alpha.real
            if self.conjugate_y:
                yv = yv.conj()
            target = _blas.stored(value, m, n, lda)
            cond = abs(alpha) * xv.abs()[:, None] * yv.abs()[None, :] + target.abs()
            _blas.stored(scale, m, n, lda).copy_(_level2.moduli(cond, target))
            target.add_(alpha * xv[:, None] * yv[None, :])
        return (Expected(value, a.dtype, scale),)

    def baseline(self, call: Call) -> object:
        m, n, alpha, x, incx, y, incy, a, lda = call.args
        if _level2.on_cublas(a):
            _cublas.call(self.routine, m, n, _level2.cscalar(alpha, a.dtype, a.device), x, incx,
                         y, incy, a, lda)
        elif m > 0 and n > 0 and alpha != 0:
            yv = _blas.gather(y, n, incy)
            _blas.stored(a, m, n, lda).addr_(_blas.gather(x, m, incx),
                                             yv.conj() if self.conjugate_y else yv, alpha=alpha)
        return None

    def cost(self, c: Case) -> Cost:
        m, n = c.shape
        work = max(m, 0) * max(n, 0) if c["alpha"] != 0 else 0
        vectors = max(m, 0) + max(n, 0) if work else 0
        return _blas.streaming_cost(_blas.flops_per_fma(self.precision) * work,
                                    2 * work + vectors, self.precision)


def entry_point(routine: str, dtype: str, scalar: str, what: str) -> EntryPoint:
    """A ger routine's entry point."""
    return EntryPoint(
        routine,
        f"{routine}(m: int, n: int, alpha: {scalar}, x: Tensor, incx: int, y: Tensor, "
        "incy: int, A: Tensor, lda: int) -> None",
        f"A = alpha * {what} + A over the m x n column-major {dtype} matrix A, in place.")


def describe(routine: str, dtype: str, what: str, scalar: str, precision_note: str) -> str:
    """A ger routine's prompt description: ``what`` says the update and its conjugation,
    ``scalar`` what alpha is, ``precision_note`` how to compute."""
    views = ""
    if dtype.startswith("complex"):
        real = {"complex64": "float32", "complex128": "float64"}[dtype]
        views = (f"; `torch.view_as_real` gives {real} views, element k's real part at [k, 0] "
                 "and imaginary part at [k, 1]")
    return (
        f"cuBLAS `{routine}` (handle omitted): {what}, updating the m x n matrix A in place "
        f"and returning None. `x`, `y` and `A` are 1-D contiguous {dtype} tensors holding the "
        f"device buffers{views}. `alpha` is {scalar}. A is column-major: element (i, j) is "
        "`A[i + j*lda]`, lda >= max(1, m); rows m..lda-1 of each column are padding that must "
        "be left untouched. Element i of x is `x[i*incx]` when incx > 0; a negative increment "
        "starts at the far end, element i being `x[(m-1-i)*|incx|]`; likewise for y (n "
        "elements, incy); increments are never 0; x and y must not be modified. Quick returns: "
        "when m == 0, n == 0 or alpha == 0 nothing is done and x and y are not read (they may "
        f"hold NaN). {precision_note}"
    )
