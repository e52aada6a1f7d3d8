"""The GEMM family's cases: a case's dimensions, the public grids and the hidden draws.

A case's shape is ``(m, n, k)``; its params are ``transa``, ``transb``, ``alpha``, ``beta``,
optional ``pad_a``/``pad_b``/``pad_c`` (padding rows beyond the stored rows), ``batch`` (batched
routines), ``shared_a``/``shared_b`` (arrays of pointers: one matrix addressed by every entry),
``stride_a``/``stride_b``/``stride_c`` (strided batches, in elements: 0 broadcasts, less than
one matrix overlaps read-only entries, more leaves gaps) and ``ctype`` (``SgemmEx``: C's dtype,
A and B being the case's dtype).

The public grids cover every (transa, transb) pair over odd sizes, alphas and betas (complex
ones for C/Z), padding; for batched routines, batch counts, shared pointees or strides that
broadcast, overlap or leave gaps; and the quick returns (m, n or batchCount of 0, alpha == 0
with finite A and B, which cuBLAS reads then; k == 0). The cpu tier (the first cases of each
list) is small enough for Triton's interpreter. Registers nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from operators.cublas import _blas
from operators.spec import Case, case

OPS = {"N": _blas.OP_N, "T": _blas.OP_T, "C": _blas.OP_C}
ALPHAS = {False: (1.0, -1.5, 0.5, 2.0, 0.25), True: (1.0, -1.5 + 0.5j, 0.5j, 2.0 - 1.0j, 1.0 + 1.0j)}
BETAS = {False: (1.0, -0.75, 0.5), True: (1.0, -0.75 + 0.25j, 0.5j)}


def gemm_case(entry: str, dtype: str, ta: str, tb: str, m: int, n: int, k: int, *,
              alpha: complex, beta: complex, cpu: bool = False, **params: Any) -> Case:
    """A case; params whose value is the default (no padding, nothing shared) are left out of
    its name. Complex routines get complex scalars, as the C API's cuComplex."""
    if dtype.startswith("complex"):
        alpha, beta = complex(alpha), complex(beta)
    extra = {key: v for key, v in params.items() if v not in (0, False, None)
             or key in ("batch", "stride_a", "stride_b", "stride_c")}
    return case(entry, dtype, (m, n, k), transa=OPS[ta], transb=OPS[tb], alpha=alpha,
                beta=beta, **extra, cpu=cpu)


@dataclass(frozen=True)
class Dims:
    """The stored shapes and leading dimensions of a case's A, B and C."""

    m: int
    n: int
    k: int
    rows_a: int
    cols_a: int
    lda: int
    rows_b: int
    cols_b: int
    ldb: int
    ldc: int

    @staticmethod
    def of(c: Case) -> Dims:
        m, n, k = c.shape
        rows_a, cols_a = (m, k) if c["transa"] == _blas.OP_N else (k, m)
        rows_b, cols_b = (k, n) if c["transb"] == _blas.OP_N else (n, k)
        return Dims(m, n, k, rows_a, cols_a, max(1, rows_a) + c.get("pad_a", 0),
                    rows_b, cols_b, max(1, rows_b) + c.get("pad_b", 0),
                    max(1, m) + c.get("pad_c", 0))

    def spans(self) -> tuple[int, int, int]:
        """Elements one matrix of A, B and C spans (its padding included)."""
        return self.lda * self.cols_a, self.ldb * self.cols_b, self.ldc * self.n


def dims(ta: str, tb: str, m: int, n: int, k: int, pads: Sequence[int] = (0, 0, 0)) -> Dims:
    """The :class:`Dims` of a case with these transposes, sizes and paddings."""
    return Dims.of(case("x", "float32", (m, n, k), transa=OPS[ta], transb=OPS[tb],
                        pad_a=pads[0], pad_b=pads[1], pad_c=pads[2]))


TRANSPOSES = tuple((a, b) for a in "NTC" for b in "NTC")
SIZES = ((71, 160, 33), (497, 32, 160), (160, 71, 497), (33, 497, 71), (128, 128, 128))
BATCH_SIZES = ((71, 33, 65), (32, 97, 160), (128, 64, 33))


def scalars(cplx: bool, i: int) -> tuple[complex, complex]:
    """The i-th (alpha, beta) pair of the grids: beta cycles through 0 (C not read) and others."""
    betas = (0.0,) + BETAS[cplx]
    return ALPHAS[cplx][i % len(ALPHAS[cplx])], betas[i % len(betas)]


def plain_grid(routine: str, dtype: str, *, every: int = 1, shift: int = 0,
               **params: Any) -> list[Case]:
    """Every ``every``-th (transa, transb) pair (from ``shift``) over :data:`SIZES`, with
    padding and cycling scalars."""
    cplx = dtype.startswith("complex")
    out = []
    for i, (ta, tb) in enumerate(TRANSPOSES):
        if (i + shift) % every:
            continue
        alpha, beta = scalars(cplx, i + shift)
        m, n, k = SIZES[(i + shift) % len(SIZES)]
        out.append(gemm_case(routine, dtype, ta, tb, m, n, k, alpha=alpha, beta=beta,
                             pad_a=i % 3, pad_b=(2 * i) % 5, pad_c=i % 2, **params))
    return out


def pointer_cases(routine: str, dtype: str) -> list[Case]:
    """Arrays of pointers: the cpu tier, then every transpose pair at three batch counts,
    shared pointees, a large batch of small matrices and the quick returns."""
    cplx = dtype.startswith("complex")
    one, z = (1 + 0j, 0j) if cplx else (1.0, 0.0)
    a1, b1 = (-1.5 + 0.5j, 0.5j) if cplx else (-1.5, 0.5)

    def g(ta: str, tb: str, m: int, n: int, k: int, alpha: complex, beta: complex,
          batch: int, cpu: bool = False, **p: Any) -> Case:
        return gemm_case(routine, dtype, ta, tb, m, n, k, alpha=alpha, beta=beta, cpu=cpu,
                         batch=batch, **p)

    cs = [
        g("N", "N", 20, 24, 18, one, z, 3, cpu=True),
        g("C", "N", 26, 21, 17, a1, b1, 2, cpu=True, pad_a=2, shared_a=True),
        g("T", "C", 12, 19, 23, 2 * one, -0.75 * one, 3, cpu=True, pad_c=1, shared_b=True),
        g("N", "T", 23, 9, 14, 0.5 * one, one, 1, cpu=True, pad_b=3),
        g("T", "T", 9, 11, 13, z, b1, 2, cpu=True),  # alpha == 0: beta * C; A, B finite
        g("N", "N", 10, 7, 0, one, a1, 2, cpu=True),  # k == 0: C = beta * C
        g("N", "N", 8, 8, 8, one, one, 0, cpu=True),  # batchCount == 0: nothing
        g("N", "N", 0, 8, 8, one, one, 2),  # m == 0
        g("T", "N", 16, 16, 16, a1, b1, 200, shared_a=True),
        g("N", "C", 1, 1, 1, one, one, 5),
    ]
    for i, (ta, tb) in enumerate(TRANSPOSES):
        alpha, beta = scalars(cplx, i)
        m, n, k = BATCH_SIZES[i % len(BATCH_SIZES)]
        cs.append(g(ta, tb, m, n, k, alpha, beta, (1, 4, 13)[i % 3], pad_a=i % 2,
                    pad_c=(i + 1) % 3, shared_a=i % 4 == 3, shared_b=i % 5 == 4))
    return cs


def strided_case(routine: str, dtype: str, ta: str, tb: str, m: int, n: int, k: int,
                 alpha: complex, beta: complex, batch: int, *, sa: str | int = "packed",
                 sb: str | int = "packed", sc: str | int = "packed", cpu: bool = False,
                 pads: tuple[int, int, int] = (0, 0, 0)) -> Case:
    """A strided-batch case whose strides are given (ints) or named by kind: ``packed`` (back
    to back), ``bcast`` (0), ``gap`` (5 elements between entries) or ``overlap`` (one column,
    ld, apart: entries share all but one column)."""
    d = dims(ta, tb, m, n, k, pads)
    ld = (d.lda, d.ldb, d.ldc)
    strides = [kind if isinstance(kind, int) else
               {"packed": s, "bcast": 0, "gap": s + 5, "overlap": ld[j]}[kind]
               for j, (s, kind) in enumerate(zip(d.spans(), (sa, sb, sc), strict=True))]
    return gemm_case(routine, dtype, ta, tb, m, n, k, alpha=alpha, beta=beta, cpu=cpu,
                     pad_a=pads[0], pad_b=pads[1], pad_c=pads[2], batch=batch,
                     stride_a=strides[0], stride_b=strides[1], stride_c=strides[2])


def strided_cases(routine: str, dtype: str) -> list[Case]:
    """Strided batches: the cpu tier, then every transpose pair at three batch counts with
    packed strides, broadcast (stride 0), overlapping and gapped entries, and the quick
    returns."""
    cplx = dtype.startswith("complex")
    one, z = (1 + 0j, 0j) if cplx else (1.0, 0.0)
    a1, b1 = (-1.5 + 0.5j, 0.5j) if cplx else (-1.5, 0.5)

    def g(ta: str, tb: str, m: int, n: int, k: int, alpha: complex, beta: complex,
          batch: int, **p: Any) -> Case:
        return strided_case(routine, dtype, ta, tb, m, n, k, alpha, beta, batch, **p)

    cs = [
        g("N", "N", 20, 24, 18, one, z, 3, cpu=True),
        g("C", "N", 26, 21, 17, a1, b1, 2, sa="bcast", cpu=True, pads=(2, 0, 0)),
        g("T", "C", 12, 19, 23, 2 * one, -0.75 * one, 3, sb="overlap", sc="gap", cpu=True,
          pads=(0, 0, 1)),
        g("N", "T", 23, 9, 14, 0.5 * one, one, 1, cpu=True, pads=(0, 3, 0)),
        g("T", "T", 9, 11, 13, z, b1, 2, cpu=True),  # alpha == 0: beta * C; A, B finite
        g("N", "N", 10, 7, 0, one, a1, 2, cpu=True),  # k == 0: C = beta * C
        g("N", "N", 8, 8, 8, one, one, 0, cpu=True),  # batchCount == 0: nothing
        g("N", "N", 8, 0, 8, one, one, 2),  # n == 0
        g("T", "N", 16, 16, 16, a1, b1, 200, sa="bcast", sc="gap"),
        g("N", "C", 1, 1, 1, one, one, 5, sb="bcast"),
    ]
    kinds = ("packed", "gap", "bcast", "overlap")
    for i, (ta, tb) in enumerate(TRANSPOSES):
        alpha, beta = scalars(cplx, i)
        m, n, k = BATCH_SIZES[i % len(BATCH_SIZES)]
        cs.append(g(ta, tb, m, n, k, alpha, beta, (1, 4, 13)[i % 3], sa=kinds[i % 4],
                    sb=kinds[(i + 1) % 4], sc=("packed", "gap")[i % 2],
                    pads=(i % 2, 0, (i + 1) % 3)))
    return cs


def hidden(routine: str, precision: str, convention: str, rng: random.Random, small: bool,
           types: Callable[[random.Random], tuple[str, dict[str, Any]]]) -> list[Case]:
    """Hidden cases: random odd sizes, every transpose, padding, alphas and betas (zero
    included, never both), and the routine's batching: counts, shared pointees, strides that
    broadcast, leave gaps or overlap; ``types`` draws a case's dtype and type params."""
    cplx = precision.startswith("complex")
    zero = 0j if cplx else 0.0
    out = []
    for _ in range(3 if small else 6):
        m, n, k = (rng.randrange(1, 40 if small else 400) for _ in range(3))
        ta, tb = rng.choice("NTC"), rng.choice("NTC")
        pads = [rng.choice([0, 0, 1, 5]) for _ in range(3)]
        params: dict[str, Any] = {"pad_a": pads[0], "pad_b": pads[1], "pad_c": pads[2]}
        params.update(_batching(convention, rng, small, dims(ta, tb, m, n, k, pads)))
        dtype, extra = types(rng)
        params.update(extra)
        alpha = rng.choice(ALPHAS[cplx] + (zero,))
        # alpha == beta == 0 would make C = 0 whatever the inputs: not a useful case.
        beta = rng.choice(BETAS[cplx] + ((zero,) if alpha != 0 else ()))
        out.append(gemm_case(routine, dtype, ta, tb, m, n, k, alpha=alpha, beta=beta,
                             cpu=small, **params))
    return out


def _batching(convention: str, rng: random.Random, small: bool, d: Dims) -> dict[str, Any]:
    if convention not in ("pointers", "strided"):
        return {}
    batch = rng.randrange(1, 4 if small else 24)
    if convention == "pointers":
        return {"batch": batch, "shared_a": rng.random() < 0.25,
                "shared_b": rng.random() < 0.25}
    span_a, span_b, span_c = d.spans()
    # Packed, with gaps, broadcast (0), or overlapping by all but one column (ld).
    return {"batch": batch,
            "stride_a": rng.choice([span_a, span_a + 3, 0, d.lda]),
            "stride_b": rng.choice([span_b, span_b + 7, 0, d.ldb]),
            "stride_c": rng.choice([span_c, span_c + 2])}
