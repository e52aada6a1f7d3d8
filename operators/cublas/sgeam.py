"""cublas::cublasSgeam — ``C = alpha * op(A) + beta * op(B)`` on column-major float32 m x n
matrices (a BLAS-like extension: addition, scaling and out-of-place transposition), in place
when C is A or B."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.cublas import _blas, _blas3, _cublas
from operators.registry import register
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    OperatorSpec,
    Out,
    Tier,
    Tolerance,
    case,
)

_N, _T, _C = _blas.OP_N, _blas.OP_T, _blas.OP_C

SOLUTION = r'''
import triton
import triton.language as tl


@triton.jit
def _geam_kernel(a_ptr, b_ptr, c_ptr, M, N, alpha, beta, s_am, s_an, s_bm, s_bn, ldc,
                 ALPHA_ZERO: tl.constexpr, BETA_ZERO: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # One tile of C = alpha * op(A) + beta * op(B). Each element is read before it is written
    # by the same program, so C may be A (or B) itself when that operand is not transposed.
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    out = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if not ALPHA_ZERO:  # alpha == 0: A is not read
        a = tl.load(a_ptr + rm[:, None] * s_am + rn[None, :] * s_an, mask=mask, other=0.0)
        out += alpha * a
    if not BETA_ZERO:  # beta == 0: B is not read
        b = tl.load(b_ptr + rm[:, None] * s_bm + rn[None, :] * s_bn, mask=mask, other=0.0)
        out += beta * b
    tl.store(c_ptr + rm[:, None] + rn[None, :] * ldc, out, mask=mask)


def cublasSgeam(transa, transb, m, n, alpha, A, lda, beta, B, ldb, C, ldc):
    if m <= 0 or n <= 0:
        return None
    # op(X) is m x n: N -> X(i, j) at i + j*ld; T/C -> X(j, i) at j + i*ld.
    s_am, s_an = (1, lda) if transa == 0 else (lda, 1)
    s_bm, s_bn = (1, ldb) if transb == 0 else (ldb, 1)
    BM, BN = (32, 32) if C.device.type == "cpu" else (64, 64)
    grid = (triton.cdiv(m, BM), triton.cdiv(n, BN))
    _geam_kernel[grid](A, B, C, m, n, float(alpha), float(beta), s_am, s_an, s_bm, s_bn, ldc,
                       ALPHA_ZERO=(alpha == 0), BETA_ZERO=(beta == 0), BLOCK_M=BM,
                       BLOCK_N=BN, num_warps=4)
    return None
'''

# Reads B even when beta == 0: NaN in B (which need not be valid) leaks through 0 * NaN.
NEGATIVE_READS_B = _blas.variant(SOLUTION, ("BETA_ZERO=(beta == 0)", "BETA_ZERO=False"))

# Only CUBLAS_OP_T (1) transposes: CUBLAS_OP_C (2), which is T for real data, taken as N.
NEGATIVE_OP_C_AS_N = _blas.variant(
    SOLUTION, ("(1, lda) if transa == 0 else (lda, 1)", "(1, lda) if transa != 1 else (lda, 1)"),
    ("(1, ldb) if transb == 0 else (ldb, 1)", "(1, ldb) if transb != 1 else (ldb, 1)"))

# Writes C as if packed (ldc taken as m): right when C has no padding rows.
NEGATIVE_C_PACKED = _blas.variant(SOLUTION, ("float(beta), s_am, s_an, s_bm, s_bn, ldc,",
                                                "float(beta), s_am, s_an, s_bm, s_bn, m,"))


def geam_case(ta: int, tb: int, m: int, n: int, *, alpha: float, beta: float, pad_a: int = 0,
              pad_b: int = 0, pad_c: int = 0, inplace: str = "", cpu: bool = False) -> Case:
    """``inplace`` "A" or "B": C is that operand (op N, ldc == its ld), as cuBLAS allows."""
    extra = {"inplace": inplace} if inplace else {}
    return case("cublasSgeam", "float32", (m, n), transa=ta, transb=tb, alpha=alpha, beta=beta,
                pad_a=pad_a, pad_b=pad_b, pad_c=pad_c, **extra, cpu=cpu)


_ALPHAS = (1.0, -1.5, 0.5, 2.0, 0.0)
_BETAS = (1.0, -0.75, 0.3, 0.0)


@register("cublas::cublasSgeam", version=1, kind=Kind.COMPUTE)
class Sgeam(OperatorSpec):
    entry_points = (
        EntryPoint(
            "cublasSgeam",
            "cublasSgeam(transa: int, transb: int, m: int, n: int, alpha: float, A: Tensor, "
            "lda: int, beta: float, B: Tensor, ldb: int, C: Tensor, ldc: int) -> None",
            "C = alpha * op(A) + beta * op(B) on column-major float32 matrices, written into C.",
        ),
    )
    description = (
        "cuBLAS `cublasSgeam` (handle omitted): `C = alpha * op(A) + beta * op(B)` for m x n "
        "column-major float32 matrices (element (i, j) at i + j*ld), writing C and returning "
        "None. op(X) is X for CUBLAS_OP_N=0 (X stored m x n, ld >= m) and X^T for "
        "CUBLAS_OP_T=1 and CUBLAS_OP_C=2 (the same for real data; X stored n x m, ld >= n, "
        "op(X)(i, j) = X(j, i) at j + i*ld); C is m x n with ldc >= m. C is only written (its "
        "old values are never used; it may hold NaN) — except in place: C may be the very "
        "tensor A (then transa is N and ldc == lda: C = alpha * C + beta * op(B)) or B (transb "
        "N, ldc == ldb), so read each element before writing it. alpha == 0 does not read A "
        "and beta == 0 does not read B (either may hold NaN, which must not propagate); alpha "
        "== beta == 0 sets C to zero. m == 0 or n == 0 does nothing. Padding rows (up to ld) "
        "are neither used nor written. `alpha`, `beta` are Python floats used as float32; "
        "compute in float32."
    )
    solution = SOLUTION
    negatives = (
        Negative("reads_b_when_beta_zero", "reads B when beta == 0, so NaN there leaks through "
                 "0 * NaN", NEGATIVE_READS_B),
        Negative("op_c_as_n", "takes CUBLAS_OP_C (2) as no transpose instead of as T",
                 NEGATIVE_OP_C_AS_N),
        Negative("c_packed", "writes C as if ldc == m, ignoring its padding rows",
                 NEGATIVE_C_PACKED),
    )
    # Two products and a sum: within 2 u of |alpha op(A)| + |beta op(B)|; padding exact.
    tolerances = {"float32": Tolerance.ulps("float32", 2)}

    def cases(self) -> Sequence[Case]:
        g = geam_case
        cs = [
            g(_N, _N, 37, 29, alpha=1.0, beta=1.0, pad_a=2, pad_b=1, pad_c=3, cpu=True),
            g(_T, _N, 45, 33, alpha=-1.5, beta=0.5, pad_a=3, cpu=True),
            g(_N, _T, 30, 41, alpha=0.5, beta=0.0, pad_c=2, cpu=True),
            g(_C, _C, 40, 40, alpha=2.0, beta=-1.0, pad_b=1, cpu=True),
            g(_N, _T, 33, 20, alpha=0.0, beta=1.5, cpu=True),
            g(_N, _T, 50, 19, alpha=0.5, beta=2.0, pad_a=3, pad_c=3, inplace="A", cpu=True),
            g(_T, _N, 23, 31, alpha=1.0, beta=-0.5, pad_b=1, pad_c=1, inplace="B", cpu=True),
            g(_N, _N, 0, 7, alpha=1.0, beta=1.0, cpu=True),
        ]
        rng = random.Random("cublasSgeam-grid")
        shapes = [(1, 1), (1, 300), (255, 1), (128, 128), (511, 257), (333, 777), (1000, 65),
                  (1024, 1024), (64, 2048)]
        for i, (m, n) in enumerate(shapes):
            for ta, tb in ((_N, _N), (_N, _T), (_T, _N), (_T, _T), (_C, _N)):
                cs.append(g(ta, tb, m, n, alpha=rng.choice(_ALPHAS[:4]),
                            beta=rng.choice(_BETAS), pad_a=(0, 7, 1)[i % 3],
                            pad_b=(0, 2, 16)[(i + ta) % 3], pad_c=(0, 3, 13)[(i + tb) % 3]))
        cs += [
            g(_T, _N, 700, 300, alpha=1.0, beta=0.0),  # an out-of-place transpose
            g(_N, _T, 90, 80, alpha=0.0, beta=0.0, pad_c=5),  # C = 0, neither A nor B read
            g(_N, _N, 513, 129, alpha=-1.0, beta=1.0, pad_a=4, inplace="A"),
            g(_T, _N, 200, 301, alpha=0.25, beta=3.0, pad_b=6, inplace="B"),
            g(_N, _N, 77, 0, alpha=1.0, beta=1.0),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        hi = 72 if small else 1500
        out = []
        for i in range(3 if small else 6):
            inplace = ("", "A", "B")[i % 3]
            out.append(geam_case(
                _N if inplace == "A" else rng.choice((_N, _T, _C)),
                _N if inplace == "B" else rng.choice((_N, _T, _C)),
                rng.randrange(1, hi), rng.randrange(1, hi), alpha=rng.choice(_ALPHAS),
                beta=rng.choice(_BETAS), pad_a=rng.choice((0, 1, 5)), pad_b=rng.choice((0, 2)),
                pad_c=rng.choice((0, 3)), inplace=inplace, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        g = geam_case
        return [g(_N, _N, 8192, 8192, alpha=1.0, beta=-1.0),
                g(_T, _N, 8192, 8192, alpha=0.5, beta=2.0),
                g(_T, _N, 16384, 8192, alpha=1.0, beta=0.0)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        m, n = c.shape
        ta, tb, inplace = c["transa"], c["transb"], c.get("inplace", "")
        ra, ca = (m, n) if ta == _N else (n, m)
        rb, cb = (m, n) if tb == _N else (n, m)
        lda, ldb = max(1, ra) + c["pad_a"], max(1, rb) + c["pad_b"]
        a = _blas3.output_matrix(ra, ca, lda, "float32", gen, read=c["alpha"] != 0)
        b = _blas3.output_matrix(rb, cb, ldb, "float32", gen, read=c["beta"] != 0)
        # C is A or B itself in place (same ld), else only written: NaN (uninitialised).
        if inplace:
            cbuf, ldc = (a, lda) if inplace == "A" else (b, ldb)
        else:
            ldc = max(1, m) + c["pad_c"]
            cbuf = _blas3.output_matrix(m, n, ldc, "float32", gen, read=False)
        if m <= 0 or n <= 0:  # nothing is C's: values that must come back as they were
            cbuf = _blas.random_values(ldc * max(n, 1), "float32", gen)
        args = (ta, tb, m, n, c["alpha"], a, lda, c["beta"], b, ldb, cbuf, ldc)
        # In place, the operand C is (5 or 8) is written too. The harness moves each argument
        # separately, so there the candidate sees two buffers with the same contents.
        alias = {"A": 5, "B": 8}.get(inplace)
        return Call(c.entry, args, outputs=(Out.arg(10),),
                    mutable=frozenset({10} if alias is None else {10, alias}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        ta, tb, m, n, alpha, a, lda, beta, b, ldb, cbuf, ldc = call.args
        value = _blas.hp(cbuf)
        scale = torch.zeros_like(value)  # padding (and a quick return's C): bit for bit
        if m <= 0 or n <= 0:
            return (Expected(value, cbuf.dtype, scale),)
        alpha, beta = _blas3.scalars(alpha, beta, "float32")
        new = torch.zeros(m, n, dtype=torch.float64)
        cond = torch.zeros_like(new)
        for s, x, t, ld in ((alpha, a, ta, lda), (beta, b, tb, ldb)):
            if s != 0:  # a zero scalar does not read its operand
                term = s.real * _blas.op_view(_blas.hp(x), t, m, n, ld)
                new += term
                cond += term.abs()
        _blas.stored(value, m, n, ldc).copy_(new)
        _blas.stored(scale, m, n, ldc).copy_(cond)
        return (Expected(value, cbuf.dtype, scale),)

    def baseline_library(self) -> str:
        return _cublas.library()

    def baseline(self, call: Call) -> object:
        ta, tb, m, n, alpha, a, lda, beta, b, ldb, cbuf, ldc = call.args
        if cbuf.is_cuda and _cublas.available():
            dev = cbuf.device
            _cublas.call("cublasSgeam", ta, tb, m, n, _cublas.scalar(alpha, torch.float32, dev),
                         a, lda, _cublas.scalar(beta, torch.float32, dev), b, ldb, cbuf, ldc)
            return None
        if m <= 0 or n <= 0:
            return None
        out = torch.zeros(m, n, dtype=cbuf.dtype, device=cbuf.device)
        if alpha != 0:
            out += alpha * _blas.op_view(a, ta, m, n, lda)
        if beta != 0:
            out += beta * _blas.op_view(b, tb, m, n, ldb)
        _blas.stored(cbuf, m, n, ldc).copy_(out)
        return None

    def cost(self, c: Case) -> Cost:
        """Bandwidth-bound: A read when alpha != 0, B when beta != 0, C written once."""
        m, n = c.shape
        mn = max(m, 0) * max(n, 0)
        reads = mn * ((c["alpha"] != 0) + (c["beta"] != 0))
        return _blas.streaming_cost(3 * mn, reads + mn, "float32")
