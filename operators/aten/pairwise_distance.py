"""aten::pairwise_distance — ``norm_p(x1 - x2 + eps)`` over the last dim of the broadcast inputs
(overload default; ATen has no out= variant)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import torch

from operators.inputs import broadcast_shapes, randn, sprinkle_specials, with_layout
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
    Tier,
    Tolerance,
    case,
    dtype_from_name,
    dtype_name,
    unit_roundoff,
)

SOLUTION = r'''
import math

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

MAX_DIMS = 5          # the reduced (last) dim plus up to four others
MAX_BLOCK_D = 1024
TILE = 4096           # elements per program and step


@triton.jit
def _pdist_kernel(a_ptr, b_ptr, out_ptr, n_rows, D, eps, p, inv_p,
                  s1, s2, s3,
                  a0, a1, a2, a3, ad,
                  b0, b1, b2, b3, bd,
                  MODE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    rows = (pid * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    row_mask = rows < n_rows
    rem = rows
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    a_row = i0 * a0 + i1 * a1 + i2 * a2 + i3 * a3
    b_row = i0 * b0 + i1 * b1 + i2 * b2 + i3 * b3
    cols = tl.arange(0, BLOCK_D).to(tl.int64)
    acc = tl.zeros([BLOCK_R, BLOCK_D], dtype=tl.float32)
    nans = tl.zeros([BLOCK_R, BLOCK_D], dtype=tl.int32)
    for start in range(0, D, BLOCK_D):
        c = start + cols
        mask = row_mask[:, None] & (c[None, :] < D)
        a = tl.load(a_ptr + a_row[:, None] + c[None, :] * ad, mask=mask, other=0.0)
        b = tl.load(b_ptr + b_row[:, None] + c[None, :] * bd, mask=mask, other=0.0)
        v = tl.abs(a.to(tl.float32) - b.to(tl.float32) + eps)
        # max/min reductions may drop NaN on GPUs: count NaNs and put them back at the end
        nans += (v != v).to(tl.int32)
        if MODE == 1:
            term = v
        elif MODE == 2:
            term = v * v
        elif MODE == 3:
            term = v
        else:
            term = libdevice.pow(v, p)
        term = tl.where(mask, term, 0.0)
        if MODE == 3:
            acc = tl.maximum(acc, term)
        else:
            acc += term
    if MODE == 3:
        r = tl.max(acc, axis=1)
    else:
        r = tl.sum(acc, axis=1)
    if MODE == 2:
        r = tl.sqrt(r)
    if MODE == 4:
        r = libdevice.pow(r, inv_p)
    r = tl.where(tl.sum(nans, axis=1) > 0, float("nan"), r)
    tl.store(out_ptr + rows, r.to(out_ptr.dtype.element_ty), mask=row_mask)


def pairwise_distance(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    a, b = torch.broadcast_tensors(x1, x2)
    if a.dim() == 0:
        a = a.reshape(1)
        b = b.reshape(1)
    shape = list(a.shape)
    if len(shape) > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dims supported")
    lead = shape[:-1]
    out = torch.empty(lead + [1] if keepdim else lead, dtype=x1.dtype, device=x1.device)
    if x1.dim() == 0 and x2.dim() == 0:
        out = torch.empty((), dtype=x1.dtype, device=x1.device)
    n_rows = 1
    for s in lead:
        n_rows *= s
    if n_rows == 0:
        return out
    D = shape[-1]
    p = float(p)
    if p == 1.0:
        mode = 1
    elif p == 2.0:
        mode = 2
    elif math.isinf(p) and p > 0:
        mode = 3
    else:
        mode = 4
    pad = MAX_DIMS - 1 - len(lead)
    sizes = [1] * pad + lead
    a_s = [0] * pad + list(a.stride()[:-1])
    b_s = [0] * pad + list(b.stride()[:-1])
    block_d = min(triton.next_power_of_2(max(D, 1)), MAX_BLOCK_D)
    block_r = max(1, min(triton.next_power_of_2(n_rows), TILE // block_d))
    grid = (triton.cdiv(n_rows, block_r),)
    _pdist_kernel[grid](a, b, out, n_rows, D, float(eps), p, 1.0 / p if mode == 4 else 1.0,
                        *sizes[1:], *a_s, a.stride(-1), *b_s, b.stride(-1),
                        MODE=mode, BLOCK_R=block_r, BLOCK_D=block_d,
                        num_warps=8 if block_r * block_d >= 2048 else 4)
    return out
'''

# Forgets eps: right to a few ulps on generic rows, but a row where x1 == x2 must come out as
# eps * D ** (1 / p), not 0.
NEGATIVE_NO_EPS = SOLUTION.replace(
    "v = tl.abs(a.to(tl.float32) - b.to(tl.float32) + eps)",
    "v = tl.abs(a.to(tl.float32) - b.to(tl.float32))")

# Euclidean whatever p says: right for p = 2 (the default) only.
NEGATIVE_ALWAYS_L2 = SOLUTION.replace("    if p == 1.0:\n        mode = 1\n    elif p == 2.0:",
                                      "    if False:\n        mode = 1\n    elif True:")

_FLOATS = ("float16", "bfloat16", "float32")
_INF = float("inf")
# roundings other than the float32 sum, in units of the output's roundoff (see reference)
_OTHER_ULPS = {"float32": 8.0, "float16": 4.0, "bfloat16": 4.0}


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


_BIG = 1 << 22  # from this many elements (benchmark sizes) inputs are drawn in float32


def _randn(shape: Sequence[int], dtype: str, gen: torch.Generator, *, std: float = 1.0,
           layout: str = "contiguous") -> torch.Tensor:
    """``operators.inputs.randn``, except that benchmark-sized tensors are drawn in float32: the
    float64 draw is 4x slower and would dominate ``validate``'s time."""
    if _numel(shape) < _BIG:
        return randn(shape, dtype, gen, std=std, layout=layout)
    x = torch.randn(tuple(shape), generator=gen, dtype=torch.float32) * std
    return with_layout(x.to(dtype_from_name(dtype)), layout)


@register("aten::pairwise_distance", version=1, kind=Kind.COMPUTE)
class PairwiseDistance(OperatorSpec):
    entry_points = (
        EntryPoint("pairwise_distance",
                   "pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, "
                   "eps: float = 1e-06, keepdim: bool = False) -> Tensor",
                   "The p-norm of x1 - x2 + eps over the last dim of the broadcast inputs."),
    )
    description = (
        "Pairwise distance, following PyTorch's `torch.pairwise_distance(x1, x2, p, eps, "
        "keepdim)` (as `torch.nn.functional.pairwise_distance`): x1 and x2 broadcast against "
        "each other (e.g. (N, D) with (D,) or (1, D)); with `d = x1 - x2 + eps` (eps is added "
        "to every component, not used as a clamp) the result is the p-norm of d over the last "
        "dim of the broadcast shape: `(sum |d|**p) ** (1 / p)` for p > 0 (p may be 1, 2, 3, a "
        "fraction such as 0.5, or float('inf') for `max |d|`). The result drops that dim, or "
        "keeps it with size 1 when keepdim is True; two 1-D inputs give a 0-d result. Rows "
        "where x1 == x2 give `eps * D ** (1 / p)`. The result has the inputs' dtype (float16, "
        "bfloat16 or float32); inputs may be non-contiguous and have up to 5 dims; a NaN in a "
        "row gives NaN (for p = inf too), an inf gives inf. Compute in float32 and round once."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_eps", "computes the norm of x1 - x2 without eps: rows with x1 == x2 "
                 "give 0", NEGATIVE_NO_EPS),
        Negative("always_euclidean", "computes the 2-norm whatever p is", NEGATIVE_ALWAYS_L2),
    )

    def tolerance(self, c: Case, dtype: torch.dtype) -> Tolerance:
        # The error bound is all in the reference's scale, in units of the output's roundoff;
        # the absolute floor (4 smallest normals) absorbs flushed or subnormal half results.
        return Tolerance.ulps(dtype, 1, atol_ulps=4)

    def cases(self) -> Sequence[Case]:
        e = "pairwise_distance"
        cs: list[Case] = [
            case(e, "float32", (63, 145), x2=(63, 145), p=2.0, same_rows=True, cpu=True),
            case(e, "float16", (49, 63), x2=(63,), p=1.0, cpu=True),
            case(e, "bfloat16", (7, 17, 31), x2=(7, 17, 31), p=_INF, cpu=True),
            case(e, "float32", (33, 65), x2=(33, 65), p=0.5, layout="transposed", cpu=True),
            case(e, "float32", (24, 50), x2=(24, 50), p=3.0, layout="strided", same_rows=True,
                 keepdim=True, cpu=True),
            case(e, "float32", (100,), x2=(100,), p=2.0, cpu=True),
            case(e, "float32", (0, 16), x2=(0, 16), p=2.0, cpu=True),
            case(e, "float32", (25, 33), x2=(25, 33), p=_INF, specials=True, cpu=True),
            case(e, "float32", (40, 30), x2=(1, 30), p=2.0, defaults=True, cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case(e, dt, (4096, 256), x2=(4096, 256), p=2.0),
                case(e, dt, (1000, 999), x2=(999,), p=1.0),
                case(e, dt, (511, 257), x2=(511, 257), p=_INF, layout="transposed"),
                case(e, dt, (16, 7, 57, 29), x2=(7, 1, 29), p=3.0, keepdim=True),
                case(e, dt, (2, 3, 4, 5, 129), x2=(2, 3, 4, 5, 129), p=0.5, layout="strided"),
                case(e, dt, (64, 4099), x2=(64, 4099), p=2.0, same_rows=True, std=10.0),
                case(e, dt, (300, 64), x2=(300, 64), p=2.0, specials=True),
                case(e, dt, (7,), x2=(7,), p=1.5),
            ]
        cs.append(case(e, "float32", (128, 128), x2=(128, 128), p=2.0, eps=0.0, same_rows=True))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS if not small else ("float32", rng.choice(("float16", "bfloat16"))):
            rows = rng.randrange(1, 60 if small else 3000)
            d = rng.randrange(1, 70 if small else 3000)
            x2 = rng.choice([(rows, d), (d,), (1, d)])
            p = rng.choice([1.0, 2.0, 3.0, 0.5, _INF])
            # no x1 == x2 rows with p < 1: eps * D ** (1 / p) is then large, and PyTorch's
            # float16 path rounds eps to a float16 subnormal (a few % off) before the sum
            out.append(case("pairwise_distance", dt, (rows, d), x2=x2, p=p,
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            keepdim=rng.random() < 0.3, same_rows=x2 == (rows, d) and p >= 1,
                            std=rng.choice([0.1, 1.0, 10.0]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        e = "pairwise_distance"
        return [
            # >= 64 MB of traffic each, no more (inputs are drawn in float64 on the CPU)
            case(e, "float32", (65536, 128), x2=(65536, 128), p=2.0),
            case(e, "bfloat16", (65536, 256), x2=(65536, 256), p=1.0),
            case(e, "float16", (8192, 4096), x2=(4096,), p=2.0),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        std = c.get("std", 1.0)
        a = _randn(c.shape, c.dtype, gen, std=std)
        b = _randn(c["x2"], c.dtype, gen, std=std)
        if c.get("same_rows") and a.dim() >= 2 and a.shape == b.shape:
            b[::3] = a[::3]  # distance eps * D ** (1 / p) exactly where x1 == x2
        if c.get("specials"):
            a = sprinkle_specials(a, gen, fraction=0.01)
        a, b = with_layout(a, layout), with_layout(b, layout)
        if c.get("defaults"):
            return Call(c.entry, (a, b))
        return Call(c.entry, (a, b), {"p": c["p"], "eps": c.get("eps", 1e-6),
                                      "keepdim": bool(c.get("keepdim", False))})

    @staticmethod
    def _operands(call: Call) -> tuple[torch.Tensor, torch.Tensor, float, float, bool]:
        k = call.kwargs
        return call.args[0], call.args[1], k.get("p", 2.0), k.get("eps", 1e-6), \
            k.get("keepdim", False)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x1, x2, p, eps, keepdim = self._operands(call)
        a, b = x1.double(), x2.double()
        diff = a - b
        value = torch.linalg.vector_norm(diff + eps, ord=p, dim=-1, keepdim=keepdim)
        # Every component of d carries ~2 roundings relative to |x1 - x2| + eps (PyTorch rounds
        # x1 - x2 and + eps to the input dtype); the p-norm is monotone and homogeneous, so the
        # result moves by as much relative to norm_p(|x1 - x2| + eps). Add pow and the root
        # (a couple of ulps each, p >= 0.5) and the output's rounding: _OTHER_ULPS. The float32
        # sum of D positive terms adds up to (D - 1) u32 relative in any summation order (a
        # tree does far better; PyTorch's CPU norm for p != 2 sums sequentially and reaches
        # ~900 u at D = 4099, p = 0.5, on rows where x1 == x2), divided by p through the root;
        # max (p = inf) is exact.
        base = torch.linalg.vector_norm(diff.abs() + abs(eps), ord=p, dim=-1, keepdim=keepdim)
        d = diff.shape[-1] if diff.dim() > 0 else 1
        growth = 0.0 if math.isinf(p) else (d - 1) / p
        ratio = unit_roundoff(torch.float32) / unit_roundoff(x1.dtype)
        scale = base * (_OTHER_ULPS[dtype_name(x1.dtype)] + growth * ratio)
        return (Expected(value, x1.dtype, scale),)

    def baseline(self, call: Call) -> object:
        x1, x2, p, eps, keepdim = self._operands(call)
        return torch.pairwise_distance(x1, x2, p, eps, keepdim)

    def cost(self, c: Case) -> Cost:
        n = _numel(broadcast_shapes(c.shape, c["x2"]))
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        p = c["p"]
        per = 3.0 if p in (1.0, 2.0) or math.isinf(p) else 20.0  # general p: pow
        reads = _numel(c.shape) + _numel(c["x2"])
        return Cost(flops=per * n, bytes=float(size * (reads + n // max(c.shape[-1], 1))),
                    dtype="float32")
