"""vllm::moe_sum — ``vllm._custom_ops.moe_sum(input, output)``: the MoE combine step, each
token's ``topk`` expert outputs summed into ``output`` (vLLM 0.13.0, csrc/moe/moe_align_sum_kernels.cu).

``input`` is ``[num_tokens, topk, hidden]`` and ``output`` ``[num_tokens, hidden]``, both
contiguous, one dtype (float16, bfloat16 or float32); ``output[t] = sum_k input[t, k]``, written
in place, None returned. vLLM's kernel sums topk 2..4 in the tensor's own dtype and hands other
topk to ``at::sum_out`` (float accumulation); the tolerance covers both.
"""

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
from operators.vllm import _baseline

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _moe_sum_kernel(in_ptr, out_ptr, hidden, topk, BLOCK: tl.constexpr):
    # One program per (token, block of hidden); the topk rows of a token are adjacent.
    tok = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < hidden
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    base = in_ptr + tok * topk * hidden
    for k in range(topk):
        acc += tl.load(base + k * hidden + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + tok * hidden + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


def moe_sum(input, output):
    num_tokens, topk, hidden = input.shape
    if num_tokens == 0 or hidden == 0:
        return None
    block = min(1024, triton.next_power_of_2(hidden))
    grid = (num_tokens, triton.cdiv(hidden, block))
    _moe_sum_kernel[grid](input, output, hidden, topk, BLOCK=block, num_warps=4)
    return None
'''

# Written for Mixtral's top-2: sums the first two expert outputs whatever topk is.
NEGATIVE_TOP2 = SOLUTION.replace("for k in range(topk):", "for k in range(2):")

# Walks hidden in whole blocks only: the tail of a hidden size that is not a multiple of the
# block is never written (right for power-of-two hidden sizes).
NEGATIVE_NO_TAIL = SOLUTION.replace(
    "grid = (num_tokens, triton.cdiv(hidden, block))", "grid = (num_tokens, hidden // block)"
).replace("block = min(1024, triton.next_power_of_2(hidden))",
          "block = min(1024, triton.next_power_of_2(hidden) // 2 or 1)")

_FLOATS = ("float16", "bfloat16", "float32")
# (num_tokens, topk, hidden) of MoE models: Mixtral-8x7B (top-2, 4096), Qwen1.5-MoE-A2.7B
# (top-4, 2048), Qwen3-30B-A3B (top-8, 2048), DeepSeek-V3 (top-8, 7168), Qwen2-57B-A14B (top-8,
# 3584), DBRX (top-4, 6144).
_PRODUCTION = ((512, 2, 4096), (333, 4, 2048), (256, 8, 2048), (128, 8, 7168), (200, 8, 3584),
               (97, 4, 6144))


@register("vllm::moe_sum", version=1, kind=Kind.COMPUTE)
class MoeSum(OperatorSpec):
    entry_points = (
        EntryPoint(
            "moe_sum",
            "moe_sum(input: Tensor, output: Tensor) -> None",
            "Writes input.sum(dim=1) ([num_tokens, topk, hidden] -> [num_tokens, hidden]) "
            "into output.",
        ),
    )
    description = (
        "The MoE combine step as vLLM's `vllm._custom_ops.moe_sum(input, output)`: `input` is "
        "`[num_tokens, topk, hidden]` (each token's `topk` expert outputs, already weighted) and "
        "`output` is `[num_tokens, hidden]`; write `output[t, h] = sum over k of input[t, k, h]` "
        "into `output` in place and return None. Both tensors are contiguous and share one "
        "dtype: float16, bfloat16 or float32. `topk` is any value from 1 up (2 for Mixtral, 8 for "
        "DeepSeek-V3 and Qwen3-MoE); `hidden` need not be a power of two or a multiple of 8. "
        "Accumulating in float32 is recommended (vLLM itself adds topk 2..4 in the input dtype). "
        "Inputs may hold inf or NaN, which propagate as in ordinary addition. Do not modify "
        "`input`."
    )
    solution = SOLUTION
    negatives = (
        Negative("top2_only", "sums only the first two expert outputs (hard-coded for Mixtral's "
                 "top-2), whatever topk is", NEGATIVE_TOP2),
        Negative("no_hidden_tail", "launches hidden // BLOCK programs per token, so the tail of a "
                 "hidden size that is not a multiple of the block is never written",
                 NEGATIVE_NO_TAIL),
    )

    def tolerance(self, case: Case, dtype: torch.dtype) -> Tolerance:
        # Summing topk terms in the output dtype (as vLLM does for topk <= 4) rounds each partial
        # sum: at most (topk - 1) u of sum |terms|, plus the final rounding of u |value| <= u of
        # the same; float32 accumulation is well within that.
        return Tolerance.ulps(dtype, max(1, case.shape[1]))

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("moe_sum", "float32", (1, 2, 8), cpu=True),
            case("moe_sum", "float16", (7, 2, 64), cpu=True),
            case("moe_sum", "bfloat16", (5, 8, 96), cpu=True),
            case("moe_sum", "float32", (3, 3, 100), cpu=True),
            case("moe_sum", "float16", (4, 1, 33), cpu=True),
            case("moe_sum", "bfloat16", (2, 6, 200), cpu=True),
            case("moe_sum", "float32", (6, 4, 128), values="cancel", cpu=True),
            case("moe_sum", "float32", (3, 2, 40), values="specials", cpu=True),
            case("moe_sum", "float16", (9, 4, 1), cpu=True),
        ]
        for dt in _FLOATS:
            cs += [case("moe_sum", dt, shape) for shape in _PRODUCTION]
            cs += [
                case("moe_sum", dt, (1, 8, 7168)),
                case("moe_sum", dt, (77, 3, 1000)),
                case("moe_sum", dt, (1000, 2, 333)),
                case("moe_sum", dt, (64, 6, 1408), values="cancel"),
                case("moe_sum", dt, (31, 5, 4100), std=300.0),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS:
            tokens = rng.randrange(1, 12 if small else 2000)
            topk = rng.choice([1, 2, 3, 4, 6, 8])
            hidden = rng.randrange(1, 300 if small else 8000)
            values = rng.choice(["randn", "randn", "cancel"])
            out.append(case("moe_sum", dt, (tokens, topk, hidden), values=values, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("moe_sum", "bfloat16", (16384, 2, 4096)),   # Mixtral-8x7B prefill
            case("moe_sum", "bfloat16", (8192, 8, 7168)),    # DeepSeek-V3 prefill chunk
            case("moe_sum", "bfloat16", (16384, 8, 2048)),   # Qwen3-30B-A3B
            case("moe_sum", "float16", (16384, 4, 2048)),    # Qwen1.5-MoE-A2.7B
            case("moe_sum", "float32", (8192, 4, 2048)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dt = c.torch_dtype
        tokens, topk, hidden = c.shape
        values = c.get("values", "randn")
        x = randn((tokens, topk, hidden), dt, gen, std=float(c.get("std", 1.0)))
        if values == "cancel":
            # Expert outputs that nearly cancel: the sum is small next to its terms.
            half = randn((tokens, 1, hidden), dt, gen, std=100.0)
            x = x.clone()
            x[:, :1] += half.to(dt)
            x[:, -1:] -= half.to(dt)
        elif values == "specials":
            flat = x.view(-1)
            idx = torch.randperm(flat.numel(), generator=gen)[:6]
            flat[idx] = torch.tensor([float("inf"), float("-inf"), float("nan"), 1e30, -1e30,
                                      float("inf")], dtype=dt)
        out = torch.empty((tokens, hidden), dtype=dt)
        return Call(c.entry, (x, out), outputs=(Out.arg(1),), mutable=frozenset({1}),
                    out_buffers=frozenset({1}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, out = call.args
        x64 = x.double()
        return (Expected(x64.sum(dim=1), out.dtype, x64.abs().sum(dim=1)),)

    def baseline_library(self) -> str:
        return _baseline.library()

    def baseline(self, call: Call) -> object:
        x, out = call.args
        ops = _baseline.for_tensor(x)
        if ops is not None:
            ops.moe_sum(x, out)
            return None
        torch.sum(x, dim=1, out=out)
        return None

    def cost(self, c: Case) -> Cost:
        tokens, topk, hidden = c.shape
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        n_out = tokens * hidden
        return Cost(flops=float(max(topk - 1, 0) * n_out),
                    bytes=float(size * (topk + 1) * n_out), dtype=c.dtype)
