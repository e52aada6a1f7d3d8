"""vllm::moe_align_block_size — ``vllm._custom_ops.moe_align_block_size(topk_ids, num_experts,
block_size, sorted_token_ids, experts_ids, num_tokens_post_pad, expert_map=None)`` (vLLM 0.13.0):
the routing step before the fused-MoE GEMM, grouping the flattened ``topk_ids`` entries by expert
into block-size-padded segments.

In place, returns None: ``sorted_token_ids`` (int32) gets the entry indices (``t * topk + k``)
of each expert, expert by expert, each expert's segment padded to a multiple of ``block_size``
with the sentinel ``topk_ids.numel()``; ``experts_ids`` (int32) the expert of each block of
``block_size`` entries; ``num_tokens_post_pad`` (int32 ``[1]``) the padded total. With
``expert_map`` (int32 ``[num_experts]``, vLLM's ``ignore_invalid_experts=True`` path) ids are
mapped to local experts first and entries mapped to -1 are dropped. The buffers are sized as
vLLM's Python wrapper sizes them (see :func:`operators.vllm._moe_align.buffer_sizes`).

Compared: the count of blocks and every block's expert exactly; each expert's padded segment as
a multiset (vLLM fills it with atomics); nothing past ``num_tokens_post_pad`` (see
:mod:`operators.vllm._moe_align`). The op is one small pass over the ids: even DeepSeek-V3's
65536-token chunks run in tens of microseconds, so its benchmark cases are the largest
production batches, not 50 µs ones.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

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
from operators.vllm import _baseline
from operators.vllm._moe_align import (
    Segments,
    align,
    buffer_sizes,
    ep_map,
    hidden_ep,
    hidden_tokens,
    local_experts,
    place,
)
from operators.vllm._routing import popularity, route

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _expert_of(topk_ptr, map_ptr, offs, numel, num_experts, HAS_MAP: tl.constexpr):
    # The (local) expert of each entry and whether it is placed at all.
    mask = offs < numel
    e = tl.load(topk_ptr + offs, mask=mask, other=0).to(tl.int32)
    valid = mask & (e >= 0) & (e < num_experts)
    if HAS_MAP:
        e = tl.load(map_ptr + e, mask=valid, other=-1)
        valid = valid & (e >= 0)
    return e, valid


@triton.jit
def _count_kernel(topk_ptr, map_ptr, counts_ptr, numel, num_experts,
                  HAS_MAP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    e, valid = _expert_of(topk_ptr, map_ptr, offs, numel, num_experts, HAS_MAP)
    tl.atomic_add(counts_ptr + e, 1, mask=valid)


@triton.jit
def _layout_kernel(counts_ptr, cursor_ptr, expert_ids_ptr, total_ptr, num_experts, block_size,
                   num_blocks, BLOCK_E: tl.constexpr, BLOCK_B: tl.constexpr):
    # One program: pad each count to a block, exclusive prefix sum -> each expert's start
    # (its write cursor), the total, and the expert of every block.
    ex = tl.arange(0, BLOCK_E)
    em = ex < num_experts
    c = tl.load(counts_ptr + ex, mask=em, other=0)
    padded = (c + block_size - 1) // block_size * block_size
    incl = tl.cumsum(padded, 0)
    tl.store(cursor_ptr + ex, incl - padded, mask=em)
    total = tl.sum(padded, 0)
    tl.store(total_ptr, total)
    end_block = tl.where(em, incl // block_size, 2147483647)
    used = total // block_size
    for b0 in range(0, num_blocks, BLOCK_B):
        b = b0 + tl.arange(0, BLOCK_B)
        expert = tl.sum((end_block[None, :] <= b[:, None]).to(tl.int32), 1)
        tl.store(expert_ids_ptr + b, tl.where(b < used, expert, 0), mask=b < num_blocks)


@triton.jit
def _fill_kernel(ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.full([BLOCK], 0, tl.int32) + value, mask=offs < n)


@triton.jit
def _scatter_kernel(topk_ptr, map_ptr, cursor_ptr, sorted_ptr, numel, num_experts, n_sorted,
                    HAS_MAP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    e, valid = _expert_of(topk_ptr, map_ptr, offs, numel, num_experts, HAS_MAP)
    pos = tl.atomic_add(cursor_ptr + e, 1, mask=valid)
    tl.store(sorted_ptr + pos, offs.to(tl.int32), mask=valid & (pos < n_sorted))


def moe_align_block_size(topk_ids, num_experts, block_size, sorted_token_ids, experts_ids,
                         num_tokens_post_pad, expert_map=None):
    numel = topk_ids.numel()
    dev = topk_ids.device
    has_map = expert_map is not None
    emap = expert_map if has_map else topk_ids  # never read without a map
    counts = torch.zeros(num_experts, dtype=torch.int32, device=dev)
    cursor = torch.empty(num_experts, dtype=torch.int32, device=dev)
    block = 1024
    grid = (triton.cdiv(numel, block),)
    if numel:
        _count_kernel[grid](topk_ids, emap, counts, numel, num_experts,
                            HAS_MAP=has_map, BLOCK=block)
    _layout_kernel[(1,)](counts, cursor, experts_ids, num_tokens_post_pad, num_experts,
                         block_size, experts_ids.numel(),
                         BLOCK_E=triton.next_power_of_2(max(num_experts, 2)), BLOCK_B=64)
    n = sorted_token_ids.numel()
    if n:
        _fill_kernel[(triton.cdiv(n, block),)](sorted_token_ids, n, numel, BLOCK=block)
    if numel:
        _scatter_kernel[grid](topk_ids, emap, cursor, sorted_token_ids, numel, num_experts, n,
                              HAS_MAP=has_map, BLOCK=block)
    return None
'''

# Treats topk_ids as local expert ids, never reading expert_map: right without expert
# parallelism, wrong with it.
NEGATIVE_NO_MAP = SOLUTION.replace("    has_map = expert_map is not None\n",
                                   "    has_map = False\n")

# Gives every expert at least one block, even an expert with no entries: right when every
# expert is routed to (a large Mixtral batch), wrong for sparse routing over many experts.
NEGATIVE_EMPTY_BLOCK = SOLUTION.replace(
    "padded = (c + block_size - 1) // block_size * block_size",
    "padded = (tl.maximum(c, 1) + block_size - 1) // block_size * block_size")

_IDS = ("int32", "int64")


def _case(dtype: str, tokens: int, topk: int, experts: int, block: int, *, ep: int = 0,
          pad: bool = False, cpu: bool = False) -> Case:
    return case("moe_align_block_size", dtype, (tokens, topk), experts=experts, block=block,
                ep=ep, pad=pad, cpu=cpu)


@register("vllm::moe_align_block_size", version=1, kind=Kind.COMPUTE)
class MoeAlignBlockSize(OperatorSpec):
    entry_points = (
        EntryPoint(
            "moe_align_block_size",
            "moe_align_block_size(topk_ids: Tensor, num_experts: int, block_size: int, "
            "sorted_token_ids: Tensor, experts_ids: Tensor, num_tokens_post_pad: Tensor, "
            "expert_map: Tensor | None = None) -> None",
            "Groups the flattened topk_ids entries by expert into block_size-padded segments; "
            "writes sorted_token_ids, experts_ids and num_tokens_post_pad in place.",
        ),
    )
    description = (
        "MoE token alignment as vLLM's `vllm._custom_ops.moe_align_block_size(topk_ids, "
        "num_experts, block_size, sorted_token_ids, experts_ids, num_tokens_post_pad, "
        "expert_map=None)`, the step before the fused-MoE GEMM. `topk_ids` is "
        "`[num_tokens, topk]` (int32 or int64, contiguous): the experts each token is routed to "
        "(distinct within a row, in [0, num_experts)). Flatten it: entry `i = t * topk + k` "
        "belongs to expert `topk_ids.flatten()[i]`. If `expert_map` (int32 `[num_experts]`) is "
        "given, entry i belongs instead to local expert `expert_map[topk_ids.flatten()[i]]`, "
        "and entries whose map value is -1 are dropped entirely (not counted, not placed). Let "
        "`count[e]` be the number of entries of expert e and `padded[e] = ceil(count[e] / "
        "block_size) * block_size` (0 for an expert with no entries). Expert e's segment is "
        "positions `[start[e], start[e] + padded[e])` of `sorted_token_ids` with `start[e] = "
        "padded[0] + ... + padded[e-1]`; it holds the indices i of expert e's entries, and its "
        "remaining `padded[e] - count[e]` slots hold the sentinel `numel = topk_ids.numel()`. "
        "Write `num_tokens_post_pad[0] = padded[0] + ... + padded[num_experts-1]` and, for "
        "every block `b < num_tokens_post_pad[0] / block_size`, `experts_ids[b]` = the expert "
        "whose segment contains positions `[b * block_size, (b + 1) * block_size)`. Outputs are "
        "int32, contiguous and written in place; return None. `sorted_token_ids` has length "
        "`numel + num_experts * (block_size - 1)` (sometimes rounded up to a multiple of "
        "block_size, or capped at `numel * block_size` when numel < num_experts) and "
        "`experts_ids` length `ceil(len(sorted_token_ids) / block_size)`, so they are usually "
        "longer than needed. Checked: num_tokens_post_pad and experts_ids of the used blocks "
        "exactly; within each expert's segment the order of its entries and sentinels is free "
        "(use atomics freely); positions at or past num_tokens_post_pad (and their blocks in "
        "experts_ids) are not checked. num_experts is at most 1023; topk_ids may be empty "
        "(num_tokens = 0). Do not modify topk_ids or expert_map."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_expert_map", "treats topk_ids as local expert ids and never reads "
                 "expert_map (right without expert parallelism only)", NEGATIVE_NO_MAP),
        Negative("pads_empty_experts", "gives every expert at least one block, even one with no "
                 "entries (right only when every expert is routed to)", NEGATIVE_EMPTY_BLOCK),
    )

    def cases(self) -> Sequence[Case]:
        cs = [
            _case("int32", 64, 2, 8, 16, cpu=True),             # Mixtral: every expert used
            _case("int64", 13, 8, 256, 16, cpu=True),           # DeepSeek-V3 decode batch
            _case("int32", 5, 8, 256, 64, cpu=True),            # numel < num_experts: capped
            _case("int32", 9, 4, 60, 32, pad=True, cpu=True),   # Qwen1.5-MoE
            _case("int64", 40, 8, 256, 16, ep=8, cpu=True),     # expert parallel, 32 local
            _case("int32", 33, 3, 17, 8, cpu=True),             # odd sizes
            _case("int32", 0, 8, 256, 64, cpu=True),            # empty batch
            _case("int32", 1, 1, 3, 1, cpu=True),
        ]
        for dt in _IDS:
            cs += [
                _case(dt, 4096, 2, 8, 64),
                _case(dt, 1, 8, 256, 16),
                _case(dt, 77, 8, 256, 16),
                _case(dt, 4096, 8, 256, 64),
                _case(dt, 2000, 8, 256, 128, pad=True),
                _case(dt, 1024, 8, 128, 32),                     # Qwen3-30B-A3B
                _case(dt, 3000, 4, 60, 64),                      # Qwen1.5-MoE-A2.7B
                _case(dt, 511, 8, 64, 16),                       # Qwen2-57B-A14B
                _case(dt, 2256, 16, 257, 32),                    # vLLM's odd expert count
                _case(dt, 4096, 8, 256, 64, ep=8),
                _case(dt, 1000, 2, 8, 16, ep=2, pad=True),
                _case(dt, 3, 32, 160, 128),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _IDS * 2:
            experts = rng.choice([8, 16, 60, 64, 128, 256, 257, 384])
            # topk at most half the experts and at least 8 local experts: routing left to chance
            topk = rng.choice([k for k in (1, 2, 4, 6, 8) if k <= experts // 2])
            tokens, block = hidden_tokens(rng, experts, topk, small)
            ep = hidden_ep(rng, experts, tokens, topk)
            out.append(_case(dt, tokens, topk, experts, block, ep=ep, pad=rng.random() < 0.3,
                             cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("int32", 65536, 8, 256, 64),   # DeepSeek-V3 prefill chunk
            _case("int32", 32768, 8, 128, 64),   # Qwen3-30B-A3B prefill
            _case("int64", 65536, 2, 8, 128),    # Mixtral-8x7B prefill
            _case("int32", 65536, 8, 256, 64, ep=8),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        tokens, topk = c.shape
        experts, block = int(c["experts"]), int(c["block"])
        ids = route(tokens, topk, popularity(experts, gen), gen).to(c.torch_dtype)
        emap = ep_map(experts, int(c["ep"]), gen) if c["ep"] else None
        n, blocks = buffer_sizes(ids.numel(), experts, block, pad_to_block=bool(c["pad"]),
                                 cap_small=True)
        args = (ids, experts, block, torch.empty(n, dtype=torch.int32),
                torch.empty(blocks, dtype=torch.int32), torch.empty(1, dtype=torch.int32), emap)
        outs = frozenset({3, 4, 5})
        return Call(c.entry, args, outputs=(Out.arg(3), Out.arg(4), Out.arg(5)), mutable=outs,
                    out_buffers=outs)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        ids, experts, block, sorted_ids, expert_ids, _, emap = call.args
        a = align(local_experts(ids, emap), experts, block, sorted_ids.numel(),
                  expert_ids.numel(), sentinel=ids.numel(), tail_expert=0)
        by_expert = Segments(a.sorted_segments, fill=ids.numel())
        used = Segments.exact(expert_ids.numel(), a.used_blocks, fill=0)
        return (Expected(by_expert(a.sorted_ids), torch.int32, canonical=by_expert),
                Expected(a.expert_ids, torch.int32, canonical=used),
                Expected(torch.tensor([a.total], dtype=torch.int32), torch.int32))

    def baseline_library(self) -> str:
        return _baseline.library()

    def baseline(self, call: Call) -> object:
        ids, experts, block, sorted_ids, expert_ids, total, emap = call.args
        ops = _baseline.for_tensor(ids)
        if ops is not None:
            ops.moe_align_block_size(ids, experts, block, sorted_ids, expert_ids, total, emap)
            return None
        owner = local_experts(ids, emap)
        owner = torch.where(owner >= 0, owner, experts)
        padded = place(owner, experts, block, sorted_ids, expert_ids, ids.numel(), 0)
        total.copy_(padded.sum().reshape(1))
        return None

    def cost(self, c: Case) -> Cost:
        tokens, topk = c.shape
        experts, block = int(c["experts"]), int(c["block"])
        numel = tokens * topk
        _, blocks = buffer_sizes(numel, experts, block, pad_to_block=bool(c["pad"]),
                                 cap_small=True)
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        # At least: the ids read once, every entry index and block expert written once (the
        # padding sentinels depend on the routing); no floating-point work.
        return Cost(flops=0.0, bytes=float(size * numel + 4 * (numel + blocks + 1)),
                    dtype="int32")
