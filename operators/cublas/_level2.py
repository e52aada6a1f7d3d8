"""What the BLAS-2 problems share (ger, symv, sbmv, syr2, tbmv, trsv): the case grid's sizes
and layouts, vectors with quick-return poison, matrix-vector expectations and their
conditioning, triangles for solves, and the spec behaviour of every BLAS-2 routine. Registers
nothing; general enough for any BLAS-2 routine of the suite (the gemv family included).

A case's params name its layout: ``incx``/``incy`` (vector increments, either sign) and
``pad`` (padding rows of the matrix: ``lda = rows + pad``, or ``k + 1 + pad`` for a band);
``std`` sets the values' magnitude (large-magnitude edge cases). What a quick return must not
read is NaN: the vectors alpha scales when ``alpha == 0``, y when ``beta == 0``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch

from operators.cublas import _blas, _cublas, _level1
from operators.spec import Case, Cost, Expected, OperatorSpec, Tier

# Matrix orders of the grid: the published saxpy grid's sizes up to 1024 (an n x n matrix of
# 5333 would make every case tens of MB) and 2049, one past a power of two.
GRID_N = (1, 32, 71, 160, 497, 1024, 2049)
# (incx, incy, pad): unit strides, mixed signs and strides, padding rows up to ld.
LAYOUTS = ((1, 1, 0), (2, -1, 3), (-2, 3, 0), (-1, -2, 7))


def layout(incx: int, incy: int | None, pad: int) -> dict[str, Any]:
    """A case's layout params (``incy`` None: a routine with one vector)."""
    return {"incx": incx, "pad": pad} if incy is None else {"incx": incx, "incy": incy,
                                                             "pad": pad}


def vector(n: int, inc: int, dtype: str | torch.dtype, gen: torch.Generator, *,
           std: float = 1.0, nan: bool = False, real: bool = False) -> torch.Tensor:
    """The buffer of a vector ``(n, inc)``, NaN in its gaps; ``nan`` makes the vector's own
    elements NaN too (a vector a quick return must not read, or an output a ``beta == 0`` update
    must not read); ``real`` zeroes the imaginary parts of a complex vector."""
    buf = _blas.make_vector(n, inc, dtype, gen, std=std)
    if nan:
        buf.fill_(_blas.NAN)
    if real and buf.is_complex():
        buf.imag.zero_()
    return buf


def start(n: int, inc: int) -> int:
    """The buffer position of a vector's element 0: 0, or ``(n-1)*|inc|`` for ``inc < 0``."""
    return (n - 1) * -inc if inc < 0 and n > 0 else 0


def moduli(scale: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A real conditioning ``scale`` as the tolerance scale of an output like ``like``: itself
    for real data, the same bound on both components for complex data (each component of a
    complex sum errs by at most its terms' moduli times the roundoff)."""
    return torch.complex(scale, scale) if like.is_complex() else scale


def mv_update(y: torch.Tensor, n: int, incy: int, alpha: complex, beta: complex,
              prod: torch.Tensor, prod_abs: torch.Tensor) -> Expected:
    """The expected ``y`` after ``y = alpha * prod + beta * y`` over the vector ``(n, incy)``
    (``prod`` a matrix-vector product in float64/complex128, ``prod_abs`` its terms' moduli
    summed, ``|A| |x|``): y's other elements unchanged (scale 0: exact). ``beta == 0`` does not
    read y; ``alpha == 0`` leaves only ``beta * y``."""
    yv = _blas.hp(_blas.gather(y, n, incy))
    value = alpha * prod
    scale = abs(alpha) * prod_abs
    if beta != 0:
        value = value + beta * yv
        scale = scale + (beta * yv).abs()
    out = _level1.updated(y, n, incy, value)
    return Expected(out, y.dtype, _level1.at(y, n, incy, moduli(scale, yv)))


def triangle_mask(n: int, uplo: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The ``n x n`` boolean mask of the triangle ``uplo`` (diagonal included), on ``device``."""
    ones = torch.ones(n, n, dtype=torch.bool, device=device)
    return ones.triu() if uplo == _blas.UPPER else ones.tril()


def triangle(buf: torch.Tensor, n: int, ld: int, uplo: int, *, diagonal: bool = True
             ) -> torch.Tensor:
    """The stored triangle ``uplo`` of an ``n x n`` matrix as a dense float64/complex128 tensor,
    zeros elsewhere (the other triangle's NaN never enters); without the diagonal when
    ``diagonal`` is False. Runs where ``buf`` lives (:func:`_blas.dense_from_triangle` builds
    its masks on the host)."""
    a = _blas.hp(_blas.stored(buf, n, n, ld))
    k = 0 if diagonal else 1
    return torch.triu(a, k) if uplo == _blas.UPPER else torch.tril(a, -k)


def symmetric(buf: torch.Tensor, n: int, ld: int, uplo: int) -> torch.Tensor:
    """The symmetric (not Hermitian: nothing conjugated) matrix the triangle ``uplo`` stores."""
    return triangle(buf, n, ld, uplo) + triangle(buf, n, ld, uplo, diagonal=False).t()


def triangular(buf: torch.Tensor, n: int, ld: int, uplo: int, *, unit: bool) -> torch.Tensor:
    """The triangular matrix the triangle ``uplo`` stores; a unit diagonal is ones, unread."""
    t = triangle(buf, n, ld, uplo, diagonal=not unit)
    if unit:
        t.diagonal().fill_(1)
    return t


def band_diagonals(buf: torch.Tensor, n: int, k: int, ld: int, uplo: int
                   ) -> list[tuple[int, torch.Tensor]]:
    """The stored diagonals of a band matrix (BLAS band storage, ``k`` off-diagonals in triangle
    ``uplo``) as ``(d, v)``, ``v[t]`` being ``A(t, t+d)`` (upper: band row ``k - d``) or
    ``A(t+d, t)`` (lower: band row ``d``) for ``t < n - d``. Views of the storage, so a band
    product costs O(n k) wherever ``buf`` lives (no n x n matrix)."""
    rows = _blas.stored(buf, ld, n, ld)  # row r of the storage is band row r
    return [(d, rows[k - d, d:] if uplo == _blas.UPPER else rows[d, :n - d])
            for d in range(min(k, n - 1) + 1)]


def band_product(buf: torch.Tensor, n: int, k: int, ld: int, uplo: int, x: torch.Tensor, *,
                 symmetric: bool, trans: int = _blas.OP_N, unit: bool = False,
                 precise: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``A x`` and ``|A| |x|`` for a band matrix A in BLAS band storage: the symmetric matrix
    its triangle stands for (``symmetric``), or the triangle itself, transposed when
    ``trans`` is T or C (real data), with ones on a unit diagonal. In float64/complex128 when
    ``precise`` (references), else in the buffers' own precision (PyTorch's baseline)."""
    cast = _blas.hp if precise else (lambda t: t)
    xv = cast(x)
    prod = torch.zeros_like(xv)
    mag = torch.zeros(xv.shape, dtype=xv.abs().dtype, device=xv.device)
    # A(t, t+d) x_{t+d} lands in row t (the "up" pattern), A(t+d, t) x_t in row t+d ("down").
    up = (uplo == _blas.UPPER) == (trans == _blas.OP_N)
    for d, stored_v in band_diagonals(buf, n, k, ld, uplo):
        v = torch.ones_like(cast(stored_v)) if d == 0 and unit else cast(stored_v)
        for row_up in ((True, False) if symmetric and d else (up,)):
            dst, src = (slice(0, n - d), slice(d, n)) if row_up else (slice(d, n), slice(0, n - d))
            prod[dst] += v * xv[src]
            mag[dst] += v.abs() * xv[src].abs()
    return prod, mag


def mv_baseline(y: torch.Tensor, n: int, incy: int, alpha: complex, beta: complex,
                product: Callable[[], torch.Tensor]) -> None:
    """PyTorch's ``y = alpha * A x + beta * y`` over the vector ``(n, incy)``, in y's own
    precision: ``product()`` (``A x``) runs only when alpha != 0, y is read only when
    beta != 0."""
    if n <= 0:
        return
    yv = alpha * product() if alpha != 0 else torch.zeros(n, dtype=y.dtype, device=y.device)
    if beta != 0:
        yv = yv + beta * _blas.gather(y, n, incy)
    _blas.scatter_(y, n, incy, yv)


def mv_cost(n: int, stored: int, fmas: int, alpha: complex, beta: complex,
            dtype: str) -> Cost:
    """A ``y = alpha * A x + beta * y`` routine's floor: the ``stored`` elements of A and x read
    once unless alpha == 0, y read unless beta == 0 and written; ``fmas`` multiply-adds."""
    n = max(n, 0)
    reads_a = alpha != 0
    elements = (stored + n if reads_a else 0) + n * (2 if beta != 0 else 1)
    return _blas.streaming_cost(_blas.flops_per_fma(dtype) * fmas if reads_a else 0, elements,
                                dtype)


def unit_triangle(n: int, ld: int, uplo: int, dtype: str | torch.dtype,
                  gen: torch.Generator) -> torch.Tensor:
    """A unit-diagonal triangle for solves (the diagonal NaN, never read), its off-diagonal
    elements scaled so each row's and column's magnitudes sum to well below 1: random unit
    triangular matrices are exponentially ill-conditioned in n, and the error measured must be
    the candidate's."""
    buf = _blas.make_triangle(n, ld, uplo, dtype, gen, unit=True)
    buf.mul_(0.5 / max(n, 1))  # NaN stays NaN
    return buf


def comparison_solve_scale(op_a: torch.Tensor, x: torch.Tensor, *, upper: bool) -> torch.Tensor:
    """Per element of the solution ``x`` of the triangular system ``op_a @ x = b``, a bound on
    the forward error a backward-stable substitution may make per unit of roundoff:
    ``M(op_a)^-1 (|op_a| |x|)``, ``M`` the comparison matrix (``|a_ii|`` on the diagonal,
    ``-|a_ij|`` off it). For a triangular matrix ``|A^-1| <= M(A)^-1`` elementwise, so this
    bounds :func:`_blas.solve_scale`'s ``|A^-1| |A| |x|`` (within a small factor on the
    diagonally dominant matrices here) with one more triangular solve instead of an inverse:
    O(n^2), so benchmark-sized solves are judged by their backward error too."""
    a = _blas.hp(op_a)
    mag = a.abs()
    comparison = -mag
    comparison.diagonal().copy_(mag.diagonal())
    rhs = mag @ _blas.hp(x).abs().reshape(-1, 1)
    s = torch.linalg.solve_triangular(comparison, rhs, upper=upper).reshape(-1)
    return torch.complex(s, s) if a.is_complex() else s


def pick_layout(rng: random.Random, two: bool) -> dict[str, Any]:
    """A hidden case's random layout: increments of either sign up to 3, padding or none."""
    incx = rng.choice([1, 1, 2, 3, -1, -2, -3])
    incy = rng.choice([1, 1, 2, -1, -3]) if two else None
    return layout(incx, incy, rng.choice([0, 0, 1, 4, 13]))


class Level2(OperatorSpec):
    """A BLAS-2 routine: cuBLAS is its baseline where there is one; ``edge_cases`` (the cpu
    tier and edge values) come first in its public cases."""

    routine: ClassVar[str]  # the entry point, the routine's C name
    precision: ClassVar[str]  # the buffers' dtype

    def edge_cases(self) -> list[Case]:
        raise NotImplementedError

    def grid(self) -> list[Case]:
        raise NotImplementedError

    def cases(self) -> Sequence[Case]:
        out = list(self.edge_cases())
        seen = {c.name for c in out}
        for c in self.grid():
            if c.name not in seen:
                seen.add(c.name)
                out.append(c)
        return out

    def hidden_sizes(self, rng: random.Random, tier: Tier) -> list[int]:
        """Matrix orders of the hidden cases: one quick return (0), then odd random ones."""
        hi = 120 if tier is Tier.CPU else 3000
        return [0] + [rng.randrange(1, hi) for _ in range(3 if tier is Tier.CPU else 7)]

    def baseline_library(self) -> str:
        return _cublas.library()


def on_cublas(t: torch.Tensor) -> bool:
    """Whether the baseline runs libcublas for a call whose buffers live where ``t`` does."""
    return t.is_cuda and _cublas.available()


def cscalar(value: complex, dtype: torch.dtype, device: torch.device) -> Any:
    """A DEVICE-mode scalar for cuBLAS, complex or real as the routine's buffers are."""
    return _cublas.scalar(value if dtype.is_complex else complex(value).real, dtype, device)
