"""aten::log_sigmoid_backward — the gradient of ``log(sigmoid(x))``:
``grad_output * sigmoid(-x)`` (overloads default, grad_input)."""

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
    out_call,
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

# Recomputes z = exp(-|x|) as PyTorch's CUDA kernel does; the buffer (the same z, rounded to the
# dtype by the forward) is not read, which saves its traffic and its rounding.
_BODY = """    dy = tl.load(dy_ptr + dy_off, mask=mask).to(tl.float32)
    x = tl.load(x_ptr + x_off, mask=mask).to(tl.float32)
    z = libdevice.exp(-tl.abs(x))  # tl.exp is an approximation: off by many ulps for large |x|
    # sigmoid(-x) without cancellation: 1 / (1 + e^x) for x < 0, e^-x / (1 + e^-x) otherwise
    d = tl.where(x < 0, 1.0 / (1.0 + z), z / (1.0 + z))
    tl.store(out_ptr + out_off, (dy * d).to(out_ptr.dtype.element_ty), mask=mask)
"""

SOLUTION = (PRELUDE + "from triton.language.extra import libdevice\n" + LAUNCHER
            + strided_kernel("_log_sigmoid_backward_kernel", ("dy", "x", "out"), _BODY) + r'''

def log_sigmoid_backward(grad_output, self, buffer):
    shape = torch.broadcast_shapes(grad_output.shape, self.shape)
    out = torch.empty(shape, dtype=self.dtype, device=self.device)
    return log_sigmoid_backward_grad_input(grad_output, self, buffer, grad_input=out)


def log_sigmoid_backward_grad_input(grad_output, self, buffer, *, grad_input):
    dy, x = torch.broadcast_tensors(grad_output, self)
    _launch(_log_sigmoid_backward_kernel, (dy, x, grad_input))
    return grad_input
''')

# 1 - sigmoid(x) computed naively: fine for half outputs and x near 0, but the subtraction
# cancels for positive x (all digits lost once sigmoid(x) rounds to 1 in float32).
NEGATIVE_ONE_MINUS_SIGMOID = SOLUTION.replace(
    "    d = tl.where(x < 0, 1.0 / (1.0 + z), z / (1.0 + z))",
    "    d = 1.0 - 1.0 / (1.0 + tl.exp(-x))")
assert NEGATIVE_ONE_MINUS_SIGMOID != SOLUTION


@register("aten::log_sigmoid_backward", version=1, kind=Kind.COMPUTE)
class LogSigmoidBackward(OperatorSpec):
    entry_points = (
        EntryPoint("log_sigmoid_backward",
                   "log_sigmoid_backward(grad_output: Tensor, self: Tensor, buffer: Tensor) "
                   "-> Tensor",
                   "The gradient of log(sigmoid(self)) times grad_output; buffer is the "
                   "forward's exp(-|self|)."),
        EntryPoint("log_sigmoid_backward_grad_input",
                   "log_sigmoid_backward_grad_input(grad_output: Tensor, self: Tensor, "
                   "buffer: Tensor, *, grad_input: Tensor) -> Tensor",
                   "Writes log_sigmoid_backward(...) into grad_input (same shape and dtype as "
                   "self) and returns grad_input."),
    )
    description = (
        "Backward of log-sigmoid, following PyTorch's `aten::log_sigmoid_backward(grad_output, "
        "self, buffer)` where self is the forward's input: `grad_input = grad_output * "
        "sigmoid(-self)`, i.e. with `z = exp(-|x|)`: `grad_output * (1 - z / (1 + z))` where "
        "x < 0 and `grad_output * z / (1 + z)` elsewhere. The buffer contract: `buffer` is what "
        "PyTorch's CPU forward `aten::log_sigmoid_forward` returns beside its output, "
        "`exp(-|self|)` rounded to self's dtype, of self's shape (its strides may differ). "
        "PyTorch's CPU backward reads it; its CUDA forward returns an empty buffer and the "
        "CUDA backward recomputes z from self. You may do either (both meet the tolerance); "
        "buffer must not be modified. grad_output, self and buffer share one dtype (float16, "
        "bfloat16 or float32), which the result has; compute in float32 and round once. "
        "Inputs may be non-contiguous (transposed or strided), 0-d or empty, with up to 6 dims. "
        "|self| is often large (std up to 40): for x >> 0 the result is tiny but must keep its "
        "relative accuracy (no 1 - sigmoid(x) cancellation); x = -inf gives grad_output, "
        "x = +inf gives 0, NaN propagates."
    )
    solution = SOLUTION
    negatives = (
        Negative("one_minus_sigmoid", "computes 1 - sigmoid(x), which cancels for positive x "
                 "(relative error grows like e^x, all lost beyond x ~ 17)",
                 NEGATIVE_ONE_MINUS_SIGMOID),
    )
    # Relative to |value| (+ float32's underflow floor once exp(-|x|) leaves the normal range).
    # float32: exp, add, divide, multiply: 4 u, 6 with margin. Half outputs: the final rounding
    # (1 u) plus, for PyTorch's CPU kernel that reads the buffer, the buffer's own rounding to
    # the dtype (1 u of z, at most 1 u of the result): 3 u.
    tolerances = {
        "float16": Tolerance.ulps("float16", 3),
        "bfloat16": Tolerance.ulps("bfloat16", 3),
        "float32": Tolerance.ulps("float32", 6),
    }

    def cases(self) -> Sequence[Case]:
        E, G = "log_sigmoid_backward", "log_sigmoid_backward_grad_input"
        cs = [
            case(E, "float32", (63, 145), std=3.0, cpu=True),
            case(E, "float32", (33, 65), std=40.0, specials=0.02, cpu=True),
            case(E, "float16", (7, 17, 31), std=3.0, cpu=True),
            case(E, "bfloat16", (40, 50), std=10.0, layout="transposed", specials=0.02,
                 cpu=True),
            case(G, "float16", (24, 50), std=5.0, layout="strided", cpu=True),
            case(E, "float32", (), std=3.0, cpu=True),
            case(G, "bfloat16", (0, 7), cpu=True),
        ]
        for dt in FLOATS:
            cs += [
                case(E, dt, (1024, 1024), std=3.0),
                case(E, dt, (16, 7, 57, 32, 29), std=1.0),
                case(E, dt, (511, 257), std=40.0, layout="transposed", specials=0.01),
                case(E, dt, (5, 7, 11, 13), std=10.0, layout="strided"),
                case(G, dt, (20, 320, 15), std=20.0, specials=0.01),
                case(G, dt, (4097,), std=3.0),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in FLOATS:
            rows = rng.randrange(1, 50 if small else 900)
            cols = rng.randrange(1, 60 if small else 1100)
            out.append(case(rng.choice(["log_sigmoid_backward",
                                        "log_sigmoid_backward_grad_input"]),
                            dt, (rows, cols), std=rng.choice([1.0, 3.0, 10.0, 40.0]),
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            specials=rng.choice([0.0, 0.01]), cpu=small))
        return out[:2] if small else out

    def benchmark_cases(self) -> Sequence[Case]:
        # ~200 MB (PyTorch's CPU kernel reads the buffer too: ~270 MB)
        return [
            case("log_sigmoid_backward", "float32", (4096, 4096), std=3.0),
            case("log_sigmoid_backward", "bfloat16", (8192, 4096), std=3.0),
            case("log_sigmoid_backward", "float16", (8192, 4096), std=3.0),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        dy = floats(c.shape, c.dtype, gen, layout=layout)
        x = floats(c.shape, c.dtype, gen, std=c.get("std", 1.0), layout=layout,
                   specials=c.get("specials", 0.0))
        # the buffer exactly as PyTorch's CPU forward makes it
        buffer = torch.ops.aten.log_sigmoid_forward(x)[1]
        if c.entry == "log_sigmoid_backward_grad_input":
            return out_call(c.entry, (dy, x, buffer), "grad_input", x.shape, x.dtype)
        return Call(c.entry, (dy, x, buffer))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        dy, x = call.args[0].double(), call.args[1].double()
        value = dy * torch.sigmoid(-x)
        scale = value.abs() + dy.abs() * F32_FLOOR
        return (Expected(value, call.args[1].dtype, scale),)

    def baseline(self, call: Call) -> object:
        op = torch.ops.aten.log_sigmoid_backward
        if "grad_input" in call.kwargs:
            return op.grad_input(*call.args, grad_input=call.kwargs["grad_input"])
        return op(*call.args)

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        # grad_output and self in, grad_input out (the buffer need not be read)
        return Cost(flops=5.0 * n, bytes=float(3 * n * itemsize(c.dtype)), dtype="float32")
