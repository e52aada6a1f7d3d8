"""The gemv family: ``y = alpha * op(A) @ x + beta * y`` for one column-major matrix (``gemv``),
for arrays of pointers (``gemvBatched``, ``gemvBatched_64``) and for strided batches
(``gemvStridedBatched``). What the ten problems share lives here — the case grid, the
cuBLAS/PyTorch baseline, the cost model and the prompt description — and in
:mod:`~operators.cublas._gemv_operands` (inputs, the fp64 reference) and
:mod:`~operators.cublas._gemv_triton` (the reference solutions); each routine module adds its
controls and benchmark cases. Registers nothing.

A case's shape is ``(m, n)`` (one matrix) or ``(m, n, batchCount)``; its params are ``trans``,
``alpha``, ``beta``, ``incx``, ``incy`` and ``pad`` (``lda = max(1, m) + pad``), and per mode
how entries are laid out: ``share_a``/``share_x`` (Batched: every pointer of the array the same
pointee) or ``sa``/``sx``/``sy`` (StridedBatched: ``packed`` entries back to back, ``gap``
with NaN between, ``zero`` a stride of 0 broadcasting one entry, ``overlap`` A entries one
column apart). Optional: ``std`` (value magnitude), ``specials`` (inf and NaN in A, real data).

Semantics (the C API's, as reference BLAS states them): A is m x n; op(A) is A (``N``), A^T
(``T``) or A^H (``C``, the same as T for real data); x has n elements for ``N`` and m
otherwise, y the other count. ``m == 0``, ``n == 0``, ``batchCount == 0`` or ``alpha == 0 and
beta == 1`` leave y as it is (even with ``beta != 1``); ``alpha == 0`` reads neither A nor x
(their inputs hold NaN then) and gives ``y = beta * y``; ``beta == 0`` does not read y (its
elements hold NaN then).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from operators.cublas import _blas, _cublas
from operators.cublas import _gemv_operands as ops
from operators.cublas._gemv_triton import BATCHED, PLAIN, STRIDED
from operators.spec import Call, Case, Cost, Expected, OperatorSpec, Tier, case

TRANS = (_blas.OP_N, _blas.OP_T, _blas.OP_C)
# The published grids' sizes (1, 32, 71, 160, 497, 1024, 4113, 4096, 5333) as matrix shapes:
# square, wide, tall and vector-like ones.
SHAPES = ((1, 1), (32, 71), (71, 32), (160, 497), (497, 160), (1024, 1024), (4113, 71),
          (71, 4113), (5333, 1), (1, 5333), (4096, 497))
BATCH_SHAPES = ((1, 1, 1), (32, 71, 3), (71, 32, 5), (160, 497, 2), (497, 160, 4),
                (1024, 1024, 2), (7, 9, 64), (64, 64, 33), (4113, 71, 2))
# Increment pairs (incx, incy) of both signs: a negative one starts at the far end.
INCS = ((1, 1), (2, 3), (-1, 1), (1, -2), (-3, -1))
PADS = (0, 3, 1, 16)
STRIDE_MODES = {"sa": ("packed", "gap", "zero", "overlap"), "sx": ("packed", "gap", "zero"),
                "sy": ("packed", "gap")}


def scalars(dtype: str) -> tuple[tuple[complex, complex], ...]:
    """``(alpha, beta)`` pairs of the grid, alpha never 0 (its quick return has its own cases):
    beta 0 (y not read), 1 and others; complex ones for C/Z routines."""
    if dtype.startswith("complex"):
        return ((1 + 0j, 0j), (-1.5 + 0.5j, 1 + 0j), (0.3 - 0.7j, -0.75 + 0.25j),
                (2j, 0.5 - 1j))
    return ((1.0, 0.0), (-1.5, 1.0), (0.3, -0.75), (2.0, 0.5))


# ---- cases ---------------------------------------------------------------------------------------

def gemv_case(entry: str, dtype: str, shape: Sequence[int], trans: int, alpha: complex,
              beta: complex, incx: int = 1, incy: int = 1, pad: int = 0, *, cpu: bool = False,
              **extra: Any) -> Case:
    """A case; real routines get their scalars as floats."""
    if dtype.startswith("complex"):
        alpha, beta = complex(alpha), complex(beta)
    else:
        alpha, beta = complex(alpha).real, complex(beta).real
    return case(entry, dtype, shape, trans=trans, alpha=alpha, beta=beta, incx=incx, incy=incy,
                pad=pad, **extra, cpu=cpu)


def layout_params(mode: str, k: int) -> dict[str, Any]:
    """The k-th entry layout of the grid's rotation (nothing for plain gemv)."""
    if mode == BATCHED:
        return {"share_a": k % 3 == 1, "share_x": k % 4 == 2}
    if mode == STRIDED:
        return {key: modes[k % len(modes)] for key, modes in STRIDE_MODES.items()}
    return {}


class Gemv(OperatorSpec):
    """A gemv-family routine; subclasses set the routine, precision, mode and the benchmark."""

    routine: ClassVar[str]  # the entry point, the routine's C name
    precision: ClassVar[str]  # float32, float64, complex64, complex128
    mode: ClassVar[str] = PLAIN  # PLAIN, BATCHED or STRIDED

    def _case(self, shape: Sequence[int], trans: int, alpha: complex, beta: complex,
              incx: int = 1, incy: int = 1, pad: int = 0, k: int = 0, *, cpu: bool = False,
              **extra: Any) -> Case:
        params = {**layout_params(self.mode, k), **extra}
        return gemv_case(self.routine, self.precision, shape, trans, alpha, beta, incx, incy,
                         pad, cpu=cpu, **params)

    def _shape(self, m: int, n: int, batch: int) -> tuple[int, ...]:
        return (m, n) if self.mode == PLAIN else (m, n, batch)

    def edge_cases(self) -> list[Case]:
        """The cpu tier (each trans, both scalar rules, negative increments, padding, the
        quick returns) and edge values."""
        s, g = scalars(self.precision), self._shape
        N, T, C = TRANS
        out = [
            self._case(g(37, 45, 3), N, s[0][0], 0, 1, 1, 3, 0, cpu=True),
            self._case(g(64, 33, 2), T, *s[1], 2, -1, 0, 1, cpu=True),
            self._case(g(19, 40, 4), C, *s[2], -2, 3, 1, 2, cpu=True),
            self._case(g(130, 150, 2), N, *s[3], 1, 1, 0, 3, cpu=True),  # 3 x 3 blocks
            self._case(g(40, 0, 2), N, s[1][0], 2.5, 1, 1, 0, 0, cpu=True),  # n == 0: y kept
            self._case(g(23, 29, 3), T, 0, -0.5, 1, 2, 2, 1, cpu=True),  # A, x not read
            self._case(g(33, 17, 2), C, 0, 0, 2, 2, 0, 2, cpu=True),  # y = 0, nothing read
            self._case(g(1000, 700, 2), N, *s[2], 1, -1, 5, 0, std=1e15),
            self._case(g(0, 40, 2), T, *s[1], 1, 1),
            self._case(g(300, 200, 2), T, 0, 1, 1, 1, 0, 3),  # alpha 0, beta 1: y kept
        ]
        if self.mode != PLAIN:
            out.append(self._case((13, 11, 0), N, *s[1], 1, 1, 0, 1))  # batchCount == 0
        if not self.precision.startswith("complex"):
            out.append(self._case(g(65, 47, 2), N, *s[1], 1, 1, 0, 0, specials=True))
            out.append(self._case(g(47, 65, 2), T, *s[3], 2, 1, 1, 1, specials=True))
        return out

    def cases(self) -> Sequence[Case]:
        out = self.edge_cases()
        s = scalars(self.precision)
        shapes = SHAPES if self.mode == PLAIN else BATCH_SHAPES
        # shapes x trans x increments, with the scalar pairs, paddings and entry layouts
        # rotating at different rates, so every pair of them meets.
        k = 0
        for shape in shapes:
            for trans in TRANS:
                for incx, incy in INCS:
                    out.append(self._case(shape, trans, *s[k % len(s)], incx, incy,
                                          PADS[k // 3 % len(PADS)], k // len(INCS)))
                    k += 1
        sweep = self._shape(160, 97, 3)
        for trans in TRANS:  # every scalar pair, and alpha == 0 with beta 0, 1 and another
            for alpha, beta in (*s, (0, 0), (0, 1), (0, s[2][1])):
                out.append(self._case(sweep, trans, alpha, beta, 1, -2 if beta == 0 else 1,
                                      2, k))
                k += 1
        return out

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        """Odd sizes, either increment sign, any trans, alpha and beta (0 included), padding
        and, for batches, any entry layout; at most 2M matrix elements per case."""
        small = tier is Tier.CPU
        s = scalars(self.precision)
        out = []
        for _ in range(3 if small else 8):
            m, n = (rng.randrange(1, 90 if small else 3000) for _ in range(2))
            batch = rng.randrange(1, 5 if small else 40)
            batch = max(1, min(batch, (2 << 20) // (m * n)))
            alpha, beta = rng.choice([*s, (0, s[2][1]), (s[2][0], 0)])
            out.append(self._case(self._shape(m, n, batch), rng.choice(TRANS), alpha, beta,
                                  rng.choice([1, 2, 3, -1, -2]), rng.choice([1, 2, -1, -3]),
                                  rng.choice(PADS), rng.randrange(12), cpu=small))
        return out

    # ---- inputs, reference, baseline, cost -----------------------------------------------------

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return ops.make_call(c, gen, self.mode)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        return ops.reference(call, self.mode, self.precision)

    def baseline_library(self) -> str:
        return _cublas.library()

    def baseline(self, call: Call) -> object:
        lay = ops.layout(call, self.mode)
        if not (lay.y.is_cuda and _cublas.available()):
            ops.torch_gemv(lay)
            return None
        dt, dev = lay.y.dtype, lay.y.device
        alpha, beta = _cublas.scalar(lay.alpha, dt, dev), _cublas.scalar(lay.beta, dt, dev)
        a = call.args
        if self.mode == STRIDED:  # strideA, stridex, stridey follow their buffers
            _cublas.call(self.routine, *a[:3], alpha, *a[4:10], beta, *a[11:])
        else:  # alpha and beta are the 4th and 9th arguments
            _cublas.call(self.routine, *a[:3], alpha, *a[4:8], beta, *a[9:])
        return None

    def cost(self, c: Case) -> Cost:
        """Bandwidth-bound: A (its distinct elements) and x read once unless alpha == 0, y read
        unless beta == 0 and written once; ``op(A) x`` is one multiply-add per element of A."""
        m, n = max(c.shape[0], 0), max(c.shape[1], 0)
        batch = c.shape[2] if self.mode != PLAIN else 1
        leny, lenx = (m, n) if c["trans"] == _blas.OP_N else (n, m)
        if m * n * batch == 0 or (c["alpha"] == 0 and c["beta"] == 1):
            return _blas.streaming_cost(0, 0, self.precision)
        a_entries = x_entries = batch
        if c.get("share_a") or c.get("sa") == "zero":
            a_entries = 1
        if c.get("share_x") or c.get("sx") == "zero":
            x_entries = 1
        a_elems = m * (n + batch - 1) if c.get("sa") == "overlap" else a_entries * m * n
        if c["alpha"] == 0:
            a_elems = x_entries = 0
        y_elems = batch * leny * (1 if c["beta"] == 0 else 2)
        flops = _blas.flops_per_fma(self.precision) * batch * (m * n + leny)
        return _blas.streaming_cost(flops, a_elems + x_entries * lenx + y_elems, self.precision)


# ---- the prompt's description --------------------------------------------------------------------

_BATCH_TEXT = {
    PLAIN: ("`y = alpha * op(A) @ x + beta * y` for the column-major m x n {kind} matrix A, "
            "updating y in place and returning None. `A`, `x` and `y` are 1-D contiguous {dtype} "
            "tensors holding the device buffers."),
    BATCHED: ("for b in 0..batchCount-1, `y_b = alpha * op(A_b) @ x_b + beta * y_b` with each "
              "A_b a column-major m x n {kind} matrix, updating every y_b in place and returning "
              "None. `Aarray`, `xarray` and `yarray` are 1-D int64 device tensors of batchCount "
              "addresses: entry b is the address of the first element of A_b (x_b, y_b), to "
              "load in Triton as `tl.load(Aarray + b).to(tl.pointer_type(tl.{real}))`. The "
              "entries are not evenly spaced and lie in no particular order; several A (or x) "
              "pointers may hold the same address; the y_b never overlap."),
    STRIDED: ("for b in 0..batchCount-1, `y_b = alpha * op(A_b) @ x_b + beta * y_b` with each "
              "A_b a column-major m x n {kind} matrix, updating every y_b in place and returning "
              "None. `A`, `x` and `y` are 1-D contiguous {dtype} tensors holding the device "
              "buffers; A_b starts at element b*strideA of A, x_b at b*stridex of x and y_b at "
              "b*stridey of y (strides count {dtype} elements). A stride of 0 uses the same A "
              "(or x) for every b, and A entries may overlap (strideA below lda*n); the y_b "
              "never overlap, and buffer elements between them must be left untouched."),
}


def describe(routine: str, dtype: str, mode: str, *, wide: bool = False) -> str:
    """The problem statement of a gemv-family routine (semantics as cuBLAS's C API defines
    them, the suite's conventions spelled out)."""
    cplx = dtype.startswith("complex")
    real = _blas.rate_dtype(dtype)
    kind = ("single" if real == "float32" else "double") + "-precision " + (
        "complex" if cplx else "real")
    parts = [f"cuBLAS `{routine}` (handle omitted): "
             + _BATCH_TEXT[mode].format(kind=kind, dtype=dtype, real=real)]
    if cplx:
        parts.append(
            f"As {real}: `torch.view_as_real` gives views with element k's real part at [k, 0] "
            "and imaginary part at [k, 1]" + ("; through a pointer, at offsets 2k and 2k + 1"
                                              if mode == BATCHED else "") + ".")
    parts.append(
        "`trans` selects op(A): CUBLAS_OP_N=0 gives A (x has n elements, y has m); "
        + ("CUBLAS_OP_T=1 gives A^T and CUBLAS_OP_C=2 the conjugate transpose A^H (A's "
           "elements conjugated, x's not)" if cplx
           else "CUBLAS_OP_T=1 gives A^T, and so does CUBLAS_OP_C=2 (C is T for real data)")
        + "; for both, x has m elements and y has n. Element (i, j) of A is at index i + j*lda, "
        "lda >= max(1, m); rows m..lda-1 are padding that holds NaN: never read it.")
    parts.append(
        "Element i of x is x[i*incx] when incx > 0; a negative increment starts at the far end, "
        "element i being x[(len-1-i)*|incx|]; likewise y with incy (increments are never 0). "
        "The elements of y's buffer that are not the vector's (gaps, the space after it) must be "
        "left untouched; A and x must not be modified.")
    number = "complex numbers" if cplx else "floats"
    empty = "m == 0 or n == 0" + ("" if mode == PLAIN else " or batchCount == 0")
    parts.append(
        f"`alpha` and `beta` are Python {number} used as {dtype}. Quick returns: when "
        f"{empty}, or alpha == 0 and beta == 1, nothing is done and y keeps its values (even "
        "when beta != 1). When alpha == 0, A and x are not read (they may hold NaN) and "
        "y = beta * y. When beta == 0, y is not read (it may hold NaN, which must not "
        "propagate): y = alpha * op(A) @ x.")
    if wide:
        parts.append(
            "This is the 64-bit API (`_64`): m, n, lda, incx, incy and batchCount are 64-bit "
            f"integers, and element offsets pass 2^31 (the benchmark has an A of more than 2^30 "
            f"{dtype} elements, whose {real} view holds more than 2^31): compute every index and "
            "offset in int64.")
    parts.append(f"Compute in {real} (any summation order).")
    return " ".join(parts)
