"""Shared machinery of the elementwise ATen problems (comparisons, bitwise_not and the activation
and loss backward ops). Registers nothing: the registry skips modules whose name starts with
``_``.

Two halves:

- pieces of the Triton reference solutions: ``PRELUDE`` (imports), ``strided_kernel`` (the
  source of an elementwise kernel over up to six broadcast, arbitrarily strided dims, with a flat
  fast path when every operand is dense) and ``LAUNCHER`` (the wrapper-side helper that pads
  shapes and strides and launches such a kernel). Each problem's ``solution`` joins them with its
  own kernel body and entry points into one self-contained source string;
- helpers of the problem modules themselves: input tensors with layouts and special values,
  element counts and sizes, out-buffer calls.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import ClassVar

import torch

from operators.inputs import broadcast_shapes, with_layout
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    OperatorSpec,
    Out,
    Tier,
    case,
    dtype_from_name,
)

# ---- pieces of the Triton solutions -----------------------------------------------------------

PRELUDE = r'''
import torch
import triton
import triton.language as tl
'''

LAUNCHER = r'''
MAX_DIMS = 6
BLOCK = 2048


def _pad(values, fill):
    values = list(values)
    if len(values) > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dims supported")
    return [fill] * (MAX_DIMS - len(values)) + values


def _dense(t, shape):
    """Whether t has exactly `shape` and row-major contiguous strides (size-1 dims ignored)."""
    if list(t.shape) != list(shape):
        return False
    expected = 1
    for size, stride in zip(reversed(list(t.shape)), reversed(list(t.stride()))):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _launch(kernel, tensors, scalars=(), **meta):
    """Run an elementwise kernel: `tensors` are the inputs, already broadcast to the output's
    shape (stride 0 where they broadcast), then the output last."""
    out = tensors[-1]
    n = out.numel()
    if n == 0:
        return
    shape = list(out.shape)
    flat = all(_dense(t, shape) for t in tensors)
    # int64 index math only when an index or an offset could pass 2**31
    span = n
    for t in tensors:
        reach = 1
        for size, stride in zip(t.shape, t.stride()):
            reach += (size - 1) * abs(stride)
        span = max(span, reach)
    strides = []
    for t in tensors:
        strides += _pad(t.stride(), 0)
    grid = (triton.cdiv(n, BLOCK),)
    kernel[grid](*tensors, n, *scalars, *_pad(shape, 1)[1:], *strides,
                 FLAT=flat, BIG=span >= 2**31 - BLOCK, BLOCK=BLOCK, num_warps=8, **meta)
'''


def strided_kernel(name: str, tensors: Sequence[str], body: str, *,
                   scalars: Sequence[str] = (), constexprs: Sequence[str] = ()) -> str:
    """Source of a ``@triton.jit`` elementwise kernel.

    Its arguments are, in ``_launch``'s order: one pointer ``<t>_ptr`` per tensor (inputs, then
    the output), ``n``, the ``scalars``, sizes 1..5 of the output padded to six dims, six
    strides per tensor, the ``constexprs`` and ``FLAT``, ``BIG``, ``BLOCK``. Before ``body``
    runs, ``mask`` marks the live lanes and ``<t>_off`` is each tensor's element offset.
    """
    ptrs = ", ".join(f"{t}_ptr" for t in tensors)
    scal = "".join(f", {s}" for s in scalars)
    strides = ",\n        ".join(", ".join(f"{t}_s{d}" for d in range(6)) for t in tensors)
    consts = "".join(f"{c}: tl.constexpr, " for c in constexprs)
    flat = "\n".join(f"        {t}_off = idx" for t in tensors)
    nd = "\n".join(
        f"        {t}_off = (i0 * {t}_s0 + i1 * {t}_s1 + i2 * {t}_s2 + i3 * {t}_s3"
        f" + i4 * {t}_s4 + i5 * {t}_s5)" for t in tensors)
    return f'''
@triton.jit
def {name}({ptrs}, n{scal},
        size1, size2, size3, size4, size5,
        {strides},
        {consts}FLAT: tl.constexpr, BIG: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if BIG:
        idx = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    else:
        idx = pid * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    if FLAT:
        # every operand is dense with the output's shape: one flat index serves them all
{flat}
    else:
        rem = idx
        i5 = rem % size5
        rem = rem // size5
        i4 = rem % size4
        rem = rem // size4
        i3 = rem % size3
        rem = rem // size3
        i2 = rem % size2
        rem = rem // size2
        i1 = rem % size1
        i0 = rem // size1
{nd}
{body}
'''


# ---- helpers of the problem modules ------------------------------------------------------------

FLOATS = ("float16", "bfloat16", "float32")

# A float32 intermediate that falls below the smallest normal number (exp of a large negative
# argument, a sigmoid's tail) is denormal or flushed to 0: its absolute error is up to float32's
# tiny whatever its size. Added to a scale (times the factor that intermediate is multiplied
# by), tiny / u makes a tolerance of n u of the scale cover n such errors.
F32_FLOOR = torch.finfo(torch.float32).tiny / (torch.finfo(torch.float32).eps / 2)


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def itemsize(dtype: str | torch.dtype) -> int:
    dt = dtype_from_name(dtype) if isinstance(dtype, str) else dtype
    return torch.empty((), dtype=dt).element_size()


def floats(shape: Sequence[int], dtype: str, gen: torch.Generator, *, std: float = 1.0,
           mean: float = 0.0, layout: str = "contiguous", specials: float = 0.0) -> torch.Tensor:
    """Normal values rounded to ``dtype``; a ``specials`` fraction replaced by inf, -inf and nan;
    then laid out as asked (the values do not depend on the layout)."""
    dt = dtype_from_name(dtype)
    # float32 draws for the narrower dtypes keep large operands cheap to build
    base = torch.randn(tuple(shape), generator=gen,
                       dtype=torch.float64 if dt == torch.float64 else torch.float32)
    t = (base * std + mean).to(dt)
    if specials > 0:
        t = with_specials(t, gen, specials)
    return with_layout(t, layout)


def with_specials(t: torch.Tensor, gen: torch.Generator, fraction: float) -> torch.Tensor:
    """A copy of ``t`` with about ``fraction`` of its elements replaced by inf, -inf or nan.
    (Unlike ``inputs.sprinkle_specials``, whose scatter with repeated indices lets threads race
    on large tensors, the result depends on the generator alone.)"""
    mask = torch.rand(t.shape, generator=gen) < fraction
    vals = torch.tensor([math.inf, -math.inf, math.nan], dtype=t.dtype)
    out = t.clone()
    out[mask] = vals[torch.randint(0, 3, (int(mask.sum()),), generator=gen)]
    return out


def out_call(entry: str, args: tuple[object, ...], name: str, shape: Sequence[int],
             dtype: torch.dtype, kwargs: dict[str, object] | None = None) -> Call:
    """A call of an out= overload: a fresh ``name`` buffer of ``shape``/``dtype``, written only."""
    kw = dict(kwargs or {})
    kw[name] = torch.empty(tuple(shape), dtype=dtype)
    return Call(entry, args, kw, outputs=(Out.arg(name),), mutable=frozenset({name}),
                out_buffers=frozenset({name}))


# ---- comparisons (eq, gt, le) -------------------------------------------------------------------

_CMP_SOLUTION = r'''
# torch dtype -> Triton dtype both operands are cast to before comparing (PyTorch's result type)
_TL = {
    torch.bool: tl.int1, torch.uint8: tl.uint8, torch.int8: tl.int8, torch.int16: tl.int16,
    torch.int32: tl.int32, torch.int64: tl.int64, torch.float16: tl.float16,
    torch.bfloat16: tl.bfloat16, torch.float32: tl.float32, torch.float64: tl.float64,
}


def _compare(a, b, out, common):
    a, b = torch.broadcast_tensors(a, b)
    _launch(_OP_kernel, (a, b, out), CT=_TL[common])
    return out


def _scalar_operand(self, other):
    """`other` as PyTorch compares it: a 0-d tensor of the result dtype, the Python number
    rounded to it (e.g. 100.001 becomes 100.0 against a float16 tensor)."""
    common = torch.result_type(self, other)
    b = torch.empty((), dtype=common, device=self.device)
    b.fill_(other)
    return b, common


def OP_Tensor(self, other):
    shape = torch.broadcast_shapes(self.shape, other.shape)
    out = torch.empty(shape, dtype=torch.bool, device=self.device)
    return _compare(self, other, out, torch.result_type(self, other))


def OP_Scalar(self, other):
    b, common = _scalar_operand(self, other)
    out = torch.empty(self.shape, dtype=torch.bool, device=self.device)
    return _compare(self, b, out, common)


def OP_Tensor_out(self, other, *, out):
    return _compare(self, other, out, torch.result_type(self, other))


def OP_Scalar_out(self, other, *, out):
    b, common = _scalar_operand(self, other)
    return _compare(self, b, out, common)
'''


def comparison_solution(op: str, symbol: str) -> str:
    """The reference solution of comparison ``op`` (``eq``), whose Triton operator is ``symbol``."""
    body = (
        "    a = tl.load(a_ptr + a_off, mask=mask).to(CT)\n"
        "    b = tl.load(b_ptr + b_off, mask=mask).to(CT)\n"
        "    if CT == tl.float16 or CT == tl.bfloat16:\n"
        "        # exact widening; compares half types as float32 does (Triton's interpreter\n"
        "        # compares bfloat16 by bit pattern, so -0.0 != 0.0 there)\n"
        "        a = a.to(tl.float32)\n"
        "        b = b.to(tl.float32)\n"
        f"    tl.store(out_ptr + out_off, a {symbol} b, mask=mask)\n"
    )
    kernel = strided_kernel(f"_{op}_kernel", ("a", "b", "out"), body, constexprs=("CT",))
    return PRELUDE + LAUNCHER + kernel + _CMP_SOLUTION.replace("OP_", f"{op}_").replace(
        "_OP_kernel", f"_{op}_kernel")


# Where rounding to a dtype stops telling neighbours apart: integers just above 2**(mantissa
# bits) collapse when cast to that float dtype (int64 ones even in float64).
_CLUSTER = {"float16": 2048.0, "bfloat16": 256.0, "float32": 2.0**24, "float64": 2.0**53,
            "int32": 2**24, "int64": 2**60}


def comparison_values(shape: Sequence[int], dtype: str, gen: torch.Generator, *,
                      layout: str = "contiguous", near: float | None = None,
                      plain: bool = False) -> torch.Tensor:
    """Operands for comparisons: values that often tie across two draws.

    Half-integers in [-3, 3] (signed zeros included), a cluster of integers around the dtype's
    last exactly-representable run (so casts to a float dtype merge neighbours), large
    magnitudes and, for floats, inf, -inf and nan. With ``near`` (a Scalar overload's number),
    a third of the elements are that number rounded to ``dtype`` or one of its neighbours.
    ``plain``: the half-integers alone, cheap to build for large benchmark operands.
    """
    shape = tuple(shape)
    dt = dtype_from_name(dtype)
    if dt == torch.bool:
        return with_layout(torch.randint(0, 2, shape, generator=gen).bool(), layout)
    t = torch.randint(-6, 7, shape, generator=gen, dtype=torch.int16).to(dt)
    kind = torch.randint(0, 100, () if plain else shape, generator=gen, dtype=torch.int16)

    def fill(mask: torch.Tensor, values: Callable[[int], torch.Tensor]) -> None:
        t[mask] = values(int(mask.sum())).to(dt)

    def cluster(k: int) -> torch.Tensor:
        offset = torch.randint(-2, 3, (k,), generator=gen, dtype=torch.int64)
        sign = torch.randint(0, 2, (k,), generator=gen, dtype=torch.int64) * 2 - 1
        if dt.is_floating_point:
            return (offset.double() + _CLUSTER[dtype]) * sign
        return (offset + int(_CLUSTER[dtype])) * sign

    if dt.is_floating_point:
        t *= 0.5  # half-integers: exact in every float dtype
    if plain:
        return with_layout(t, layout)
    fill(kind < 15, cluster)
    if dt.is_floating_point:
        fill((kind >= 15) & (kind < 20),
             lambda k: torch.randn(k, generator=gen, dtype=torch.float64) * 1e4)
        specials = torch.tensor([math.inf, -math.inf, math.nan], dtype=dt)
        fill((kind >= 20) & (kind < 23),
             lambda k: specials[torch.randint(0, 3, (k,), generator=gen)])
        fill((kind >= 23) & (kind < 26) & (t == 0), lambda k: torch.full((k,), -0.0))
    if near is not None:
        if dt.is_floating_point:
            r = torch.full((), near, dtype=dt)
            opts = torch.stack([r, torch.nextafter(r, torch.full((), math.inf, dtype=dt)),
                                torch.nextafter(r, torch.full((), -math.inf, dtype=dt))])
        else:
            r0 = math.floor(near)
            opts = torch.tensor([r0 - 1, r0, r0 + 1], dtype=torch.int64)
        fill(kind >= 66, lambda k: opts[torch.randint(0, 3, (k,), generator=gen)])
    return with_layout(t, layout)


class ComparisonSpec(OperatorSpec):
    """Shared body of the eq / gt / le problems; a subclass sets ``op``, ``symbol``, ``word``,
    ``torch_op``, ``solution`` and ``negatives`` and registers itself."""

    op: ClassVar[str]
    symbol: ClassVar[str]  # the Python / Triton operator
    word: ClassVar[str]  # "equal to", ...
    torch_op: ClassVar[Callable[..., torch.Tensor]]
    bitwise_deterministic = True

    @classmethod
    def make_entry_points(cls, op: str, word: str) -> tuple[EntryPoint, ...]:
        return (
            EntryPoint(f"{op}_Tensor", f"{op}_Tensor(self: Tensor, other: Tensor) -> Tensor",
                       f"Elementwise `self {word} other` (broadcast) as a bool tensor."),
            EntryPoint(f"{op}_Scalar", f"{op}_Scalar(self: Tensor, other: Scalar) -> Tensor",
                       f"Elementwise `self {word} other` for a Python number other, as a bool "
                       "tensor of self's shape."),
            EntryPoint(f"{op}_Tensor_out",
                       f"{op}_Tensor_out(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor",
                       "Writes the Tensor overload's result into out (bool, of the broadcast "
                       "shape) and returns out."),
            EntryPoint(f"{op}_Scalar_out",
                       f"{op}_Scalar_out(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor",
                       "Writes the Scalar overload's result into out (bool, of self's shape) "
                       "and returns out."),
        )

    @classmethod
    def make_description(cls, op: str, symbol: str, word: str) -> str:
        return (
            f"Elementwise comparison `self {symbol} other` ({word}), following PyTorch's "
            f"`torch.{op}`; the result is a bool tensor. Tensor overloads broadcast self and "
            "other; inputs may be non-contiguous (transposed or strided), 0-d or empty, with up "
            "to 6 dims. Dtypes: bool, int32, int64, float16, bfloat16, float32, float64, and "
            "mixed pairs of them: both operands are first converted to PyTorch's result type "
            "(`torch.result_type(self, other)`: e.g. int32 with float32 compares in float32, "
            "float16 with bfloat16 in float32, int32 with int64 in int64, and a 0-d tensor or a "
            "Python number does not raise a dimensioned tensor's dtype within its category), "
            "then compared exactly in that type. So a Scalar is rounded to that type first "
            "(100.001 against a float16 tensor is 100.0), int32 values above 2**24 round when "
            "compared with float32, and int64 values must never go through a float. NaN "
            f"compares false (so `{op}` with NaN is False); -0.0 equals 0.0. Out overloads "
            "write a bool `out` already of the result's shape."
        )

    def cases(self) -> Sequence[Case]:
        op = self.op
        T, S, TO, SO = f"{op}_Tensor", f"{op}_Scalar", f"{op}_Tensor_out", f"{op}_Scalar_out"
        cs = [
            case(T, "float32", (63, 145), other=(63, 145), cpu=True),
            case(T, "float16", (33, 65), other=(65,), layout="transposed", cpu=True),
            case(T, "bfloat16", (7, 17, 31), other=(17, 1), cpu=True),
            case(T, "int32", (33, 65), other=(33, 65), other_dtype="float32", cpu=True),
            case(T, "float16", (40, 30), other=(), other_dtype="float32", cpu=True),
            case(T, "bool", (20, 30), other=(20, 30), cpu=True),
            case(T, "float32", (), other=(), cpu=True),
            case(T, "float32", (0, 7), other=(7,), cpu=True),
            case(S, "float16", (49, 63), other=100.001, cpu=True),
            case(S, "bfloat16", (45, 41), other=0.001, cpu=True),
            case(S, "int32", (2065,), other=16777216.0, cpu=True),
            case(TO, "int64", (7, 17, 31), other=(7, 17, 31), cpu=True),
            case(SO, "float16", (24, 50), other=0.999, layout="strided", cpu=True),
        ]
        for dt in FLOATS:
            cs += [
                case(T, dt, (1024, 1024), other=(1024, 1024)),
                case(T, dt, (16, 7, 57, 32, 29), other=(1, 7, 1, 32, 1)),
                case(S, dt, (20, 320, 15), other=-111.999),
                case(S, dt, (511, 257), other=-0.999, layout="transposed"),
                case(TO, dt, (2, 3, 4, 5, 6), other=(4, 1, 6), layout="strided"),
                case(SO, dt, (4097,), other=0.5),
            ]
        cs += [
            case(T, "float64", (4097,), other=(4097,)),
            case(T, "bfloat16", (5, 7, 11, 13), other=(5, 7, 11, 13), other_dtype="float16"),
            case(T, "int32", (511, 257), other=(257,), other_dtype="int64"),
            case(T, "int64", (529,), other=(), layout="transposed"),
            case(T, "bool", (63, 145), other=(145,), other_dtype="int32"),
            case(S, "int64", (2065,), other=2**60 + 1),
            case(S, "int32", (33, 65), other=-3, layout="transposed"),
            case(S, "float32", (4097,), other=16777217.0),
            case(SO, "int32", (511, 257), other=3.0),
            case(TO, "float32", (145, 63), other=(145, 63), other_dtype="float64"),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        op = self.op
        out = []
        for dt in ("float16", "bfloat16", "float32", "int32", "int64"):
            rows = rng.randrange(1, 40 if small else 700)
            cols = rng.randrange(1, 60 if small else 900)
            layout = rng.choice(["contiguous", "transposed", "strided"])
            if rng.random() < 0.5:
                other: object = rng.choice([(rows, cols), (cols,), (rows, 1), ()])
                entry = rng.choice([f"{op}_Tensor", f"{op}_Tensor_out"])
            else:
                numbers = [0.5, -0.999, 100.001, 0.001, -111.999, 3]
                if dt not in ("float16", "bfloat16"):  # (a half overflows or rounds it away)
                    numbers.append(16777217.0)
                other = rng.choice(numbers)
                entry = rng.choice([f"{op}_Scalar", f"{op}_Scalar_out"])
            out.append(case(entry, dt, (rows, cols), other=other, layout=layout, cpu=small))
        return out[:3] if small else out

    def benchmark_cases(self) -> Sequence[Case]:
        op = self.op
        # 100-150 MB of traffic each
        return [
            case(f"{op}_Tensor", "float32", (4096, 4096), other=(4096, 4096), plain=True),
            case(f"{op}_Tensor", "bfloat16", (8192, 4096), other=(4096,), plain=True),
            case(f"{op}_Scalar", "float16", (8192, 4096), other=0.5, plain=True),
            case(f"{op}_Tensor", "int32", (4096, 4096), other=(4096, 4096), plain=True),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        plain = c.get("plain", False)
        other = c["other"]
        if isinstance(other, tuple):
            a = comparison_values(c.shape, c.dtype, gen, layout=layout, plain=plain)
            b = comparison_values(other, c.get("other_dtype", c.dtype), gen, layout=layout,
                                  plain=plain)
            shape = broadcast_shapes(a.shape, b.shape)
        else:
            a = comparison_values(c.shape, c.dtype, gen, layout=layout,
                                  near=None if plain else other, plain=plain)
            b = other
            shape = a.shape
        if c.entry.endswith("_out"):
            return out_call(c.entry, (a, b), "out", shape, torch.bool)
        return Call(c.entry, (a, b))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        a, b = call.args[0], call.args[1]
        common = torch.result_type(a, b)
        if not isinstance(b, torch.Tensor):
            b = torch.full((), b, dtype=common)  # the number rounded to the result type
        a, b = a.to(common), b.to(common)
        if common.is_floating_point:
            a, b = a.double(), b.double()  # exact: both already hold values of `common`
        elif common != torch.bool:
            a, b = a.long(), b.long()
        return (Expected(type(self).torch_op(a, b), torch.bool),)

    def baseline(self, call: Call) -> object:
        fn = type(self).torch_op
        if "out" in call.kwargs:
            return fn(call.args[0], call.args[1], out=call.kwargs["out"])
        return fn(call.args[0], call.args[1])

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        other = c["other"]
        if isinstance(other, tuple):
            n = numel(broadcast_shapes(tuple(c.shape), other))
            b_bytes = numel(other) * itemsize(c.get("other_dtype", c.dtype))
        else:
            b_bytes = 0
        return Cost(flops=float(n),
                    bytes=float(numel(c.shape) * itemsize(c.dtype) + b_bytes + n),
                    dtype=c.dtype if c.dtype in FLOATS else "float32")
