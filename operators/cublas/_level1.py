"""What the BLAS-1 problems share: the published case grid widened by negative increments and
quick returns, hidden cases, the vector inputs of a case, and the spec behaviour of the
routine families (:class:`Level1` for every routine; :class:`Copy` and :class:`Dot` for the
two-vector copies and dot products). Registers nothing.

A case's shape is ``(n,)``; its params are ``incx`` (and ``incy`` for two-vector routines),
``alpha`` where the routine scales, and optionally ``std`` (the magnitude of the values: edge
cases with large ones), ``specials`` (inf and NaN among the values, where the routine defines
what they give), ``subnormal`` (every other value subnormal) and ``real_x`` (x with zero
imaginary parts: a conjugation changes nothing).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from operators.cublas import _blas, _cublas
from operators.spec import Call, Case, Cost, Expected, OperatorSpec, Out, Tier, case

# The published saxpy grid's sizes; its increments {1, 2, 3} widened by negative ones, which
# start at the far end of the buffer.
GRID_N = (1, 32, 71, 160, 497, 1024, 4113, 4096, 5333)
INCS = (1, 2, 3, -1, -2)
# Sizes that are quick returns (n <= 0): nothing is read; a scalar result is 0.
QUICK_N = (0, -3)


def grid(entry: str, dtype: str, first: Sequence[Case], *, two: bool,
         alphas: Sequence[float] = (), incs: Sequence[int] = INCS) -> list[Case]:
    """``first`` (the cpu tier and edge cases), then the full grid n x [alpha] x incx [x incy]
    and the quick returns, without repeating a case ``first`` already has."""
    out = list(first)
    seen = {c.name for c in out}
    scalars: list[dict[str, Any]] = [{"alpha": a} for a in alphas] or [{}]
    for n in (*GRID_N, *QUICK_N):
        for extra in scalars:
            for incx in incs:
                for incy in (incs if two else (None,)):
                    c = case(entry, dtype, (n,), **extra, **incs_of(incx, incy))
                    if c.name not in seen:
                        seen.add(c.name)
                        out.append(c)
    return out


def incs_of(incx: int, incy: int | None) -> dict[str, Any]:
    return {"incx": incx} if incy is None else {"incx": incx, "incy": incy}


def hidden(entry: str, dtype: str, rng: random.Random, tier: Tier, *, two: bool,
           alphas: Sequence[float] = ()) -> list[Case]:
    """Random sizes (odd ones mostly), increments of either sign, and one quick return."""
    small = tier is Tier.CPU
    out = []
    for k in range(4 if small else 8):
        n = rng.randrange(1, 3000 if small else 300_000) if k else rng.choice(QUICK_N)
        extra = {"alpha": rng.choice(list(alphas))} if alphas else {}
        incx = rng.choice([1, 2, 3, 4, -1, -2, -3])
        incy = rng.choice([1, 2, 3, -1, -2]) if two else None
        out.append(case(entry, dtype, (n,), **extra, **incs_of(incx, incy), cpu=small))
    return out


def vector(c: Case, inc: int, gen: torch.Generator, **kw: Any) -> torch.Tensor:
    """The buffer of one vector of case ``c``, of its dtype, NaN in the gaps unless ``gap``
    says otherwise."""
    (n,) = c.shape
    buf = _blas.make_vector(n, inc, c.dtype, gen, std=float(c.get("std", 1.0)), **kw)
    if c.get("specials") and n > 0:
        # inf, -inf and NaN at the first, middle and last element of the vector.
        idx = _blas.vector_index(n, inc)
        specials = torch.tensor([float("inf"), float("-inf"), float("nan")])
        for pos, value in zip(idx[[0, n // 2, n - 1]].tolist(), specials.tolist(), strict=True):
            buf[pos] = value
    if c.get("subnormal") and n > 0:
        # Every other element of the vector scaled into the subnormal range: a copy must keep
        # them (no flush to zero).
        every_other = _blas.vector_index(n, inc)[::2]
        buf[every_other] *= torch.finfo(buf.real.dtype).tiny / 1024
    if c.get("real_x") and buf.is_complex():
        buf.imag.zero_()
    return buf


def updated(buf: torch.Tensor, n: int, inc: int, values: torch.Tensor) -> torch.Tensor:
    """``buf`` in high precision with the vector ``(n, inc)`` replaced by ``values``: the
    expected contents of an output buffer whose other elements stay as they were."""
    out = _blas.hp(buf)
    _blas.scatter_(out, n, inc, values)
    return out


def at(buf: torch.Tensor, n: int, inc: int, values: torch.Tensor) -> torch.Tensor:
    """A float64/complex128 tensor shaped like ``buf``, ``values`` at the vector ``(n, inc)``
    and 0 elsewhere: a scale whose untouched elements must come back exactly."""
    out = torch.zeros(buf.shape, dtype=torch.complex128 if values.is_complex() else torch.float64)
    _blas.scatter_(out, n, inc, values)
    return out


# ---- the families' spec behaviour ----------------------------------------------------------------

class Level1(OperatorSpec):
    """A BLAS-1 routine: its cases are ``edge_cases()`` (the cpu tier and edge values) then
    :func:`grid`; hidden ones from :func:`hidden`; cuBLAS is its baseline where there is one."""

    routine: ClassVar[str]  # the entry point, the routine's C name
    precision: ClassVar[str]  # the vectors' dtype
    two: ClassVar[bool] = True  # x and y, or x alone
    alphas: ClassVar[tuple[float, ...]] = ()  # the grid's, for routines that scale
    hidden_alphas: ClassVar[tuple[float, ...]] = ()
    incs: ClassVar[tuple[int, ...]] = INCS

    def edge_cases(self) -> list[Case]:
        raise NotImplementedError

    def cases(self) -> Sequence[Case]:
        return grid(self.routine, self.precision, self.edge_cases(), two=self.two,
                    alphas=self.alphas, incs=self.incs)

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return hidden(self.routine, self.precision, rng, tier, two=self.two,
                      alphas=self.hidden_alphas)

    def baseline_library(self) -> str:
        return _cublas.library()


class Copy(Level1):
    """``cublas?copy``: ``y_i = x_i``, bit for bit (tolerance :func:`_blas.exact`); y's other
    elements untouched."""

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        (n,) = c.shape
        x = vector(c, c["incx"], gen)
        y = vector(c, c["incy"], gen)
        return Call(c.entry, (n, x, c["incx"], y, c["incy"]), outputs=(Out.arg(3),),
                    mutable=frozenset({3}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        n, x, incx, y, incy = call.args
        value = updated(y, n, incy, _blas.gather(x, n, incx))
        return (Expected(value, y.dtype, torch.zeros_like(value)),)

    def baseline(self, call: Call) -> object:
        n, x, incx, y, incy = call.args
        if x.is_cuda and _cublas.available():
            _cublas.call(self.routine, n, x, incx, y, incy)
        elif n > 0:
            _blas.scatter_(y, n, incy, _blas.gather(x, n, incx))
        return None

    def cost(self, c: Case) -> Cost:
        (n,) = c.shape
        return _blas.streaming_cost(0, 2 * max(n, 0), self.precision)


class Dot(Level1):
    """``cublas?dot[uc]``: ``result[0] = sum_i x_i * y_i`` (``conj(x_i)`` for dotc) into a
    1-element out-buffer; 0 when n <= 0. Judged relative to the sum of |terms| (tolerance
    :func:`_blas.sum_tolerance`)."""

    conjugate_x: ClassVar[bool] = False

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        (n,) = c.shape
        x = vector(c, c["incx"], gen)
        y = vector(c, c["incy"], gen)
        result = torch.full((1,), _blas.NAN, dtype=x.dtype)  # as the harness poisons it
        return Call(c.entry, (n, x, c["incx"], y, c["incy"], result), outputs=(Out.arg(5),),
                    mutable=frozenset({5}), out_buffers=frozenset({5}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        n, x, incx, y, incy, result = call.args
        xv = _blas.gather(x, n, incx)
        value, scale = _blas.product_terms(xv.conj() if self.conjugate_x else xv,
                                           _blas.gather(y, n, incy))
        return (Expected(value.reshape(1), result.dtype, scale.reshape(1)),)

    def baseline(self, call: Call) -> object:
        n, x, incx, y, incy, result = call.args
        if x.is_cuda and _cublas.available():
            _cublas.call(self.routine, n, x, incx, y, incy, result)
        elif n > 0:
            dot = torch.vdot if self.conjugate_x else torch.dot
            result.copy_(dot(_blas.gather(x, n, incx), _blas.gather(y, n, incy)).reshape(1))
        else:
            result.zero_()
        return None

    def cost(self, c: Case) -> Cost:
        (n,) = c.shape
        work = max(n, 0)
        return _blas.streaming_cost(_blas.flops_per_fma(self.precision) * work, 2 * work + 1,
                                    self.precision)
