"""cublas::cublasSdgmm — ``C = A @ diag(x)`` (mode RIGHT) or ``diag(x) @ A`` (mode LEFT) on
column-major float32 m x n matrices, x strided with any increment (0 repeats x[0]), in place
when C is A."""

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

_LEFT, _RIGHT = _blas.LEFT, _blas.RIGHT

SOLUTION = r'''
import triton
import triton.language as tl


@triton.jit
def _dgmm_kernel(a_ptr, x_ptr, c_ptr, M, N, lda, incx, x0, ldc, LEFT: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # One tile of C(i, j) = x_i * A(i, j) (LEFT) or A(i, j) * x_j (RIGHT). Each element is
    # read before it is written by the same program, so C may be A itself.
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = rm < M
    n_ok = rn < N
    mask = m_ok[:, None] & n_ok[None, :]
    a = tl.load(a_ptr + rm[:, None] + rn[None, :] * lda, mask=mask, other=0.0)
    if LEFT:
        x = tl.load(x_ptr + x0 + rm * incx, mask=m_ok, other=0.0)
        out = x[:, None] * a
    else:
        x = tl.load(x_ptr + x0 + rn * incx, mask=n_ok, other=0.0)
        out = a * x[None, :]
    tl.store(c_ptr + rm[:, None] + rn[None, :] * ldc, out, mask=mask)


def cublasSdgmm(mode, m, n, A, lda, x, incx, C, ldc):
    if m <= 0 or n <= 0:
        return None
    # x has m elements for LEFT (0), n for RIGHT (1); element j at x[j*incx] (incx >= 0, so
    # 0 repeats x[0]) or, for a negative incx, at x[(len-1-j)*|incx|].
    length = m if mode == 0 else n
    x0 = (length - 1) * -incx if incx < 0 else 0
    BM, BN = (32, 32) if C.device.type == "cpu" else (64, 64)
    grid = (triton.cdiv(m, BM), triton.cdiv(n, BN))
    _dgmm_kernel[grid](A, x, C, m, n, lda, incx, x0, ldc, LEFT=(mode == 0), BLOCK_M=BM,
                       BLOCK_N=BN, num_warps=4)
    return None
'''

# Takes |incx| and walks forward from x[0]: right for incx >= 0.
NEGATIVE_ABS_INCREMENT = _blas.variant(
    SOLUTION, ("    x0 = (length - 1) * -incx if incx < 0 else 0\n",
               "    x0 = 0\n    incx = abs(incx)\n"))

# Writes C as if packed (ldc taken as m): right when C has no padding rows.
NEGATIVE_C_PACKED = _blas.variant(SOLUTION, ("lda, incx, x0, ldc, LEFT=", "lda, incx, x0, m, LEFT="))


def dgmm_case(mode: int, m: int, n: int, incx: int, *, pad_a: int = 0, pad_c: int = 0,
              inplace: bool = False, cpu: bool = False) -> Case:
    """``inplace``: C is A itself (ldc == lda), as cuBLAS allows."""
    extra = {"inplace": True} if inplace else {}
    return case("cublasSdgmm", "float32", (m, n), mode=mode, incx=incx, pad_a=pad_a,
                pad_c=pad_c, **extra, cpu=cpu)


@register("cublas::cublasSdgmm", version=1, kind=Kind.COMPUTE)
class Sdgmm(OperatorSpec):
    entry_points = (
        EntryPoint(
            "cublasSdgmm",
            "cublasSdgmm(mode: int, m: int, n: int, A: Tensor, lda: int, x: Tensor, incx: int, "
            "C: Tensor, ldc: int) -> None",
            "C = A @ diag(x) (mode RIGHT) or diag(x) @ A (LEFT) on column-major float32 "
            "matrices, written into C.",
        ),
    )
    description = (
        "cuBLAS `cublasSdgmm` (handle omitted): for m x n column-major float32 matrices A and C "
        "(element (i, j) at i + j*ld, lda and ldc >= m), `C = A @ diag(X)` — C(i, j) = A(i, j) "
        "* X_j — when `mode` is CUBLAS_SIDE_RIGHT=1 (X has n elements), or `C = diag(X) @ A` — "
        "C(i, j) = X_i * A(i, j) — when it is CUBLAS_SIDE_LEFT=0 (X has m elements), writing C "
        "and returning None. X is gathered from the 1-D tensor `x` with increment `incx`, which "
        "may be positive, negative or zero: X_j = x[j*incx] for incx >= 0 (incx == 0 uses x[0] "
        "for every j) and x[(len-1-j)*|incx|] for incx < 0 (len = m or n), walking back from the "
        "far end; elements of x between X's hold NaN. C is only written (its old values may be "
        "NaN) — except in place: C may be the very tensor A with ldc == lda, so read each "
        "element before writing it. m == 0 or n == 0 does nothing. Padding rows (up to ld) are "
        "neither used nor written. Compute in float32 (one rounded product per element)."
    )
    solution = SOLUTION
    negatives = (
        Negative("abs_increment", "walks forward from x[0] by |incx| for a negative increment",
                 NEGATIVE_ABS_INCREMENT),
        Negative("c_packed", "writes C as if ldc == m, ignoring its padding rows",
                 NEGATIVE_C_PACKED),
    )
    # One product, correctly rounded: within 1 u of |x_j A(i, j)|; padding exact.
    tolerances = {"float32": Tolerance.ulps("float32", 1)}

    def cases(self) -> Sequence[Case]:
        g = dgmm_case
        cs = [
            g(_RIGHT, 37, 29, 1, pad_a=2, pad_c=3, cpu=True),
            g(_LEFT, 45, 33, 2, pad_a=3, cpu=True),
            g(_RIGHT, 30, 41, -1, pad_c=2, cpu=True),
            g(_LEFT, 40, 23, -3, pad_a=1, pad_c=1, cpu=True),
            g(_RIGHT, 33, 20, 0, pad_a=4, pad_c=4, cpu=True),
            g(_LEFT, 50, 19, 1, pad_a=3, inplace=True, cpu=True),
            g(_RIGHT, 23, 31, -2, pad_a=1, inplace=True, cpu=True),
            g(_LEFT, 0, 7, 1, cpu=True),
        ]
        shapes = [(1, 1), (1, 300), (255, 1), (128, 128), (511, 257), (333, 777), (1000, 65),
                  (1024, 1024), (64, 2048)]
        for i, (m, n) in enumerate(shapes):
            for mode in (_LEFT, _RIGHT):
                for incx in (1, 3, -1, -2, 0):
                    cs.append(g(mode, m, n, incx, pad_a=(0, 7, 1)[(i + incx) % 3],
                                pad_c=(0, 3, 13)[(i + mode) % 3], inplace=(incx == 3 and i % 2 == 1)))
        cs += [g(_LEFT, 77, 0, 1), g(_RIGHT, 0, 5, -1)]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        hi = 72 if small else 1500
        return [dgmm_case(rng.choice((_LEFT, _RIGHT)), rng.randrange(1, hi), rng.randrange(1, hi),
                          rng.choice((1, 2, 0, -1, -3)), pad_a=rng.choice((0, 1, 5)),
                          pad_c=rng.choice((0, 3)), inplace=(i % 2 == 1), cpu=small)
                for i in range(3 if small else 6)]

    def benchmark_cases(self) -> Sequence[Case]:
        g = dgmm_case
        return [g(_RIGHT, 8192, 8192, 1), g(_LEFT, 8192, 16384, -1),
                g(_LEFT, 16384, 8192, 1, inplace=True)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        m, n = c.shape
        mode, incx = c["mode"], c["incx"]
        length = m if mode == _LEFT else n
        lda = max(1, m) + c["pad_a"]
        a = _blas.make_matrix(m, n, lda, "float32", gen) if n > 0 else \
            _blas.random_values(lda, "float32", gen)
        if incx == 0:  # X_j = x[0] for every j; what follows x[0] is never read
            x = torch.full((1 + c["pad_a"],), _blas.NAN)
            x[0] = torch.randn(1, generator=gen, dtype=torch.float64).item()
        else:
            x = _blas.make_vector(length, incx, "float32", gen, tail=2)
        if c.get("inplace"):
            cbuf, ldc = a, lda
        else:
            ldc = max(1, m) + c["pad_c"]
            cbuf = _blas3.output_matrix(m, n, ldc, "float32", gen, read=False)
        if m <= 0 or n <= 0:  # nothing is C's: values that must come back as they were
            cbuf = _blas.random_values(ldc * max(n, 1), "float32", gen)
        args = (mode, m, n, a, lda, x, incx, cbuf, ldc)
        # In place, A (3) is written too. The harness moves each argument separately, so there
        # the candidate sees two buffers with the same contents.
        return Call(c.entry, args, outputs=(Out.arg(7),),
                    mutable=frozenset({7, 3} if c.get("inplace") else {7}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        mode, m, n, a, lda, x, incx, cbuf, ldc = call.args
        value = _blas.hp(cbuf)
        scale = torch.zeros_like(value)  # padding (and a quick return's C): bit for bit
        if m <= 0 or n <= 0:
            return (Expected(value, cbuf.dtype, scale),)
        xs = _x(_blas.hp(x), m if mode == _LEFT else n, incx)
        am = _blas.stored(_blas.hp(a), m, n, lda)
        new = xs[:, None] * am if mode == _LEFT else am * xs[None, :]
        _blas.stored(value, m, n, ldc).copy_(new)
        _blas.stored(scale, m, n, ldc).copy_(new.abs())
        return (Expected(value, cbuf.dtype, scale),)

    def baseline_library(self) -> str:
        return _cublas.library()

    def baseline(self, call: Call) -> object:
        mode, m, n, a, lda, x, incx, cbuf, ldc = call.args
        if cbuf.is_cuda and _cublas.available():
            _cublas.call("cublasSdgmm", mode, m, n, a, lda, x, incx, cbuf, ldc)
            return None
        if m <= 0 or n <= 0:
            return None
        xs = _x(x, m if mode == _LEFT else n, incx)
        am = _blas.stored(a, m, n, lda)
        _blas.stored(cbuf, m, n, ldc).copy_(xs[:, None] * am if mode == _LEFT else am * xs[None, :])
        return None

    def cost(self, c: Case) -> Cost:
        """Bandwidth-bound: A and X read once, C written once."""
        m, n = c.shape
        mn = max(m, 0) * max(n, 0)
        length = m if c["mode"] == _LEFT else n
        return _blas.streaming_cost(mn, 2 * mn + max(length, 0) * (mn > 0), "float32")


def _x(buf: torch.Tensor, length: int, incx: int) -> torch.Tensor:
    """X from ``x``: ``x[j*incx]`` (``incx == 0`` repeats ``x[0]``), or walking back from
    ``x[(length-1)*|incx|]`` for a negative increment."""
    if incx == 0:
        return buf[:1].expand(length)
    return _blas.gather(buf, length, incx)
