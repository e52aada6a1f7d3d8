"""What the align-block-size problems share (``moe_align_block_size``, its batched and multi-LoRA
forms): the exact reference layout and the canonical form that frees what vLLM leaves open.

The layout (vLLM 0.13.0, csrc/moe/moe_align_sum_kernels.cu): each expert's entries are padded up
to a multiple of ``block_size`` and the experts' padded segments follow each other in expert
order from position 0, so the GEMM reading block ``b`` of ``sorted_ids`` uses expert
``expert_ids[b]``. A segment holds the expert's entry indices, then the sentinel in its padding
slots (the consumer masks entries >= the sentinel). ``num_tokens_post_pad`` is the sum of the
padded segment lengths.

What is unspecified: vLLM places entries with atomics, so the order within an expert's padded
segment is free (real entries and sentinels in any order: the consumer masks per slot); and
everything past ``num_tokens_post_pad`` in ``sorted_ids`` (and past its block in
``expert_ids``) is never read. :class:`Segments` maps an output to a canonical form where those
freedoms are gone, which is what the harness compares (``Expected.canonical``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Segments:
    """Canonical form of an integer buffer: positions with the same id (ids non-decreasing over
    the positions that have one) are sorted ascending among themselves; positions with id -1
    are unspecified and set to ``fill``. Works on any device and any integer dtype."""

    ids: torch.Tensor  # int64, one per element of the (flattened) buffer
    fill: int

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        flat = t.reshape(-1)
        ids = self.ids.to(flat.device)
        inside = ids >= 0
        vals = flat[inside]
        by_value = torch.argsort(vals, stable=True)
        by_segment = torch.argsort(ids[inside][by_value], stable=True)
        out = torch.full_like(flat, self.fill)
        out[inside] = vals[by_value][by_segment]
        return out.reshape(t.shape)

    @staticmethod
    def exact(n: int, specified: int, fill: int) -> Segments:
        """The first ``specified`` of ``n`` positions compared exactly, the rest unspecified."""
        ids = torch.full((n,), -1, dtype=torch.int64)
        ids[:specified] = torch.arange(specified)
        return Segments(ids, fill)


@dataclass(frozen=True)
class Alignment:
    """The reference answer of one alignment (one LoRA slot, or the whole op)."""

    sorted_ids: torch.Tensor  # int32 [buf_len]: entries ascending within segments, tail = sentinel
    sorted_segments: torch.Tensor  # int64 [buf_len]: expert of each position, -1 past the total
    expert_ids: torch.Tensor  # int32 [num_blocks]: tail = tail_expert
    used_blocks: int
    total: int


def buffer_sizes(numel: int, num_experts: int, block_size: int, *, pad_to_block: bool,
                 cap_small: bool) -> tuple[int, int]:
    """(sorted_ids length, expert_ids length) as vLLM's Python wrappers allocate them:
    ``numel + num_experts * (block_size - 1)`` (rounded up to a block with ``pad_to_block``,
    capped at ``numel * block_size`` with ``cap_small`` when numel < num_experts)."""
    n = numel + num_experts * (block_size - 1)
    if pad_to_block:
        n = -(-n // block_size) * block_size
    if cap_small and numel < num_experts:
        n = min(numel * block_size, n)
    return n, -(-n // block_size)


def place(owner: torch.Tensor, num_experts: int, block_size: int, sorted_ids: torch.Tensor,
          expert_ids: torch.Tensor, sentinel: int, tail_expert: int) -> torch.Tensor:
    """Write the layout of entries ``0..len(owner)-1`` into ``sorted_ids`` and ``expert_ids``
    (int32, on ``owner``'s device), entries ascending within an expert; ``owner`` (int64) is
    each entry's expert, ``num_experts`` for an entry not placed. Returns the padded counts.
    PyTorch's implementation of the op: the reference and the baselines without vLLM."""
    dev = owner.device
    counts = torch.bincount(owner, minlength=num_experts + 1)[:num_experts]
    padded = (counts + block_size - 1) // block_size * block_size
    starts = torch.cumsum(padded, 0) - padded
    first = torch.cumsum(counts, 0) - counts  # where each expert starts among sorted entries
    kept = torch.argsort(owner, stable=True)[: int(counts.sum())]
    e = owner[kept]
    sorted_ids.fill_(sentinel)
    sorted_ids[starts[e] + torch.arange(kept.numel(), device=dev) - first[e]] = (
        kept.to(torch.int32))
    blocks = padded // block_size
    used = int(blocks.sum())
    expert_ids.fill_(tail_expert)
    expert_ids[:used] = segment_ids(blocks, used).to(torch.int32)
    return padded


def segment_ids(lengths: torch.Tensor, total: int) -> torch.Tensor:
    """``repeat_interleave(arange(len(lengths)), lengths)`` (int64, ``total`` long), without
    it: torch's repeat_interleave spins its thread pool (17 ms a call on a loaded 2-core
    host, against 25 µs for this count of segment ends at or before each position)."""
    ends = torch.cumsum(lengths, 0)
    marks = torch.zeros(total + 1, dtype=torch.int64, device=lengths.device)
    marks.index_add_(0, ends, torch.ones_like(ends))
    return torch.cumsum(marks, 0)[:total]


def align(experts: torch.Tensor, num_experts: int, block_size: int, buf_len: int,
          num_blocks: int, sentinel: int, tail_expert: int) -> Alignment:
    """The reference layout of entries ``0..len(experts)-1`` where entry ``i`` belongs to
    expert ``experts[i]`` (int64; -1: the entry is not placed)."""
    sorted_ids = torch.empty(buf_len, dtype=torch.int32)
    expert_ids = torch.empty(num_blocks, dtype=torch.int32)
    owner = torch.where(experts >= 0, experts, num_experts)
    padded = place(owner, num_experts, block_size, sorted_ids, expert_ids, sentinel, tail_expert)
    total = int(padded.sum())
    segments = torch.full((buf_len,), -1, dtype=torch.int64)
    segments[:total] = segment_ids(padded, total)
    return Alignment(sorted_ids, segments, expert_ids, total // block_size, total)


def local_experts(topk_ids: torch.Tensor, expert_map: torch.Tensor | None) -> torch.Tensor:
    """Each entry's expert, through the expert-parallel map where given (-1: not local)."""
    flat = topk_ids.reshape(-1).to(torch.int64)
    if expert_map is None:
        return flat
    return expert_map.to(torch.int64)[flat]


def ep_map(num_experts: int, ranks: int, gen: torch.Generator) -> torch.Tensor:
    """An expert-parallel map (int32): one rank's contiguous share of the global experts maps to
    local ids 0.., every other expert to -1."""
    share = num_experts // ranks
    rank = int(torch.randint(ranks, (1,), generator=gen))
    m = torch.full((num_experts,), -1, dtype=torch.int32)
    m[rank * share:(rank + 1) * share] = torch.arange(share, dtype=torch.int32)
    return m


def hidden_tokens(rng: random.Random, experts: int, topk: int, small: bool) -> tuple[int, int]:
    """(num_tokens, block_size) for a hidden case whose layout is left to the routing: sparse
    (32+ experts, at most one entry each on average: which experts are empty varies) or dense
    (a block and a half per expert or more: the block counts vary), never the regime between
    where every expert holds one partial block whatever the seed."""
    # sparse needs experts to spread entries over; the cpu tier keeps dense batches small
    sparse = experts >= 32 and (rng.random() < 0.5 or (small and experts > 16 * topk))
    if sparse:
        return rng.randrange(4, max(5, experts // topk)), 16
    block = rng.choice([16, 16, 32, 64, 128] if not small else [16])
    least = -(-3 * block * experts // (2 * topk))
    return least + rng.randrange(0, 64 if small else 4000), block


def hidden_ep(rng: random.Random, experts: int, tokens: int, topk: int) -> int:
    """Expert-parallel ranks for a hidden case (0: none): 8+ local experts, and only for dense
    routing (a sparse batch leaves a rank's few experts almost nothing to align)."""
    if tokens * topk < experts:
        return 0
    return rng.choice([0, 0] + [r for r in (2, 4, 8) if experts % r == 0 and experts // r >= 8])
