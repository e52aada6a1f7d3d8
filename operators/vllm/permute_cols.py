"""vllm::permute_cols — ``vllm._custom_ops.permute_cols(a, perm)`` (vLLM 0.13.0,
csrc/permute_cols.cu): ``a[..., perm]`` as a new tensor, the activation reordering of GPTQ
act-order (desc_act) Marlin kernels.

``a`` is float16 or bfloat16, contiguous, its last dim K a multiple of 8; ``perm`` int32 ``[K]``,
a permutation. Exact: the result is a copy. Act-order permutations group the columns of each
quantization group (``argsort(g_idx)``), so the cases use those beside fully random ones, the
identity (act-order off) and the reversal.
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
def _permute_cols_kernel(a_ptr, perm_ptr, out_ptr, rows, k, BLOCK_M: tl.constexpr,
                         BLOCK_K: tl.constexpr):
    r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    c = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    cmask = c < k
    src = tl.load(perm_ptr + c, mask=cmask, other=0)
    mask = (r < rows)[:, None] & cmask[None, :]
    base = r[:, None].to(tl.int64) * k
    x = tl.load(a_ptr + base + src[None, :], mask=mask)
    tl.store(out_ptr + base + c[None, :], x, mask=mask)


def permute_cols(a, perm):
    k = a.shape[-1]
    out = torch.empty_like(a)
    rows = a.numel() // k if k else 0
    if rows == 0:
        return out
    block_k = min(1024, triton.next_power_of_2(k))
    block_m = max(1, 4096 // block_k)
    grid = (triton.cdiv(rows, block_m), triton.cdiv(k, block_k))
    _permute_cols_kernel[grid](a, perm, out, rows, k, BLOCK_M=block_m, BLOCK_K=block_k)
    return out
'''

# Scatters instead of gathering (out[..., perm[k]] = a[..., k], the inverse permutation): right
# for the identity and the reversal, wrong for act-order permutations.
NEGATIVE_SCATTER = SOLUTION.replace(
    "    x = tl.load(a_ptr + base + src[None, :], mask=mask)\n"
    "    tl.store(out_ptr + base + c[None, :], x, mask=mask)\n",
    "    x = tl.load(a_ptr + base + c[None, :], mask=mask)\n"
    "    tl.store(out_ptr + base + src[None, :], x, mask=mask)\n")

# Launches K // BLOCK_K column blocks: the last columns of a K that is not a multiple of the
# block are never written.
NEGATIVE_NO_TAIL = SOLUTION.replace(
    "    block_k = min(1024, triton.next_power_of_2(k))\n",
    "    block_k = min(1024, max(8, triton.next_power_of_2(k) // 2))\n").replace(
    "grid = (triton.cdiv(rows, block_m), triton.cdiv(k, block_k))",
    "grid = (triton.cdiv(rows, block_m), k // block_k)")

_HALVES = ("float16", "bfloat16")
# K of act-order GPTQ layers: Llama-2-7B/13B hidden and MLP (4096, 11008, 5120, 13824),
# Llama-3-8B MLP (14336), Llama-3-70B (8192, 28672).
_KS = (4096, 11008, 5120, 13824, 14336, 8192, 28672)


def _case(dtype: str, shape: Sequence[int], perm: str = "act_order", *,
          cpu: bool = False) -> Case:
    return case("permute_cols", dtype, shape, perm=perm, cpu=cpu)


@register("vllm::permute_cols", version=1, kind=Kind.COMPUTE)
class PermuteCols(OperatorSpec):
    entry_points = (
        EntryPoint(
            "permute_cols",
            "permute_cols(a: Tensor, perm: Tensor) -> Tensor",
            "Returns a new tensor with a's columns permuted: out[..., k] = a[..., perm[k]].",
        ),
    )
    description = (
        "Column permutation as vLLM's `vllm._custom_ops.permute_cols(a, perm)` (the "
        "activation reordering of act-order GPTQ Marlin layers): return a new tensor `out` of "
        "a's shape and dtype with `out[..., k] = a[..., perm[k]]` for every k. `a` is float16 "
        "or bfloat16, contiguous, of any rank >= 1 (its leading dims flattened into rows, "
        "possibly none) with the last dim K a multiple of 8; `perm` is int32 `[K]`, a "
        "permutation of 0..K-1. The result is an exact copy of the values. Do not modify `a` "
        "or `perm`."
    )
    solution = SOLUTION
    negatives = (
        Negative("scatters", "writes out[..., perm[k]] = a[..., k] (the inverse permutation): "
                 "right only when perm is its own inverse, such as the identity", NEGATIVE_SCATTER),
        Negative("no_column_tail", "launches K // BLOCK column blocks, so the last columns of a "
                 "K that is not a multiple of the block are never written", NEGATIVE_NO_TAIL),
    )
    tolerances = {"float16": Tolerance(0.0), "bfloat16": Tolerance(0.0)}  # a copy: exact

    def cases(self) -> Sequence[Case]:
        cs = [
            _case("float16", (5, 64), "identity", cpu=True),       # act-order off
            _case("bfloat16", (7, 256), cpu=True),
            _case("float16", (3, 1000), "random", cpu=True),
            _case("bfloat16", (2, 3, 96), "reverse", cpu=True),
            _case("bfloat16", (1, 4096), cpu=True),                 # one decode token
            _case("float16", (33, 24), "random", cpu=True),
            _case("float16", (0, 128), cpu=True),                   # no rows
        ]
        for dt in _HALVES:
            for k in _KS:
                cs.append(_case(dt, (64, k)))
            cs += [
                _case(dt, (1, 14336)),
                _case(dt, (544, 4096), "random"),     # vLLM's test shapes
                _case(dt, (67, 8192), "reverse"),
                _case(dt, (4, 129, 5120)),
                _case(dt, (1000, 8)),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _HALVES * 2:
            rows = rng.randrange(1, 9 if small else 3000)
            k = 8 * rng.randrange(1, 64 if small else 3600)
            out.append(_case(dt, (rows, k), rng.choice(["act_order", "random"]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("float16", (8192, 14336)),   # Llama-3-8B MLP down_proj input, 8K tokens
            _case("bfloat16", (4096, 28672)),  # Llama-3-70B
            _case("float16", (16384, 4096), "random"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        k = c.shape[-1]
        a = randn(c.shape, c.dtype, gen)
        kind = str(c["perm"])
        if kind == "identity":
            perm = torch.arange(k)
        elif kind == "reverse":
            perm = torch.arange(k - 1, -1, -1)
        elif kind == "random":
            perm = torch.randperm(k, generator=gen)
        else:  # act-order: columns ranked by activation size, g_idx = rank // group size
            group = 128 if k % 128 == 0 else 8
            g_idx = torch.randperm(k, generator=gen) // group
            perm = torch.argsort(g_idx, stable=True)
        return Call(c.entry, (a, perm.to(torch.int32)))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        a, perm = call.args
        return (Expected(a[..., perm.long()].double(), a.dtype),)

    def baseline_library(self) -> str:
        return _baseline.library()

    def baseline(self, call: Call) -> object:
        a, perm = call.args
        ops = _baseline.for_tensor(a)
        if ops is not None:
            return ops.permute_cols(a, perm)
        return torch.index_select(a, a.dim() - 1, perm)

    def cost(self, c: Case) -> Cost:
        n = 1
        for d in c.shape:
            n *= d
        return Cost(flops=0.0, bytes=float(2 * 2 * n + 4 * c.shape[-1]), dtype=c.dtype)
