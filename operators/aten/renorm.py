"""aten::renorm — rescale each slice ``self.select(dim, i)`` whose p-norm exceeds maxnorm to norm
``maxnorm`` (factor ``maxnorm / (norm + 1e-7)``); other slices unchanged (overloads default, out;
the in-place renorm_ is a separate operator)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import torch

from operators.inputs import sprinkle_specials, with_layout
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
    Out,
    Tier,
    Tolerance,
    case,
    dtype_name,
    unit_roundoff,
)

SOLUTION = r'''
import math

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

MAX_DIMS = 5          # the slice dim plus up to four others
TILE = 4096           # elements per program and step


@triton.jit
def _renorm_kernel(x_ptr, out_ptr, S, K, p, inv_p, maxnorm,
                   k1, k2, k3,
                   xk0, xk1, xk2, xk3, xsd,
                   ok0, ok1, ok2, ok3, osd,
                   MODE: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    s = (pid * BLOCK_S + tl.arange(0, BLOCK_S)).to(tl.int64)
    s_mask = s < S
    cols = tl.arange(0, BLOCK_K).to(tl.int64)
    acc = tl.zeros([BLOCK_S, BLOCK_K], dtype=tl.float32)
    nans = tl.zeros([BLOCK_S, BLOCK_K], dtype=tl.int32)
    # pass 1: the p-norm of every slice, over all the other dims
    for start in range(0, K, BLOCK_K):
        k = start + cols
        rem = k
        j3 = rem % k3
        rem = rem // k3
        j2 = rem % k2
        rem = rem // k2
        j1 = rem % k1
        j0 = rem // k1
        x_off = j0 * xk0 + j1 * xk1 + j2 * xk2 + j3 * xk3
        mask = s_mask[:, None] & (k[None, :] < K)
        v = tl.load(x_ptr + s[:, None] * xsd + x_off[None, :], mask=mask, other=0.0)
        v = tl.abs(v.to(tl.float32))
        # max reductions may drop NaN on GPUs: count NaNs and put them back below
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
        norm = tl.max(acc, axis=1)
    else:
        norm = tl.sum(acc, axis=1)
    if MODE == 2:
        norm = tl.sqrt(norm)
    if MODE == 4:
        norm = libdevice.pow(norm, inv_p)
    norm = tl.where(tl.sum(nans, axis=1) > 0, float("nan"), norm)
    # a NaN norm fails the comparison: that slice is left as it is
    factor = tl.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)
    # pass 2: scale
    for start in range(0, K, BLOCK_K):
        k = start + cols
        rem = k
        j3 = rem % k3
        rem = rem // k3
        j2 = rem % k2
        rem = rem // k2
        j1 = rem % k1
        j0 = rem // k1
        x_off = j0 * xk0 + j1 * xk1 + j2 * xk2 + j3 * xk3
        o_off = j0 * ok0 + j1 * ok1 + j2 * ok2 + j3 * ok3
        mask = s_mask[:, None] & (k[None, :] < K)
        x = tl.load(x_ptr + s[:, None] * xsd + x_off[None, :], mask=mask, other=0.0)
        y = x.to(tl.float32) * factor[:, None]
        tl.store(out_ptr + s[:, None] * osd + o_off[None, :], y.to(out_ptr.dtype.element_ty),
                 mask=mask)


def _renorm(self, p, dim, maxnorm, out):
    nd = self.dim()
    if nd < 2 or nd > MAX_DIMS:
        raise ValueError(f"renorm needs 2 to {MAX_DIMS} dims")
    dim = dim % nd
    if self.numel() == 0:
        return out
    x_strides = list(self.stride())
    o_strides = list(out.stride())
    others = [i for i in range(nd) if i != dim]
    pad = MAX_DIMS - 1 - len(others)
    sizes = [1] * pad + [self.shape[i] for i in others]
    xk = [0] * pad + [x_strides[i] for i in others]
    ok = [0] * pad + [o_strides[i] for i in others]
    S = self.shape[dim]
    K = self.numel() // S
    p = float(p)
    if p == 1.0:
        mode = 1
    elif p == 2.0:
        mode = 2
    elif math.isinf(p):
        mode = 3
    else:
        mode = 4
    if x_strides[dim] == 1:
        # slices side by side in memory (dim is the contiguous one): many slices per program
        block_s = min(triton.next_power_of_2(S), 32)
        block_k = max(1, min(triton.next_power_of_2(K), TILE // block_s))
    else:
        block_k = min(triton.next_power_of_2(K), 2048)
        block_s = max(1, min(triton.next_power_of_2(S), TILE // block_k))
    grid = (triton.cdiv(S, block_s),)
    _renorm_kernel[grid](self, out, S, K, p, 1.0 / p if mode == 4 else 1.0, float(maxnorm),
                         *sizes[1:], *xk, x_strides[dim], *ok, o_strides[dim],
                         MODE=mode, BLOCK_S=block_s, BLOCK_K=block_k,
                         num_warps=8 if block_s * block_k >= 2048 else 4)
    return out


def renorm(self, p, dim, maxnorm):
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    return _renorm(self, p, dim, maxnorm, out)


def renorm_out(self, p, dim, maxnorm, *, out):
    return _renorm(self, p, dim, maxnorm, out)
'''

# min(1, maxnorm / norm) spelled as always scaling: slices already under maxnorm get blown up
# to norm maxnorm too. Right only when every slice exceeds maxnorm.
NEGATIVE_ALWAYS_SCALES = SOLUTION.replace(
    "factor = tl.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)",
    "factor = maxnorm / (norm + 1e-7)")

# Reads self with out's (contiguous) strides: right for contiguous self only.
NEGATIVE_OUT_STRIDES = SOLUTION.replace("x_strides = list(self.stride())",
                                        "x_strides = list(out.stride())")

_FLOATS = ("float16", "bfloat16", "float32")
_INF = float("inf")
# roundings other than the float32 sum, in units of the output's roundoff (see reference)
_OTHER_ULPS = {"float32": 8.0, "float16": 3.0, "bfloat16": 3.0}


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _slice_norms(x: torch.Tensor, p: float, dim: int) -> torch.Tensor:
    dims = [i for i in range(x.dim()) if i != dim % x.dim()]
    norms: torch.Tensor = torch.linalg.vector_norm(x, ord=p, dim=dims, keepdim=True)
    return norms


@register("aten::renorm", version=1, kind=Kind.COMPUTE)
class Renorm(OperatorSpec):
    entry_points = (
        EntryPoint("renorm",
                   "renorm(self: Tensor, p: Scalar, dim: int, maxnorm: Scalar) -> Tensor",
                   "Each slice self.select(dim, i) whose p-norm exceeds maxnorm is rescaled to "
                   "norm maxnorm; the others are copied unchanged."),
        EntryPoint("renorm_out",
                   "renorm_out(self: Tensor, p: Scalar, dim: int, maxnorm: Scalar, *, "
                   "out: Tensor) -> Tensor",
                   "Writes renorm(self, p, dim, maxnorm) into out (self's shape and dtype) and "
                   "returns out."),
    )
    description = (
        "Renormalization of sub-tensors, following PyTorch's `torch.renorm(self, p, dim, "
        "maxnorm)`: for every index i of dim, the slice `self.select(dim, i)` (all the other "
        "dims together) has p-norm `norm = (sum |x|**p) ** (1 / p)` (p > 0: 1, 2, 3, a fraction "
        "such as 0.5, or float('inf') for max |x|); the slice is multiplied by `maxnorm / (norm "
        "+ 1e-7)` where `norm > maxnorm` and copied unchanged otherwise (zero slices stay zero; "
        "maxnorm >= 0). The norm is over every dim except `dim` (unlike normalize, which reduces "
        "along dim). `dim` may be negative; self has 2 to 5 dims, may be non-contiguous or "
        "empty; the result has self's shape and dtype (float16, bfloat16 or float32). A NaN in "
        "a slice makes its norm NaN, so the slice is left unchanged (for p = inf too); an inf "
        "makes the norm inf and the factor 0 (inf * 0 = NaN there). Compute the norm and the "
        "factor in float32 and round each output once."
    )
    solution = SOLUTION
    negatives = (
        Negative("always_scales", "multiplies every slice by maxnorm / (norm + 1e-7), also "
                 "those already under maxnorm", NEGATIVE_ALWAYS_SCALES),
        Negative("reads_with_out_strides", "indexes self with the (contiguous) strides of out: "
                 "wrong for transposed or strided self", NEGATIVE_OUT_STRIDES),
    )

    def tolerance(self, c: Case, dtype: torch.dtype) -> Tolerance:
        # The error bound is all in the reference's scale, in units of the output's roundoff.
        return Tolerance.ulps(dtype, 1, atol_ulps=3)

    def cases(self) -> Sequence[Case]:
        e, eo = "renorm", "renorm_out"
        cs: list[Case] = [
            case(e, "float32", (63, 145), p=2.0, dim=0, cpu=True),
            case(e, "bfloat16", (7, 17, 31), p=1.0, dim=1, cpu=True),
            case(e, "float32", (33, 65), p=_INF, dim=-1, layout="transposed", cpu=True),
            case(e, "float16", (24, 50), p=3.0, dim=0, layout="strided", cpu=True),
            case(e, "float32", (40, 30), p=0.5, dim=1, zero_slices=True, cpu=True),
            case(e, "float32", (25, 33), p=2.0, dim=0, specials=True, cpu=True),
            case(e, "float32", (25, 33), p=_INF, dim=0, specials=True, cpu=True),
            case(eo, "float32", (5, 9, 13), p=2, dim=2, maxnorm=0.5, cpu=True),  # every slice scaled
            case(eo, "float16", (16, 64), p=2.0, dim=-2, cpu=True),
            case(e, "float32", (0, 8), p=2.0, dim=0, cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case(e, dt, (4096, 256), p=2.0, dim=0),
                case(e, dt, (1000, 999), p=2.0, dim=1),
                case(e, dt, (511, 257), p=1.0, dim=0, layout="transposed"),
                case(e, dt, (16, 7, 57, 29), p=_INF, dim=1),
                case(e, dt, (2, 3, 4, 5, 129), p=0.5, dim=-1, layout="strided"),
                case(e, dt, (3, 40999), p=2.0, dim=0, zero_slices=True),
                case(e, dt, (300, 64), p=3.0, dim=0, specials=True),
                case(eo, dt, (64, 33, 17), p=2.0, dim=1, layout="transposed"),
            ]
        cs.append(case(e, "float32", (50000, 64), p=2, dim=0, maxnorm=1.0))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS if not small else ("float32", rng.choice(("float16", "bfloat16"))):
            rank = rng.choice([2, 2, 3])
            top = 40 if small else (400 if rank == 2 else 100)
            shape = [rng.randrange(1, top) for _ in range(rank)]
            out.append(case(rng.choice(["renorm", "renorm_out"]), dt, shape,
                            p=rng.choice([1.0, 2.0, 3.0, 0.5, _INF]),
                            dim=rng.randrange(-rank, rank),
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            zero_slices=rng.random() < 0.3, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            # >= 64 MB of traffic each, no more (inputs are drawn in float64 on the CPU)
            # maxnorm near the median slice norm (1.55 * E|x|^p-norm of a slice, see make_call)
            case("renorm", "float32", (8192, 1024), p=2.0, dim=0, maxnorm=50.0),
            case("renorm", "bfloat16", (4096, 4096), p=2.0, dim=-1, maxnorm=100.0),
            case("renorm", "float16", (4096, 4096), p=1.0, dim=0, maxnorm=5000.0),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dim = c["dim"]
        # benchmark-sized tensors are drawn in float32 (the float64 draw is 4x slower)
        work = torch.float64 if _numel(c.shape) < 1 << 22 else torch.float32
        x64 = torch.randn(c.shape, generator=gen, dtype=work)
        if x64.numel() > 0:
            # slices of different norms (x0.1 .. x3), some under maxnorm and some over
            size = [1] * x64.dim()
            size[dim] = c.shape[dim]
            x64 = x64 * (0.1 + 2.9 * torch.rand(size, generator=gen, dtype=work))
            if c.get("zero_slices"):
                x64.movedim(dim, 0)[::4] = 0.0
        x = x64.to(c.torch_dtype)
        if c.get("specials"):
            x = sprinkle_specials(x, gen, fraction=0.005)
        p = c["p"]
        maxnorm = c.get("maxnorm")
        if maxnorm is None:
            # the median slice norm (3 significant digits): about half the slices are scaled
            norms = _slice_norms(x.double(), p, dim).flatten()
            norms = norms[torch.isfinite(norms)]
            med = float(norms.median()) if norms.numel() else 1.0
            maxnorm = float(f"{med:.3g}") if med > 0 else 1.0
        x = with_layout(x, c.get("layout", "contiguous"))
        args = (x, p, dim, maxnorm)
        if c.entry == "renorm_out":
            out = torch.empty(c.shape, dtype=x.dtype)
            return Call(c.entry, args, {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, args)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, p, dim, maxnorm = call.args
        x64 = x.double()
        if x64.numel() == 0:
            return (Expected(x64, x.dtype),)
        norm = _slice_norms(x64, p, dim)
        factor = torch.where(norm > maxnorm, maxnorm / (norm + 1e-7),
                             torch.ones_like(norm))
        value = x64 * factor
        # Relative to |value| = |x| * factor: the factor carries the norm's relative error and
        # the product one rounding. pow and the root cost a couple of ulps (p >= 0.5), the
        # division one; PyTorch's half path rounds the factor to the half type before the
        # product (2 u of the half type): _OTHER_ULPS. The float32 sum of the slice's K
        # positive terms adds up to (K - 1) u32 relative in any summation order (PyTorch's CPU
        # norm sums sequentially for p != 2), divided by p through the root; max (p = inf) is
        # exact. A slice whose norm is within that error of maxnorm may land on either side:
        # the two factors differ by about that error (plus 1e-7 / maxnorm, under 1 u here).
        k = x64.numel() // x64.shape[dim]
        growth = 0.0 if math.isinf(p) else (k - 1) / float(p)
        ratio = unit_roundoff(torch.float32) / unit_roundoff(x.dtype)
        scale = value.abs() * (_OTHER_ULPS[dtype_name(x.dtype)] + growth * ratio)
        return (Expected(value, x.dtype, scale),)

    def baseline(self, call: Call) -> object:
        x, p, dim, maxnorm = call.args
        if call.entry == "renorm_out":
            return torch.renorm(x, p, dim, maxnorm, out=call.kwargs["out"])
        return torch.renorm(x, p, dim, maxnorm)

    def cost(self, c: Case) -> Cost:
        n = _numel(c.shape)
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        p = float(c["p"])
        per = 3.0 if p in (1.0, 2.0) or math.isinf(p) else 20.0  # general p: pow
        return Cost(flops=per * n, bytes=float(2 * size * n), dtype="float32")
