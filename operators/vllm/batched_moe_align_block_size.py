"""vllm::batched_moe_align_block_size — ``vllm._custom_ops.batched_moe_align_block_size(
max_tokens_per_batch, block_size, expert_num_tokens, sorted_ids, expert_ids,
num_tokens_post_pad)`` (vLLM 0.13.0): moe_align_block_size for the batched (expert-major) MoE
layout, where expert ``b``'s tokens are rows ``b * max_tokens_per_batch + i`` for
``i < expert_num_tokens[b]``.

In place, returns None: ``sorted_ids`` (int32, length ``B * round_up(max_tokens_per_batch,
block_size)``) gets each batch's valid rows in its block-padded segment, batches in order,
padding slots holding the sentinel ``B * max_tokens_per_batch``; ``expert_ids`` (int32, one per
block) the batch of each block; ``num_tokens_post_pad`` (int32 ``[1]``) the padded total. vLLM
writes rows in ascending order and -1 for unused blocks; the comparison is the one of
:mod:`operators.vllm._moe_align` (a segment as a multiset, nothing past the total), the same as
for moe_align_block_size. vLLM's kernel is one block of 1024 threads (B <= 1024); the op is
small, so its benchmark cases are the largest batched layouts, not 50 µs ones.
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
from operators.vllm._moe_align import Segments, align, place
from operators.vllm._routing import popularity

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _layout_kernel(counts_ptr, starts_ptr, expert_ids_ptr, total_ptr, num_batches, block_size,
                   num_blocks, BLOCK_E: tl.constexpr, BLOCK_B: tl.constexpr):
    # One program: each batch's count padded to a block, exclusive prefix sum -> starts, the
    # total, and the batch of every block (-1 past the total).
    ex = tl.arange(0, BLOCK_E)
    em = ex < num_batches
    c = tl.load(counts_ptr + ex, mask=em, other=0)
    padded = (c + block_size - 1) // block_size * block_size
    incl = tl.cumsum(padded, 0)
    tl.store(starts_ptr + ex, incl - padded, mask=em)
    total = tl.sum(padded, 0)
    tl.store(total_ptr, total)
    end_block = tl.where(em, incl // block_size, 2147483647)
    used = total // block_size
    for b0 in range(0, num_blocks, BLOCK_B):
        b = b0 + tl.arange(0, BLOCK_B)
        batch = tl.sum((end_block[None, :] <= b[:, None]).to(tl.int32), 1)
        tl.store(expert_ids_ptr + b, tl.where(b < used, batch, -1), mask=b < num_blocks)


@triton.jit
def _rows_kernel(counts_ptr, starts_ptr, sorted_ptr, max_tokens, block_size, sentinel,
                 BLOCK: tl.constexpr):
    # Program (batch, chunk): the chunk of the batch's padded segment, rows then sentinels.
    b = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    n = tl.load(counts_ptr + b)
    start = tl.load(starts_ptr + b)
    padded = (n + block_size - 1) // block_size * block_size
    row = (b * max_tokens + j).to(tl.int32)
    tl.store(sorted_ptr + start + j, tl.where(j < n, row, sentinel), mask=j < padded)


def batched_moe_align_block_size(max_tokens_per_batch, block_size, expert_num_tokens, sorted_ids,
                                 expert_ids, num_tokens_post_pad):
    num_batches = expert_num_tokens.numel()
    starts = torch.empty(max(num_batches, 1), dtype=torch.int32, device=sorted_ids.device)
    _layout_kernel[(1,)](expert_num_tokens, starts, expert_ids, num_tokens_post_pad, num_batches,
                         block_size, expert_ids.numel(),
                         BLOCK_E=triton.next_power_of_2(max(num_batches, 2)), BLOCK_B=64)
    seg = triton.cdiv(max_tokens_per_batch, block_size) * block_size
    if num_batches and seg:
        block = min(1024, triton.next_power_of_2(seg))
        _rows_kernel[(num_batches, triton.cdiv(seg, block))](
            expert_num_tokens, starts, sorted_ids, max_tokens_per_batch, block_size,
            num_batches * max_tokens_per_batch, BLOCK=block)
    return None
'''

# Packs the segments by the valid rows instead of their padded counts (start[b] = n[0] + ... +
# n[b-1]) while the blocks still count padded segments: right only when every batch's count is
# a multiple of block_size.
NEGATIVE_UNPADDED_STARTS = SOLUTION.replace(
    "    tl.store(starts_ptr + ex, incl - padded, mask=em)\n",
    "    tl.store(starts_ptr + ex, tl.cumsum(c, 0) - c, mask=em)\n")

# Pads with max_tokens_per_batch (the per-batch capacity) instead of B * max_tokens_per_batch,
# which is a real row of batch 1: right only when no segment has padding slots.
NEGATIVE_SENTINEL = SOLUTION.replace("num_batches * max_tokens_per_batch, BLOCK=block)",
                                     "max_tokens_per_batch, BLOCK=block)")


def _case(batches: int, max_tokens: int, block: int, *, load: str = "skewed",
          cpu: bool = False) -> Case:
    return case("batched_moe_align_block_size", "int32", (batches,), max_tokens=max_tokens,
                block=block, load=load, cpu=cpu)


@register("vllm::batched_moe_align_block_size", version=1, kind=Kind.COMPUTE)
class BatchedMoeAlignBlockSize(OperatorSpec):
    entry_points = (
        EntryPoint(
            "batched_moe_align_block_size",
            "batched_moe_align_block_size(max_tokens_per_batch: int, block_size: int, "
            "expert_num_tokens: Tensor, sorted_ids: Tensor, expert_ids: Tensor, "
            "num_tokens_post_pad: Tensor) -> None",
            "Lays the valid rows of each batch out in block_size-padded segments; writes "
            "sorted_ids, expert_ids and num_tokens_post_pad in place.",
        ),
    )
    description = (
        "Block alignment of the batched MoE layout, as vLLM's "
        "`vllm._custom_ops.batched_moe_align_block_size(max_tokens_per_batch, block_size, "
        "expert_num_tokens, sorted_ids, expert_ids, num_tokens_post_pad)`. There are B = "
        "`expert_num_tokens.numel()` batches (one per local expert, B <= 1024); batch b owns "
        "rows `b * max_tokens_per_batch + i` of the hidden states, of which the first "
        "`n[b] = expert_num_tokens[b]` (int32, 0 <= n[b] <= max_tokens_per_batch) are valid. "
        "Let `padded[b] = ceil(n[b] / block_size) * block_size` (0 for an empty batch) and "
        "`start[b] = padded[0] + ... + padded[b-1]`. Batch b's segment is positions "
        "`[start[b], start[b] + padded[b])` of `sorted_ids`: it holds the row ids `b * "
        "max_tokens_per_batch + i` for `i < n[b]` and, in its remaining slots, the sentinel `B * "
        "max_tokens_per_batch`. Write `num_tokens_post_pad[0] = padded[0] + ... + "
        "padded[B-1]` and, for every block `k < num_tokens_post_pad[0] / block_size`, "
        "`expert_ids[k]` = the batch whose segment contains positions `[k * block_size, (k + 1) "
        "* block_size)`. All outputs are int32, contiguous, written in place; return None. "
        "`sorted_ids` has length `B * ceil(max_tokens_per_batch / block_size) * block_size` and "
        "`expert_ids` that divided by block_size. Checked: num_tokens_post_pad and expert_ids "
        "of the used blocks exactly; within a batch's segment the order of its row ids and "
        "sentinels is free (vLLM writes rows ascending, then sentinels); positions at or past "
        "num_tokens_post_pad (and their blocks) are not checked (vLLM writes the sentinel and "
        "-1 there). Do not modify expert_num_tokens."
    )
    solution = SOLUTION
    negatives = (
        Negative("unpadded_starts", "starts each batch's segment at the sum of the previous "
                 "batches' valid rows, not of their padded counts (right only when every count "
                 "is a multiple of block_size)", NEGATIVE_UNPADDED_STARTS),
        Negative("sentinel_is_capacity", "pads with max_tokens_per_batch (a real row of batch 1) "
                 "instead of B * max_tokens_per_batch", NEGATIVE_SENTINEL),
    )

    def cases(self) -> Sequence[Case]:
        cs = [
            _case(8, 64, 16, load="aligned", cpu=True),     # counts in whole blocks
            _case(8, 13, 8, cpu=True),                      # vLLM's odd capacity
            _case(32, 64, 16, load="half_empty", cpu=True),  # DeepSeek-V3, EP 8: 32 experts
            _case(16, 40, 64, load="half_empty", cpu=True),  # capacity below a block
            _case(1, 2000, 16, load="uniform", cpu=True),  # one batch
            _case(3, 100, 32, load="uniform", cpu=True),
        ]
        for batches, max_tokens, block in ((8, 512, 64), (16, 512, 32), (32, 1024, 64),
                                           (64, 256, 16), (256, 128, 128), (1024, 16, 16),
                                           (60, 333, 32)):
            for load in ("skewed", "half_empty", "aligned", "uniform"):
                cs.append(_case(batches, max_tokens, block, load=load))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(3):
            batches = rng.randrange(4, 40 if small else 1025)
            max_tokens = rng.randrange(32, 120 if small else 2048)
            # a few blocks per batch at capacity, so the block counts vary with the load
            block = rng.choice([b for b in (8, 16, 32, 64, 128) if 4 * b <= max_tokens])
            loads = ["skewed", "skewed", "half_empty", "uniform"]
            if max_tokens >= 2 * block:  # at least two whole blocks to choose from
                loads.append("aligned")
            load = rng.choice(loads)
            out.append(_case(batches, max_tokens, block, load=load, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case(32, 16384, 64),     # DeepSeek-V3, 32 local experts, long prefill
            _case(256, 4096, 64),
            _case(1024, 1024, 128, load="half_empty"),
            _case(8, 65536, 128, load="uniform"),  # Mixtral
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        (batches,) = c.shape
        max_tokens, block = int(c["max_tokens"]), int(c["block"])
        counts = _counts(batches, max_tokens, block, str(c["load"]), gen)
        n = batches * (-(-max_tokens // block) * block)
        args = (max_tokens, block, counts, torch.empty(n, dtype=torch.int32),
                torch.empty(n // block, dtype=torch.int32), torch.empty(1, dtype=torch.int32))
        outs = frozenset({3, 4, 5})
        return Call(c.entry, args, outputs=(Out.arg(3), Out.arg(4), Out.arg(5)), mutable=outs,
                    out_buffers=outs)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        max_tokens, block, counts, sorted_ids, expert_ids, _ = call.args
        batches = counts.numel()
        slot = torch.arange(max_tokens)
        rows = torch.where(slot[None, :] < counts.long()[:, None],
                           torch.arange(batches)[:, None], -1).reshape(-1)
        a = align(rows, batches, block, sorted_ids.numel(), expert_ids.numel(),
                  sentinel=batches * max_tokens, tail_expert=-1)
        by_batch = Segments(a.sorted_segments, fill=batches * max_tokens)
        used = Segments.exact(expert_ids.numel(), a.used_blocks, fill=-1)
        return (Expected(by_batch(a.sorted_ids), torch.int32, canonical=by_batch),
                Expected(a.expert_ids, torch.int32, canonical=used),
                Expected(torch.tensor([a.total], dtype=torch.int32), torch.int32))

    def baseline_library(self) -> str:
        return _baseline.library()

    def baseline(self, call: Call) -> object:
        max_tokens, block, counts, sorted_ids, expert_ids, total = call.args
        ops = _baseline.for_tensor(counts)
        if ops is not None:
            ops.batched_moe_align_block_size(max_tokens, block, counts, sorted_ids, expert_ids,
                                             total)
            return None
        slot = torch.arange(max_tokens, device=counts.device)
        owner = torch.where(slot[None, :] < counts.long()[:, None],
                            torch.arange(counts.numel(), device=counts.device)[:, None],
                            counts.numel()).reshape(-1)
        padded = place(owner, counts.numel(), block, sorted_ids, expert_ids,
                       counts.numel() * max_tokens, -1)
        total.copy_(padded.sum().reshape(1))
        return None

    def cost(self, c: Case) -> Cost:
        (batches,) = c.shape
        max_tokens, block = int(c["max_tokens"]), int(c["block"])
        n = batches * (-(-max_tokens // block) * block)
        # The counts read; at most every slot and block written once (the packed segments
        # are what the data says; the whole buffer is the bound vLLM writes).
        return Cost(flops=0.0, bytes=float(4 * (batches + n + n // block + 1)), dtype="int32")


def _counts(batches: int, max_tokens: int, block: int, load: str,
            gen: torch.Generator) -> torch.Tensor:
    """Valid rows per batch (int32): ``skewed`` (hot experts near capacity, cold ones with few
    or none), ``half_empty`` (skewed, half the batches empty), ``aligned`` (whole blocks, as
    a dispatcher that pads to the block sends them) or ``uniform``."""
    if load == "aligned":
        blocks = torch.randint(0, max_tokens // block + 1, (batches,), generator=gen)
        return (blocks * block).to(torch.int32)
    if load == "uniform":
        return torch.randint(0, max_tokens + 1, (batches,), generator=gen, dtype=torch.int32)
    w = popularity(batches, gen)
    share = (w / w.max()) * torch.rand(batches, generator=gen, dtype=torch.float64)
    counts = (share * (max_tokens + 1)).floor().clamp(max=max_tokens).to(torch.int32)
    if load == "half_empty":
        counts[torch.randperm(batches, generator=gen)[: batches // 2]] = 0
    return counts
