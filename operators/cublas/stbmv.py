"""cublas::cublasStbmv_v2 — ``x = op(A) * x``, A a triangular band matrix in BLAS band storage,
float32, in place."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.cublas import _blas, _cublas, _level1, _level2
from operators.registry import register
from operators.spec import Call, Case, Cost, EntryPoint, Expected, Kind, Negative, Out, Tier, case

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _gather_kernel(x_ptr, t_ptr, n, incx, x0, BLOCK: tl.constexpr):
    # t[i] = x_i: x is overwritten in place, so the products read this copy.
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = i < n
    tl.store(t_ptr + i, tl.load(x_ptr + x0 + i * incx, mask=ok), mask=ok)


@triton.jit
def _stbmv_kernel(a_ptr, t_ptr, t0, tinc, x_ptr, n, k, lda, incx, x0, UP_ROWS: tl.constexpr,
                  UPPER: tl.constexpr, UNIT: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_D: tl.constexpr):
    # Rows rm of op(A) x. Band storage: upper A(r, c) at band row k + r - c of column c, lower
    # at band row r - c. UP_ROWS: row i sums A(i, i+d) x_{i+d} (upper, N) or A(i+d, i) x_{i+d}
    # (lower, T); else A(i, i-d) x_{i-d} (lower, N) or A(i-d, i) x_{i-d} (upper, T).
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    m_ok = rm < n
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for d0 in range(0, k + 1, BLOCK_D):
        d = d0 + tl.arange(0, BLOCK_D)
        d_ok = d <= k
        if UNIT:  # the diagonal is 1 and never read
            d_ok = d_ok & (d > 0)
        if UP_ROWS:
            col = rm[:, None] + d[None, :]
            ok = m_ok[:, None] & d_ok[None, :] & (col < n)
            if UPPER:
                p = (k - d)[None, :] + col * lda  # A(i, i+d)
            else:
                p = d[None, :] + rm[:, None] * lda  # A(i+d, i)
        else:
            col = rm[:, None] - d[None, :]
            ok = m_ok[:, None] & d_ok[None, :] & (col >= 0)
            if UPPER:
                p = (k - d)[None, :] + rm[:, None] * lda  # A(i-d, i)
            else:
                p = d[None, :] + col * lda  # A(i, i-d)
        a = tl.load(a_ptr + p, mask=ok, other=0.0)
        xv = tl.load(t_ptr + t0 + col * tinc, mask=ok, other=0.0)
        acc += tl.sum(a * xv, axis=1)
    if UNIT:
        acc += tl.load(t_ptr + t0 + rm * tinc, mask=m_ok, other=0.0)
    tl.store(x_ptr + x0 + rm * incx, acc, mask=m_ok)


def _start(n, inc):
    # A negative increment starts at the far end: element i is at (n - 1 - i) * |inc|.
    return (n - 1) * -inc if inc < 0 else 0


def cublasStbmv_v2(uplo, trans, diag, n, k, A, lda, x, incx):
    if n <= 0:  # BLAS's quick return: x is left as it is
        return None
    on_cpu = x.device.type == "cpu"
    BLOCK_M, BLOCK_D = (64, 32) if on_cpu else (128, 32)
    x0 = _start(n, incx)
    t = torch.empty(n, dtype=x.dtype, device=x.device)
    _gather_kernel[(triton.cdiv(n, 1024),)](x, t, n, incx, x0, BLOCK=1024)
    # CUBLAS_OP_T (1) and CUBLAS_OP_C (2) are the same for real data.
    up_rows = (uplo == 1) == (trans == 0)
    _stbmv_kernel[(triton.cdiv(n, BLOCK_M),)](
        A, t, 0, 1, x, n, k, lda, incx, x0, UP_ROWS=up_rows, UPPER=(uplo == 1),
        UNIT=(diag == 1), BLOCK_M=BLOCK_M, BLOCK_D=BLOCK_D, num_warps=4)
    return None
'''

# Reads an upper band's A(i, j) at band row j - i (the lower layout, mirrored) instead of
# k + i - j: the trap. Right only for k == 0 (the diagonal in row 0 either way) or a
# lower band.
NEGATIVE_UPPER_WITHOUT_K = _blas.variant(
    SOLUTION,
    ("                p = (k - d)[None, :] + col * lda  # A(i, i+d)\n",
     "                p = d[None, :] + col * lda\n"),
    ("                p = (k - d)[None, :] + rm[:, None] * lda  # A(i-d, i)\n",
     "                p = d[None, :] + rm[:, None] * lda\n"))

# Reads the stored diagonal even when diag is CUBLAS_DIAG_UNIT: it holds garbage (NaN here).
NEGATIVE_READS_UNIT_DIAGONAL = _blas.variant(SOLUTION, ("UNIT=(diag == 1)", "UNIT=False"))

# Updates x in place while other programs still read it (no copy): rows that read x elements
# of earlier blocks (lower N, upper T) see values already overwritten.
NEGATIVE_IN_PLACE_WITHOUT_COPY = _blas.variant(
    SOLUTION,
    ("    _gather_kernel[(triton.cdiv(n, 1024),)](x, t, n, incx, x0, BLOCK=1024)\n", ""),
    ("        A, t, 0, 1, x, n, k, lda,", "        A, x, x0, incx, x, n, k, lda,"))

# (n, k) of the grid, as cublasDsbmv_v2's.
SHAPES = ((1, 0), (1, 3), (32, 3), (71, 0), (160, 7), (497, 31), (1024, 64), (70, 100),
          (2049, 1), (4113, 15))


@register("cublas::cublasStbmv_v2", version=1, kind=Kind.COMPUTE)
class Stbmv(_level2.Level2):
    """Case shape ``(n,)``; params ``uplo``, ``trans``, ``diag``, ``k``, the layout (``incx``,
    ``pad``: lda = k + 1 + pad) and optionally ``std``. A unit diagonal holds NaN in the band
    storage (never read)."""

    routine, precision = "cublasStbmv_v2", "float32"
    entry_points = (
        EntryPoint(
            "cublasStbmv_v2",
            "cublasStbmv_v2(uplo: int, trans: int, diag: int, n: int, k: int, A: Tensor, "
            "lda: int, x: Tensor, incx: int) -> None",
            "x = op(A) @ x, A triangular with k off-diagonals in band storage, x in place.",
        ),
    )
    description = (
        "cuBLAS `cublasStbmv_v2` (handle omitted): `x = op(A) * x` with A an n x n triangular "
        "band matrix with k off-diagonals, updating x in place and returning None. `A` and `x` "
        "are 1-D contiguous float32 tensors holding the device buffers. op(A) is A for trans "
        "== 0 (CUBLAS_OP_N) and A^T for trans == 1 (T) or 2 (C, the same as T for real data). "
        "A is given in BLAS band storage, a column-major lda x n array (element (r, c) at "
        "`A[r + c*lda]`, lda >= k + 1): uplo == 1 (CUBLAS_FILL_MODE_UPPER) stores A(i, j), "
        "max(0, j-k) <= i <= j, at band row k + i - j of column j (the diagonal in row k); "
        "uplo == 0 (LOWER) stores A(i, j), j <= i <= min(n-1, j+k), at band row i - j of column "
        "j (the diagonal in row 0); A is zero elsewhere. diag == 1 (CUBLAS_DIAG_UNIT) means "
        "A's diagonal is all ones and is not read (its storage may hold garbage); diag == 0 "
        "(NON_UNIT) reads it. The storage's other elements (the band's unused corner, rows "
        "beyond k) may hold NaN and must not be read. Element i of x is `x[i*incx]` when "
        "incx > 0; a negative increment starts at the far end, element i being "
        "`x[(n-1-i)*|incx|]`; incx is never 0; x's other elements must be left untouched, and "
        "every output element depends on several inputs of x, so read the old x before "
        "overwriting it. n == 0 does nothing. A must not be modified. Compute in float32 "
        "(any summation order)."
    )
    solution = SOLUTION
    negatives = (
        Negative("upper_band_without_k", "reads an upper band's A(i, j) at band row j - i "
                 "instead of k + i - j; right only for k == 0 or a lower band",
                 NEGATIVE_UPPER_WITHOUT_K),
        Negative("reads_unit_diagonal", "reads the stored diagonal when diag is unit",
                 NEGATIVE_READS_UNIT_DIAGONAL),
        Negative("in_place_without_copy", "overwrites x while other programs still read it; "
                 "rows that read earlier rows (lower N, upper T) see new values",
                 NEGATIVE_IN_PLACE_WITHOUT_COPY),
    )
    # Sums of up to k + 1 products relative to |op(A)| |x|.
    tolerances = {"float32": _blas.sum_tolerance("float32")}

    def c(self, n: int, k: int, uplo: int, trans: int, diag: int, incx: int, pad: int, *,
          cpu: bool = False, **extra: object) -> Case:
        return case(self.routine, self.precision, (n,), uplo=uplo, trans=trans, diag=diag,
                    k=k, **_level2.layout(incx, None, pad), **extra, cpu=cpu)

    def edge_cases(self) -> list[Case]:
        c = self.c
        return [
            c(37, 3, 1, 0, 0, 1, 0, cpu=True),
            c(45, 5, 0, 1, 1, 2, 3, cpu=True),
            c(90, 4, 0, 0, 0, -1, 0, cpu=True),
            c(64, 0, 1, 2, 1, -2, 7, cpu=True),
            c(50, 60, 1, 1, 0, 1, 1, cpu=True),
            c(1, 2, 0, 0, 1, 1, 0, cpu=True),
            c(0, 2, 1, 0, 0, 1, 0, cpu=True),
            c(300, 20, 1, 2, 0, 1, 5, std=1e17),
        ]

    def grid(self) -> list[Case]:
        out = [self.c(n, k, uplo, trans, diag, incx, pad) for n, k in SHAPES for uplo in (0, 1)
               for trans in (0, 1, 2) for diag in (0, 1) for incx, _, pad in _level2.LAYOUTS]
        return out + [self.c(0, 3, uplo, 0, 0, 1, 0) for uplo in (0, 1)]

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for n in self.hidden_sizes(rng, tier):
            lay = _level2.pick_layout(rng, two=False)
            k = rng.choice((0, 1, 2, 5, 17, 40)) if small else rng.randrange(0, 200)
            out.append(self.c(n, k, rng.choice((0, 1)), rng.choice((0, 1, 2)), rng.choice((0, 1)),
                              lay["incx"], lay["pad"], cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # The band storage: 8M x 32 float32 elements, 1 GiB.
        return [self.c(8 * 2**20, 31, 1, 0, 0, 1, 0), self.c(8 * 2**20, 31, 0, 1, 1, -1, 0)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        (n,) = c.shape
        k, uplo, lda = c["k"], c["uplo"], c["k"] + 1 + c["pad"]
        std = float(c.get("std", 1.0))
        a = _blas.make_band(n, k, lda, uplo, self.precision, gen).mul_(std)
        if c["diag"] == _blas.UNIT and n > 0:  # never read: garbage
            _blas.stored(a, lda, n, lda)[k if uplo == _blas.UPPER else 0].fill_(_blas.NAN)
        x = _level2.vector(n, c["incx"], self.precision, gen, std=std)
        return Call(c.entry, (uplo, c["trans"], c["diag"], n, k, a, lda, x, c["incx"]),
                    outputs=(Out.arg(7),), mutable=frozenset({7}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        uplo, trans, diag, n, k, a, lda, x, incx = call.args
        prod, mag = _level2.band_product(a, n, k, lda, uplo, _blas.gather(x, n, incx),
                                         symmetric=False, trans=trans, unit=diag == _blas.UNIT)
        return (Expected(_level1.updated(x, n, incx, prod), x.dtype,
                         _level1.at(x, n, incx, mag)),)

    def baseline(self, call: Call) -> object:
        uplo, trans, diag, n, k, a, lda, x, incx = call.args
        if _level2.on_cublas(x):
            _cublas.call(self.routine, uplo, trans, diag, n, k, a, lda, x, incx)
        elif n > 0:
            prod, _ = _level2.band_product(a, n, k, lda, uplo, _blas.gather(x, n, incx),
                                           symmetric=False, trans=trans, unit=diag == _blas.UNIT,
                                           precise=False)
            _blas.scatter_(x, n, incx, prod)
        return None

    def cost(self, c: Case) -> Cost:
        (n,) = c.shape
        n = max(n, 0)
        band = sum(n - d for d in range(min(c["k"], n - 1) + 1)) if n else 0
        read = band - (n if c["diag"] == _blas.UNIT else 0)
        return _blas.streaming_cost(2.0 * read, read + 2 * n, self.precision)
