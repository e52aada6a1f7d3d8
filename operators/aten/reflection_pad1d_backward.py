"""aten::reflection_pad1d_backward — the gradient of 1-d reflection padding: each input position
sums the gradients of the output positions that read it (overloads default, grad_input)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._indexing import esize, int_values, numel, with_specials
from operators.inputs import randn, with_layout
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

BLOCK = 1024


@triton.jit
def _reflection_pad1d_backward_kernel(g_ptr, out_ptr, n, C, W, pl, pr,
                                      gn, gc, gw, on, oc, ow, BLOCK: tl.constexpr):
    # One program per BLOCK elements of grad_input (rows of W). Input position i is read by
    # output position i + pl, by pl - i (left reflection, 1 <= i <= pl) and by
    # pl + 2 * (W - 1) - i (right reflection, W - 1 - pr <= i <= W - 2): at most three terms,
    # summed in float32 and rounded once.
    pid = tl.program_id(0)
    e = (pid * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = e < n
    i = e % W
    row = e // W
    c = row % C
    b = row // C
    g_row = b * gn + c * gc
    acc = tl.load(g_ptr + g_row + (i + pl) * gw, mask=mask, other=0).to(tl.float32)
    left = mask & (i >= 1) & (i <= pl)
    acc += tl.load(g_ptr + g_row + (pl - i) * gw, mask=left, other=0).to(tl.float32)
    right = mask & (i >= W - 1 - pr) & (i <= W - 2)
    acc += tl.load(g_ptr + g_row + (pl + 2 * (W - 1) - i) * gw, mask=right,
                   other=0).to(tl.float32)
    tl.store(out_ptr + b * on + c * oc + i * ow, acc.to(out_ptr.dtype.element_ty), mask=mask)


def _backward(grad_output, self, padding, grad_input):
    pl, pr = padding
    g = grad_output if grad_output.dim() == 3 else grad_output.unsqueeze(0)
    o = grad_input if grad_input.dim() == 3 else grad_input.unsqueeze(0)
    N, C, W = o.shape
    n = N * C * W
    if n == 0:
        return grad_input
    grid = (triton.cdiv(n, BLOCK),)
    _reflection_pad1d_backward_kernel[grid](g, o, n, C, W, pl, pr, *g.stride(), *o.stride(),
                                            BLOCK=BLOCK)
    return grad_input


def reflection_pad1d_backward(grad_output, self, padding):
    grad_input = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    return _backward(grad_output, self, padding, grad_input)


def reflection_pad1d_backward_grad_input(grad_output, self, padding, *, grad_input):
    return _backward(grad_output, self, padding, grad_input)
'''

# Forgets the right-hand reflection: right whenever the right padding is 0.
NEGATIVE_NO_RIGHT = SOLUTION.replace("right = mask & (i >= W - 1 - pr) & (i <= W - 2)",
                                     "right = mask & (i < 0)")

# Mirrors around the edge element itself (symmetric padding, as numpy's 'symmetric') instead of
# reflecting past it: the left term is read from position pl - 1 - i for 0 <= i < pl.
NEGATIVE_SYMMETRIC = (SOLUTION
                      .replace("left = mask & (i >= 1) & (i <= pl)", "left = mask & (i < pl)")
                      .replace("(pl - i) * gw, mask=left", "(pl - 1 - i) * gw, mask=left"))

_FLOATS = ("float16", "bfloat16", "float32")
# An element whose terms are integers with magnitudes summing to at most 256 is exact in every
# float dtype (bfloat16 holds the integers up to 256), whatever the order of the additions.
_EXACT_LIMIT = 256.0


@register("aten::reflection_pad1d_backward", version=1, kind=Kind.COMPUTE)
class ReflectionPad1dBackward(OperatorSpec):
    entry_points = (
        EntryPoint("reflection_pad1d_backward",
                   "reflection_pad1d_backward(grad_output: Tensor, self: Tensor, "
                   "padding: list[int]) -> Tensor",
                   "The gradient with respect to self of reflection_pad1d(self, padding), given "
                   "grad_output of the padded shape."),
        EntryPoint("reflection_pad1d_backward_grad_input",
                   "reflection_pad1d_backward_grad_input(grad_output: Tensor, self: Tensor, "
                   "padding: list[int], *, grad_input: Tensor) -> Tensor",
                   "Writes the gradient into grad_input (self's shape and dtype) and returns "
                   "grad_input."),
    )
    description = (
        "Backward of 1-d reflection padding, following PyTorch's "
        "`aten::reflection_pad1d_backward(grad_output, self, padding)`. The forward pads the "
        "last dim of self (shape (N, C, W) or (C, W)) by padding = (pl, pr) (each < W) "
        "reflecting without repeating the edge: out[..., j] = self[..., reflect(j - pl)] for "
        "j in [0, W + pl + pr), reflect(k) = -k for k < 0, 2*(W-1) - k for k >= W, else k. The "
        "backward returns grad_input of self's shape and dtype with grad_input[..., i] = sum of "
        "grad_output[..., j] over every j with reflect(j - pl) == i (one to three terms). Only "
        "self's shape and dtype are used. grad_output may be non-contiguous (transposed or "
        "strided); dtypes float16, bfloat16, float32: accumulate in float32 and round once."
    )
    solution = SOLUTION
    negatives = (
        Negative("drops_right_reflection", "ignores the gradient flowing back through the "
                 "right-hand padding", NEGATIVE_NO_RIGHT),
        Negative("symmetric_not_reflect", "maps the left padding as symmetric padding (edge "
                 "repeated) instead of reflection", NEGATIVE_SYMMETRIC),
    )
    # Relative to the sum of |terms| at each element: at most three terms; PyTorch's CPU kernel
    # adds them one by one in the output dtype (two roundings: <= 2.001 u), a float32 sum
    # rounded once costs <= 1 u. Exact-friendly elements (see _EXACT_LIMIT) have scale 0.
    tolerances = {dt: Tolerance.ulps(dt, 3) for dt in _FLOATS}

    def cases(self) -> Sequence[Case]:
        f, o = "reflection_pad1d_backward", "reflection_pad1d_backward_grad_input"
        cs: list[Case] = [
            case(f, "float32", (2, 3, 8), pad=(1, 1), cpu=True),
            case(f, "float16", (2, 3, 8), pad=(2, 3), cpu=True),
            case(o, "bfloat16", (2, 3, 8), pad=(5, 5), cpu=True),
            case(f, "float32", (5, 6), pad=(5, 5), cpu=True),
            case(f, "float32", (4, 7, 31), pad=(3, 0), layout="transposed", cpu=True),
            case(o, "float16", (3, 5, 49), pad=(7, 2), exact=True, cpu=True),
            case(f, "bfloat16", (4, 16, 64), pad=(0, 4), layout="strided", specials=True,
                 cpu=True),
        ]
        # the published grid: shapes x dtypes x paddings, default and grad_input variants
        for shape in ((2, 3, 8), (4, 16, 64), (32, 64, 512)):
            for dt in _FLOATS:
                for pad in ((1, 1), (2, 3), (5, 5)):
                    for e in (f, o):
                        c = case(e, dt, shape, pad=pad)
                        if c.name not in {x.name for x in cs}:
                            cs.append(c)
        for dt in _FLOATS:
            cs += [
                case(f, dt, (63, 1025), pad=(511, 1), layout="transposed"),
                case(o, dt, (7, 17, 2065), pad=(100, 1000), exact=True),
                case(f, dt, (16, 33, 257), pad=(256, 256), layout="strided", specials=True),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS:
            w = rng.randrange(2, 40 if small else 3000)
            shape = ([rng.randrange(1, 4 if small else 32)] if rng.random() < 0.7 else []) + \
                [rng.randrange(1, 6 if small else 64), w]
            pad = (rng.randrange(0, w), rng.randrange(0, w))
            out.append(case(rng.choice(["reflection_pad1d_backward",
                                        "reflection_pad1d_backward_grad_input"]), dt, shape,
                            pad=pad, layout=rng.choice(["contiguous", "transposed", "strided"]),
                            cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # 67-134 MB read and written each
        return [
            case("reflection_pad1d_backward", "float32", (64, 128, 2048), pad=(5, 5)),
            case("reflection_pad1d_backward", "bfloat16", (128, 128, 2048), pad=(64, 63)),
            case("reflection_pad1d_backward", "float16", (32, 128, 8192), pad=(2, 3)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        pl, pr = c["pad"]
        gshape = tuple(c.shape[:-1]) + (c.shape[-1] + pl + pr,)
        exact = c.get("exact")
        g = int_values(gshape, c.dtype, gen) if exact else randn(gshape, c.dtype, gen)
        if c.get("specials"):
            g = with_specials(g, gen)
        g = with_layout(g, c.get("layout", "contiguous"))
        x = torch.zeros(c.shape, dtype=g.dtype)  # the forward's input: only its shape is used
        args = (g, x, [pl, pr])
        if c.entry == "reflection_pad1d_backward_grad_input":
            gi = torch.empty(c.shape, dtype=g.dtype)
            return Call(c.entry, args, {"grad_input": gi}, outputs=(Out.arg("grad_input"),),
                        mutable=frozenset({"grad_input"}),
                        out_buffers=frozenset({"grad_input"}))
        return Call(c.entry, args)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        g, x, pad = call.args
        g64 = g.double()
        op = torch.ops.aten.reflection_pad1d_backward
        value = op(g64, x.double(), pad)
        scale = op(g64.abs(), x.double(), pad)
        if bool(torch.equal(g64.nan_to_num(), g64.nan_to_num().round())):
            scale = torch.where(scale <= _EXACT_LIMIT, torch.zeros_like(scale), scale)
        return (Expected(value, x.dtype, scale),)

    def baseline(self, call: Call) -> object:
        if call.entry == "reflection_pad1d_backward_grad_input":
            return torch.ops.aten.reflection_pad1d_backward.grad_input(
                *call.args, grad_input=call.kwargs["grad_input"])
        return torch.ops.aten.reflection_pad1d_backward(*call.args)

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        pl, pr = c["pad"]
        n_g = n // c.shape[-1] * (c.shape[-1] + pl + pr)
        size = esize(c.torch_dtype)
        return Cost(flops=float(n_g - n), bytes=float((n + n_g) * size), dtype=c.dtype)
