"""vllm::shuffle_rows — ``vllm._custom_ops.shuffle_rows(input_tensor, dst2src_map)`` (vLLM
0.13.0, csrc/moe/moe_permute_unpermute_op.cu): the MoE permute step, a new tensor whose row
``d`` is ``input_tensor[dst2src_map[d]]`` (rows repeat: each token once per chosen expert).

``input_tensor`` is ``[num_src, num_cols]``, contiguous, float32, float16, bfloat16, float8
(e4m3fn, e5m2) or uint8 (packed fp4), ``num_cols`` a multiple of 16 (vLLM's check);
``dst2src_map`` is int32 ``[num_dst]`` with values in ``[0, num_src)``. Exact: a copy. The maps
are real MoE permutations: the entries of skewed top-k routing sorted by expert, each mapped to
its token.
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
from operators.vllm._routing import popularity, route

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _shuffle_rows_kernel(in_ptr, map_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    d = tl.program_id(0)
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = c < cols
    src = tl.load(map_ptr + d).to(tl.int64)
    x = tl.load(in_ptr + src * cols + c, mask=mask)
    tl.store(out_ptr + d.to(tl.int64) * cols + c, x, mask=mask)


def shuffle_rows(input_tensor, dst2src_map):
    num_dst = dst2src_map.numel()
    cols = input_tensor.shape[1]
    out = torch.empty((num_dst, cols), dtype=input_tensor.dtype, device=input_tensor.device)
    if num_dst == 0 or cols == 0:
        return out
    block = min(2048, triton.next_power_of_2(cols))
    _shuffle_rows_kernel[(num_dst, triton.cdiv(cols, block))](input_tensor, dst2src_map, out,
                                                               cols, BLOCK=block)
    return out
'''

# Reads the map as src -> dst (out[map[i]] = input[i], for the first num_src rows): right for
# the identity map only.
NEGATIVE_SCATTER = SOLUTION.replace(
    "    src = tl.load(map_ptr + d).to(tl.int64)\n"
    "    x = tl.load(in_ptr + src * cols + c, mask=mask)\n"
    "    tl.store(out_ptr + d.to(tl.int64) * cols + c, x, mask=mask)\n",
    "    dst = tl.load(map_ptr + d).to(tl.int64)\n"
    "    x = tl.load(in_ptr + d.to(tl.int64) * cols + c, mask=mask & (d < num_src))\n"
    "    tl.store(out_ptr + dst * cols + c, x, mask=mask & (d < num_src))\n").replace(
    "def _shuffle_rows_kernel(in_ptr, map_ptr, out_ptr, cols, BLOCK: tl.constexpr):",
    "def _shuffle_rows_kernel(in_ptr, map_ptr, out_ptr, cols, num_src, BLOCK: tl.constexpr):"
).replace("out,\n                                                               cols, BLOCK=block)",
          "out,\n                                                               cols, "
          "input_tensor.shape[0], BLOCK=block)")

# Launches num_cols // BLOCK column blocks per row: the end of a row whose width is not a
# multiple of the block is never copied (right for power-of-two widths).
NEGATIVE_NO_TAIL = SOLUTION.replace(
    "    block = min(2048, triton.next_power_of_2(cols))\n",
    "    block = min(2048, max(16, triton.next_power_of_2(cols) // 2))\n").replace(
    "(num_dst, triton.cdiv(cols, block))", "(num_dst, cols // block)")

_DTYPES = ("bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e5m2", "uint8")
# (tokens, topk, hidden): Mixtral-8x7B (top-2 of 8, 4096), DeepSeek-V3 (top-8 of 256, 7168),
# Qwen3-30B-A3B (top-8 of 128, 2048).
_MODELS = ((2, 8, 4096), (8, 256, 7168), (8, 128, 2048))


def _case(dtype: str, tokens: int, cols: int, *, topk: int = 2, experts: int = 8,
          mapping: str = "moe", cpu: bool = False) -> Case:
    return case("shuffle_rows", dtype, (tokens, cols), topk=topk, experts=experts,
                mapping=mapping, cpu=cpu)


@register("vllm::shuffle_rows", version=1, kind=Kind.COMPUTE)
class ShuffleRows(OperatorSpec):
    entry_points = (
        EntryPoint(
            "shuffle_rows",
            "shuffle_rows(input_tensor: Tensor, dst2src_map: Tensor) -> Tensor",
            "Returns a new [dst2src_map.numel(), num_cols] tensor whose row d is "
            "input_tensor[dst2src_map[d]].",
        ),
    )
    description = (
        "The MoE permute step as vLLM's `vllm._custom_ops.shuffle_rows(input_tensor, "
        "dst2src_map)`: return a new tensor `out` of shape `[num_dst, num_cols]` (num_dst = "
        "`dst2src_map.numel()`) and input_tensor's dtype with `out[d, :] = "
        "input_tensor[dst2src_map[d], :]`. `input_tensor` is `[num_src, num_cols]`, contiguous, "
        "of dtype float32, float16, bfloat16, float8_e4m3fn, float8_e5m2 or uint8 (packed "
        "4-bit values), with num_cols a multiple of 16; `dst2src_map` is int32 `[num_dst]` "
        "with values in [0, num_src) that may repeat (a token goes to each of its topk "
        "experts) and skip rows; num_dst may be 0. Copy the bytes exactly. Do not modify the "
        "inputs."
    )
    solution = SOLUTION
    negatives = (
        Negative("reads_map_backwards", "treats the map as source -> destination (out[map[i]] = "
                 "input[i]): right for the identity map only", NEGATIVE_SCATTER),
        Negative("no_column_tail", "launches num_cols // BLOCK column blocks per row, so the "
                 "end of a row whose width is not a multiple of the block is never copied",
                 NEGATIVE_NO_TAIL),
    )
    tolerances = {dt: Tolerance(0.0) for dt in _DTYPES if dt != "uint8"}  # a copy: exact

    def cases(self) -> Sequence[Case]:
        cs = [
            _case("float16", 16, 128, mapping="identity", cpu=True),   # vLLM's test map
            _case("bfloat16", 16, 256, mapping="reverse", cpu=True),
            _case("bfloat16", 9, 64, topk=2, experts=8, cpu=True),     # Mixtral routing
            _case("float8_e4m3fn", 7, 112, topk=8, experts=64, cpu=True),
            _case("uint8", 5, 48, topk=4, experts=16, cpu=True),
            _case("float32", 6, 16, topk=3, experts=7, cpu=True),
            _case("float8_e5m2", 3, 32, mapping="expand", cpu=True),
            _case("float16", 0, 64, cpu=True),                          # empty batch
        ]
        for dt in _DTYPES:
            for topk, experts, hidden in _MODELS:
                cols = hidden // 2 if dt == "uint8" else hidden  # uint8: two fp4 per byte
                cs.append(_case(dt, 333, cols, topk=topk, experts=experts))
            cs += [
                _case(dt, 1, 7168, topk=8, experts=256),
                _case(dt, 1024, 2064, topk=6, experts=64),
                _case(dt, 512, 1024, mapping="expand"),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in rng.sample(_DTYPES, 3):
            experts = rng.choice([8, 16, 60, 64, 128, 256])
            topk = rng.choice([k for k in (1, 2, 4, 6, 8) if k < experts])
            tokens = rng.randrange(1, 10 if small else 2000)
            cols = 16 * rng.randrange(1, 12 if small else 500)
            out.append(_case(dt, tokens, cols, topk=topk, experts=experts,
                             mapping=rng.choice(["moe", "moe", "expand"]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("bfloat16", 8192, 7168, topk=8, experts=256),      # DeepSeek-V3 prefill
            _case("float8_e4m3fn", 16384, 7168, topk=8, experts=256),
            _case("bfloat16", 16384, 4096, topk=2, experts=8),       # Mixtral
            _case("uint8", 16384, 3584, topk=8, experts=256),        # fp4-packed DeepSeek-V3
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        tokens, cols = c.shape
        if c.dtype == "uint8":
            x = torch.randint(0, 256, (tokens, cols), generator=gen, dtype=torch.uint8)
        else:
            x = randn((tokens, cols), c.dtype, gen)
        kind = str(c["mapping"])
        if kind == "identity":
            m = torch.arange(tokens)
        elif kind == "reverse":
            m = torch.arange(tokens - 1, -1, -1)
        elif kind == "expand":  # vLLM's expansion test: 2x rows, sources drawn at random
            m = torch.randint(0, max(tokens, 1), (2 * tokens,), generator=gen)
        else:  # the MoE permutation: (token, k) entries sorted by expert, each to its token
            topk = int(c["topk"])
            ids = route(tokens, topk, popularity(int(c["experts"]), gen), gen)
            m = torch.argsort(ids.reshape(-1), stable=True) // topk
        return Call(c.entry, (x, m.to(torch.int32)))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, m = call.args
        rows = x[m.long()]
        return (Expected(rows if x.dtype == torch.uint8 else rows.double(), x.dtype),)

    def baseline_library(self) -> str:
        return _baseline.library()

    def baseline(self, call: Call) -> object:
        x, m = call.args
        ops = _baseline.for_tensor(x)
        if ops is not None:
            return ops.shuffle_rows(x, m)
        if x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):  # index_select lacks fp8
            return torch.index_select(x.view(torch.uint8), 0, m).view(x.dtype)
        return torch.index_select(x, 0, m)

    def cost(self, c: Case) -> Cost:
        tokens, cols = c.shape
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        dst = 2 * tokens if c["mapping"] == "expand" else tokens * int(c["topk"])
        if c["mapping"] in ("identity", "reverse"):
            dst = tokens
        # every destination row written, every source row read at least once
        return Cost(flops=0.0, bytes=float(size * cols * (dst + tokens) + 4 * dst),
                    dtype=c.dtype)
