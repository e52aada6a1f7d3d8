"""The operands of a GEMM call: inputs made from a seed, a call's arguments in any calling
convention as one record, the float64/complex128 reference and the PyTorch and cuBLAS
baselines. Registers nothing.

Every routine computes, for each batch entry ``e``, ``C_e = alpha * op(A_e) @ op(B_e) + beta *
C_e`` on column-major matrices, ``op`` being ``N`` (as stored), ``T`` (transposed) or ``C``
(conjugate transposed; ``T`` for real data). Inputs follow the suite's conventions: padding
rows, gaps between entries and between pointees hold NaN in A and B; A and B hold finite values
even when ``alpha == 0`` (cuBLAS in DEVICE pointer mode reads them then: 0 * NaN would be NaN);
when ``beta == 0`` all of C is NaN (C is not read); otherwise C
holds random values everywhere, padding and gaps included, so a write outside the entries'
matrices shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from operators.cublas import _blas, _cublas
from operators.spec import Expected, PointerArray, dtype_from_name

# Argument names in C order, the handle omitted, per calling convention.
_ARGS = {
    "none": ("transa", "transb", "m", "n", "k", "alpha", "A", "lda", "B", "ldb", "beta", "C",
             "ldc"),
    "ex": ("transa", "transb", "m", "n", "k", "alpha", "A", "Atype", "lda", "B", "Btype", "ldb",
           "beta", "C", "Ctype", "ldc"),
    "pointers": ("transa", "transb", "m", "n", "k", "alpha", "Aarray", "lda", "Barray", "ldb",
                 "beta", "Carray", "ldc", "batchCount"),
    "strided": ("transa", "transb", "m", "n", "k", "alpha", "A", "lda", "strideA", "B", "ldb",
                "strideB", "beta", "C", "ldc", "strideC", "batchCount"),
}


def arg_names(convention: str) -> tuple[str, ...]:
    """The C arguments of a calling convention, in order."""
    return _ARGS[convention]


# ---- inputs -------------------------------------------------------------------------------------

def matrix(rows: int, cols: int, ld: int, dtype: str, gen: torch.Generator, fill: str,
           ) -> torch.Tensor:
    """One ``ld * cols`` buffer: ``"random"`` (padding NaN), ``"nan"`` (never read) or
    ``"dense"`` (random padding too: an output whose padding must come back)."""
    if fill == "random":
        return _blas.make_matrix(rows, cols, ld, dtype, gen)
    if fill == "dense":
        return _blas.random_values(ld * cols, dtype, gen)
    return torch.full((ld * cols,), _blas.NAN, dtype=_dtype(dtype))


def strided(rows: int, cols: int, ld: int, stride: int, batch: int, dtype: str,
            gen: torch.Generator, fill: str) -> torch.Tensor:
    """One buffer holding ``batch`` matrices ``stride`` elements apart (at least one matrix's
    span, so even an empty batch gets a valid buffer). ``"random"`` fills every entry's matrix
    and leaves the rest NaN; overlapping entries share elements."""
    size = ld * cols + stride * max(batch - 1, 0)
    if fill != "random":
        return matrix(size, 1, size, dtype, gen, fill)
    buf = torch.full((size,), _blas.NAN, dtype=_dtype(dtype))
    count = 1 if stride == 0 else batch
    if rows * cols == 0 or count == 0:
        return buf
    if stride >= ld * cols:  # disjoint entries: one strided view
        view = buf.as_strided((count, rows, cols), (stride, 1, ld))
        view.copy_(_blas.random_values(count * rows * cols, dtype, gen).reshape(view.shape))
        return buf
    for e in range(count):
        _blas.stored(buf[e * stride:], rows, cols, ld).copy_(
            _blas.random_values(rows * cols, dtype, gen).reshape(rows, cols))
    return buf


def pointers(entries: Sequence[torch.Tensor], dtype: str, gen: torch.Generator) -> PointerArray:
    """The pointer array of ``entries`` (:func:`_blas.pointer_array`); an empty batch gets one
    NaN element of the routine's dtype (which must come back as it was) and no pointers."""
    if not entries:
        return PointerArray(torch.full((1,), _blas.NAN, dtype=_dtype(dtype)), ())
    return _blas.pointer_array(entries, gen)


def pointer_entries(rows: int, cols: int, ld: int, dtype: str, batch: int,
                    gen: torch.Generator, fill: str, shared: bool) -> PointerArray:
    """The pointer array of ``batch`` matrices (:func:`matrix`); ``shared``: one matrix every
    entry points at."""
    if shared and batch > 0:
        return pointers([matrix(rows, cols, ld, dtype, gen, fill)] * batch, dtype, gen)
    return pointers([matrix(rows, cols, ld, dtype, gen, fill) for _ in range(batch)], dtype, gen)


def _dtype(name: str) -> torch.dtype:
    return dtype_from_name(name)


# ---- a call's arguments ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Operands:
    """A GEMM call's arguments, whatever its calling convention: buffers (a pointer array's
    buffer for Batched routines) and where each entry's matrices start in them."""

    ta: int
    tb: int
    m: int
    n: int
    k: int
    alpha: complex
    beta: complex
    a: torch.Tensor
    b: torch.Tensor
    c: torch.Tensor
    lda: int
    ldb: int
    ldc: int
    offsets: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]

    @property
    def batch(self) -> int:
        return len(self.offsets[2])

    def empty(self) -> bool:
        """A quick return: nothing is written."""
        return self.m <= 0 or self.n <= 0 or self.batch <= 0

    def product_free(self) -> bool:
        """``C = beta * C``: A and B are not read."""
        return self.alpha == 0 or self.k <= 0


def operands(convention: str, args: Sequence[Any]) -> Operands:
    """The :class:`Operands` of ``args`` in ``convention``'s order (see :func:`arg_names`)."""
    a = dict(zip(_ARGS[convention], args, strict=True))
    count = int(a.get("batchCount", 1))
    if convention == "pointers":
        arrays = (a["Aarray"], a["Barray"], a["Carray"])
        bufs = tuple(p.buffer for p in arrays)
        offsets = tuple(tuple(p.offsets) for p in arrays)
    else:
        bufs = (a["A"], a["B"], a["C"])
        strides = (a.get("strideA", 0), a.get("strideB", 0), a.get("strideC", 0))
        offsets = tuple(tuple(e * s for e in range(max(count, 0))) for s in strides)
    return Operands(a["transa"], a["transb"], a["m"], a["n"], a["k"], a["alpha"], a["beta"],
                    bufs[0], bufs[1], bufs[2], a["lda"], a["ldb"], a["ldc"],
                    (offsets[0], offsets[1], offsets[2]))


def stack(buf: torch.Tensor, offsets: Sequence[int], rows: int, cols: int, ld: int,
          ) -> torch.Tensor:
    """The ``rows x cols`` matrices at ``offsets`` as one ``(entries, rows, cols)`` tensor: a
    view when the offsets are evenly spaced (strided batches), else a stacked copy."""
    if len(offsets) <= 1 or all(b - a == offsets[1] - offsets[0] >= 0
                                for a, b in zip(offsets, offsets[1:], strict=False)):
        step = offsets[1] - offsets[0] if len(offsets) > 1 else 0
        base = buf[offsets[0]:] if offsets else buf
        return base.as_strided((len(offsets), rows, cols), (step, 1, ld), base.storage_offset())
    return torch.stack([_blas.stored(buf[o:], rows, cols, ld) for o in offsets])


# A single matrix spanning at most this many elements is copied with its padding (the layout,
# and so the rounding, BLAS gives the original buffer); larger spans (the _64 cases', mostly
# gaps) copy the matrix alone.
_SPAN_COPY_LIMIT = 1 << 26


def op_stack(buf: torch.Tensor, offsets: Sequence[int], trans: int, rows: int, cols: int,
             ld: int) -> torch.Tensor:
    """``op(X_e)`` (``rows x cols`` each) of every entry, in float64/complex128; one entry when
    all entries are the same matrix (matmul broadcasts it)."""
    r, c = (rows, cols) if trans == _blas.OP_N else (cols, rows)
    if len(set(offsets)) == 1 and ld * (c - 1) + r <= _SPAN_COPY_LIMIT:
        o = offsets[0]
        x = _blas.op_view(_blas.hp(buf[o:o + ld * (c - 1) + r]), trans, rows, cols, ld)
        return x.resolve_conj()[None]
    if len(set(offsets)) == 1:
        offsets = offsets[:1]
    # A column-major copy of the stored matrices (the layout BLAS sees, without the padding).
    x = _blas.hp(stack(buf, offsets, r, c, ld).transpose(1, 2).contiguous()).transpose(1, 2)
    if trans == _blas.OP_N:
        return x
    x = x.transpose(1, 2)
    return x.conj().resolve_conj() if trans == _blas.OP_C and x.is_complex() else x


def abs_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The conditioning of ``a @ b``: ``|a| @ |b|``; for complex data per component (the real
    part sums ``|ar br| + |ai bi|``, the imaginary part ``|ar bi| + |ai br|``)."""
    if not a.is_complex():
        return a.abs() @ b.abs()
    ar, ai, br, bi = a.real.abs(), a.imag.abs(), b.real.abs(), b.imag.abs()
    return torch.complex(ar @ br + ai @ bi, ar @ bi + ai @ br)


def scaled_abs(s: complex, x: torch.Tensor) -> torch.Tensor:
    """The conditioning of ``s * x`` from that of ``x``, per component for complex data."""
    if not x.is_complex():
        return abs(s.real) * x.abs()
    sr, si = abs(s.real), abs(s.imag)
    xr, xi = x.real.abs(), x.imag.abs()
    return torch.complex(sr * xr + si * xi, sr * xi + si * xr)


def reference(g: Operands, scalar_dtype: str) -> Expected:
    """C after the call, in float64/complex128, and each element's conditioning: ``|alpha|
    (|op(A)| @ |op(B)|) + |beta C|`` (per component for complex data); elements outside the
    entries' matrices keep their values and have scale 0 (they must come back exactly)."""
    value = _blas.hp(g.c)
    scale = torch.zeros_like(value)
    if g.empty():
        return Expected(value, g.c.dtype, scale)
    alpha, beta = _blas.as_c(g.alpha, scalar_dtype), _blas.as_c(g.beta, scalar_dtype)
    if not value.is_complex():
        alpha, beta = complex(alpha.real), complex(beta.real)
    old = stack(value, g.offsets[2], g.m, g.n, g.ldc).clone()
    new = torch.zeros_like(old)
    cond = torch.zeros_like(old)
    if not g.product_free():
        a = op_stack(g.a, g.offsets[0], g.ta, g.m, g.k, g.lda)
        b = op_stack(g.b, g.offsets[1], g.tb, g.k, g.n, g.ldb)
        if len(a) == len(b) == 1:  # one product (a 2-D matmul, as for cublasSgemm_v2)
            a, b = a[0], b[0]
        new += _mul(alpha, a @ b)
        cond += scaled_abs(alpha, abs_product(a, b)).expand_as(cond)
    if beta != 0:  # beta == 0: C is not read (NaN there must not propagate)
        new += _mul(beta, old)
        cond += scaled_abs(beta, old)
    for e, o in enumerate(g.offsets[2]):
        _blas.stored(value[o:], g.m, g.n, g.ldc).copy_(new[e])
        _blas.stored(scale[o:], g.m, g.n, g.ldc).copy_(cond[e])
    return Expected(value, g.c.dtype, scale)


def _mul(s: complex, x: torch.Tensor) -> torch.Tensor:
    return (s if x.is_complex() else s.real) * x


# ---- the baseline ---------------------------------------------------------------------------------

def torch_baseline(g: Operands) -> None:
    """The call in PyTorch (hosts without cuBLAS): each entry's C updated in place; A and B
    are not touched when ``alpha == 0`` or ``k == 0``, nor C's old values when ``beta == 0``.
    Mixed or half-precision data compute in float32 and round once, as cuBLAS does."""
    if g.empty():
        return
    for e, oc in enumerate(g.offsets[2]):
        c = _blas.stored(g.c[oc:], g.m, g.n, g.ldc)
        if g.product_free():
            c.copy_(g.beta * c) if g.beta != 0 else c.zero_()
            continue
        a = _blas.op_view(g.a[g.offsets[0][e]:], g.ta, g.m, g.k, g.lda)
        b = _blas.op_view(g.b[g.offsets[1][e]:], g.tb, g.k, g.n, g.ldb)
        if a.dtype == c.dtype and c.dtype not in (torch.float16, torch.bfloat16):
            beta = g.beta if c.is_complex() else g.beta.real
            alpha = g.alpha if c.is_complex() else g.alpha.real
            c.addmm_(a, b, beta=beta, alpha=alpha)
            continue
        out = g.alpha.real * (a.float() @ b.float())
        if g.beta != 0:
            out += g.beta.real * c.float()
        c.copy_(out)


def cublas_args(convention: str, args: Sequence[Any], scalar: torch.dtype) -> list[Any]:
    """``args`` as :func:`_cublas.call` takes them: alpha and beta as DEVICE-mode scalars."""
    out = list(args)
    device = next(a for a in args if isinstance(a, torch.Tensor | PointerArray))
    dev = device.device if isinstance(device, torch.Tensor) else device.buffer.device
    for name in ("alpha", "beta"):
        i = _ARGS[convention].index(name)
        out[i] = _cublas.scalar(args[i], scalar, dev)
    return out
