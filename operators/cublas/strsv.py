"""cublas::cublasStrsv_v2 — solve ``op(A) * x = b`` for x in place, A triangular, float32;
judged by backward error."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import torch

from operators.cublas import _blas, _cublas, _level1, _level2
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
    Tier,
    Tolerance,
    case,
)

SOLUTION = r'''
import triton
import triton.language as tl


@triton.jit
def _diag_solve_kernel(a_ptr, x_ptr, n, incx, x0, start, s_r, s_c, FORWARD: tl.constexpr,
                       UNIT: tl.constexpr, BLOCK: tl.constexpr):
    # One program solves the diagonal block I = start .. start+BLOCK-1 of op(A) x = r, r being
    # x_I as the earlier blocks' updates left it. op(A)(i, j) is at a_ptr + i*s_r + j*s_c; the
    # block's strict triangle is held in registers, substitution runs row by row.
    r = tl.arange(0, BLOCK)
    rows = start + r.to(tl.int64)
    ok = rows < n
    if FORWARD:
        strict = r[None, :] < r[:, None]
    else:
        strict = r[None, :] > r[:, None]
    tile = tl.load(a_ptr + rows[:, None] * s_r + rows[None, :] * s_c,
                   mask=strict & ok[:, None] & ok[None, :], other=0.0)
    if UNIT:  # a unit diagonal is 1 and never read
        diag = tl.full((BLOCK,), 1.0, dtype=tl.float32)
    else:
        diag = tl.load(a_ptr + rows * s_r + rows * s_c, mask=ok, other=1.0)
    px = x_ptr + x0 + rows * incx
    xb = tl.load(px, mask=ok, other=0.0)
    for step in range(0, BLOCK):
        if FORWARD:
            t = step
        else:
            t = BLOCK - 1 - step
        # Row t's strict part covers solved elements only: x_t = (r_t - sum_s A_ts x_s) / A_tt.
        dots = tl.sum(tile * xb[None, :], axis=1)
        xb = tl.where(r == t, (xb - dots) / diag, xb)
    tl.store(px, xb, mask=ok)


@triton.jit
def _update_kernel(a_ptr, x_ptr, n, incx, x0, start, lo, hi, s_r, s_c, BLOCK_M: tl.constexpr,
                   BLOCK: tl.constexpr):
    # x_J -= op(A)[J, I] x_I for rows J in [lo, hi), those solved after block I.
    rows = lo + tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    r_ok = rows < hi
    cols = start + tl.arange(0, BLOCK).to(tl.int64)
    c_ok = cols < n
    x_i = tl.load(x_ptr + x0 + cols * incx, mask=c_ok, other=0.0)
    tile = tl.load(a_ptr + rows[:, None] * s_r + cols[None, :] * s_c,
                   mask=r_ok[:, None] & c_ok[None, :], other=0.0)
    px = x_ptr + x0 + rows * incx
    x_j = tl.load(px, mask=r_ok, other=0.0)
    tl.store(px, x_j - tl.sum(tile * x_i[None, :], axis=1), mask=r_ok)


def _start(n, inc):
    # A negative increment starts at the far end: element i is at (n - 1 - i) * |inc|.
    return (n - 1) * -inc if inc < 0 else 0


def cublasStrsv_v2(uplo, trans, diag, n, A, lda, x, incx):
    if n <= 0:  # BLAS's quick return: x is left as it is
        return None
    BLOCK, BLOCK_M = (16, 64) if x.device.type == "cpu" else (64, 64)
    # op(A)(i, j): A(i, j) for CUBLAS_OP_N, A(j, i) for T and C (the same for real data).
    s_r, s_c = (1, lda) if trans == 0 else (lda, 1)
    # op(A) lower triangular (lower N, upper T/C): forward substitution, else backward.
    forward = (uplo == 0) == (trans == 0)
    x0 = _start(n, incx)
    blocks = list(range(triton.cdiv(n, BLOCK)))
    for b in (blocks if forward else blocks[::-1]):
        start = b * BLOCK
        _diag_solve_kernel[(1,)](A, x, n, incx, x0, start, s_r, s_c, FORWARD=forward,
                                 UNIT=(diag == 1), BLOCK=BLOCK, num_warps=4)
        lo, hi = (start + BLOCK, n) if forward else (0, start)
        if hi > lo:
            _update_kernel[(triton.cdiv(hi - lo, BLOCK_M),)](
                A, x, n, incx, x0, start, lo, hi, s_r, s_c, BLOCK_M=BLOCK_M, BLOCK=BLOCK,
                num_warps=4)
    return None
'''

# Picks the substitution's direction from uplo alone: for a transposed matrix it runs the
# wrong way (and reads the triangle that is not stored); right whenever trans is N.
NEGATIVE_DIRECTION_IGNORES_TRANS = _blas.variant(SOLUTION, (
    "    forward = (uplo == 0) == (trans == 0)\n", "    forward = uplo == 0\n"))

# Divides by the stored diagonal even when diag is CUBLAS_DIAG_UNIT (garbage there: NaN).
NEGATIVE_READS_UNIT_DIAGONAL = _blas.variant(SOLUTION, ("UNIT=(diag == 1)", "UNIT=False"))

# Transposes for CUBLAS_OP_T (1) only and takes CUBLAS_OP_C (2) as N.
NEGATIVE_OP_C_AS_N = _blas.variant(
    SOLUTION,
    ("    s_r, s_c = (1, lda) if trans == 0 else (lda, 1)\n",
     "    s_r, s_c = (lda, 1) if trans == 1 else (1, lda)\n"),
    ("    forward = (uplo == 0) == (trans == 0)\n", "    forward = (uplo == 0) == (trans != 1)\n"))


@register("cublas::cublasStrsv_v2", version=1, kind=Kind.COMPUTE)
class Strsv(_level2.Level2):
    """Case shape ``(n,)``; params ``uplo``, ``trans``, ``diag``, the layout (``incx``,
    ``pad``: lda = n + pad) and optionally ``std`` (the right-hand side's magnitude). A
    non-unit A is diagonally dominant; a unit one has small off-diagonal elements (random unit
    triangles are exponentially ill-conditioned): the error measured is the candidate's."""

    routine, precision = "cublasStrsv_v2", "float32"
    entry_points = (
        EntryPoint(
            "cublasStrsv_v2",
            "cublasStrsv_v2(uplo: int, trans: int, diag: int, n: int, A: Tensor, lda: int, "
            "x: Tensor, incx: int) -> None",
            "Solve op(A) @ x = b for the triangular A, b given in x and overwritten by x.",
        ),
    )
    description = (
        "cuBLAS `cublasStrsv_v2` (handle omitted): solves the triangular system "
        "`op(A) * x = b` for x, where b arrives in `x` and is overwritten by the solution; "
        "returns None. `A` and `x` are 1-D contiguous float32 tensors holding the device "
        "buffers. op(A) is A for trans == 0 (CUBLAS_OP_N) and A^T for trans == 1 (T) or 2 (C, "
        "the same as T for real data). A is n x n, column-major, element (i, j) at "
        "`A[i + j*lda]`, lda >= max(1, n), and triangular: uplo == 1 "
        "(CUBLAS_FILL_MODE_UPPER) stores the elements with i <= j, uplo == 0 (LOWER) those "
        "with i >= j; the other triangle and the padding rows may hold NaN and must not be "
        "read. diag == 1 (CUBLAS_DIAG_UNIT) means the diagonal is all ones and is not read (it "
        "may hold garbage); diag == 0 (NON_UNIT) reads it. Element i of b and x is "
        "`x[i*incx]` when incx > 0; a negative increment starts at the far end, element i "
        "being `x[(n-1-i)*|incx|]`; incx is never 0; x's other elements must be left "
        "untouched and A must not be modified. n == 0 does nothing. The matrices are well "
        "conditioned (no singularity test is needed); the answer is judged by its backward "
        "error: it must solve a system within a few float32 roundings of op(A). Compute in "
        "float32."
    )
    solution = SOLUTION
    negatives = (
        Negative("direction_ignores_trans", "chooses forward or backward substitution from "
                 "uplo alone; wrong for every transposed solve", NEGATIVE_DIRECTION_IGNORES_TRANS),
        Negative("reads_unit_diagonal", "divides by the stored diagonal when diag is unit",
                 NEGATIVE_READS_UNIT_DIAGONAL),
        Negative("op_c_as_n", "takes CUBLAS_OP_C (2) as no transpose", NEGATIVE_OP_C_AS_N),
    )
    # Backward error, per element of x relative to M(op(A))^-1 (|op(A)| |x|)
    # (_level2.comparison_solve_scale): the floor for small n, see tolerance().
    tolerances = {"float32": _blas.sum_tolerance("float32")}

    def tolerance(self, case: Case, dtype: torch.dtype) -> Tolerance:
        """A substitution's rounding errors fall on the running value of each x_j (b_j minus
        the terms so far), not on the terms alone: the componentwise backward error is bounded
        by n u (Higham, Thm 8.5) and in practice grows like sqrt(n) u — the column-oriented
        algorithm of reference BLAS and MKL measured 0.9 sqrt(n) u of this scale at n = 2049
        (sgemm-like blocked updates stay lower). So the floor grows to 4 sqrt(n) u: 181 u at
        n = 2049, 512 u at the benchmark's 16384, still far below a wrong trans, uplo or diagonal
        (O(1)) or TF32 products (~2^-11)."""
        base = super().tolerance(case, dtype)
        grow = max(1.0, 4 * math.sqrt(max(case.shape[0], 1)) / _blas.SUM_ULPS)
        return Tolerance(base.rtol * grow, base.atol)

    def c(self, n: int, uplo: int, trans: int, diag: int, incx: int, pad: int, *,
          cpu: bool = False, **extra: object) -> Case:
        return case(self.routine, self.precision, (n,), uplo=uplo, trans=trans, diag=diag,
                    **_level2.layout(incx, None, pad), **extra, cpu=cpu)

    def edge_cases(self) -> list[Case]:
        c = self.c
        return [
            c(37, 0, 0, 0, 1, 0, cpu=True),
            c(21, 1, 1, 1, 2, 3, cpu=True),
            c(40, 1, 0, 0, -1, 0, cpu=True),
            c(27, 0, 2, 0, -2, 7, cpu=True),
            c(33, 0, 1, 1, 1, 1, cpu=True),
            c(1, 1, 0, 0, 1, 0, cpu=True),
            c(0, 0, 0, 0, 1, 0, cpu=True),
            c(300, 1, 2, 0, 1, 5, std=1e17),
        ]

    def grid(self) -> list[Case]:
        out = [self.c(n, uplo, trans, diag, incx, pad) for n in _level2.GRID_N
               for uplo in (0, 1) for trans in (0, 1, 2) for diag in (0, 1)
               for incx, _, pad in _level2.LAYOUTS]
        return out + [self.c(0, uplo, 1, 0, -1, 0) for uplo in (0, 1)]

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        # Substitution is sequential: Triton's interpreter takes milliseconds per row.
        sizes = [0, *(rng.randrange(1, 50) for _ in range(3))] if small else \
            self.hidden_sizes(rng, tier)
        for n in sizes:
            lay = _level2.pick_layout(rng, two=False)
            out.append(self.c(n, rng.choice((0, 1)), rng.choice((0, 1, 2)), rng.choice((0, 1)),
                              lay["incx"], lay["pad"], cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # A: 16384^2 float32 = 1 GiB, one triangle of it read.
        return [self.c(16384, 1, 0, 0, 1, 0), self.c(16384, 0, 1, 1, -1, 0)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        (n,) = c.shape
        uplo, lda = c["uplo"], max(n, 1) + c["pad"]
        if c["diag"] == _blas.UNIT:
            a = _level2.unit_triangle(n, lda, uplo, self.precision, gen)
        else:
            a = _blas.make_triangle(n, lda, uplo, self.precision, gen, dominant=True)
        x = _level2.vector(n, c["incx"], self.precision, gen, std=float(c.get("std", 1.0)))
        return Call(c.entry, (uplo, c["trans"], c["diag"], n, a, lda, x, c["incx"]),
                    outputs=(Out.arg(6),), mutable=frozenset({6}))

    @staticmethod
    def _op(a: torch.Tensor, uplo: int, trans: int, diag: int, n: int, lda: int
            ) -> tuple[torch.Tensor, bool]:
        """op(A) in float64 and whether it is upper triangular."""
        t = _level2.triangular(a, n, lda, uplo, unit=diag == _blas.UNIT)
        return (t if trans == _blas.OP_N else t.t()), (uplo == _blas.UPPER) == (trans == _blas.OP_N)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        uplo, trans, diag, n, a, lda, x, incx = call.args
        if n <= 0:
            return (Expected(_blas.hp(x), x.dtype, torch.zeros_like(_blas.hp(x))),)
        op, upper = self._op(a, uplo, trans, diag, n, lda)
        b = _blas.hp(_blas.gather(x, n, incx))
        sol = torch.linalg.solve_triangular(op, b.reshape(-1, 1), upper=upper).reshape(-1)
        scale = _level2.comparison_solve_scale(op, sol, upper=upper)
        return (Expected(_level1.updated(x, n, incx, sol), x.dtype,
                         _level1.at(x, n, incx, scale)),)

    def baseline(self, call: Call) -> object:
        uplo, trans, diag, n, a, lda, x, incx = call.args
        if _level2.on_cublas(x):
            _cublas.call(self.routine, uplo, trans, diag, n, a, lda, x, incx)
        elif n > 0:
            t = _blas.stored(a, n, n, lda)
            t = t.triu() if uplo == _blas.UPPER else t.tril()
            op = t if trans == _blas.OP_N else t.t()
            upper = (uplo == _blas.UPPER) == (trans == _blas.OP_N)
            b = _blas.gather(x, n, incx).reshape(-1, 1)
            sol = torch.linalg.solve_triangular(op, b, upper=upper,
                                                unitriangular=diag == _blas.UNIT)
            _blas.scatter_(x, n, incx, sol.reshape(-1))
        return None

    def cost(self, c: Case) -> Cost:
        (n,) = c.shape
        n = max(n, 0)
        tri = n * (n + 1) // 2 - (n if c["diag"] == _blas.UNIT else 0)
        return _blas.streaming_cost(2.0 * tri, tri + 2 * n, self.precision)
