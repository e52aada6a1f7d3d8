"""Shared machinery of the data-movement problems (clone, copy_, to, _to_copy, rot90, cat, stack).

Registers nothing. It holds:

- ``COPY_SOURCE``: the Triton part every reference solution of these problems starts with — a
  strided gather/scatter copy with dtype conversion (PyTorch's conversion rules: round to
  nearest even for float narrowing, truncation toward zero for float -> int, two's-complement
  wrapping between ints, ``x != 0`` for -> bool). Each problem's ``solution`` string is
  ``COPY_SOURCE`` plus its own wrappers, so it stays one self-contained source.
- input builders whose values exercise a given conversion (rounding ties, overflow to inf,
  half-precision subnormals, truncation of negative fractions, integer wrapping, NaN -> True),
  kept inside the range where PyTorch's conversion is defined;
- the exact reference of a conversion, and the tolerance table (zero: every covered conversion
  is correctly rounded or exact, so the only right answer is PyTorch's bit pattern, up to the
  sign of zero and NaN payloads, which the comparison does not look at).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.inputs import with_layout
from operators.spec import Tolerance, dtype_from_name

COPY_SOURCE = r'''
import torch
import triton
import triton.language as tl

MAX_DIMS = 6
BLOCK = 2048


@triton.jit
def _flat_copy_kernel(src_ptr, dst_ptr, n, src_base, BLOCK: tl.constexpr):
    # Both sides dense in the same order: one linear index, no index arithmetic.
    pid = tl.program_id(0)
    idx = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    x = tl.load(src_ptr + src_base + idx, mask=mask)
    tl.store(dst_ptr + idx, x.to(dst_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _strided_copy_kernel(src_ptr, dst_ptr, n, src_base,
                         s1, s2, s3, s4, s5,
                         a0, a1, a2, a3, a4, a5,
                         o0, o1, o2, o3, o4, o5,
                         BLOCK: tl.constexpr):
    # dst[i] = src[i] for every multi-index i of the (at most 6-D) iteration space; the
    # innermost dim is the one dst is densest along, so stores coalesce.
    pid = tl.program_id(0)
    idx = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    rem = idx
    i5 = rem % s5
    rem = rem // s5
    i4 = rem % s4
    rem = rem // s4
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    src_off = src_base + i0 * a0 + i1 * a1 + i2 * a2 + i3 * a3 + i4 * a4 + i5 * a5
    dst_off = i0 * o0 + i1 * o1 + i2 * o2 + i3 * o3 + i4 * o4 + i5 * o5
    x = tl.load(src_ptr + src_off, mask=mask)
    tl.store(dst_ptr + dst_off, x.to(dst_ptr.dtype.element_ty), mask=mask)


def _plan(shape, src_strides, dst_strides):
    """(size, src stride, dst stride) per dim: size-1 dims dropped, ordered by dst stride
    (outermost first), neighbours merged where both sides are contiguous across them."""
    dims = [(s, a, o) for s, a, o in zip(shape, src_strides, dst_strides) if s != 1]
    dims = sorted(dims, key=lambda d: -abs(d[2]))
    merged = []
    for s, a, o in dims:
        if merged:
            ps, pa, po = merged[-1]
            if pa == a * s and po == o * s:
                merged[-1] = (ps * s, a, o)
                continue
        merged.append((s, a, o))
    return merged


def _copy(dst, src, src_strides=None, src_base=0):
    """dst[...] = src[...] converted to dst's dtype. ``src`` is read with dst's shape and
    ``src_strides`` (default: its own strides; a broadcast src comes expanded), starting
    ``src_base`` elements after its data pointer (negative strides are fine)."""
    n = dst.numel()
    if n == 0:
        return dst
    if src_strides is None:
        src_strides = src.stride()
    dims = _plan(dst.shape, src_strides, dst.stride())
    if len(dims) == 0:
        dims = [(1, 0, 0)]
    grid = (triton.cdiv(n, BLOCK),)
    if len(dims) == 1 and dims[0][1] == 1 and dims[0][2] == 1:
        _flat_copy_kernel[grid](src, dst, n, src_base, BLOCK=BLOCK, num_warps=8)
        return dst
    if len(dims) > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} non-mergeable dims supported")
    dims = [(1, 0, 0)] * (MAX_DIMS - len(dims)) + dims
    sizes = [d[0] for d in dims]
    a = [d[1] for d in dims]
    o = [d[2] for d in dims]
    _strided_copy_kernel[grid](src, dst, n, src_base, *sizes[1:], *a, *o,
                               BLOCK=BLOCK, num_warps=8)
    return dst
'''

# Every covered conversion is exact or correctly rounded: the answer is one bit pattern.
EXACT = {name: Tolerance(0.0, 0.0) for name in ("float16", "bfloat16", "float32", "float64")}

FLOATS = ("float16", "bfloat16", "float32", "float64")
DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32",
          "int64", "bool")
# (dst, src) conversions the full tiers go through: every float pair, float <-> int both ways,
# integer narrowing and widening across signedness, bool both ways.
PAIRS = (
    ("float16", "float32"), ("bfloat16", "float32"), ("float32", "float16"),
    ("float32", "bfloat16"), ("float16", "bfloat16"), ("bfloat16", "float16"),
    ("float64", "float32"), ("float32", "float64"), ("float64", "bfloat16"),
    ("int32", "float32"), ("int64", "bfloat16"), ("uint8", "float32"), ("int8", "float16"),
    ("int64", "float64"), ("int16", "bfloat16"), ("bool", "float32"), ("bool", "float16"),
    ("float32", "int32"), ("float16", "int64"), ("bfloat16", "int16"), ("float32", "uint8"),
    ("float64", "int64"), ("bfloat16", "bool"), ("float32", "bool"), ("int32", "bool"),
    ("int8", "int32"), ("uint8", "int8"), ("int32", "int64"), ("int64", "int32"),
    ("int16", "uint8"), ("bool", "int64"),
)
INTS = ("int8", "uint8", "int16", "int32", "int64")

# Largest finite magnitude per float dtype, as a power of two exponent (values above overflow).
_MAX_EXP = {"float16": 15, "bfloat16": 127, "float32": 127, "float64": 1023}
# Smallest magnitude worth generating: the subnormal floor (float64: its normal floor).
_MIN_EXP = {"float16": -24, "bfloat16": -133, "float32": -149, "float64": -1022}


def numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def itemsize(dtype: str | torch.dtype) -> int:
    dt = dtype_from_name(dtype) if isinstance(dtype, str) else dtype
    return torch.empty((), dtype=dt).element_size()


def _float_values(shape: tuple[int, ...], src: str, dst: str | None,
                  gen: torch.Generator, normal_only: bool = False) -> torch.Tensor:
    """Float64 values representable-ish in ``src`` that stress a conversion to ``dst``: a
    normal bulk, magnitudes spread over the exponent range where ``dst`` rounds, overflows or
    goes subnormal, exact rounding ties of ``dst``, and inf/-inf/nan."""
    n = numel(shape)
    bulk = torch.randn(n, generator=gen, dtype=torch.float64)
    lo = max(_MIN_EXP[src], _MIN_EXP.get(dst or src, -126) - 4)
    if normal_only:
        lo = max(lo, -126)
    hi = min(_MAX_EXP[src], _MAX_EXP.get(dst or src, 127) + 2)
    expo = torch.randint(lo, hi + 1, (n,), generator=gen).to(torch.float64)
    spread = torch.sign(bulk) * torch.exp2(expo) * (1 + torch.rand(n, generator=gen,
                                                                   dtype=torch.float64))
    pick = torch.rand(n, generator=gen)
    v = torch.where(pick < 0.5, bulk, spread)
    if dst in ("float16", "bfloat16") and src in ("float32", "float64"):
        # Exact halfway points between neighbours of dst: round-half-to-even decides them.
        mant = 10 if dst == "float16" else 7  # stored mantissa bits
        k = torch.randint(1 << mant, 1 << (mant + 1), (n,), generator=gen).to(torch.float64)
        tie = (k + 0.5) * torch.exp2(torch.randint(-mant - 6, -mant + 6, (n,),
                                                   generator=gen).to(torch.float64))
        tie = tie * torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0)
        v = torch.where((pick >= 0.5) & (pick < 0.65), tie, v)
    specials = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0],
                            dtype=torch.float64)
    which = torch.randint(0, 5, (n,), generator=gen)
    v = torch.where(pick >= 0.97, specials[which], v)
    return v.reshape(shape)


def _int_range(dtype: str) -> tuple[int, int]:
    if dtype == "bool":
        return 0, 2
    info = torch.iinfo(dtype_from_name(dtype))
    return int(info.min), int(info.max) + 1


# Big tensors repeat a pattern of this many elements (prime, so it never lines up with a dim):
# building every element the careful way would take seconds per benchmark case.
_PERIOD = 65_521


def make_values(shape: Sequence[int], src: str, dst: str | None, gen: torch.Generator,
                layout: str = "contiguous", cpu: bool = False) -> torch.Tensor:
    """A tensor of dtype ``src`` and ``layout`` whose values exercise conversion to ``dst``
    (None: a plain copy), within the range where PyTorch defines that conversion. ``cpu``:
    for the interpreter tier, whose bfloat16 -> float32 cast mishandles subnormals (so
    bfloat16 inputs that get converted are normal there)."""
    shape = tuple(int(d) for d in shape)
    n = numel(shape)
    if n > _PERIOD:
        pattern = make_values((_PERIOD,), src, dst, gen, cpu=cpu)
        start = int(torch.randint(0, _PERIOD, (1,), generator=gen))
        reps = (n + start) // _PERIOD + 1
        return arrange(pattern.repeat(reps)[start:start + n].reshape(shape), layout)
    sdt = dtype_from_name(src)
    normal_only = cpu and src == "bfloat16" and dst not in (None, "bfloat16")
    dst_int = dst is not None and dst not in FLOATS
    if src in FLOATS:
        if dst_int and dst is not None and dst != "bool":
            # float -> int: fractional values of both signs inside dst's range (out-of-range
            # and NaN are undefined behaviour in PyTorch); truncation toward zero decides them.
            lo, hi = _int_range(dst)
            if src == "float16":
                lo, hi = max(lo, -65504), min(hi, 65504)
            if src == "bfloat16" or hi - lo > 2**24:
                lo, hi = max(lo, -(2**24)), min(hi, 2**24)  # exactly representable integers
            width = torch.rand(shape, generator=gen, dtype=torch.float64)
            scale = torch.where(torch.rand(shape, generator=gen) < 0.5,
                                torch.full(shape, 4.0, dtype=torch.float64),
                                torch.full(shape, float(hi - 1), dtype=torch.float64))
            v = width * torch.minimum(scale, torch.tensor(float(hi - 1)))
            neg = torch.rand(shape, generator=gen) < 0.5
            if lo < 0:
                v = torch.where(neg, -torch.minimum(v, torch.tensor(float(-lo))), v)
            v = v.to(sdt)
            # the rounding to src may land exactly on hi (e.g. 255.9 -> 256 in bfloat16)
            v = torch.where(v.double() >= hi, torch.zeros_like(v), v)
        elif dst == "bool":
            v = _float_values(shape, src, src, gen, normal_only)
            zero = torch.rand(shape, generator=gen) < 0.3
            v = torch.where(zero, torch.zeros_like(v), v).to(sdt)
        else:
            v = _float_values(shape, src, dst, gen, normal_only).to(sdt)
    elif src == "bool":
        v = torch.rand(shape, generator=gen) < 0.5
    else:
        lo, hi = _int_range(src)
        hi = min(hi, 2**63 - 1)  # randint's bound must fit an int64
        if dst in ("float16", "bfloat16"):
            # int -> half rounds once while |x| <= 2**24; PyTorch goes through float32 beyond.
            lo, hi = max(lo, -(2**24)), min(hi, 2**24)
        if dst == "float16":
            lo, hi = max(lo, -70000), min(hi, 70000)  # around float16's overflow threshold
        small = torch.randint(-3, 4, shape, generator=gen, dtype=torch.int64)
        big = torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64)
        v = torch.where(torch.rand(shape, generator=gen) < 0.2, small.clamp(lo, hi - 1), big)
        v = v.to(sdt)
    return arrange(v, layout)


LAYOUTS = ("contiguous", "transposed", "strided", "channels_last", "permuted", "sliced")


def arrange(t: torch.Tensor, layout: str) -> torch.Tensor:
    """The values of ``t`` stored as ``layout``: ``operators.inputs`` layouts, plus
    ``channels_last`` (4-D), ``permuted`` (dims stored in reverse order) and ``sliced`` (the
    window ``[1:-1]`` of a tensor two bigger along every dim: row gaps and a storage offset)."""
    if t.dim() == 0 or layout in ("contiguous", "transposed", "strided"):
        return with_layout(t, layout)
    if layout == "channels_last":
        return t.contiguous(memory_format=torch.channels_last)
    if layout == "permuted":
        order = list(range(t.dim()))[::-1]
        back = [order.index(i) for i in range(t.dim())]
        return t.permute(order).contiguous().permute(back)
    if layout == "sliced":
        big = torch.zeros([d + 2 for d in t.shape], dtype=t.dtype)
        view = big[tuple(slice(1, d + 1) for d in t.shape)]
        view.copy_(t)
        return view
    raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")


def covered(dst: str, src: str, cpu: bool) -> bool:
    """Whether a (dst, src) dtype pair is in the problems' cases. float64 -> float16/bfloat16
    is not: PyTorch rounds it twice (through float32) where a direct conversion rounds once.
    The cpu tier also leaves out integer/bool/float64 -> bfloat16, which Triton's interpreter
    gets wrong (it reinterprets the value as bfloat16 bits) while GPUs convert correctly."""
    if src == "float64" and dst in ("float16", "bfloat16"):
        return False
    return not (cpu and dst == "bfloat16" and src not in ("float16", "float32", "bfloat16"))


def convert(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The exact result of PyTorch's conversion of ``x`` to ``dtype``, as an Expected value
    (float64 for float outputs). For the covered pairs the float64 detour is exact: every
    source value is representable in float64 and each narrowing rounds once."""
    y = x.double().to(dtype) if x.dtype.is_floating_point else x.to(dtype)
    return y.double() if dtype.is_floating_point else y
