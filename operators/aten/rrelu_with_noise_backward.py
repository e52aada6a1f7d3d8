"""aten::rrelu_with_noise_backward — the gradient of randomized leaky ReLU given the forward's
noise: ``grad_output * noise`` in training, else ``grad_output`` where ``self > 0`` and
``grad_output * (lower + upper) / 2`` elsewhere (overloads default, out)."""

from __future__ import annotations

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
    if TRAINING:
        # the forward's noise already holds 1 where the input was positive
        noise = tl.load(noise_ptr + noise_off, mask=mask).to(tl.float32)
        g = dy * noise
    else:
        x = tl.load(x_ptr + x_off, mask=mask).to(tl.float32)
        g = tl.where(x > 0, dy, dy * negval)
    tl.store(out_ptr + out_off, g.to(out_ptr.dtype.element_ty), mask=mask)
"""

SOLUTION = (PRELUDE + LAUNCHER
            + strided_kernel("_rrelu_backward_kernel", ("dy", "x", "noise", "out"), _BODY,
                             scalars=("negval",), constexprs=("TRAINING",)) + r'''

def rrelu_with_noise_backward_out(grad_output, self, noise, lower, upper, training,
                                  self_is_result, *, out):
    # self_is_result: self holds the forward's output instead of its input; for the
    # non-negative slopes rrelu uses the sign test `self > 0` reads the same either way
    negval = (float(lower) + float(upper)) / 2
    dy, x, nz = torch.broadcast_tensors(grad_output, self, noise)
    _launch(_rrelu_backward_kernel, (dy, x, nz, out), (negval,), TRAINING=bool(training))
    return out


def rrelu_with_noise_backward(grad_output, self, noise, lower, upper, training,
                              self_is_result):
    shape = torch.broadcast_shapes(grad_output.shape, self.shape, noise.shape)
    out = torch.empty(shape, dtype=grad_output.dtype, device=grad_output.device)
    return rrelu_with_noise_backward_out(grad_output, self, noise, lower, upper, training,
                                         self_is_result, out=out)
''')

# Evaluation slope `lower` instead of the mean of lower and upper: right in training mode only.
NEGATIVE_LOWER_SLOPE = SOLUTION.replace("    negval = (float(lower) + float(upper)) / 2",
                                        "    negval = float(lower)")
assert NEGATIVE_LOWER_SLOPE != SOLUTION


@register("aten::rrelu_with_noise_backward", version=1, kind=Kind.COMPUTE)
class RreluWithNoiseBackward(OperatorSpec):
    entry_points = (
        EntryPoint("rrelu_with_noise_backward",
                   "rrelu_with_noise_backward(grad_output: Tensor, self: Tensor, noise: Tensor, "
                   "lower: Scalar, upper: Scalar, training: bool, self_is_result: bool) "
                   "-> Tensor",
                   "The gradient of rrelu_with_noise given its noise, times grad_output."),
        EntryPoint("rrelu_with_noise_backward_out",
                   "rrelu_with_noise_backward_out(grad_output: Tensor, self: Tensor, "
                   "noise: Tensor, lower: Scalar, upper: Scalar, training: bool, "
                   "self_is_result: bool, *, out: Tensor) -> Tensor",
                   "Writes rrelu_with_noise_backward(...) into out (same shape and dtype) and "
                   "returns out."),
    )
    description = (
        "Backward of randomized leaky ReLU, following PyTorch's "
        "`aten::rrelu_with_noise_backward(grad_output, self, noise, lower, upper, training, "
        "self_is_result)`; deterministic given `noise`. Training: `grad_input = grad_output * "
        "noise`, where noise is what the training forward wrote (1 where its input was "
        "positive, the random slope drawn from U(lower, upper) elsewhere); self is not used. "
        "Evaluation (training False): the slope is fixed, `grad_input = grad_output` where "
        "`self > 0` and `grad_output * (lower + upper) / 2` elsewhere (NaN in self takes the "
        "slope branch). `self_is_result` says self holds the forward's output instead of its "
        "input; with the non-negative lower/upper used here the sign test reads the same. "
        "lower and upper are Python floats. grad_output, self and noise have the same shape "
        "and dtype (float16, bfloat16 or float32), which the result has; compute in float32 "
        "and round once. Inputs may be non-contiguous (transposed or strided), 0-d or empty, "
        "with up to 6 dims."
    )
    solution = SOLUTION
    negatives = (
        Negative("lower_as_eval_slope", "uses lower instead of (lower + upper) / 2 as the "
                 "evaluation-mode slope", NEGATIVE_LOWER_SLOPE),
    )
    # Relative to |value|: one product of two dtype values (training), or of grad_output and
    # the slope rounded to float32 (evaluation): at most 2 roundings in float32 (4 u leaves
    # margin); half outputs: the final rounding (the float32 work is far below it).
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 4),
    }

    def cases(self) -> Sequence[Case]:
        E, OUT = "rrelu_with_noise_backward", "rrelu_with_noise_backward_out"
        cs = [
            case(E, "float32", (63, 145), lower=0.125, upper=1 / 3, training=True, cpu=True),
            case(E, "float32", (33, 65), lower=0.125, upper=1 / 3, training=False,
                 specials=0.02, cpu=True),
            case(E, "float16", (7, 17, 31), lower=0.1, upper=0.3, training=True, cpu=True),
            case(E, "bfloat16", (40, 50), lower=0.1, upper=0.3, training=False,
                 self_is_result=True, layout="transposed", cpu=True),
            case(OUT, "float16", (24, 50), lower=0.2, upper=0.2, training=False,
                 layout="strided", cpu=True),
            case(OUT, "bfloat16", (49, 63), lower=0.0, upper=0.5, training=True,
                 self_is_result=True, cpu=True),
            case(E, "float32", (), lower=0.125, upper=1 / 3, training=False, cpu=True),
            case(OUT, "float32", (0, 7), lower=0.125, upper=1 / 3, training=True, cpu=True),
        ]
        for dt in FLOATS:
            cs += [
                case(E, dt, (1024, 1024), lower=0.125, upper=1 / 3, training=True),
                case(E, dt, (16, 7, 57, 32, 29), lower=0.125, upper=1 / 3, training=False),
                case(E, dt, (511, 257), lower=0.01, upper=0.99, training=True,
                     layout="transposed", specials=0.01),
                case(E, dt, (5, 7, 11, 13), lower=0.3, upper=0.4, training=False,
                     self_is_result=True, layout="strided", specials=0.01),
                case(OUT, dt, (20, 320, 15), lower=0.125, upper=1 / 3, training=False),
                case(OUT, dt, (4097,), lower=0.0, upper=0.0, training=True),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in FLOATS:
            rows = rng.randrange(1, 50 if small else 900)
            cols = rng.randrange(1, 60 if small else 1100)
            lower = rng.choice([0.0, 0.05, 0.125, 0.2])
            out.append(case(rng.choice(["rrelu_with_noise_backward",
                                        "rrelu_with_noise_backward_out"]),
                            dt, (rows, cols), lower=lower,
                            upper=lower + rng.choice([0.0, 0.1, 1 / 3 - 0.125]),
                            training=rng.random() < 0.5, self_is_result=rng.random() < 0.3,
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            specials=rng.choice([0.0, 0.01]), cpu=small))
        return out[:2] if small else out

    def benchmark_cases(self) -> Sequence[Case]:
        E = "rrelu_with_noise_backward"
        # ~200 MB of traffic each (training reads grad_output and noise, evaluation grad_output
        # and self)
        return [
            case(E, "float32", (4096, 4096), lower=0.125, upper=1 / 3, training=True),
            case(E, "bfloat16", (8192, 4096), lower=0.125, upper=1 / 3, training=True),
            case(E, "float16", (8192, 4096), lower=0.125, upper=1 / 3, training=False),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        lower, upper, training = c["lower"], c["upper"], c["training"]
        dt = dtype_from_name(c.dtype)
        dy = floats(c.shape, c.dtype, gen, layout=layout)
        x = floats(c.shape, c.dtype, gen, specials=c.get("specials", 0.0))
        # the noise the training forward would have written: 1 for positive inputs, a slope
        # drawn from U(lower, upper) elsewhere (an evaluation forward leaves it untouched)
        slope = torch.rand(c.shape, generator=gen, dtype=torch.float64) * (upper - lower) + lower
        noise = torch.where(x > 0, 1.0, slope).to(dt)
        self_is_result = c.get("self_is_result", False)
        if self_is_result:
            # self holds the forward's output instead of its input
            x = (x.double() * torch.where(x > 0, 1.0, noise.double() if training
                                          else torch.full((), (lower + upper) / 2))).to(dt)
        x, noise = with_layout(x, layout), with_layout(noise, layout)
        args = (dy, x, noise, lower, upper, training, self_is_result)
        if c.entry == "rrelu_with_noise_backward_out":
            return out_call(c.entry, args, "out", dy.shape, dy.dtype)
        return Call(c.entry, args)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        dy_in, x_in, noise_in, lower, upper, training = call.args[:6]
        dy = dy_in.double()
        if training:
            value = dy * noise_in.double()
        else:
            value = torch.where(x_in.double() > 0, dy, dy * ((lower + upper) / 2))
        return (Expected(value, dy_in.dtype),)

    def baseline(self, call: Call) -> object:
        op = torch.ops.aten.rrelu_with_noise_backward
        if "out" in call.kwargs:
            return op.out(*call.args, out=call.kwargs["out"])
        return op(*call.args)

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        return Cost(flops=float(n), bytes=float(3 * n * itemsize(c.dtype)), dtype="float32")
