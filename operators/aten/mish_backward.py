"""aten::mish_backward — the gradient of ``mish(x) = x * tanh(softplus(x))``:
``grad_output * (t + x * sigmoid(x) * (1 - t**2))`` with ``t = tanh(log1p(exp(x)))``
(overload default)."""

from __future__ import annotations

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
    strided_kernel,
)
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
)

_BODY = """    dy = tl.load(dy_ptr + dy_off, mask=mask).to(tl.float32)
    x = tl.load(x_ptr + x_off, mask=mask).to(tl.float32)
    # libdevice.exp, not tl.exp: the fast approximation is off by many ulps for large |x|.
    sig = 1.0 / (1.0 + libdevice.exp(-x))
    t = libdevice.tanh(libdevice.log1p(libdevice.exp(x)))
    g = dy * (t + x * sig * (1.0 - t * t))
    tl.store(out_ptr + out_off, g.to(out_ptr.dtype.element_ty), mask=mask)
"""

SOLUTION = (PRELUDE + "from triton.language.extra import libdevice\n" + LAUNCHER
            + strided_kernel("_mish_backward_kernel", ("dy", "x", "out"), _BODY) + r'''

def mish_backward(grad_output, self):
    dy, x = torch.broadcast_tensors(grad_output, self)
    out = torch.empty(dy.shape, dtype=self.dtype, device=self.device)
    _launch(_mish_backward_kernel, (dy, x, out))
    return out
''')

# tanh(softplus(x)) through the identity ((1+e^x)^2 - 1) / ((1+e^x)^2 + 1): exact algebra, but
# e^(2x) overflows to inf / inf = NaN for x above ~44.
NEGATIVE_OVERFLOWING_TANH = SOLUTION.replace(
    "    t = libdevice.tanh(libdevice.log1p(libdevice.exp(x)))\n",
    "    e = tl.exp(x)\n"
    "    num = e * e + 2.0 * e\n"
    "    t = num / (num + 2.0)\n")
assert NEGATIVE_OVERFLOWING_TANH != SOLUTION


@register("aten::mish_backward", version=1, kind=Kind.COMPUTE)
class MishBackward(OperatorSpec):
    entry_points = (
        EntryPoint("mish_backward", "mish_backward(grad_output: Tensor, self: Tensor) -> Tensor",
                   "The gradient of mish at self (the forward's input), times grad_output."),
    )
    description = (
        "Backward of the Mish activation `mish(x) = x * tanh(softplus(x))`, following PyTorch's "
        "`aten::mish_backward(grad_output, self)` where self is the forward's input: "
        "`grad_input = grad_output * (t + x * s * (1 - t*t))` with `s = sigmoid(x) = "
        "1 / (1 + exp(-x))` and `t = tanh(log1p(exp(x)))`. grad_output and self have the same "
        "shape and dtype (float16, bfloat16 or float32), which the result has too; compute in "
        "float32 and round once. Inputs may be non-contiguous (transposed or strided), 0-d or "
        "empty, with up to 6 dims. Large |x| (exp overflowing float32) must give the limits "
        "(grad_output for large x, 0 for very negative x); exactly as PyTorch's formula, x = "
        "+inf or -inf gives NaN (inf * 0), and NaN propagates."
    )
    solution = SOLUTION
    negatives = (
        Negative("overflowing_tanh", "computes tanh(softplus(x)) by an algebraic identity whose "
                 "exp(2x) overflows, giving NaN for x above ~44", NEGATIVE_OVERFLOWING_TANH),
    )
    # Relative to scale = |grad_output| * (|t| + |x| s + (1 + |x|) F32_FLOOR) (see reference).
    # float32: the exp, log1p, tanh, the sigmoid and the products each cost about one u of their
    # term, and 1 - t*t loses up to ~u in absolute terms when t is near 1, times |x| s: 8 u
    # leaves margin for libdevice's few-ulp transcendentals. Half outputs: one final rounding
    # (<= 1 u of |value| <= scale); the float32 work is far below it.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 8),
    }

    def cases(self) -> Sequence[Case]:
        cs = [
            case("mish_backward", "float32", (63, 145), std=3.0, cpu=True),
            case("mish_backward", "float32", (33, 65), std=40.0, specials=0.02, cpu=True),
            case("mish_backward", "float16", (7, 17, 31), std=3.0, cpu=True),
            case("mish_backward", "bfloat16", (40, 50), std=3.0, layout="transposed", cpu=True),
            case("mish_backward", "float16", (24, 50), std=10.0, layout="strided",
                 specials=0.02, cpu=True),
            case("mish_backward", "float32", (), std=3.0, cpu=True),
            case("mish_backward", "bfloat16", (0, 7), cpu=True),
        ]
        for dt in FLOATS:
            cs += [
                case("mish_backward", dt, (1024, 1024), std=3.0),
                case("mish_backward", dt, (16, 7, 57, 32, 29), std=1.0),
                case("mish_backward", dt, (511, 257), std=40.0, layout="transposed",
                     specials=0.01),
                case("mish_backward", dt, (5, 7, 11, 13), mean=-1.2, std=0.2,
                     layout="strided"),
                case("mish_backward", dt, (20, 320, 15), std=10.0, specials=0.01),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in FLOATS:
            rows = rng.randrange(1, 50 if small else 900)
            cols = rng.randrange(1, 60 if small else 1100)
            out.append(case("mish_backward", dt, (rows, cols),
                            std=rng.choice([1.0, 3.0, 10.0, 40.0]),
                            mean=rng.choice([0.0, 0.0, -1.2]),
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            specials=rng.choice([0.0, 0.01]), cpu=small))
        return out[:2] if small else out

    def benchmark_cases(self) -> Sequence[Case]:
        # ~200 MB of traffic each
        return [
            case("mish_backward", "float32", (4096, 4096), std=3.0),
            case("mish_backward", "bfloat16", (8192, 4096), std=3.0),
            case("mish_backward", "float16", (8192, 4096), std=3.0),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        dy = floats(c.shape, c.dtype, gen, layout=layout)
        x = floats(c.shape, c.dtype, gen, std=c.get("std", 1.0), mean=c.get("mean", 0.0),
                   layout=layout, specials=c.get("specials", 0.0))
        return Call(c.entry, (dy, x))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        dy, x = call.args[0].double(), call.args[1].double()
        s = torch.sigmoid(x)
        t = torch.tanh(torch.nn.functional.softplus(x))
        value = dy * (t + x * s * (1 - t * t))
        # PyTorch's formula, NaN at x = +-inf (inf * 0) included: same as the line above.
        # Below x ~ -87, float32's exp(x) and sigmoid(x) leave the normal range (F32_FLOOR).
        scale = dy.abs() * (t.abs() + x.abs() * s + (1 + x.abs()) * F32_FLOOR)
        return (Expected(value, call.args[1].dtype, scale),)

    def baseline(self, call: Call) -> object:
        return torch.ops.aten.mish_backward(call.args[0], call.args[1])

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        # two exps, log1p, tanh, a division and ~6 multiply-adds
        return Cost(flops=12.0 * n, bytes=float(3 * n * itemsize(c.dtype)), dtype="float32")
