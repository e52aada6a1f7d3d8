"""What the symmetric rank-k updates share (``cublasSsyrk_v2``, ``cublasCsyrkEx``):
``C = alpha * op(A) @ op(A)^T + beta * C`` on the triangle ``uplo`` of the n x n matrix C,
where op(A) is n x k (A stored n x k for ``OP_N``, k x n for ``OP_T``). Symmetric, never
Hermitian: complex data are not conjugated. Registers nothing.

A case's shape is ``(n, k)``; its params are ``uplo``, ``trans``, ``alpha``, ``beta``, the
padding rows ``pad_a``/``pad_c`` and, for ``CsyrkEx``, ``atype`` (a ``cudaDataType``; with
CUDA_C_8I, lda is rounded up to a multiple of :data:`INT8_LDA_MULTIPLE`). Inputs:
padding rows NaN; A finite even when ``alpha == 0`` (cuBLAS's GEMM-based BLAS-3 routines read
their operands then in DEVICE pointer mode; syrk itself not yet checked on a GPU); C's
updated triangle NaN when
``beta == 0`` (not read); C's other triangle random values that must come back bit for bit,
so a kernel writing there shows.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from operators.cublas import _blas, _blas3, _cublas
from operators.spec import Call, Case, Cost, Expected, OperatorSpec, Out, Tier, case

# cudaDataType_t values (library_types.h) of the complex data CsyrkEx takes.
CUDA_C_32F, CUDA_C_8I = 4, 7
# CUDA_C_8I data get lda a multiple of 4 (columns 8-byte aligned), what cuBLAS's int8 GEMM paths
# ask of lda; cuBLAS documents no such rule for CsyrkEx, which refused a case with
# CUBLAS_STATUS_NOT_SUPPORTED on an H100 (which case was not recorded): a precaution until the
# per-case GPU check names the cases it refuses.
INT8_LDA_MULTIPLE = 4
_U, _L = _blas.UPPER, _blas.LOWER


@dataclass(frozen=True)
class Args:
    """A call's arguments by name, whatever the routine's C order."""

    uplo: int
    trans: int
    n: int
    k: int
    alpha: complex
    a: torch.Tensor
    atype: int | None
    lda: int
    beta: complex
    c: torch.Tensor
    ldc: int


def syrk_case(entry: str, dtype: str, uplo: int, trans: int, n: int, k: int, *,
              alpha: complex, beta: complex, pad_a: int = 0, pad_c: int = 0,
              atype: int | None = None, cpu: bool = False) -> Case:
    extra: dict[str, Any] = {} if atype is None else {"atype": atype}
    return case(entry, dtype, (n, k), uplo=uplo, trans=trans, alpha=alpha, beta=beta,
                pad_a=pad_a, pad_c=pad_c, **extra, cpu=cpu)


def complex_int8(rows: int, cols: int, ld: int, gen: torch.Generator) -> torch.Tensor:
    """A CUDA_C_8I matrix: an int8 buffer of ``2 * ld * cols`` elements, element (i, j)'s real
    part at ``2 * (i + j*ld)`` and its imaginary part next to it; random values in
    [-127, 127], padding rows too (an integer cannot hold NaN)."""
    return torch.randint(-127, 128, (2 * ld * max(cols, 0),), generator=gen, dtype=torch.int8)


def as_complex(a: torch.Tensor) -> torch.Tensor:
    """A buffer of complex elements in complex128: a complex tensor, or an int8 one of
    interleaved (real, imaginary) pairs."""
    if a.dtype == torch.int8:
        pairs = a.to(torch.float64).reshape(-1, 2)
        return torch.complex(pairs[:, 0], pairs[:, 1])
    return _blas.hp(a)


# ---- the reference solutions' shared Triton text (each solution is standalone) ----------------

# The tile (pid_m, pid_n) of C a program computes: tiles wholly outside the triangle uplo
# return at once; rows, columns and k offsets in int64.
TILE = r'''    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if UPPER:
        if pid_m > pid_n:
            return
    else:
        if pid_m < pid_n:
            return
    rm = pid_m.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    rn = pid_n.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    rk = tl.arange(0, BLOCK_K).to(tl.int64)
    m_ok = rm < N
    n_ok = rn < N
'''

# The elements of the tile that lie in C and in the triangle uplo (the diagonal included).
TRIANGLE_MASK = r'''    if UPPER:
        tri = rm[:, None] <= rn[None, :]
    else:
        tri = rm[:, None] >= rn[None, :]
    c_mask = m_ok[:, None] & n_ok[None, :] & tri
'''


class Syrk(OperatorSpec):
    """The spec behaviour of a syrk routine: cases, inputs, reference, cost, torch baseline."""

    routine: ClassVar[str]
    precision: ClassVar[str]  # C's dtype
    transes: ClassVar[tuple[int, ...]]  # the trans values the routine accepts
    atypes: ClassVar[tuple[int | None, ...]] = (None,)

    # ---- the routine's C argument order -------------------------------------------------------
    def pack(self, g: Args) -> tuple[Any, ...]:
        raise NotImplementedError

    def unpack(self, args: Sequence[Any]) -> Args:
        raise NotImplementedError

    @property
    def c_index(self) -> int:
        raise NotImplementedError

    # ---- cases --------------------------------------------------------------------------------
    def scalars(self, rng: random.Random) -> tuple[complex, complex]:
        raise NotImplementedError

    def grid(self, first: Sequence[Case]) -> list[Case]:
        """``first`` (the cpu tier), then odd and production sizes over every (uplo, trans),
        padding, and the quick returns."""
        e, d = self.routine, self.precision
        rng = random.Random(f"{e}-grid")
        shapes = [(1, 1), (1, 300), (255, 1), (128, 128), (511, 1023), (333, 777), (1000, 65),
                  (257, 511), (1024, 1024), (2048, 64), (96, 2000)]
        out = list(first)
        for i, (n, k) in enumerate(shapes):
            alpha, beta = self.scalars(rng)
            out.append(syrk_case(
                e, d, (_U, _L)[i % 2], self.transes[i % len(self.transes)], n, k,
                alpha=alpha, beta=beta if i % 3 else 0.0, pad_a=(0, 7, 1, 16)[i % 4],
                pad_c=(0, 3, 13)[i % 3], atype=self.atypes[i % len(self.atypes)]))
        for uplo in (_U, _L):  # quick returns: n == 0; k == 0 and alpha == 0 give beta * C
            out.append(syrk_case(e, d, uplo, self.transes[-1], 0, 5, alpha=1.0, beta=1.0,
                                 atype=self.atypes[-1]))
            out.append(syrk_case(e, d, uplo, self.transes[0], 40, 0, alpha=1.0, beta=-2.0,
                                 atype=self.atypes[0]))
            out.append(syrk_case(e, d, uplo, self.transes[-1], 70, 30, alpha=0.0, beta=0.0,
                                 pad_c=2, atype=self.atypes[-1]))
        return out

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        hi = 72 if small else 900
        out = []
        for i in range(3 if small else 6):
            alpha, beta = self.scalars(rng)
            out.append(syrk_case(
                self.routine, self.precision, rng.choice((_U, _L)), rng.choice(self.transes),
                rng.randrange(1, hi), rng.randrange(0 if i == 0 else 1, hi),
                alpha=0.0 if i == 1 else alpha, beta=rng.choice((beta, 0.0)),
                pad_a=rng.choice((0, 0, 1, 5)), pad_c=rng.choice((0, 0, 2, 9)),
                atype=rng.choice(self.atypes), cpu=small))
        return out

    # ---- inputs, reference, baseline ----------------------------------------------------------
    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        n, k = c.shape
        trans, atype = c["trans"], c.get("atype")
        rows, cols = (n, k) if trans == _blas.OP_N else (k, n)
        lda, ldc = max(1, rows) + c["pad_a"], max(1, n) + c["pad_c"]
        if atype == CUDA_C_8I:  # lda a multiple of 4: 8-byte aligned int8 columns (a precaution)
            lda = -(-lda // INT8_LDA_MULTIPLE) * INT8_LDA_MULTIPLE
        if atype == CUDA_C_8I:
            a = complex_int8(rows, cols, lda, gen)
        else:
            a = _blas.make_matrix(rows, cols, lda, c.dtype, gen)
        cbuf = _blas.make_matrix(n, n, ldc, c.dtype, gen) if n > 0 else \
            torch.full((ldc,), _blas.NAN, dtype=c.torch_dtype)
        if c["beta"] == 0 and n > 0:  # the updated triangle is not read: uninitialised
            _blas.stored(cbuf, n, n, ldc).masked_fill_(_blas.in_triangle(n, c["uplo"]),
                                                       _blas.NAN)
        g = Args(c["uplo"], trans, n, k, c["alpha"], a, atype, lda, c["beta"], cbuf, ldc)
        return Call(c.entry, self.pack(g), outputs=(Out.arg(self.c_index),),
                    mutable=frozenset({self.c_index}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        g = self.unpack(call.args)
        value = _blas.hp(g.c)
        scale = torch.zeros_like(value)  # everything else must come back bit for bit
        if g.n <= 0:
            return (Expected(value, g.c.dtype, scale),)
        alpha, beta = _blas3.scalars(g.alpha, g.beta, self.precision)
        old = _blas.stored(value, g.n, g.n, g.ldc).clone()
        new = torch.zeros_like(old)
        cond = torch.zeros_like(old)
        if alpha != 0 and g.k > 0:
            a = _blas.op_view(as_complex(g.a) if g.atype is not None else _blas.hp(g.a),
                              g.trans, g.n, g.k, g.lda)
            new += _blas3.mul(alpha, a @ a.t())  # op(A) op(A)^T: transposed, not conjugated
            cond += _blas3.scaled_abs(alpha, _blas3.abs_product(a, a.t()))
        if beta != 0:  # beta == 0: C is not read (NaN there must not propagate)
            new += _blas3.mul(beta, old)
            cond += _blas3.scaled_abs(beta, old)
        tri = _blas.in_triangle(g.n, g.uplo)
        _blas.stored(value, g.n, g.n, g.ldc).copy_(torch.where(tri, new, old))
        _blas.stored(scale, g.n, g.n, g.ldc).copy_(torch.where(tri, cond, torch.zeros_like(cond)))
        return (Expected(value, g.c.dtype, scale),)

    def torch_baseline(self, g: Args) -> None:
        """The call in PyTorch (hosts without cuBLAS): the triangle ``uplo`` of C updated in
        place, in C's precision; A not read when ``alpha == 0`` or ``k == 0``, nor C's old
        values when ``beta == 0``."""
        if g.n <= 0:
            return
        c = _blas.stored(g.c, g.n, g.n, g.ldc)
        new = torch.zeros_like(c)
        if g.alpha != 0 and g.k > 0:
            buf = as_complex(g.a).to(c.dtype) if g.atype is not None else g.a
            a = _blas.op_view(buf, g.trans, g.n, g.k, g.lda)
            new = _blas3.mul(g.alpha, a @ a.t())
        if g.beta != 0:
            new = new + _blas3.mul(g.beta, c)
        tri = _blas.in_triangle(g.n, g.uplo).to(c.device)
        c.copy_(torch.where(tri, new, c))

    def baseline_library(self) -> str:
        return _cublas.library()

    def cost(self, c: Case) -> Cost:
        """``n(n+1)/2 * k`` multiply-adds (one triangle), A read once, C's triangle read (when
        beta != 0) and written once."""
        n, k = c.shape
        tri = n * (n + 1) / 2
        product = c["alpha"] != 0 and k > 0
        size = _blas.element_size(self.precision)
        a_size = 2 if c.get("atype") == CUDA_C_8I else size  # a pair of int8s per element
        a_bytes = n * k * a_size if product else 0
        c_bytes = tri * (2 if c["beta"] != 0 else 1) * size
        return Cost(flops=_blas.flops_per_fma(self.precision) * tri * k * product + 3.0 * tri,
                    bytes=float(a_bytes + c_bytes), dtype=_blas.rate_dtype(self.precision))
