"""aten::linear — ``input @ weight.T + bias`` over any leading batch dims (overloads default,
out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._matmul import FLOATS, KERNEL, TOLERANCES, dot_expected, element_size
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
    case,
)

SOLUTION = KERNEL + r'''

def _linear(input, weight, bias, out):
    b = weight.t()                                        # (K, N), a view
    a = input.unsqueeze(0) if input.dim() == 1 else input
    c = out.unsqueeze(0) if input.dim() == 1 else out
    if a.dim() == 2:
        return _gemm(a, b, c, bias)
    # Leading dims fold into the rows when input's and out's strides allow it (no copy) ...
    a2, c2 = _merge_rows(a), _merge_rows(c)
    if a2 is not None and c2 is not None:
        return _gemm(a2, b, c2, bias)
    # ... else they are batch dims over which the weight repeats (stride 0).
    batch = list(c.shape[:-2])
    return _gemm(a, b.expand(*batch, b.shape[0], b.shape[1]), c, bias)


def linear(input, weight, bias=None):
    shape = list(input.shape[:-1]) + [weight.shape[0]]
    out = torch.empty(shape, dtype=input.dtype, device=input.device)
    _linear(input, weight, bias, out)
    return out


def linear_out(input, weight, bias=None, *, out):
    _linear(input, weight, bias, out)
    return out
'''

# Forgets the bias: right whenever bias is None.
NEGATIVE_NO_BIAS = SOLUTION.replace(
    "def _linear(input, weight, bias, out):\n",
    "def _linear(input, weight, bias, out):\n    bias = None\n")

# Indexes weight as a contiguous row-major (N, K) matrix: right for the usual contiguous weight,
# wrong for a weight stored transposed (e.g. tied to another layer's (K, N) matrix).
NEGATIVE_ROW_MAJOR_WEIGHT = SOLUTION.replace(
    "    b = weight.t()                                        # (K, N), a view\n",
    "    b = weight.as_strided((weight.shape[1], weight.shape[0]), (1, weight.shape[1]))\n")


@register("aten::linear", version=1, kind=Kind.COMPUTE)
class Linear(OperatorSpec):
    entry_points = (
        EntryPoint("linear", "linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) "
                   "-> Tensor",
                   "input @ weight.T + bias for input (*, K), weight (N, K), bias (N,) or None; "
                   "the result is (*, N)."),
        EntryPoint("linear_out", "linear_out(input: Tensor, weight: Tensor, bias: Tensor | None "
                   "= None, *, out: Tensor) -> Tensor",
                   "Writes linear(input, weight, bias) into out (already (*, N), the inputs' "
                   "dtype) and returns out."),
    )
    description = (
        "The affine map of `torch.nn.functional.linear(input, weight, bias)`: `out[..., n] = "
        "sum_k input[..., k] * weight[n, k] + bias[n]` for `input` of shape (*, K) with any "
        "number (0 to 3) of leading dims (a 1-D input (K,) gives an (N,) result), `weight` of "
        "shape (N, K) and `bias` of shape (N,) or None (no bias). All tensors have the same "
        "dtype (float16, bfloat16 or float32) and so does the result. Sizes need not be "
        "multiples of any block size; K may be 0 (the result is then the bias, or zeros). Any "
        "input may be non-contiguous: a transposed input, a weight stored transposed "
        "(column-major), a strided bias. Accumulate in float32, add the bias in float32 and "
        "round once. For float32 inputs use full float32 precision (as PyTorch does by "
        "default): no TF32, e.g. `tl.dot(..., input_precision=\"ieee\")`."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_bias", "never adds the bias", NEGATIVE_NO_BIAS),
        Negative("assumes_row_major_weight", "indexes weight as a contiguous (N, K) matrix, "
                 "ignoring its strides", NEGATIVE_ROW_MAJOR_WEIGHT),
    )
    tolerances = TOLERANCES

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = []
        for dt in FLOATS:
            f32 = dt == "float32"
            cs += [
                case("linear", dt, (33, 70), weight=(45, 70), bias=True, cpu=True),
                case("linear", dt, (3, 17, 40), weight=(19, 40), bias=False, cpu=f32),
                case("linear_out", dt, (4, 12, 30), weight=(14, 30), bias=True,
                     layout_w="transposed", cpu=dt != "float16"),
                case("linear", dt, (50,), weight=(20, 50), bias=True, cpu=dt == "float16"),
                case("linear", dt, (1000, 999), weight=(1001, 999), bias=True),
                case("linear", dt, (8, 129, 512), weight=(384, 512), bias=True),
                case("linear", dt, (4, 63, 145), weight=(511, 145), bias=False,
                     layout_x="transposed"),
                case("linear", dt, (2, 3, 49, 256), weight=(257, 256), bias=True,
                     layout_w="transposed"),
                case("linear", dt, (1, 4096), weight=(4096, 4096), bias=True),
                case("linear_out", dt, (2, 512, 768), weight=(3072, 768), bias=True,
                     layout_b="strided"),
            ]
        cs += [
            # leading dims that cannot fold into rows (transposed matrices), strided bias
            case("linear", "float32", (2, 3, 5, 24), weight=(13, 24), bias=True,
                 layout_x="transposed", layout_b="strided", cpu=True),
            case("linear", "bfloat16", (7, 17, 31), weight=(9, 31), bias=True,
                 layout_x="transposed", cpu=True),
            # K = 0: the result is the bias repeated
            case("linear", "float32", (3, 0), weight=(4, 0), bias=True, cpu=True),
            case("linear", "float32", (0, 5, 7), weight=(3, 7), bias=True, cpu=True),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        top = 40 if small else 600
        out = []
        for dt in FLOATS:
            if small and dt != "float32":
                continue
            lead = [rng.randrange(1, 4 if small else 8) for _ in range(rng.randrange(0, 3))]
            m, k, n = (rng.randrange(1, top) for _ in range(3))
            shape = (k,) if not lead and rng.random() < 0.2 else (*lead, m, k)
            out.append(case(rng.choice(["linear", "linear_out"]), dt, shape, weight=(n, k),
                            bias=rng.random() < 0.7,
                            layout_x=rng.choice(["contiguous", "transposed"]),
                            layout_w=rng.choice(["contiguous", "transposed"]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            # 137 GFLOP in half precision (~0.2 ms on an H200), 4096-scale in every dtype
            case("linear", "bfloat16", (4096, 4096), weight=(4096, 4096), bias=True),
            case("linear", "float16", (4, 1024, 4096), weight=(4096, 4096), bias=True),
            case("linear", "float32", (4096, 4096), weight=(4096, 4096), bias=False),
            # a decode-like skinny batch: weight-read bound (128 MB of weight)
            case("linear", "bfloat16", (16, 4096), weight=(16384, 4096), bias=False),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = randn(c.shape, c.dtype, gen, layout=c.get("layout_x", "contiguous"))
        w = randn(c["weight"], c.dtype, gen, layout=c.get("layout_w", "contiguous"))
        n = c["weight"][0]
        bias = randn((n,), c.dtype, gen, layout=c.get("layout_b", "contiguous")) \
            if c["bias"] else None
        if c.entry == "linear_out":
            out = torch.empty((*c.shape[:-1], n), dtype=x.dtype)
            return Call(c.entry, (x, w, bias), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, (x, w, bias))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, w, bias = call.args
        return (dot_expected(x, w.t(), bias),)

    def baseline(self, call: Call) -> object:
        x, w, bias = call.args
        if call.entry == "linear_out":
            return torch.ops.aten.linear.out(x, w, bias, out=call.kwargs["out"])
        return torch.nn.functional.linear(x, w, bias)

    def cost(self, c: Case) -> Cost:
        n, k = c["weight"]
        rows = 1
        for d in c.shape[:-1]:
            rows *= d
        size = element_size(c.dtype)
        elems = rows * k + n * k + rows * n + (n if c["bias"] else 0)
        return Cost(flops=2.0 * rows * n * k + (rows * n if c["bias"] else 0),
                    bytes=float(size * elems), dtype=c.dtype)
