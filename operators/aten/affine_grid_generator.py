"""aten::affine_grid_generator — the sampling grid of ``F.affine_grid``: each output point's
normalized coordinates mapped by a batch of affine matrices (overloads default, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.inputs import randn
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
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _coord(i, n, den):
    # linspace(-1, 1, n)[i] = (2i - (n - 1)) / (n - 1), times (n - 1) / n without
    # align_corners: the numerator is an exact integer, den is n - 1 or n (1 when n == 1,
    # where the only coordinate is 0)
    return (2 * i - (n - 1)).to(tl.float32) / den


@triton.jit
def _affine_grid_kernel(theta_ptr, out_ptr, D, H, W, dden, hden, wden,
                        t0, t1, t2, o0, od, oh, ow, oc,
                        THREE_D: tl.constexpr, BLOCK: tl.constexpr):
    n = tl.program_id(1).to(tl.int64)
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < D * H * W
    w = idx % W
    rest = idx // W
    h = rest % H
    d = rest // H
    x = _coord(w, W, wden)
    y = _coord(h, H, hden)
    th = theta_ptr + n * t0
    o = out_ptr + n * o0 + d * od + h * oh + w * ow
    if THREE_D:
        z = _coord(d, D, dden)
        for i in tl.static_range(3):
            a = tl.load(th + i * t1).to(tl.float32)
            b = tl.load(th + i * t1 + t2).to(tl.float32)
            c = tl.load(th + i * t1 + 2 * t2).to(tl.float32)
            e = tl.load(th + i * t1 + 3 * t2).to(tl.float32)
            v = a * x + b * y + c * z + e
            tl.store(o + i * oc, v.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        for i in tl.static_range(2):
            a = tl.load(th + i * t1).to(tl.float32)
            b = tl.load(th + i * t1 + t2).to(tl.float32)
            e = tl.load(th + i * t1 + 2 * t2).to(tl.float32)
            v = a * x + b * y + e
            tl.store(o + i * oc, v.to(out_ptr.dtype.element_ty), mask=mask)


def _grid(theta, size, align_corners, out):
    three_d = len(size) == 5
    N = size[0]
    if three_d:
        D, H, W = size[2], size[3], size[4]
        o0, od, oh, ow, oc = out.stride()
    else:
        D, H, W = 1, size[2], size[3]
        o0, oh, ow, oc = out.stride()
        od = 0
    points = D * H * W
    if N == 0 or points == 0:
        return out
    dens = [float(max(n - 1 if align_corners else n, 1)) for n in (D, H, W)]
    BLOCK = 1024
    grid = (triton.cdiv(points, BLOCK), N)
    _affine_grid_kernel[grid](theta, out, D, H, W, *dens, *theta.stride(), o0, od, oh, ow, oc,
                              THREE_D=three_d, BLOCK=BLOCK, num_warps=4)
    return out


def affine_grid_generator(theta, size, align_corners):
    shape = [size[0], *size[2:], len(size) - 2]
    out = torch.empty(shape, dtype=theta.dtype, device=theta.device)
    return _grid(theta, size, align_corners, out)


def affine_grid_generator_out(theta, size, align_corners, *, out):
    return _grid(theta, size, align_corners, out)
'''

# Always uses the align_corners=True coordinates (corner pixels at exactly -1 and 1).
NEGATIVE_IGNORES_ALIGN = SOLUTION.replace("n - 1 if align_corners else n", "n - 1")

# Indexes theta as a contiguous (N, k, k + 1) tensor: right unless theta is non-contiguous.
NEGATIVE_CONTIGUOUS_THETA = SOLUTION.replace(
    "*theta.stride(),", "theta.shape[1] * theta.shape[2], theta.shape[2], 1,")

_FLOATS = ("float16", "bfloat16", "float32")


def _linspace(n: int, align: bool) -> torch.Tensor:
    if n <= 1:
        return torch.zeros(n, dtype=torch.float64)
    i = torch.arange(n, dtype=torch.float64)
    return (2 * i - (n - 1)) / ((n - 1) if align else n)


@register("aten::affine_grid_generator", version=1, kind=Kind.COMPUTE)
class AffineGridGenerator(OperatorSpec):
    entry_points = (
        EntryPoint("affine_grid_generator",
                   "affine_grid_generator(theta: Tensor, size: list[int], align_corners: bool) "
                   "-> Tensor",
                   "The (N, H, W, 2) or (N, D, H, W, 3) grid of theta applied to the normalized "
                   "coordinates of a size = [N, C, H, W] or [N, C, D, H, W] output."),
        EntryPoint("affine_grid_generator_out",
                   "affine_grid_generator_out(theta: Tensor, size: list[int], "
                   "align_corners: bool, *, out: Tensor) -> Tensor",
                   "Writes affine_grid_generator(theta, size, align_corners) into out (already "
                   "of the grid's shape, theta's dtype) and returns out."),
    )
    description = (
        "The sampling grid behind `torch.nn.functional.affine_grid(theta, size, align_corners)` "
        "(`torch.affine_grid_generator`). 2-D: theta is (N, 2, 3), size = [N, C, H, W], the "
        "result (N, H, W, 2) with `grid[n, h, w, i] = theta[n, i, 0] * x[w] + theta[n, i, 1] * "
        "y[h] + theta[n, i, 2]`. 3-D: theta is (N, 3, 4), size = [N, C, D, H, W], the result "
        "(N, D, H, W, 3) with `grid[n, d, h, w, i] = theta[n, i, 0] * x[w] + theta[n, i, 1] * "
        "y[h] + theta[n, i, 2] * z[d] + theta[n, i, 3]`. The normalized coordinates of an axis "
        "of n points are `linspace(-1, 1, n)` with align_corners=True, i.e. `(2k - (n - 1)) / "
        "(n - 1)`, and that times (n - 1) / n without, i.e. `(2k - (n - 1)) / n`; a 1-point "
        "axis has the single coordinate 0. C is not used. The result has theta's dtype "
        "(float16, bfloat16, float32); compute in float32 and round once. theta may be "
        "non-contiguous; sizes are arbitrary (odd, 1, large)."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_align_corners", "always uses the align_corners=True coordinates",
                 NEGATIVE_IGNORES_ALIGN),
        Negative("assumes_contiguous_theta", "indexes theta as if it were contiguous, ignoring "
                 "its strides", NEGATIVE_CONTIGUOUS_THETA),
    )
    # Relative to sum_j |theta_ij| (|coordinate_j| + 1) (see reference). A candidate computing
    # in float32 costs one final rounding (<= 0.5 u of |value| <= scale) for half outputs and a
    # few float32 roundings (the coordinate's division, the multiply-adds) for float32 ones.
    # PyTorch builds the base grid in theta's dtype (linspace, then * (n - 1) / n): measured
    # <= 1.3 u (half) and <= 1.5 u (float32) of that scale. Hence 3 u and 4 u.
    tolerances = {
        "float16": Tolerance.ulps("float16", 3),
        "bfloat16": Tolerance.ulps("bfloat16", 3),
        "float32": Tolerance.ulps("float32", 4),
    }

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("affine_grid_generator", "float32", (2, 3, 7, 9), align_corners=False,
                 cpu=True),
            case("affine_grid_generator", "float16", (3, 1, 5, 17), align_corners=True,
                 cpu=True),
            case("affine_grid_generator", "bfloat16", (2, 3, 12, 12), align_corners=True,
                 cpu=True),
            case("affine_grid_generator", "bfloat16", (2, 4, 3, 4, 5), align_corners=False,
                 cpu=True),
            case("affine_grid_generator", "float32", (2, 1, 6, 7, 3), align_corners=True,
                 cpu=True),
            case("affine_grid_generator", "float32", (4, 2, 1, 31), align_corners=False,
                 layout="transposed", cpu=True),
            case("affine_grid_generator_out", "float32", (2, 3, 33, 1), align_corners=True,
                 cpu=True),
            case("affine_grid_generator_out", "float16", (1, 2, 9, 8, 7), align_corners=True,
                 layout="transposed", cpu=True),
        ]
        for dt in _FLOATS:
            for align in (False, True):
                cs += [
                    case("affine_grid_generator", dt, (8, 3, 224, 224), align_corners=align),
                    case("affine_grid_generator", dt, (3, 1, 63, 145), align_corners=align,
                         layout="transposed"),
                    case("affine_grid_generator", dt, (2, 4, 17, 31, 49), align_corners=align),
                    case("affine_grid_generator_out", dt, (1, 1, 511, 257),
                         align_corners=align, std=30.0),
                ]
        # 1-point axes (coordinate 0) in float32 only: PyTorch's CPU kernel has no half path
        # for them (at::tensor(0) of Half), so it could not validate such cases.
        cs += [
            case("affine_grid_generator_out", "float32", (5, 2, 1, 1, 2065), align_corners=False),
            case("affine_grid_generator", "float32", (7, 3, 1, 1), align_corners=True),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(2 if small else 6):
            three = rng.random() < 0.4
            dt = rng.choice(_FLOATS)
            low = 1 if dt == "float32" else 2  # see cases(): 1-point axes in float32 only
            spatial = [rng.randrange(low, 9 if small else 70) for _ in range(3 if three else 2)]
            shape = (rng.randrange(1, 4 if small else 9), rng.randrange(1, 4), *spatial)
            out.append(case(rng.choice(["affine_grid_generator", "affine_grid_generator_out"]),
                            dt, shape, align_corners=rng.random() < 0.5,
                            layout=rng.choice(["contiguous", "transposed"]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("affine_grid_generator", "float32", (64, 3, 512, 512), align_corners=False),
            case("affine_grid_generator", "bfloat16", (32, 3, 1024, 1024), align_corners=True),
            case("affine_grid_generator", "float16", (8, 1, 128, 128, 128), align_corners=False),
        ]

    @staticmethod
    def _grid_shape(size: Sequence[int]) -> tuple[int, ...]:
        return (size[0], *size[2:], len(size) - 2)

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        k = len(c.shape) - 2  # spatial dims
        theta = randn((c.shape[0], k, k + 1), c.dtype, gen, std=c.get("std", 1.0),
                      layout=c.get("layout", "contiguous"))
        size = list(c.shape)
        args = (theta, size, c["align_corners"])
        if c.entry == "affine_grid_generator_out":
            out = torch.empty(self._grid_shape(size), dtype=theta.dtype)
            return Call(c.entry, args, {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, args)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        theta, size, align = call.args
        t = theta.double()
        spatial = list(size[2:])
        axes = [_linspace(n, align) for n in spatial]  # (D,) H, W
        mesh = torch.meshgrid(*axes, indexing="ij")
        # base coordinates in x, y(, z) order: x runs over W, y over H, z over D
        coords = list(reversed(mesh))
        base = torch.stack([*coords, torch.ones_like(coords[0])], dim=-1)  # (..., k + 1)
        value = torch.einsum("...j,nij->n...i", base, t)
        # A coordinate's natural error is absolute, relative to its range [-1, 1] (a linspace
        # start + k * step errs by ~u * |k * step| even where it crosses 0): each term counts
        # |theta| * (|coordinate| + 1).
        scale = torch.einsum("...j,nij->n...i", base.abs() + 1, t.abs())
        return (Expected(value, theta.dtype, scale),)

    def baseline(self, call: Call) -> object:
        theta, size, align = call.args
        if call.entry == "affine_grid_generator_out":
            return torch.ops.aten.affine_grid_generator.out(theta, size, align,
                                                            out=call.kwargs["out"])
        return torch.affine_grid_generator(theta, size, align)

    def cost(self, c: Case) -> Cost:
        k = len(c.shape) - 2
        points = 1
        for d in c.shape[2:]:
            points *= d
        out_elems = c.shape[0] * points * k
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        # per output element: k multiply-adds and one add of the translation
        return Cost(flops=float(2 * k * out_elems),
                    bytes=float(size * (out_elems + c.shape[0] * k * (k + 1))),
                    dtype="float32")
