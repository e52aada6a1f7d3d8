"""What the BLAS-3 and extension routines beyond GEMM share (``symm``, ``syrk``, ``geam``,
``dgmm``): the conditioning of products and scalings for their tolerances, per component for
complex data, and C buffers whose elements a routine must not write hold values that show a
write. Registers nothing. General: any routine computing ``alpha * (product) + beta * C`` can
use it.
"""

from __future__ import annotations

import torch

from operators.cublas import _blas

# A product's output judged relative to |alpha| (|X| @ |Y|) + |beta C| (per component for
# complex data): 16 u of the routine's precision, the GEMM family's allowance (a blocked fp32
# accumulation measures ~6 u there), while TF32 inputs (2^-11 per product) land at hundreds.
PRODUCT_ULPS = 16

# ---- Triton text the reference solutions share (each solution stays standalone) ---------------

# tl.dot in fp32 without TF32 (IEEE) or, for the TF32 controls, at Triton's default precision.
MMA = r'''

@triton.jit
def _mma(a, b, acc, IEEE: tl.constexpr):
    # IEEE: exact float32 products (no TF32), as the routine computes.
    if IEEE:
        acc = tl.dot(a, b, acc, input_precision="ieee")
    else:
        acc = tl.dot(a, b, acc)
    return acc
'''


# The end of a complex product kernel: the tile's sums ``acc`` (real and imaginary parts)
# scaled by alpha, plus beta times C's old values unless BETA_ZERO (C not read), stored at the
# real-view pointers ``pc`` (real part) and ``pc + 1`` under ``c_mask``.
COMPLEX_EPILOGUE = r'''    out_re = alpha_re * acc_re - alpha_im * acc_im
    out_im = alpha_re * acc_im + alpha_im * acc_re
    if not BETA_ZERO:
        c_re = tl.load(pc, mask=c_mask, other=0.0)
        c_im = tl.load(pc + 1, mask=c_mask, other=0.0)
        out_re += beta_re * c_re - beta_im * c_im
        out_im += beta_re * c_im + beta_im * c_re
    tl.store(pc, out_re, mask=c_mask)
    tl.store(pc + 1, out_im, mask=c_mask)
'''


def abs_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The conditioning of ``a @ b``: ``|a| @ |b|``; for complex data per component (the real
    part sums ``|ar br| + |ai bi|``, the imaginary part ``|ar bi| + |ai br|``), as
    :func:`operators.checking.compare` bounds each component."""
    if not a.is_complex():
        return a.abs() @ b.abs()
    ar, ai, br, bi = a.real.abs(), a.imag.abs(), b.real.abs(), b.imag.abs()
    return torch.complex(ar @ br + ai @ bi, ar @ bi + ai @ br)


def scaled_abs(s: complex, x: torch.Tensor) -> torch.Tensor:
    """The conditioning of ``s * x`` given that of ``x`` (or ``x`` itself), per component for
    complex data."""
    if not x.is_complex():
        return abs(s.real) * x.abs()
    sr, si = abs(s.real), abs(s.imag)
    xr, xi = x.real.abs(), x.imag.abs()
    return torch.complex(sr * xr + si * xi, sr * xi + si * xr)


def mul(s: complex, x: torch.Tensor) -> torch.Tensor:
    """``s * x`` with a scalar stored as a Python complex: its real part for real data."""
    return (s if x.is_complex() else s.real) * x


def scalars(alpha: complex, beta: complex, dtype: str | torch.dtype) -> tuple[complex, complex]:
    """``alpha`` and ``beta`` as the routine computes with them (rounded to ``dtype``)."""
    if not _blas._dt(dtype).is_complex:
        return complex(_blas.as_real(alpha.real, dtype)), complex(_blas.as_real(beta.real, dtype))
    return _blas.as_c(alpha, dtype), _blas.as_c(beta, dtype)


def output_matrix(rows: int, cols: int, ld: int, dtype: str | torch.dtype, gen: torch.Generator,
                  *, read: bool) -> torch.Tensor:
    """An output matrix C: random values when the routine reads it (``beta != 0``), else NaN
    throughout (uninitialised memory: NaN must not propagate); padding rows NaN either way."""
    if read:
        return _blas.make_matrix(rows, cols, ld, dtype, gen)
    return torch.full((ld * max(cols, 0),), _blas.NAN, dtype=_blas._dt(dtype))


def unwritten(n: int, uplo: int) -> torch.Tensor:
    """The ``n x n`` mask of what a routine updating triangle ``uplo`` must leave as it was."""
    return ~_blas.in_triangle(n, uplo)
