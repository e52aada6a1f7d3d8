"""Shared machinery of the binary elementwise ATen problems (add_, sub, rsub, mul, div, div_,
floor_divide, pow, fmax, heaviside, logaddexp2, prelu). Registers nothing.

- :func:`solution` builds a complete, self-contained Triton source from one op-specific
  ``_op(a, b, p, MODE)`` and the op's wrappers: a strided, broadcasting elementwise kernel
  (dims coalesced on the host, int32 indexing unless a tensor spans 2**31 elements, 16-bit
  floats computed in float32 and rounded once, Python scalars held in the compute dtype).
- :class:`BinaryProblem` holds what the problems share: calls for every overload form
  (Tensor, Scalar, out, in-place, scalar base), inputs with edge values, the float64 reference
  plumbing, the baseline and the cost model; :func:`grid` and :func:`hidden` the case grids.
- The division problems' shared op and inputs are in :mod:`operators.aten._division`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch

from operators.inputs import broadcast_shapes, randint, with_layout
from operators.spec import (
    Call,
    Case,
    Cost,
    Expected,
    OperatorSpec,
    Out,
    Tier,
    case,
    dtype_from_name,
)

# ---- the Triton source ---------------------------------------------------------------------

_HEADER = r'''
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
'''

_KERNEL = r'''

MAX_DIMS = 6
BLOCK = 1024

# Compute dtype of each input dtype: 16-bit floats in float32 (rounded once at the store).
_CT = {torch.float16: tl.float32, torch.bfloat16: tl.float32, torch.float32: tl.float32,
       torch.float64: tl.float64, torch.int8: tl.int8, torch.uint8: tl.uint8,
       torch.int16: tl.int16, torch.int32: tl.int32, torch.int64: tl.int64}
_HOLD = {tl.float32: torch.float32, tl.float64: torch.float64, tl.int8: torch.int8,
         tl.uint8: torch.uint8, tl.int16: torch.int16, tl.int32: torch.int32,
         tl.int64: torch.int64}


@triton.jit
def _binary_kernel(a_ptr, b_ptr, out_ptr, n, p,
                   s1, s2, s3, s4, s5,
                   a0, a1, a2, a3, a4, a5,
                   b0, b1, b2, b3, b4, b5,
                   o0, o1, o2, o3, o4, o5,
                   NDIM: tl.constexpr, CT: tl.constexpr, MODE: tl.constexpr,
                   INDEX64: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if INDEX64:
        idx = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    else:
        idx = pid * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    # Unravel the flat index over the used (innermost NDIM) dims; the outermost used dim takes
    # the remaining quotient, so no division is spent on it.
    rem = idx
    if NDIM > 1:
        i = rem % s5
        rem = rem // s5
    else:
        i = rem
    a_off = i * a5
    b_off = i * b5
    o_off = i * o5
    if NDIM > 1:
        if NDIM > 2:
            i = rem % s4
            rem = rem // s4
        else:
            i = rem
        a_off += i * a4
        b_off += i * b4
        o_off += i * o4
    if NDIM > 2:
        if NDIM > 3:
            i = rem % s3
            rem = rem // s3
        else:
            i = rem
        a_off += i * a3
        b_off += i * b3
        o_off += i * o3
    if NDIM > 3:
        if NDIM > 4:
            i = rem % s2
            rem = rem // s2
        else:
            i = rem
        a_off += i * a2
        b_off += i * b2
        o_off += i * o2
    if NDIM > 4:
        if NDIM > 5:
            i = rem % s1
            rem = rem // s1
        else:
            i = rem
        a_off += i * a1
        b_off += i * b1
        o_off += i * o1
    if NDIM > 5:
        a_off += rem * a0
        b_off += rem * b0
        o_off += rem * o0
    a = tl.load(a_ptr + a_off, mask=mask, other=1).to(CT)
    b = tl.load(b_ptr + b_off, mask=mask, other=1).to(CT)
    r = _op(a, b, p, MODE)
    tl.store(out_ptr + o_off, r.to(out_ptr.dtype.element_ty), mask=mask)


def _scalar(value, ct, device):
    """A Python number as a 0-d tensor of the compute dtype (the kernel reads it, stride 0)."""
    t = torch.empty((), dtype=_HOLD[ct], device=device)
    t.fill_(value)
    return t


def _launch(a, b, out, p=0, ct=None, mode=0):
    """out = _op(a, b) elementwise; a and b are already broadcast (expanded) to out's shape."""
    n = out.numel()
    if n == 0:
        return out
    if ct is None:
        ct = _CT[a.dtype]
    # Coalesce: drop size-1 dims, merge a dim into the next inner one when every tensor's
    # strides allow it (contiguous tensors become one dim).
    dims = []
    for d in range(out.dim()):
        size = out.shape[d]
        if size == 1:
            continue
        st = (a.stride(d), b.stride(d), out.stride(d))
        if dims and all(ps == s * size for ps, s in zip(dims[-1][1], st)):
            dims[-1] = (dims[-1][0] * size, st)
        else:
            dims.append((size, st))
    if len(dims) > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} non-mergeable dims are supported")
    ndim = max(len(dims), 1)
    dims = [(1, (0, 0, 0))] * (MAX_DIMS - len(dims)) + dims
    sizes = [d[0] for d in dims]
    strides = [[d[1][k] for d in dims] for k in range(3)]
    span = max(sum((sz - 1) * abs(s) for sz, s in zip(sizes, st)) for st in strides)
    index64 = n >= 2**31 or span >= 2**31
    grid = (triton.cdiv(n, BLOCK),)
    # libdevice flushes subnormals to zero unless told not to; PyTorch keeps them (a subnormal
    # over zero is inf, not nan).
    _binary_kernel[grid](a, b, out, n, p, *sizes[1:], *strides[0], *strides[1], *strides[2],
                         NDIM=ndim, CT=ct, MODE=mode, INDEX64=index64, BLOCK=BLOCK,
                         enable_reflect_ftz=False)
    return out
'''


def solution(op: str, wrappers: str) -> str:
    """A complete candidate source: imports, the op's ``_op`` jit function, the shared kernel
    and launch helpers, then the op's entry-point wrappers."""
    return _HEADER + op.rstrip() + "\n" + _KERNEL + wrappers


# ---- call forms ------------------------------------------------------------------------------

TENSOR = "tensor"                  # f(self, other, **kw) -> Tensor
SCALAR = "scalar"                  # f(self, other: Scalar, **kw) -> Tensor
OUT = "out"                        # f(self, other, **kw, out) -> out
SCALAR_OUT = "scalar_out"          # f(self, other: Scalar, **kw, out) -> out
INPLACE = "inplace"                # f(self, other, **kw) writes self, returns self
INPLACE_SCALAR = "inplace_scalar"  # f(self, other: Scalar, **kw) writes self
SCALAR_SELF = "scalar_self"        # f(self: Scalar, other: Tensor) -> Tensor (pow.Scalar)
SCALAR_SELF_OUT = "scalar_self_out"

_SCALAR_OTHER = {SCALAR, SCALAR_OUT, INPLACE_SCALAR}
_SCALAR_SELF = {SCALAR_SELF, SCALAR_SELF_OUT}
_OUT = {OUT, SCALAR_OUT, SCALAR_SELF_OUT}
_INPLACE = {INPLACE, INPLACE_SCALAR}

FLOATS = ("float16", "bfloat16", "float32")


def numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _draw_dtype(dtype: torch.dtype) -> torch.dtype:
    # Values are drawn in float32 (4x cheaper than float64 for benchmark-sized inputs), in
    # float64 only for float64 tensors so that they use its full precision.
    return torch.float64 if dtype == torch.float64 else torch.float32


def normal(shape: Sequence[int], dtype: torch.dtype, gen: torch.Generator, *,
           std: float = 1.0, mean: float = 0.0) -> torch.Tensor:
    """Contiguous normal values, rounded to ``dtype``."""
    t = torch.randn(tuple(shape), generator=gen, dtype=_draw_dtype(dtype))
    return (t * std + mean).to(dtype)


def uniform(shape: Sequence[int], dtype: torch.dtype, gen: torch.Generator, *,
            low: float, high: float) -> torch.Tensor:
    """Contiguous uniform values in ``[low, high)``, rounded to ``dtype``."""
    t = torch.rand(tuple(shape), generator=gen, dtype=_draw_dtype(dtype))
    return (t * (high - low) + low).to(dtype)


def saturate(value: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The float64 reference with results beyond ``dtype``'s range replaced by the infinity
    they round to: an fp16 product of 300 and 300 *is* inf, whatever precision computed it."""
    rounded = value.to(dtype).to(torch.float64)
    return torch.where(torch.isinf(rounded) & torch.isfinite(value), rounded, value)


def edges(t: torch.Tensor, gen: torch.Generator, values: Sequence[float],
          fraction: float = 0.02) -> torch.Tensor:
    """A copy of contiguous ``t`` with about ``fraction`` of its elements replaced by each of
    ``values`` (inf, nan, signed zeros, large magnitudes ...), at positions drawn from ``gen``."""
    out = t.clone()
    if out.numel() < 16 or not values:
        return out  # a 0-d or tiny operand made all special would make the output constant
    flat = out.view(-1)
    k = min(out.numel(), max(1, int(out.numel() * fraction)) * len(values))
    # distinct positions: a scatter with repeated indices is not deterministic
    idx = torch.randperm(out.numel(), generator=gen)[:k]
    vals = torch.tensor(list(values), dtype=torch.float64).to(out.dtype)
    flat[idx] = vals[torch.arange(k) % len(values)]
    return out


class BinaryProblem(OperatorSpec):
    """Base of the binary elementwise problems (not registered itself).

    A subclass sets ``forms`` (entry point -> call form), ``op_name`` (the torch function) and
    ``method`` (the in-place Tensor method) and overrides ``ref64``; optionally ``draw``,
    ``edge_values``, ``kw_names``, ``result_dtype``, ``exact``, ``flops_per_element``.
    """

    forms: ClassVar[dict[str, str]] = {}
    op_name: ClassVar[str] = ""
    method: ClassVar[str] = ""
    kw_names: ClassVar[tuple[str, ...]] = ()
    flops_per_element: ClassVar[int] = 1

    # ---- hooks --------------------------------------------------------------------------------
    def draw(self, role: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator,
             c: Case) -> torch.Tensor:
        """Contiguous values of operand ``role`` ("self" or "other")."""
        if not dtype.is_floating_point:
            return randint(shape, dtype, gen, low=-100, high=100)
        return normal(shape, dtype, gen, std=2.0)

    def draw_pair(self, shape_a: tuple[int, ...], shape_b: tuple[int, ...], dtype: torch.dtype,
                  gen: torch.Generator, c: Case) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Both tensor operands at once when one depends on the other (exact quotients ...);
        None draws them independently with ``draw``."""
        return None

    def edge_values(self, role: str, dtype: torch.dtype) -> Sequence[float]:
        """Values sprinkled into operand ``role`` of cases with ``edge=True``."""
        big = {torch.float16: 3.0e2, torch.bfloat16: 3.0e30}.get(dtype, 3.0e30)
        subnormal = torch.finfo(dtype).tiny / 64
        return (float("inf"), float("-inf"), float("nan"), 0.0, -0.0, big, -big, subnormal)

    def result_dtype(self, dtype: torch.dtype, kw: dict[str, Any]) -> torch.dtype:
        """The output dtype for tensor operand(s) of ``dtype`` and the call's kwargs."""
        return dtype

    def ref64(self, a: torch.Tensor, b: torch.Tensor, kw: dict[str, Any],
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(value, scale) in float64 from float64 operands (Python scalars as 0-d tensors);
        ``dtype`` is the output dtype."""
        raise NotImplementedError

    def exact(self, a: Any, b: Any, kw: dict[str, Any]) -> torch.Tensor:
        """The exact answer for integer outputs: PyTorch's own op on the integer operands."""
        fn: Callable[..., torch.Tensor] = getattr(torch, self.op_name)
        return fn(a, b, **kw)

    # ---- calls --------------------------------------------------------------------------------
    def kwargs(self, c: Case) -> dict[str, Any]:
        return {k: c[k] for k in self.kw_names if c.get(k, "__absent__") != "__absent__"}

    def _tensor(self, role: str, shape: tuple[int, ...], c: Case,
                gen: torch.Generator) -> torch.Tensor:
        return self._finish(role, self.draw(role, tuple(shape), c.torch_dtype, gen, c), c, gen)

    def _finish(self, role: str, t: torch.Tensor, c: Case, gen: torch.Generator) -> torch.Tensor:
        dt = c.torch_dtype
        if c.get("edge") and dt.is_floating_point:
            t = edges(t, gen, self.edge_values(role, dt))
        return with_layout(t, c.get("layout", "contiguous"))

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        form = self.forms[c.entry]
        kw = self.kwargs(c)
        if form in _SCALAR_SELF:
            other = self._tensor("other", c.shape, c, gen)
            args: tuple[Any, ...] = (c["self"], other)
        else:
            pair = None if form in _SCALAR_OTHER else \
                self.draw_pair(c.shape, tuple(c["other"]), c.torch_dtype, gen, c)
            if pair is not None:
                a = self._finish("self", pair[0], c, gen)
                b = self._finish("other", pair[1], c, gen)
            else:
                a = self._tensor("self", c.shape, c, gen)
                b = c["other"] if form in _SCALAR_OTHER else \
                    self._tensor("other", c["other"], c, gen)
            args = (a, b)
        if form in _OUT:
            if form in _SCALAR_SELF:
                shape = tuple(args[1].shape)
            elif form in _SCALAR_OTHER:
                shape = tuple(args[0].shape)
            else:
                shape = tuple(broadcast_shapes(args[0].shape, args[1].shape))
            out = with_layout(torch.empty(shape, dtype=self.result_dtype(c.torch_dtype, kw)),
                              c.get("out_layout", "contiguous"))
            return Call(c.entry, args, {**kw, "out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        if form in _INPLACE:
            return Call(c.entry, args, kw, outputs=(Out.arg(0),), mutable=frozenset({0}))
        return Call(c.entry, args, kw)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        form = self.forms[call.entry]
        a, b = call.args[0], call.args[1]
        kw = {k: v for k, v in call.kwargs.items() if k != "out"}
        tensor = b if form in _SCALAR_SELF else a
        out_dtype = self.result_dtype(tensor.dtype, kw)
        if not out_dtype.is_floating_point:
            value = self.exact(a, b, kw)
            return (Expected(value.to(out_dtype), out_dtype),)
        a64 = _f64(a)
        b64 = _f64(b)
        value, scale = self.ref64(a64, b64, kw, out_dtype)  # of the broadcast shape
        value = saturate(value, out_dtype)
        if scale is not None:
            scale = scale.expand(value.shape)
        return (Expected(value, out_dtype, scale),)

    def baseline(self, call: Call) -> object:
        form = self.forms[call.entry]
        if form in _INPLACE:
            return getattr(call.args[0], self.method)(*call.args[1:], **call.kwargs)
        return getattr(torch, self.op_name)(*call.args, **call.kwargs)

    def cost(self, c: Case) -> Cost:
        form = self.forms[c.entry]
        size = c.torch_dtype.itemsize
        out_size = self.result_dtype(c.torch_dtype, self.kwargs(c)).itemsize
        if form in _SCALAR_SELF or form in _SCALAR_OTHER:
            n = numel(c.shape)
            reads = n
        else:
            n = numel(broadcast_shapes(c.shape, c["other"]))
            reads = numel(c.shape) + numel(c["other"])
        return Cost(flops=float(self.flops_per_element * n),
                    bytes=float(reads * size + n * out_size), dtype=c.dtype)


def _f64(x: Any) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.to(torch.float64)
    return torch.tensor(x, dtype=torch.float64)


# ---- case grids ------------------------------------------------------------------------------

def grid(tensor: str, *, scalar: str | None = None, out: str | None = None,
         dtypes: Sequence[str] = FLOATS, scalars: Sequence[float] = (100.001, -0.999),
         variants: Sequence[dict[str, Any]] = ({},), cpu_dtype: str = "float32",
         edge: bool = True, inplace: bool = False) -> list[Case]:
    """The shared public grid: odd and published pointwise shapes, one- and two-sided
    broadcasts, transposed and strided layouts, 0-d and empty tensors, edge values, the Scalar
    and out forms. ``variants`` (extra params such as alpha) cycle over the cases. The cpu tier
    gets ~8 small cases: most in ``cpu_dtype``, one transposed and one out case in the others.
    ``inplace``: ``tensor``/``scalar`` write self, so ``other`` only broadcasts to self's shape."""
    cs: list[Case] = []
    k = 0

    def add(entry: str, dt: str, shape: tuple[int, ...], cpu: bool, **params: Any) -> None:
        nonlocal k
        extra = dict(variants[k % len(variants)])
        k += 1
        cs.append(case(entry, dt, shape, cpu=cpu, **params, **extra))

    others = [d for d in dtypes if d != cpu_dtype]
    for dt in dtypes:
        main = dt == cpu_dtype
        add(tensor, dt, (20, 320, 15), False, other=(20, 320, 15))
        add(tensor, dt, (1024, 1024), False, other=(1024, 1024))
        add(tensor, dt, (63, 145), main, other=(145,))
        add(tensor, dt, (16, 7, 57, 32, 29), False, other=(1, 7, 1, 32, 1))
        if inplace:
            add(tensor, dt, (7, 17, 31), main, other=(17, 1))
        else:
            add(tensor, dt, (7, 1, 31), main, other=(17, 1))
        add(tensor, dt, (33, 65), bool(others) and dt == others[0], other=(33, 65),
            layout="transposed")
        add(tensor, dt, (96, 80), main, other=(96, 80), layout="strided")
        add(tensor, dt, (), main, other=())
        add(tensor, dt, (45,), False, other=())
        if edge:
            add(tensor, dt, (511, 257), False, other=(511, 257), edge=True)
            add(tensor, dt, (37, 41), main, other=(37, 41), edge=True)
        if scalar is not None:
            for j, s in enumerate(scalars):
                add(scalar, dt, (49, 63), main and j == 0, other=s)
        if out is not None:
            add(out, dt, (7, 17, 31), bool(others) and dt == others[-1], other=(7, 17, 31))
            add(out, dt, (64, 48), False, other=(48,), out_layout="transposed")
    add(tensor, cpu_dtype, (0, 5), True, other=(5,))
    return cs


def hidden(rng: random.Random, tier: Tier, entries: Sequence[tuple[str, str]],
           dtypes: Sequence[str] = FLOATS, scalars: Sequence[float] = (2.5, -0.75),
           variants: Sequence[dict[str, Any]] = ({},), count: int = 2) -> list[Case]:
    """Hidden cases drawn from ``rng``: ``count`` small ones for the cpu tier, 4 * ``count``
    otherwise, over the given (entry, form) pairs, dtypes, layouts and broadcast patterns."""
    small = tier is Tier.CPU
    cs: list[Case] = []
    for _ in range(count if small else 4 * count):
        entry, form = rng.choice(list(entries))
        dt = rng.choice(list(dtypes))
        rows = rng.randrange(2, 40 if small else 700)
        cols = rng.randrange(2, 60 if small else 900)
        params: dict[str, Any] = dict(rng.choice(list(variants)))
        params["layout"] = rng.choice(["contiguous", "transposed", "strided"])
        params["edge"] = rng.random() < 0.5 and dtype_from_name(dt).is_floating_point
        if form in _SCALAR_SELF:
            params = {"self": rng.choice(list(scalars)), **params}
        elif form in _SCALAR_OTHER:
            params = {"other": rng.choice(list(scalars)), **params}
        else:
            pattern = rng.choice(["same", "row", "col", "0d"])
            other = {"same": (rows, cols), "row": (cols,), "col": (rows, 1), "0d": ()}[pattern]
            params = {"other": other, **params}
        cs.append(case(entry, dt, (rows, cols), cpu=small, **params))
    return cs
