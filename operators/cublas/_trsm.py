"""What the triangular solves (``cublasStrsm_v2``, ``cublasDtrsmBatched``,
``cublasZtrsmBatched``) share: cases, inputs, the fp64/complex128 reference judged by backward
error, the cuBLAS and PyTorch baselines, the cost model and the problem statement. Registers
nothing; each routine's module names its routine, precision, controls and benchmark cases.

Every routine solves ``op(A) X = alpha B`` (side LEFT, A m x m) or ``X op(A) = alpha B`` (side
RIGHT, A n x n) for the m x n matrix X, overwriting B (each batch entry's B). A case's shape is
``(m, n)``; its params are the flags ``side``, ``uplo``, ``trans``, ``diag``, ``alpha``, the
padding of A and B (``lda = k + pad_a``, ``ldb = m + pad_b``, k the order of A), and optionally
``batch`` and ``shared_a`` (every entry's pointer addresses one A), ``std`` (B's magnitude) and
``b_nan`` (with ``alpha == 0``: B holds NaN, which the quick return never reads).

Inputs follow the suite's conventions: what the routine never reads holds NaN (A's other
triangle and padding rows, a unit diagonal, B's padding rows, all of A when ``alpha == 0``).
When ``alpha == 0`` (A all NaN, never read) B's padding rows hold random values instead, which
the quick return must leave as they are; an empty B is all such values.
A non-unit A is diagonally dominant (``_blas.make_triangle``); a unit A has off-diagonal
elements of order ``0.5 / k`` (random unit triangles are exponentially ill-conditioned), so
every system is well conditioned and the error measured is the candidate's.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from operators.cublas import _blas, _cublas
from operators.spec import (
    Call,
    Case,
    Cost,
    Expected,
    OperatorSpec,
    Out,
    PointerArray,
    Tier,
    Tolerance,
    case,
    dtype_from_name,
    unit_roundoff,
)

FLAGS = {"L": _blas.LEFT, "R": _blas.RIGHT}
# (side, uplo, trans, diag) as letters: "LLNN" is left, lower, no transpose, non-unit.
_SIDE, _UPLO, _TRANS, _DIAG = ({"L": 0, "R": 1}, {"L": 0, "U": 1}, {"N": 0, "T": 1, "C": 2},
                               {"N": 0, "U": 1})
ALL_FLAGS = tuple(s + u + t + d for s in "LR" for u in "LU" for t in "NTC" for d in "NU")


def trsm_case(entry: str, dtype: str, flags: str, m: int, n: int, *, alpha: complex,
              pad_a: int = 0, pad_b: int = 0, batch: int | None = None, cpu: bool = False,
              **extra: Any) -> Case:
    """A case from its flags as letters (side, uplo, trans, diag: ``"RUCN"``)."""
    s, u, t, d = tuple(flags)
    more: dict[str, Any] = {} if batch is None else {"batch": batch}
    return case(entry, dtype, (m, n), side=_SIDE[s], uplo=_UPLO[u], trans=_TRANS[t],
                diag=_DIAG[d], alpha=alpha, pad_a=pad_a, pad_b=pad_b, **more, **extra, cpu=cpu)


def order(c: Case) -> int:
    """The order k of A: m for side LEFT, n for RIGHT."""
    m, n = c.shape
    return m if c["side"] == _blas.LEFT else n


# ---- inputs -------------------------------------------------------------------------------------

def _nan(size: int, dtype: str) -> torch.Tensor:
    return torch.full((max(size, 1),), _blas.NAN, dtype=dtype_from_name(dtype))


def triangle(k: int, lda: int, uplo: int, unit: bool, dtype: str,
             gen: torch.Generator) -> torch.Tensor:
    """A's buffer: a dominant triangle, or a unit one with off-diagonal elements scaled to
    ``0.5 / k`` (row sums of magnitudes about 0.4: as well conditioned); NaN elsewhere."""
    if k <= 0:
        return _nan(lda, dtype)
    buf = _blas.make_triangle(k, lda, uplo, dtype, gen, unit=unit, dominant=not unit)
    if unit:
        a = _blas.stored(buf, k, k, lda)
        a.mul_(0.5 / k)  # NaN stays NaN
    return buf


def matrix(rows: int, cols: int, ld: int, dtype: str, gen: torch.Generator, *, std: float,
           nan: bool, padding: bool) -> torch.Tensor:
    """B's buffer: random values (``std``), or NaN throughout (``nan``); padding rows NaN, or
    random (``padding``: values a quick return must leave as they are, which a write over the
    whole buffer would change). An empty matrix's buffer is all such values."""
    if rows <= 0 or cols <= 0:
        return _blas.random_values(max(ld * max(cols, 0), 1), dtype, gen)
    buf = (_blas.random_values(ld * cols, dtype, gen) if padding
           else _nan(ld * cols, dtype))
    inner = _blas.stored(buf, rows, cols, ld)
    inner.copy_(_nan(1, dtype).expand(rows * cols).reshape(rows, cols) if nan else
                _blas.random_values(rows * cols, dtype, gen, std=std).reshape(rows, cols))
    return buf


def operands(c: Case, dtype: str, gen: torch.Generator) -> tuple[list[torch.Tensor],
                                                                list[torch.Tensor], int, int]:
    """Every entry's A and B buffers and the leading dimensions of a case (one entry for a
    non-batched routine; a shared A is one tensor listed for every entry)."""
    m, n = c.shape
    k = order(c)
    lda, ldb = max(k, 1) + c["pad_a"], max(m, 1) + c["pad_b"]
    zero = c["alpha"] == 0
    count = c.get("batch", 1)

    def one_a() -> torch.Tensor:
        if zero:  # never read: NaN throughout, the triangle included
            return _nan(lda * k, dtype)
        return triangle(k, lda, c["uplo"], c["diag"] == _blas.UNIT, dtype, gen)

    shared = one_a() if c.get("shared_a", False) else None
    a_list = [shared if shared is not None else one_a() for _ in range(count)]
    b_list = [matrix(m, n, ldb, dtype, gen, std=float(c.get("std", 1.0)),
                     nan=zero and c.get("b_nan", False), padding=zero) for _ in range(count)]
    return a_list, b_list, lda, ldb


def pointers(entries: list[torch.Tensor], dtype: str, gen: torch.Generator) -> PointerArray:
    """The pointer array of ``entries``; an empty batch gets a one-element NaN buffer."""
    if not entries:
        return PointerArray(_nan(1, dtype), ())
    return _blas.pointer_array(entries, gen)


# ---- reference ----------------------------------------------------------------------------------

def op_triangle(a: torch.Tensor, k: int, lda: int, uplo: int, trans: int, diag: int
                ) -> torch.Tensor:
    """op(A) as a dense k x k float64/complex128 matrix (zeros outside the triangle, ones on a
    unit diagonal, which is never read)."""
    t = _blas.dense_from_triangle(a, k, lda, uplo, "triangular", unit=diag == _blas.UNIT)
    if trans == _blas.OP_N:
        return t
    return t.t().conj() if trans == _blas.OP_C else t.t()


def solve(a: torch.Tensor, b: torch.Tensor, side: int, uplo: int, trans: int, diag: int,
          alpha: complex, m: int, n: int, lda: int, ldb: int
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """X and its error scale for one entry, in float64/complex128, from pristine A and B.

    The scale is the backward error carried to the solution: a computed X whose every column
    (row, for side RIGHT) solves a system perturbed componentwise by ``|dT| <= eps |T|`` (T the
    matrix the entry solves with) lies within ``eps |T^-1| (|T| |X|)`` of X to first order."""
    k = m if side == _blas.LEFT else n
    op = op_triangle(a, k, lda, uplo, trans, diag)
    rhs = alpha * _blas.stored(_blas.hp(b), m, n, ldb)
    upper = (uplo == _blas.UPPER) == (trans == _blas.OP_N)
    left = side == _blas.LEFT
    x = torch.linalg.solve_triangular(op, rhs, upper=upper, left=left)
    eye = torch.eye(k, dtype=op.dtype, device=op.device)
    inv = torch.linalg.solve_triangular(op, eye, upper=upper).abs()
    scale = inv @ (op.abs() @ x.abs()) if left else (x.abs() @ op.abs()) @ inv
    return x, scale


def entries(call: Call) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Each entry's A and B buffers (views): one of each for a non-batched routine."""
    side, _, _, _, m, n, _, a, lda, b, ldb = call.args[:11]
    count = call.args[11] if len(call.args) > 11 else None
    if count is None:
        return [a], [b]
    k = m if side == _blas.LEFT else n
    size_a, size_b = max(lda * max(k, 0), 1), max(ldb * max(n, 0), 1)
    return ([_blas.pointee(a, e, size_a) for e in range(count)],
            [_blas.pointee(b, e, size_b) for e in range(count)])


def reference(call: Call, dtype: str) -> Expected:
    """The B buffer (a pointer array's whole buffer) after the call: X where each entry's
    matrix is, everything else as it was (scale 0: bit for bit). ``alpha == 0`` gives zeros
    without reading A or B."""
    side, uplo, trans, diag, m, n, alpha, _, lda, b, ldb = call.args[:11]
    out = _blas.hp(b.buffer if isinstance(b, PointerArray) else b)
    scale = torch.zeros_like(out.real if out.is_complex() else out)
    offsets = b.offsets if isinstance(b, PointerArray) else (0,)
    alpha = _blas.as_c(alpha, dtype)
    for (a_e, b_e), o in zip(zip(*entries(call), strict=True), offsets, strict=True):
        if m <= 0 or n <= 0:
            continue
        view = _blas.stored(out[o:], m, n, ldb)
        sview = _blas.stored(scale[o:], m, n, ldb)
        if alpha == 0:
            view.zero_()
            continue
        x, s = solve(a_e, b_e, side, uplo, trans, diag, alpha if out.is_complex() else alpha.real,
                     m, n, lda, ldb)
        view.copy_(x)
        sview.copy_(s)
    target = dtype_from_name(dtype)
    return Expected(out, target, torch.complex(scale, scale) if out.is_complex() else scale)


def tolerance_for(c: Case, dtype: str) -> Tolerance:
    """``max(16, 4 sqrt(k)) u`` of the backward-error scale, k the order of A. Substitution's
    componentwise backward error is bounded by ``k u`` (Higham, Thm 8.5) and grows like
    ``sqrt(k) u`` in practice (roundings of a running sum of k terms); blocked solves whose
    updates are GEMMs stay within that. A wrong triangle, side or diagonal errs by O(1) of the
    scale, TF32 products (fp32) by ~2^-11 of each term's share."""
    u = unit_roundoff(dtype_from_name(dtype))
    ulps = max(float(_blas.SUM_ULPS), 4.0 * math.sqrt(max(order(c), 1)))
    return Tolerance(rtol=ulps * u, atol=_blas.SUM_ULPS * torch.finfo(
        dtype_from_name(_blas.rate_dtype(dtype))).tiny)


# ---- baselines ----------------------------------------------------------------------------------

def torch_solve_(a: torch.Tensor, b: torch.Tensor, side: int, uplo: int, trans: int, diag: int,
                 alpha: complex, m: int, n: int, lda: int, ldb: int) -> None:
    """One entry solved by PyTorch in the routine's precision, B overwritten in place: the
    baseline where cuBLAS is not. Only the triangle is used (the rest is masked to 0 before
    solving, so NaN there never enters); a unit diagonal is taken as 1."""
    if m <= 0 or n <= 0:
        return
    view = _blas.stored(b, m, n, ldb)
    if alpha == 0:
        view.zero_()
        return
    k = m if side == _blas.LEFT else n
    stored = _blas.stored(a, k, k, lda)
    keep = _blas.in_triangle(k, uplo, diagonal=diag != _blas.UNIT).to(a.device)
    t = torch.where(keep, stored, torch.zeros((), dtype=a.dtype, device=a.device))
    if diag == _blas.UNIT:
        t = t + torch.eye(k, dtype=a.dtype, device=a.device)
    op = t if trans == _blas.OP_N else (t.t().conj() if trans == _blas.OP_C else t.t())
    upper = (uplo == _blas.UPPER) == (trans == _blas.OP_N)
    x = torch.linalg.solve_triangular(op, view * alpha, upper=upper, left=side == _blas.LEFT)
    view.copy_(x)


# ---- the spec -----------------------------------------------------------------------------------

class Trsm(OperatorSpec):
    """A trsm routine: ``routine`` and ``precision`` (``"float32"``, ``"float64"``,
    ``"complex128"``) and whether it takes arrays of pointers (``batched``)."""

    routine: ClassVar[str]
    precision: ClassVar[str]
    batched: ClassVar[bool] = False

    def tolerance(self, case: Case, dtype: torch.dtype) -> Tolerance:
        return tolerance_for(case, self.precision)

    def c(self, flags: str, m: int, n: int, *, alpha: complex = 1.0, **extra: Any) -> Case:
        if self.batched:
            extra.setdefault("batch", 3)
        return trsm_case(self.routine, self.precision, flags, m, n, alpha=alpha, **extra)

    def alphas(self) -> tuple[complex, ...]:
        """Nonzero alphas the grid cycles through (complex ones for complex routines)."""
        if self.precision.startswith("complex"):
            return (1.0, complex(-0.5, 1.25), complex(0.0, 2.0))
        return (1.0, -1.5, 0.25)

    def grid(self, sizes: Sequence[tuple[int, int]], first: Sequence[Case]) -> list[Case]:
        """``first``, then every flag combination crossed with ``sizes``, alphas and paddings
        rotating at different rates, then the quick returns."""
        out = list(first)
        alphas = self.alphas()
        pads = ((0, 0), (3, 1), (0, 5), (7, 2))
        i = 0
        for m, n in sizes:
            for flags in ALL_FLAGS:
                pad_a, pad_b = pads[i % len(pads)]
                out.append(self.c(flags, m, n, alpha=alphas[(i // 5) % len(alphas)],
                                  pad_a=pad_a, pad_b=pad_b))
                i += 1
        out += [self.c("LLNN", 0, 5), self.c("RUTU", 7, 0), self.c("LUCN", 9, 4, alpha=0.0,
                                                                   pad_b=1),
                self.c("RLNU", 6, 11, alpha=0.0, b_nan=True, pad_b=2)]
        return out

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        hi = 20 if small else 400
        out = []
        for _ in range(3 if small else 8):
            extra: dict[str, Any] = {}
            if self.batched:
                extra["batch"] = rng.randrange(1, 4 if small else 24)
                extra["shared_a"] = rng.random() < 0.3
            alpha = rng.choice((*self.alphas(), 0.0) if not small else self.alphas())
            # alpha == 0 writes zeros: B's padding (random then) shows what else was written.
            pad_b = rng.choice((2, 5) if alpha == 0 else (0, 0, 2, 5))
            out.append(self.c(rng.choice(ALL_FLAGS), rng.randrange(1, hi), rng.randrange(1, hi),
                              alpha=alpha, pad_a=rng.choice((0, 0, 1, 6)), pad_b=pad_b,
                              cpu=small, **extra))
        return out

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        m, n = c.shape
        a_list, b_list, lda, ldb = operands(c, self.precision, gen)
        flags = (c["side"], c["uplo"], c["trans"], c["diag"], m, n, c["alpha"])
        if self.batched:
            args: tuple[Any, ...] = (*flags, pointers(a_list, self.precision, gen), lda,
                                     pointers(b_list, self.precision, gen), ldb, c["batch"])
        else:
            args = (*flags, a_list[0], lda, b_list[0], ldb)
        return Call(c.entry, args, outputs=(Out.arg(9),), mutable=frozenset({9}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        return (reference(call, self.precision),)

    def baseline_library(self) -> str:
        return _cublas.library()

    def baseline(self, call: Call) -> object:
        side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb = call.args[:11]
        buf = b.buffer if isinstance(b, PointerArray) else b
        if buf.is_cuda and _cublas.available():
            dt = dtype_from_name(self.precision)
            _cublas.call(self.routine, side, uplo, trans, diag, m, n,
                         _cublas.scalar(alpha, dt, buf.device), *call.args[7:])
            return None
        for a_e, b_e in zip(*entries(call), strict=True):
            torch_solve_(a_e, b_e, side, uplo, trans, diag, alpha, m, n, lda, ldb)
        return None

    def cost(self, c: Case) -> Cost:
        """Compute-bound: ``k^2 r`` real FLOPs per entry (``k(k+1)/2 * r`` multiply-adds; 8
        real FLOPs per complex one), k the order of A and r the other dimension of B; A's
        triangle read once (once for a shared A), B read and written."""
        m, n = c.shape
        k = order(c)
        count = c.get("batch", 1)
        if m <= 0 or n <= 0 or count <= 0:
            return _blas.streaming_cost(0, 0, self.precision)
        r = m * n // k
        if c["alpha"] == 0:
            return _blas.streaming_cost(0, count * m * n, self.precision)
        tri = k * (k + 1) // 2 - (k if c["diag"] == _blas.UNIT else 0)
        a_count = 1 if c.get("shared_a", False) else count
        flops = count * (_blas.flops_per_fma(self.precision) * tri * r / 1.0)
        elements = a_count * tri + count * 2 * m * n
        return Cost(flops=float(flops), bytes=float(elements * _blas.element_size(self.precision)),
                    dtype=_blas.rate_dtype(self.precision))


# ---- the problem statement ----------------------------------------------------------------------

def statement(routine: str, dtype: str, *, batched: bool) -> str:
    """The prompt description: everything a candidate needs, as the C API defines it."""
    complex_ = dtype.startswith("complex")
    a, b = ("Aarray[e]", "Barray[e]") if batched else ("A", "B")
    what = ("for every batch entry e < batchCount" if batched else "")
    parts = [
        f"cuBLAS `{routine}` (handle omitted) solves {what + ' ' if what else ''}the triangular "
        f"system `op(A) X = alpha B` (side == 0, CUBLAS_SIDE_LEFT; A is m x m) or "
        f"`X op(A) = alpha B` (side == 1, RIGHT; A is n x n) for the m x n matrix X, which "
        f"overwrites B; returns None. No test for singularity is needed.",
    ]
    if batched:
        parts.append(
            "`Aarray` and `Barray` are 1-D int64 device tensors of batchCount addresses: entry "
            f"e's A starts at address `Aarray[e]` and its B at `Barray[e]` (load them in Triton "
            f"with `tl.load(Aarray + e).to(tl.pointer_type(tl.{_blas.rate_dtype(dtype)}))`"
            "; entries are neither ordered nor evenly spaced, several entries may share one A, "
            "every entry has its own B). batchCount <= 0 does nothing.")
    else:
        parts.append(f"`A` and `B` are 1-D contiguous {dtype} tensors holding the device buffers.")
    if complex_:
        parts.append(
            "Buffers hold complex128 elements: a Triton kernel reads them as interleaved float64 "
            "pairs (real part of element e at 2e, imaginary at 2e + 1; `torch.view_as_real` for "
            "a tensor, the same bytes behind a pointer). `alpha` is a Python complex used as a "
            "cuDoubleComplex (pass alpha.real and alpha.imag to a kernel as parameters "
            "annotated `tl.float64`: a Python float reaches a Triton kernel as float32 "
            "otherwise). op(A) is A for trans == 0 (CUBLAS_OP_N), A^T for 1 (T) and the "
            "conjugate transpose A^H for 2 (C); side RIGHT with C solves X A^H = alpha B.")
    else:
        parts.append(
            f"`alpha` is a Python float used as a {'float' if dtype == 'float32' else 'double'}"
            + ("" if dtype == "float32" else " (a Python float reaches a Triton kernel as "
               "float32 unless the kernel parameter is annotated `tl.float64`)")
            + ". op(A) is A for trans == 0 (CUBLAS_OP_N) and A^T for trans == 1 (T) or 2 (C, "
            "the same as T for real data).")
    parts.append(
        f"Matrices are column-major: element (i, j) of {a} is at offset `i + j*lda` from its "
        f"start, lda >= max(1, order of A); element (i, j) of {b} (m x n) at `i + j*ldb`, "
        "ldb >= max(1, m). A is triangular: uplo == 1 (CUBLAS_FILL_MODE_UPPER) stores the "
        "elements with i <= j, uplo == 0 (LOWER) those with i >= j; the other triangle and "
        "the padding rows (i >= order, up to lda) may hold NaN and must not be read. diag == 1 "
        "(CUBLAS_DIAG_UNIT) means A's diagonal is all ones and is not read (it may hold NaN); "
        "diag == 0 (NON_UNIT) reads it. B's padding rows (i >= m) may hold NaN and must be "
        "left untouched, and A must not be modified.")
    parts.append(
        "Quick returns: when m == 0 or n == 0 nothing is done; when alpha == 0, X = 0 is "
        "written into B without reading A or B (both may then hold NaN).")
    compute = ('float32 (no TF32: use input_precision="ieee" for tl.dot)'
               if dtype == "float32" else "float64")
    parts.append(
        "The triangles are well conditioned; X is judged by backward error: it must solve, "
        "column by column (row by row for side RIGHT), a system within a few "
        f"{'float32' if dtype == 'float32' else 'float64'} roundings per term of op(A) "
        "(per element, within max(16, 4 sqrt(k)) units of roundoff of |op(A)^-1| (|op(A)| "
        f"|X|), k the order of A). Compute in {compute}.")
    return " ".join(parts)
