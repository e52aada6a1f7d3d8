"""aten::sgn — the sign of each element, ``x / |x|`` for complex (overloads default, out); real
floats, integers and complex64."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._unary import (
    FLOATS,
    INF,
    NAN,
    Unary,
    describe,
    half_denormals,
    ignores_strides,
    pick,
    solution,
)
from operators.inputs import with_layout
from operators.registry import register
from operators.spec import (
    Call,
    Case,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    Tier,
    Tolerance,
    case,
)

OP = r'''
@triton.jit
def _op(x, p0, p1):
    # (x > 0) - (x < 0): 0 for zeros and, as in PyTorch, for NaN
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


@triton.jit
def _sgn_complex_kernel(x_ptr, out_ptr, n,
                        s1, s2, s3, s4, s5,
                        x0, x1, x2, x3, x4, x5,
                        o0, o1, o2, o3, o4, o5,
                        BLOCK: tl.constexpr):
    # x_ptr / out_ptr are float32 views (real, imag pairs); strides in float32 elements
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
    re_off = i0 * x0 + i1 * x1 + i2 * x2 + i3 * x3 + i4 * x4 + i5 * x5
    out_off = i0 * o0 + i1 * o1 + i2 * o2 + i3 * o3 + i4 * o4 + i5 * o5
    re = tl.load(x_ptr + re_off, mask=mask, other=0.0)
    im = tl.load(x_ptr + re_off + 1, mask=mask, other=0.0)
    a = libdevice.hypot(re, im)  # no overflow/underflow of re^2 + im^2
    nz = a != 0.0  # NaN counts as nonzero: NaN results
    tl.store(out_ptr + out_off, tl.where(nz, re / a, 0.0), mask=mask)
    tl.store(out_ptr + out_off + 1, tl.where(nz, im / a, 0.0), mask=mask)
'''

WRAPPERS = '''

def _sgn_complex(x, out):
    n = out.numel()
    if n == 0:
        return out
    # complex64 as (..., 2) float32 views; unsqueeze first so any strides work
    xr = x.unsqueeze(-1).view(torch.float32)
    orr = out.unsqueeze(-1).view(torch.float32)
    sizes = _pad(out.shape, 1)
    grid = (triton.cdiv(n, 1024),)
    _sgn_complex_kernel[grid](xr, orr, n, *sizes[1:], *_pad(xr.stride()[:-1], 0),
                              *_pad(orr.stride()[:-1], 0), BLOCK=1024)
    return out


def sgn(self):
    out = _result_like(self, self.dtype)
    if self.dtype.is_complex:
        return _sgn_complex(self, out)
    return _launch(self, out)


def sgn_out(self, *, out):
    if self.dtype.is_complex:
        return _sgn_complex(self, out)
    return _launch(self, out)
'''

SOLUTION = solution(OP, WRAPPERS, name="sgn", libdevice=True)

# |z| as sqrt(re^2 + im^2): re^2 overflows (or underflows) for huge (or tiny) components.
NEGATIVE_NAIVE_ABS = SOLUTION.replace("    a = libdevice.hypot(re, im)  # no overflow/underflow "
                                      "of re^2 + im^2",
                                      "    a = tl.sqrt(re * re + im * im)")

# numpy's convention: NaN propagates (PyTorch's sgn gives 0 for NaN).
NEGATIVE_NAN_PROPAGATES = SOLUTION.replace(
    "    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)",
    "    return tl.where(x != x, x, (x > 0).to(x.dtype) - (x < 0).to(x.dtype))")


@register("aten::sgn", version=1, kind=Kind.COMPUTE)
class Sgn(Unary):
    op = "sgn"
    int_dtypes = ("int32", "int64")
    entry_points = (
        EntryPoint("sgn", "sgn(self: Tensor) -> Tensor",
                   "The sign of each element: -1, 0 or 1, in self's dtype."),
        EntryPoint("sgn_out", "sgn_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes sgn(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "The elementwise sign, following PyTorch's `torch.sgn`. Real inputs: `out = (x > 0) - "
        "(x < 0)` in the input's dtype: 1 for positive values (+inf and subnormals included), "
        "-1 for negative ones, 0 for ±0 and — as PyTorch does — 0 for NaN.", FLOATS,
        ints="int32 and int64 inputs (full range) give exact -1/0/1 of the same dtype.",
        extra="complex64 inputs (any strides; Triton has no complex type, so view them as "
              "float32 pairs, e.g. `x.unsqueeze(-1).view(torch.float32)`) give the complex64 "
              "`x / |x|` (0 for 0); components range from 1e-30 to 1e30, so compute |x| "
              "without overflow or underflow; NaN components give NaN (infinite ones are not "
              "tested).")
    solution = SOLUTION
    negatives = (
        Negative("nan_propagates", "returns NaN for NaN inputs (numpy's sign) where PyTorch's "
                 "sgn gives 0", NEGATIVE_NAN_PROPAGATES),
        Negative("naive_complex_abs", "computes |z| as sqrt(re^2 + im^2), which overflows or "
                 "underflows for huge or tiny complex values", NEGATIVE_NAIVE_ABS),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # -1, 0 and 1 are exact in every dtype. complex64: per component, relative to 1 (|sgn| = 1;
    # a relative perturbation u of x turns x/|x| by ~u): CUDA's hypotf (<= 3 ulp) and a
    # division (1 ulp): <= 8 u.
    tolerances = {
        "float16": Tolerance(0.0, 0.0),
        "bfloat16": Tolerance(0.0, 0.0),
        "float32": Tolerance(0.0, 0.0),
        "complex64": Tolerance.ulps("complex64", 8),
    }
    flops_per_element = 2.0

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        # zeros are common in practice (e.g. sgn in abs' gradient of ReLU outputs)
        z = torch.randn(n, generator=gen, dtype=torch.float64)
        return pick(n, gen, z, z, z * 1e-3, torch.zeros(n, dtype=torch.float64))

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        # float32-range subnormals are left out: a flush to 0 would turn ±1 into 0
        fi = torch.finfo(dtype)
        return [INF, -INF, NAN, 0.0, -0.0, fi.max, -fi.max, *half_denormals(dtype)]

    def extra_cases(self) -> list[Case]:
        return [
            case("sgn", "complex64", (49, 63), edge=True, cpu=True),
            case("sgn", "complex64", (33, 65), layout="transposed", cpu=True),
            case("sgn_out", "complex64", (7, 17, 31), layout="strided", edge=True, cpu=True),
            case("sgn", "complex64", ()),
            case("sgn", "complex64", (0, 3)),
            case("sgn", "complex64", (1024, 1024), edge=True),
            case("sgn", "complex64", (511, 257), layout="strided"),
            case("sgn_out", "complex64", (63, 145), out_layout="transposed", edge=True),
        ]

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        rows = rng.randrange(2, 40 if small else 700)
        cols = rng.randrange(2, 40 if small else 700)
        extra = case(rng.choice(["sgn", "sgn_out"]), "complex64", (rows, cols), cpu=small,
                     layout=rng.choice(["contiguous", "transposed", "strided"]),
                     edge=rng.random() < 0.5)
        return [*super().hidden_cases(rng, tier), extra]

    def benchmark_cases(self) -> Sequence[Case]:
        return [*super().benchmark_cases(), case("sgn", "complex64", (4096, 4096))]

    def make_input(self, c: Case, gen: torch.Generator) -> torch.Tensor:
        if c.dtype != "complex64":
            return super().make_input(c, gen)
        n = 1
        for d in c.shape:
            n *= d
        re = self.sample(n, c, gen)
        im = self.sample(n, c, gen)
        z = torch.complex(re, im)
        if c.get("edge") and n > 0:
            nan = float("nan")
            specials = torch.tensor([0j, 1e30 + 1e30j, -3e-30 + 1e-30j, 2.5 + 0j, -4j,
                                     complex(nan, 0.0), complex(1.0, nan), 1e30 - 1e-30j],
                                    dtype=torch.complex128)
            k = max(1, n // 16)
            pos = torch.randperm(n, generator=gen)[:k]
            z[pos] = specials.repeat(k // len(specials) + 1)[:k]
        x = z.to(torch.complex64).reshape(c.shape)
        return with_layout(x, c.get("layout", "contiguous"))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x = self.input_of(call)
        if not x.dtype.is_complex:
            return super().reference(call)
        z = x.to(torch.complex128)
        a = z.abs()
        zero = a == 0
        y = torch.where(zero, torch.zeros_like(z), z / torch.where(zero, 1.0, a))
        scale = torch.where(zero, torch.zeros_like(z), torch.full_like(z, 1 + 1j))
        return (Expected(y, x.dtype, scale),)

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, None]:
        return (x > 0).double() - (x < 0).double(), None

    def ref_int(self, x: torch.Tensor, call: Call) -> torch.Tensor:
        return (x > 0).long() - (x < 0).long()
