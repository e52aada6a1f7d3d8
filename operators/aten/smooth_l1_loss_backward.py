"""aten::smooth_l1_loss_backward — the gradient of the smooth L1 (Huber-like) loss with respect to
its input: ``norm * grad_output * clamp((self - target) / beta, -1, 1)``, ``norm`` being
``1 / numel`` for the mean reduction (overloads default, grad_input)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import torch

from operators.aten._pointwise import (
    FLOATS,
    LAUNCHER,
    PRELUDE,
    floats,
    itemsize,
    numel,
    out_call,
    strided_kernel,
)
from operators.inputs import with_layout
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
)

_BODY = """    dy = tl.load(dy_ptr + dy_off, mask=mask).to(tl.float32)
    x = tl.load(x_ptr + x_off, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + y_off, mask=mask).to(tl.float32)
    d = x - y
    # PyTorch's CPU branch order; with beta == 0 the middle branch is reached by NaN alone
    g = tl.where(d <= -beta, -norm * dy, tl.where(d >= beta, norm * dy, norm * d * dy / beta))
    tl.store(out_ptr + out_off, g.to(out_ptr.dtype.element_ty), mask=mask)
"""

SOLUTION = (PRELUDE + LAUNCHER
            + strided_kernel("_smooth_l1_backward_kernel", ("dy", "x", "y", "out"), _BODY,
                             scalars=("norm", "beta")) + r'''
MEAN = 1  # reduction codes: 0 none, 1 mean, 2 sum


def smooth_l1_loss_backward(grad_output, self, target, reduction, beta):
    shape = torch.broadcast_shapes(grad_output.shape, self.shape, target.shape)
    out = torch.empty(shape, dtype=self.dtype, device=self.device)
    return smooth_l1_loss_backward_grad_input(grad_output, self, target, reduction, beta,
                                              grad_input=out)


def smooth_l1_loss_backward_grad_input(grad_output, self, target, reduction, beta, *,
                                       grad_input):
    # mean: the loss was averaged over self's elements (grad_output is then a 0-d tensor)
    norm = 1.0 / max(self.numel(), 1) if reduction == MEAN else 1.0
    dy, x, y = torch.broadcast_tensors(grad_output, self, target)
    _launch(_smooth_l1_backward_kernel, (dy, x, y, grad_input), (norm, float(beta)))
    return grad_input
''')

# Forgets the mean reduction's 1 / numel: right for the none and sum reductions only.
NEGATIVE_NO_MEAN_NORM = SOLUTION.replace(
    "    norm = 1.0 / max(self.numel(), 1) if reduction == MEAN else 1.0",
    "    norm = 1.0")

# Treats beta as its default 1.0: right for beta == 1 only.
NEGATIVE_DEFAULT_BETA = SOLUTION.replace("(norm, float(beta)))", "(norm, 1.0))")
assert NEGATIVE_NO_MEAN_NORM != SOLUTION and NEGATIVE_DEFAULT_BETA != SOLUTION

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


@register("aten::smooth_l1_loss_backward", version=1, kind=Kind.COMPUTE)
class SmoothL1LossBackward(OperatorSpec):
    entry_points = (
        EntryPoint("smooth_l1_loss_backward",
                   "smooth_l1_loss_backward(grad_output: Tensor, self: Tensor, target: Tensor, "
                   "reduction: int, beta: float) -> Tensor",
                   "The gradient of smooth_l1_loss(self, target, reduction, beta) with respect "
                   "to self, times grad_output."),
        EntryPoint("smooth_l1_loss_backward_grad_input",
                   "smooth_l1_loss_backward_grad_input(grad_output: Tensor, self: Tensor, "
                   "target: Tensor, reduction: int, beta: float, *, grad_input: Tensor) "
                   "-> Tensor",
                   "Writes smooth_l1_loss_backward(...) into grad_input (self's shape and "
                   "dtype) and returns grad_input."),
    )
    description = (
        "Backward of the smooth L1 loss, following PyTorch's `aten::smooth_l1_loss_backward("
        "grad_output, self, target, reduction, beta)`: with `d = self - target` and "
        "`norm = 1 / self.numel()` for reduction 1 (mean), else 1 (reductions 0 none, 2 sum), "
        "`grad_input = -norm * grad_output` where `d <= -beta`, `norm * grad_output` where "
        "`d >= beta`, and `norm * d * grad_output / beta` in between. For the none reduction "
        "grad_output has self's shape; for mean and sum it is a 0-d tensor, broadcast. self and "
        "target have the same shape; all share one dtype (float16, bfloat16 or float32), which "
        "the result has; compute in float32 and round once. beta >= 0: with beta == 0 the "
        "gradient is `norm * grad_output * sign(d)` (where self == target PyTorch's CPU and CUDA "
        "kernels disagree, -norm * grad_output vs NaN: no case has that tie); d = NaN gives NaN, "
        "d = +-inf gives +-norm * grad_output. Inputs may be non-contiguous (transposed or "
        "strided), 0-d or empty, with up to 6 dims."
    )
    solution = SOLUTION
    negatives = (
        Negative("no_mean_normalization", "ignores the mean reduction's 1 / numel factor",
                 NEGATIVE_NO_MEAN_NORM),
        Negative("default_beta", "uses beta = 1 whatever beta is passed", NEGATIVE_DEFAULT_BETA),
    )
    # Relative to |value|: d = self - target, the products and the division are each one
    # rounding (rounding d costs |d| u, and the middle branch is proportional to d), a few u in
    # float32 (8 leaves margin). Half outputs: a float32 candidate makes one final rounding
    # (PyTorch's CPU kernel too: <= 1 u measured), but PyTorch's CUDA kernel, the timed
    # baseline, computes in the half type itself (c10::Half arithmetic, read from its source):
    # d, norm and beta are rounded to it and so is each of the three products/quotients, up to
    # ~6 u of the half dtype; 8 u accepts that.
    tolerances = {
        "float16": Tolerance.ulps("float16", 8),
        "bfloat16": Tolerance.ulps("bfloat16", 8),
        "float32": Tolerance.ulps("float32", 8),
    }

    def cases(self) -> Sequence[Case]:
        E, G = "smooth_l1_loss_backward", "smooth_l1_loss_backward_grad_input"
        cs = [
            case(E, "float32", (63, 145), reduction=0, beta=1.0, cpu=True),
            case(E, "float32", (33, 65), reduction=1, beta=0.5, specials=0.02, cpu=True),
            case(E, "float16", (7, 17, 31), reduction=2, beta=1.0, cpu=True),
            case(E, "bfloat16", (40, 50), reduction=0, beta=0.0, layout="transposed",
                 cpu=True),
            case(G, "float16", (24, 50), reduction=1, beta=0.1, layout="strided", cpu=True),
            case(E, "float32", (49, 63), reduction=2, beta=0.0, specials=0.02, cpu=True),
            case(E, "float32", (), reduction=0, beta=1.0, cpu=True),
            case(G, "bfloat16", (0, 7), reduction=1, beta=1.0, cpu=True),
        ]
        for dt in FLOATS:
            cs += [
                case(E, dt, (1024, 1024), reduction=1, beta=1.0),
                case(E, dt, (16, 7, 57, 32, 29), reduction=0, beta=0.5),
                case(E, dt, (511, 257), reduction=0, beta=0.0, layout="transposed",
                     specials=0.01),
                case(E, dt, (5, 7, 11, 13), reduction=2, beta=2.0, layout="strided"),
                case(G, dt, (20, 320, 15), reduction=1, beta=0.1, specials=0.01),
                case(G, dt, (4097,), reduction=0, beta=1.0, std=10.0),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in FLOATS:
            rows = rng.randrange(1, 50 if small else 900)
            cols = rng.randrange(1, 60 if small else 1100)
            out.append(case(rng.choice(["smooth_l1_loss_backward",
                                        "smooth_l1_loss_backward_grad_input"]),
                            dt, (rows, cols), reduction=rng.choice([0, 1, 2]),
                            beta=rng.choice([0.0, 0.1, 0.5, 1.0, 2.0]),
                            std=rng.choice([0.3, 1.0, 10.0]),
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            specials=rng.choice([0.0, 0.01]), cpu=small))
        return out[:2] if small else out

    def benchmark_cases(self) -> Sequence[Case]:
        E = "smooth_l1_loss_backward"
        # 200-270 MB of traffic each
        return [
            case(E, "float32", (4096, 4096), reduction=1, beta=1.0),
            case(E, "bfloat16", (8192, 4096), reduction=0, beta=1.0),
            case(E, "float16", (8192, 4096), reduction=2, beta=0.5),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        std = c.get("std", 1.0)
        beta = c["beta"]
        dt = dtype_from_name(c.dtype)
        x = floats(c.shape, c.dtype, gen, std=std, specials=c.get("specials", 0.0))
        y = floats(c.shape, c.dtype, gen, std=std)
        tie = torch.rand(c.shape, generator=gen) < 0.1
        if beta == 0:
            # no self == target ties (PyTorch's CPU and CUDA kernels disagree there)
            y = torch.where(y == x, torch.nextafter(y, torch.full((), math.inf, dtype=dt)), y)
        else:
            # some exact ties (d == 0) and some d on or next to +-beta
            y = torch.where(tie, x, y)
            edge = (torch.rand(c.shape, generator=gen) < 0.1) & x.isfinite()
            y = torch.where(edge, (x.double() - beta).to(dt), y)
        x, y = with_layout(x, layout), with_layout(y, layout)
        reduction = c["reduction"]
        if reduction == 0:
            dy = floats(c.shape, c.dtype, gen, layout=layout)
        else:
            dy = floats((), c.dtype, gen, std=3.0)
        args = (dy, x, y, reduction, beta)
        if c.entry == "smooth_l1_loss_backward_grad_input":
            return out_call(c.entry, args, "grad_input", x.shape, x.dtype)
        return Call(c.entry, args)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        dy_in, x_in, y_in, reduction, beta = call.args[:5]
        dy, d = dy_in.double(), x_in.double() - y_in.double()
        norm = 1.0 / max(x_in.numel(), 1) if reduction == 1 else 1.0
        middle = norm * d * dy / beta if beta > 0 else torch.full_like(d, math.nan)
        value = torch.where(d <= -beta, -norm * dy, torch.where(d >= beta, norm * dy, middle))
        value = value.expand(x_in.shape) if value.shape != x_in.shape else value
        return (Expected(value, x_in.dtype),)

    def baseline(self, call: Call) -> object:
        op = torch.ops.aten.smooth_l1_loss_backward
        if "grad_input" in call.kwargs:
            return op.grad_input(*call.args, grad_input=call.kwargs["grad_input"])
        return op(*call.args)

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        dy = n if c["reduction"] == 0 else 1
        return Cost(flops=4.0 * n, bytes=float((3 * n + dy) * itemsize(c.dtype)),
                    dtype="float32")
