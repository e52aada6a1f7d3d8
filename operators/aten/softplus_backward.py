"""aten::softplus_backward — the gradient of ``softplus(x) = log1p(exp(beta * x)) / beta``
(linear above ``threshold``): ``grad_output`` where ``x * beta > threshold``, else
``grad_output * z / (z + 1)`` with ``z = exp(x * beta)`` (overloads default, grad_input)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import torch

from operators.aten._pointwise import (
    F32_FLOOR,
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
    # beta and threshold arrive as float32, as PyTorch converts them for these dtypes
    bx = x * beta
    z = tl.exp(bx)
    g = tl.where(bx > threshold, dy, dy * z / (z + 1.0))
    tl.store(out_ptr + out_off, g.to(out_ptr.dtype.element_ty), mask=mask)
"""

SOLUTION = (PRELUDE + LAUNCHER
            + strided_kernel("_softplus_backward_kernel", ("dy", "x", "out"), _BODY,
                             scalars=("beta", "threshold")) + r'''

def _softplus_backward(grad_output, self, beta, threshold, out):
    dy, x = torch.broadcast_tensors(grad_output, self)
    _launch(_softplus_backward_kernel, (dy, x, out), (float(beta), float(threshold)))
    return out


def softplus_backward(grad_output, self, beta, threshold):
    shape = torch.broadcast_shapes(grad_output.shape, self.shape)
    out = torch.empty(shape, dtype=self.dtype, device=self.device)
    return _softplus_backward(grad_output, self, beta, threshold, out)


def softplus_backward_grad_input(grad_output, self, beta, threshold, *, grad_input):
    return _softplus_backward(grad_output, self, beta, threshold, grad_input)
''')

# Forgets the threshold: right wherever it is far (the default 20 changes the result by
# ~2e-9 relative), wrong for small thresholds and NaN (inf / inf) once exp(x * beta) overflows.
NEGATIVE_NO_THRESHOLD = SOLUTION.replace(
    "    g = tl.where(bx > threshold, dy, dy * z / (z + 1.0))",
    "    g = dy * z / (z + 1.0)")

# `>=` instead of `>`: differs only where x * beta equals the threshold exactly.
NEGATIVE_GE = SOLUTION.replace("tl.where(bx > threshold,", "tl.where(bx >= threshold,")
assert NEGATIVE_NO_THRESHOLD != SOLUTION and NEGATIVE_GE != SOLUTION


def _f32(v: float) -> float:
    return float(torch.tensor(v, dtype=torch.float32))


@register("aten::softplus_backward", version=1, kind=Kind.COMPUTE)
class SoftplusBackward(OperatorSpec):
    entry_points = (
        EntryPoint("softplus_backward",
                   "softplus_backward(grad_output: Tensor, self: Tensor, beta: Scalar, "
                   "threshold: Scalar) -> Tensor",
                   "The gradient of softplus(self, beta, threshold) times grad_output."),
        EntryPoint("softplus_backward_grad_input",
                   "softplus_backward_grad_input(grad_output: Tensor, self: Tensor, "
                   "beta: Scalar, threshold: Scalar, *, grad_input: Tensor) -> Tensor",
                   "Writes softplus_backward(...) into grad_input (same shape and dtype as self) "
                   "and returns grad_input."),
    )
    description = (
        "Backward of softplus, following PyTorch's `aten::softplus_backward(grad_output, self, "
        "beta, threshold)` where self is the forward's input: with `bx = self * beta` and "
        "`z = exp(bx)`, `grad_input = grad_output` where `bx > threshold` and "
        "`grad_output * z / (z + 1)` (= grad_output * sigmoid(bx)) elsewhere. beta and "
        "threshold are Python floats (beta > 0 here). The branch test is PyTorch's exactly: "
        "`bx` is the float32 product of self (converted to float32) and float32(beta), compared "
        "with float32(threshold) by a strict `>`; values of self put exactly on and next to the "
        "threshold are tested, with small thresholds where the two branches differ a lot. "
        "grad_output and self have the same shape and dtype (float16, bfloat16 or float32), "
        "which the result has; compute in float32 and round once. Inputs may be non-contiguous "
        "(transposed or strided), 0-d or empty, with up to 6 dims; inf, -inf and NaN follow "
        "the formula (self = -inf gives 0, +inf gives grad_output, NaN gives NaN)."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_threshold", "always uses grad_output * sigmoid(x * beta), dropping "
                 "the linear region above the threshold", NEGATIVE_NO_THRESHOLD),
        Negative("threshold_inclusive", "takes the linear branch where x * beta >= threshold "
                 "instead of >", NEGATIVE_GE),
    )
    # Relative to scale = |grad_output| * (s + s (1 - s) |bx| + F32_FLOOR) on the sigmoid
    # branch (s = sigmoid(bx)): rounding bx costs |bx| u in exp's argument, i.e. s (1 - s) |bx| u
    # in s; exp, the add, division and product a few u of s more (8 u leaves margin).
    # grad_output branch: exact. Half outputs: one final rounding (<= 1 u of |value| <= scale).
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 8),
    }

    def cases(self) -> Sequence[Case]:
        E, G = "softplus_backward", "softplus_backward_grad_input"
        cs = [
            case(E, "float32", (63, 145), beta=1.0, threshold=20.0, std=10.0, cpu=True),
            case(E, "float32", (33, 65), beta=2.0, threshold=1.0, near=True, cpu=True),
            case(E, "float16", (7, 17, 31), beta=0.5, threshold=2.0, near=True, cpu=True),
            case(E, "bfloat16", (40, 50), beta=1.0, threshold=20.0, std=30.0,
                 layout="transposed", specials=0.02, cpu=True),
            case(E, "float32", (24, 50), beta=3.0, threshold=5.0, std=3.0, layout="strided",
                 specials=0.02, cpu=True),
            case(G, "float16", (49, 63), beta=1.0, threshold=20.0, std=5.0, cpu=True),
            case(E, "float32", (), beta=1.0, threshold=20.0, cpu=True),
            case(G, "bfloat16", (0, 7), beta=1.0, threshold=20.0, cpu=True),
        ]
        for dt in FLOATS:
            cs += [
                case(E, dt, (1024, 1024), beta=1.0, threshold=20.0, std=10.0),
                case(E, dt, (16, 7, 57, 32, 29), beta=2.0, threshold=10.0, std=4.0),
                case(E, dt, (511, 257), beta=0.25, threshold=1.0, near=True,
                     layout="transposed"),
                case(E, dt, (5, 7, 11, 13), beta=1.5, threshold=3.0, near=True,
                     layout="strided"),
                case(G, dt, (20, 320, 15), beta=1.0, threshold=20.0, std=30.0, specials=0.01),
                case(G, dt, (4097,), beta=4.0, threshold=0.5, near=True),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in FLOATS:
            rows = rng.randrange(1, 50 if small else 900)
            cols = rng.randrange(1, 60 if small else 1100)
            out.append(case(rng.choice(["softplus_backward", "softplus_backward_grad_input"]),
                            dt, (rows, cols), beta=rng.choice([0.5, 1.0, 2.0, 3.0]),
                            threshold=rng.choice([1.0, 5.0, 20.0]),
                            std=rng.choice([1.0, 5.0, 20.0]), near=rng.random() < 0.5,
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            cpu=small))
        return out[:2] if small else out

    def benchmark_cases(self) -> Sequence[Case]:
        E = "softplus_backward"
        # ~200 MB of traffic each
        return [
            case(E, "float32", (4096, 4096), beta=1.0, threshold=20.0, std=10.0),
            case(E, "bfloat16", (8192, 4096), beta=1.0, threshold=20.0, std=10.0),
            case(E, "float16", (8192, 4096), beta=2.0, threshold=5.0, std=3.0),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        beta, threshold = c["beta"], c["threshold"]
        dy = floats(c.shape, c.dtype, gen, layout=layout)
        x = floats(c.shape, c.dtype, gen, std=c.get("std", 1.0),
                   specials=c.get("specials", 0.0))
        if c.get("near"):
            # about half the elements on the threshold x = threshold / beta or a few of the
            # dtype's ulps away from it, so x * beta straddles it
            dt = dtype_from_name(c.dtype)
            at = torch.full(c.shape, threshold / beta, dtype=dt)
            up = torch.nextafter(at, torch.full((), math.inf, dtype=dt))
            down = torch.nextafter(at, torch.full((), -math.inf, dtype=dt))
            which = torch.randint(0, 6, c.shape, generator=gen)
            near = torch.where(which == 0, up, torch.where(which == 1, down, at))
            near = torch.where(which == 2, torch.nextafter(up, torch.full((), math.inf,
                                                                             dtype=dt)), near)
            x = torch.where(which < 4, near, x)
        x = with_layout(x, layout)
        args = (dy, x, beta, threshold)
        if c.entry == "softplus_backward_grad_input":
            return out_call(c.entry, args, "grad_input", x.shape, x.dtype)
        return Call(c.entry, args)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        dy_in, x_in, beta, threshold = call.args[:4]
        # PyTorch's branch test, in float32: fl32(fl32(x) * fl32(beta)) > fl32(threshold)
        bx32 = x_in.float() * torch.tensor(_f32(beta), dtype=torch.float32)
        linear = bx32 > torch.tensor(_f32(threshold), dtype=torch.float32)
        dy, bx = dy_in.double(), x_in.double() * beta
        s = torch.sigmoid(bx)
        value = torch.where(linear, dy, dy * s)
        # (at bx = -inf the value is exactly 0: keep the scale 0 there, not 0 * inf = NaN)
        arg = torch.where(bx.isfinite(), (1 - s) * bx.abs(), 0.0)
        # (below bx ~ -87 float32's exp(bx) leaves the normal range: F32_FLOOR)
        scale = torch.where(linear, dy.abs(), dy.abs() * (s * (1 + arg) + F32_FLOOR))
        return (Expected(value, x_in.dtype, scale),)

    def baseline(self, call: Call) -> object:
        op = torch.ops.aten.softplus_backward
        if "grad_input" in call.kwargs:
            return op.grad_input(*call.args, grad_input=call.kwargs["grad_input"])
        return op(*call.args)

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        return Cost(flops=5.0 * n, bytes=float(3 * n * itemsize(c.dtype)), dtype="float32")
