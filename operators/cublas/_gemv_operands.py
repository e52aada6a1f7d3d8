"""The operands of a gemv-family call and what is computed from them: inputs made from a seed
(one matrix, arrays of pointers or strided batches), their :class:`Layout` (every entry's
buffer and offsets), the fp64 reference with its per-element conditioning, and the PyTorch
baseline. Registers nothing; :mod:`operators.cublas._gemv` holds the problems' cases and
description (where the semantics are stated).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from operators.cublas import _blas
from operators.cublas._gemv_triton import BATCHED, PLAIN
from operators.spec import Call, Case, Expected, Out

GAP = 5  # elements of NaN between strided entries in "gap" mode
CHUNK = 1 << 22  # elements per block when making or reducing a large matrix


@dataclass(frozen=True)
class Layout:
    """Where a call's operands live: each operand's buffer and the offset of each batch
    entry in it (one entry for plain gemv)."""

    trans: int
    m: int
    n: int
    alpha: complex
    beta: complex
    lda: int
    incx: int
    incy: int
    batch: int
    a: torch.Tensor
    a_offs: tuple[int, ...]
    x: torch.Tensor
    x_offs: tuple[int, ...]
    y: torch.Tensor
    y_offs: tuple[int, ...]

    @property
    def lens(self) -> tuple[int, int]:
        """Lengths of x and y: (n, m) for N, (m, n) for T and C."""
        return (self.n, self.m) if self.trans == _blas.OP_N else (self.m, self.n)

    @property
    def quick(self) -> bool:
        """A quick return: y is left as it is."""
        return (self.m <= 0 or self.n <= 0 or self.batch <= 0
                or (self.alpha == 0 and self.beta == 1))

    def matrix(self, b: int) -> torch.Tensor:
        """Entry b of A as the stored ``m x n`` view."""
        a = self.a
        return a.as_strided((self.m, self.n), (1, self.lda), a.storage_offset() + self.a_offs[b])

    def x_vector(self, b: int) -> torch.Tensor:
        return _blas.gather(self.x[self.x_offs[b]:], self.lens[0], self.incx)

    def y_positions(self, b: int) -> torch.Tensor:
        return self.y_offs[b] + _blas.vector_index(self.lens[1], self.incy).to(self.y.device)


def layout(call: Call, mode: str) -> Layout:
    """The operands of ``call`` (a plain, Batched or StridedBatched gemv) as a :class:`Layout`."""
    a = call.args
    trans, m, n, alpha = a[0], a[1], a[2], a[3]
    if mode == PLAIN:
        _, _, _, _, abuf, lda, xbuf, incx, beta, ybuf, incy = a
        return Layout(trans, m, n, alpha, beta, lda, incx, incy, 1, abuf, (0,), xbuf, (0,),
                      ybuf, (0,))
    if mode == BATCHED:
        _, _, _, _, aa, lda, xa, incx, beta, ya, incy, batch = a
        return Layout(trans, m, n, alpha, beta, lda, incx, incy, batch, aa.buffer, aa.offsets,
                      xa.buffer, xa.offsets, ya.buffer, ya.offsets)
    _, _, _, _, abuf, lda, sa, xbuf, incx, sx, beta, ybuf, incy, sy, batch = a
    bs = range(max(batch, 0))
    return Layout(trans, m, n, alpha, beta, lda, incx, incy, batch, abuf,
                  tuple(b * sa for b in bs), xbuf, tuple(b * sx for b in bs), ybuf,
                  tuple(b * sy for b in bs))


def product(a: torch.Tensor, trans: int, xv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``op(a) @ xv`` in float64/complex128 for the stored ``m x n`` view ``a``, and its
    conditioning: the sum of |terms| per output, per component for complex data (the real part
    sums ``|ar xr| + |ai xi|``, the imaginary part ``|ar xi| + |ai xr|``), as
    :func:`_blas.product_terms` does for one dot. Made in column blocks, so a matrix of
    gigabytes never has a float64 copy of its own."""
    m, n = a.shape
    x = _blas.hp(xv)
    cplx = x.is_complex()
    out = m if trans == _blas.OP_N else n
    t = torch.zeros(out, dtype=x.dtype, device=x.device)
    s_re = torch.zeros(out, dtype=torch.float64, device=x.device)
    s_im = torch.zeros_like(s_re)
    step = max(1, CHUNK // max(m, 1))
    for j0 in range(0, n, step):
        j1 = min(n, j0 + step)
        blk = _blas.hp(a[:, j0:j1])
        if trans == _blas.OP_N:
            xs, sl = x[j0:j1], slice(None)
        else:
            blk, xs, sl = blk.t(), x, slice(j0, j1)
            if trans == _blas.OP_C and cplx:
                blk = blk.conj()
        t[sl] += blk @ xs
        if cplx:
            br, bi, xr, xi = blk.real.abs(), blk.imag.abs(), xs.real.abs(), xs.imag.abs()
            s_re[sl] += br @ xr + bi @ xi
            s_im[sl] += br @ xi + bi @ xr
        else:
            s_re[sl] += blk.abs() @ xs.abs()
    return t, (torch.complex(s_re, s_im) if cplx else s_re)


def scaled(alpha: complex, t: torch.Tensor, s: torch.Tensor, beta: complex,
           yv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``alpha * t + beta * y`` (beta == 0: y not read) and its conditioning from ``s`` (that of
    ``t``): per component, ``alpha * t``'s real part is ``ar tr - ai ti``, conditioned by
    ``|ar| s_re + |ai| s_im``; likewise ``beta * y``."""
    if not t.is_complex():
        value, scale = alpha.real * t, abs(alpha.real) * s
        if beta != 0:
            value = value + beta.real * yv
            scale = scale + (beta.real * yv).abs()
        return value, scale
    ar, ai = abs(alpha.real), abs(alpha.imag)
    value = alpha * t
    sr = ar * s.real + ai * s.imag
    si = ar * s.imag + ai * s.real
    if beta != 0:
        value = value + beta * yv
        br, bi = abs(beta.real), abs(beta.imag)
        sr = sr + br * yv.real.abs() + bi * yv.imag.abs()
        si = si + br * yv.imag.abs() + bi * yv.real.abs()
    return value, torch.complex(sr, si)


def reference(call: Call, mode: str, dtype: str) -> tuple[Expected, ...]:
    """The whole y buffer after the call, in float64/complex128, with per-element conditioning
    (0 where y must come back bit for bit: gaps, other entries, quick returns)."""
    lay = layout(call, mode)
    value = _blas.hp(lay.y)
    cplx = value.is_complex()
    scale = torch.zeros_like(value)
    alpha, beta = _blas.as_c(lay.alpha, dtype), _blas.as_c(lay.beta, dtype)
    if not cplx:
        alpha, beta = complex(alpha.real), complex(beta.real)
    if not lay.quick:
        for b in range(lay.batch):
            pos = lay.y_positions(b)
            yv = value[pos]
            if alpha == 0:  # neither A nor x read
                t = torch.zeros_like(yv)
                s = torch.zeros_like(scale[pos])
            else:
                t, s = product(lay.matrix(b), lay.trans, lay.x_vector(b))
            value[pos], scale[pos] = scaled(alpha, t, s, beta, yv)
    return (Expected(value, lay.y.dtype, scale),)


def torch_gemv(lay: Layout) -> None:
    """The PyTorch baseline (hosts without cuBLAS): each entry's product with ``torch``'s own
    matrix-vector kernel, in the routine's precision, written into y."""
    if lay.quick:
        return
    for b in range(lay.batch):
        pos = lay.y_positions(b)
        if lay.alpha == 0:
            new = lay.y[pos] * lay.beta if lay.beta != 0 else torch.zeros_like(lay.y[pos])
        else:
            a = lay.matrix(b)
            op = a if lay.trans == _blas.OP_N else a.t()
            if lay.trans == _blas.OP_C and a.is_complex():
                op = op.conj()
            new = (op @ lay.x_vector(b)) * lay.alpha
            if lay.beta != 0:
                new = new + lay.y[pos] * lay.beta
        lay.y[pos] = new.to(lay.y.dtype)


# ---- inputs --------------------------------------------------------------------------------------

def matrix(rows: int, cols: int, ld: int, dtype: str, gen: torch.Generator, *,
           std: float = 1.0) -> torch.Tensor:
    """:func:`_blas.make_matrix`'s buffer (random ``rows x cols``, NaN padding rows), filled in
    column blocks so a matrix of gigabytes is made without float64 temporaries of its size."""
    buf = torch.full((max(1, ld * cols),), _blas.NAN, dtype=_blas._dt(dtype))
    view = _blas.stored(buf, rows, cols, ld)
    step = max(1, CHUNK // max(rows, 1))
    for j0 in range(0, cols if rows > 0 else 0, step):
        j1 = min(cols, j0 + step)
        vals = _blas.random_values(rows * (j1 - j0), dtype, gen, std=std)
        view[:, j0:j1].copy_(vals.reshape(rows, j1 - j0))
    return buf


def fill(parts: Sequence[torch.Tensor], stride: int, dtype: str) -> torch.Tensor:
    """One buffer holding ``parts`` ``stride`` elements apart (NaN between): strided entries."""
    span = max(p.numel() for p in parts)
    buf = torch.full(((len(parts) - 1) * stride + span,), _blas.NAN, dtype=_blas._dt(dtype))
    for b, p in enumerate(parts):
        buf[b * stride:b * stride + p.numel()] = p
    return buf


class Inputs:
    """Makes the operands of one case from its generator, in a fixed order."""

    def __init__(self, c: Case, gen: torch.Generator) -> None:
        self.c, self.gen = c, gen
        self.m, self.n = c.shape[0], c.shape[1]
        self.trans, self.dtype = c["trans"], c.dtype
        self.lda = max(1, self.m) + c["pad"]
        self.lenx, self.leny = (self.n, self.m) if self.trans == _blas.OP_N else (self.m, self.n)
        self.alpha_zero = c["alpha"] == 0
        self.std = float(c.get("std", 1.0))

    def a(self, cols: int | None = None) -> torch.Tensor:
        """A matrix buffer (``cols`` columns, default n): NaN throughout when alpha == 0."""
        cols = self.n if cols is None else cols
        if self.alpha_zero:
            return torch.full((max(1, self.lda * cols),), _blas.NAN, dtype=_blas._dt(self.dtype))
        buf = matrix(self.m, cols, self.lda, self.dtype, self.gen, std=self.std)
        if self.c.get("specials") and self.m >= 2 and self.n >= 2:
            # inf at (0, 0) and NaN at (m-1, n-1): one output each (another row and column).
            buf[0] = float("inf")
            buf[self.m - 1 + (self.n - 1) * self.lda] = float("nan")
        return buf

    def x(self) -> torch.Tensor:
        if self.alpha_zero:
            size = _blas.vector_len(self.lenx, self.c["incx"])
            return torch.full((size,), _blas.NAN, dtype=_blas._dt(self.dtype))
        return _blas.make_vector(self.lenx, self.c["incx"], self.dtype, self.gen, std=self.std)

    def y(self) -> torch.Tensor:
        incy = self.c["incy"]
        if self.c["beta"] == 0:
            # Not read: NaN at the vector's elements; random gaps and one random element past
            # the end, which must come back as they were.
            buf = _blas.make_vector(self.leny, incy, self.dtype, self.gen, std=self.std,
                                    tail=1, gap=None)
            buf[_blas.vector_index(self.leny, incy)] = _blas.NAN
            return buf
        return _blas.make_vector(self.leny, incy, self.dtype, self.gen, std=self.std)


def make_call(c: Case, gen: torch.Generator, mode: str) -> Call:
    """The call of case ``c``: its operands from :class:`Inputs`, laid out as ``mode`` says."""
    inp = Inputs(c, gen)
    m, n, lda = inp.m, inp.n, inp.lda
    head = (c["trans"], m, n, c["alpha"])
    if mode == PLAIN:
        args: tuple[Any, ...] = (*head, inp.a(), lda, inp.x(), c["incx"], c["beta"], inp.y(),
                                 c["incy"])
        return Call(c.entry, args, outputs=(Out.arg(9),), mutable=frozenset({9}))
    batch = c.shape[2]
    count = max(batch, 1)  # batchCount 0 still passes arrays/buffers of one entry
    if mode == BATCHED:
        a_entries = [inp.a()] * count if c["share_a"] else [inp.a() for _ in range(count)]
        x_entries = [inp.x()] * count if c["share_x"] else [inp.x() for _ in range(count)]
        y_entries = [inp.y() for _ in range(count)]
        args = (*head, _blas.pointer_array(a_entries, gen), lda,
                _blas.pointer_array(x_entries, gen), c["incx"], c["beta"],
                _blas.pointer_array(y_entries, gen), c["incy"], batch)
        return Call(c.entry, args, outputs=(Out.arg(9),), mutable=frozenset({9}))
    abuf, sa = strided_a(inp, c["sa"], count)
    xbuf, sx = strided_vectors(inp.x, c["sx"], count, inp.dtype)
    ybuf, sy = strided_vectors(inp.y, c["sy"], count, inp.dtype)
    args = (*head, abuf, lda, sa, xbuf, c["incx"], sx, c["beta"], ybuf, c["incy"], sy, batch)
    return Call(c.entry, args, outputs=(Out.arg(11),), mutable=frozenset({11}))


def strided_a(inp: Inputs, how: str, count: int) -> tuple[torch.Tensor, int]:
    """A's buffer and strideA: ``zero`` one matrix for all; ``overlap`` entries one column
    apart in one wider matrix; ``packed`` entries back to back; ``gap`` NaN between them."""
    span = inp.lda * inp.n
    if how == "zero":
        return inp.a(), 0
    if how == "overlap":
        return inp.a(inp.n + count - 1), inp.lda
    if how == "packed":
        return inp.a(inp.n * count), span
    return fill([inp.a() for _ in range(count)], span + GAP, inp.dtype), span + GAP


def strided_vectors(make: Any, how: str, count: int, dtype: str) -> tuple[torch.Tensor, int]:
    """A vector operand's buffer and stride: one vector (``zero``), or ``count`` of them back
    to back (``packed``) or with NaN between (``gap``)."""
    if how == "zero":
        return make(), 0
    parts = [make() for _ in range(count)]
    stride = max(p.numel() for p in parts) + (GAP if how == "gap" else 0)
    return fill(parts, stride, dtype), stride
