"""vllm::moe_lora_align_block_size — ``vllm._custom_ops.moe_lora_align_block_size(topk_ids,
token_lora_mapping, num_experts, block_size, max_loras, max_num_tokens_padded,
max_num_m_blocks, sorted_token_ids, experts_ids, num_tokens_post_pad, adapter_enabled, lora_ids,
expert_map=None)`` (vLLM 0.13.0): moe_align_block_size once per active LoRA adapter, over the
tokens routed to that adapter, each into its own slot of the output buffers.

For ``lora_idx`` in ``range(max_loras)``: ``lora_id = lora_ids[lora_idx]``; skipped when -1 or
``adapter_enabled[lora_id] == 0``; else the entries of tokens ``t`` with
``token_lora_mapping[t] == lora_id`` are aligned as moe_align_block_size does (sentinel
``topk_ids.numel()``, expert_map applied and -1 entries dropped) into slot ``lora_id``:
``sorted_token_ids[lora_id * max_num_tokens_padded:][:max_num_tokens_padded]``,
``experts_ids[lora_id * max_num_m_blocks:][:max_num_m_blocks]`` (-1 past the used blocks) and
``num_tokens_post_pad[lora_id]``. Slots of skipped adapters are left as they were (the consumer
skips them), so they are not checked; within a slot the comparison is moe_align_block_size's
(see :mod:`operators.vllm._moe_align`). The op is small; benchmark cases are large batches.
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
def _active_kernel(lora_ids_ptr, enabled_ptr, active_ptr, max_loras, BLOCK_L: tl.constexpr):
    # active[l] = 1 for the adapters processed: l in lora_ids[:max_loras], l != -1, enabled.
    j = tl.arange(0, BLOCK_L)
    lid = tl.load(lora_ids_ptr + j, mask=j < max_loras, other=-1)
    on = tl.load(enabled_ptr + tl.maximum(lid, 0), mask=lid >= 0, other=0)
    tl.store(active_ptr + lid, (on != 0).to(tl.int32), mask=lid >= 0)


@triton.jit
def _entries(topk_ptr, map_ptr, mapping_ptr, active_ptr, offs, numel, topk, num_experts,
             HAS_MAP: tl.constexpr):
    # Each entry's adapter (its token's) and local expert, and whether it is placed: its
    # adapter is processed and expert_map keeps it.
    mask = offs < numel
    lid = tl.load(mapping_ptr + offs // topk, mask=mask, other=-1)
    act = tl.load(active_ptr + tl.maximum(lid, 0), mask=mask & (lid >= 0), other=0)
    e = tl.load(topk_ptr + offs, mask=mask, other=0).to(tl.int32)
    valid = mask & (act != 0) & (e >= 0) & (e < num_experts)
    if HAS_MAP:
        e = tl.load(map_ptr + e, mask=valid, other=-1)
        valid = valid & (e >= 0)
    return lid, e, valid


@triton.jit
def _count_kernel(topk_ptr, map_ptr, mapping_ptr, active_ptr, counts_ptr, numel, topk,
                  num_experts, HAS_MAP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    lid, e, valid = _entries(topk_ptr, map_ptr, mapping_ptr, active_ptr, offs, numel, topk,
                             num_experts, HAS_MAP)
    tl.atomic_add(counts_ptr + lid * num_experts + e, 1, mask=valid)


@triton.jit
def _layout_kernel(active_ptr, counts_ptr, cursor_ptr, expert_ids_ptr, total_ptr, sorted_ptr,
                   num_experts, block_size, num_blocks, slot_len, sentinel,
                   BLOCK_E: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_P: tl.constexpr):
    # One program per slot l: padded counts, their exclusive prefix sum (the write cursors),
    # the total, every block's expert (-1 past the total), the slot filled with sentinels.
    lid = tl.program_id(0)
    active = tl.load(active_ptr + lid) != 0
    ex = tl.arange(0, BLOCK_E)
    em = (ex < num_experts) & active
    c = tl.load(counts_ptr + lid * num_experts + ex, mask=em, other=0)
    padded = (c + block_size - 1) // block_size * block_size
    incl = tl.cumsum(padded, 0)
    tl.store(cursor_ptr + lid * num_experts + ex, incl - padded, mask=em)
    total = tl.sum(padded, 0)
    tl.store(total_ptr + lid, total, mask=active)
    end_block = tl.where(em, incl // block_size, 2147483647)
    used = total // block_size
    for b0 in range(0, num_blocks, BLOCK_B):
        b = b0 + tl.arange(0, BLOCK_B)
        expert = tl.sum((end_block[None, :] <= b[:, None]).to(tl.int32), 1)
        tl.store(expert_ids_ptr + lid * num_blocks + b, tl.where(b < used, expert, -1),
                 mask=(b < num_blocks) & active)
    for p0 in range(0, slot_len, BLOCK_P):
        p = p0 + tl.arange(0, BLOCK_P)
        tl.store(sorted_ptr + lid * slot_len + p, tl.full([BLOCK_P], 0, tl.int32) + sentinel,
                 mask=(p < slot_len) & active)


@triton.jit
def _scatter_kernel(topk_ptr, map_ptr, mapping_ptr, active_ptr, cursor_ptr, sorted_ptr, numel,
                    topk, num_experts, slot_len, HAS_MAP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    lid, e, valid = _entries(topk_ptr, map_ptr, mapping_ptr, active_ptr, offs, numel, topk,
                             num_experts, HAS_MAP)
    pos = tl.atomic_add(cursor_ptr + lid * num_experts + e, 1, mask=valid)
    tl.store(sorted_ptr + lid * slot_len + pos, offs.to(tl.int32), mask=valid & (pos < slot_len))


def moe_lora_align_block_size(topk_ids, token_lora_mapping, num_experts, block_size, max_loras,
                              max_num_tokens_padded, max_num_m_blocks, sorted_token_ids,
                              experts_ids, num_tokens_post_pad, adapter_enabled, lora_ids,
                              expert_map=None):
    numel = topk_ids.numel()
    topk = topk_ids.shape[1]
    dev = topk_ids.device
    has_map = expert_map is not None
    emap = expert_map if has_map else lora_ids  # never read without a map
    active = torch.zeros(max_loras, dtype=torch.int32, device=dev)
    counts = torch.zeros(max_loras * num_experts, dtype=torch.int32, device=dev)
    cursor = torch.empty(max_loras * num_experts, dtype=torch.int32, device=dev)
    _active_kernel[(1,)](lora_ids, adapter_enabled, active, max_loras,
                         BLOCK_L=triton.next_power_of_2(max(max_loras, 2)))
    block = 1024
    grid = (triton.cdiv(numel, block),)
    if numel:
        _count_kernel[grid](topk_ids, emap, token_lora_mapping, active, counts, numel, topk,
                            num_experts, HAS_MAP=has_map, BLOCK=block)
    _layout_kernel[(max_loras,)](active, counts, cursor, experts_ids, num_tokens_post_pad,
                                 sorted_token_ids, num_experts, block_size, max_num_m_blocks,
                                 max_num_tokens_padded, numel,
                                 BLOCK_E=triton.next_power_of_2(max(num_experts, 2)), BLOCK_B=64,
                                 BLOCK_P=1024)
    if numel:
        _scatter_kernel[grid](topk_ids, emap, token_lora_mapping, active, cursor,
                              sorted_token_ids, numel, topk, num_experts, max_num_tokens_padded,
                              HAS_MAP=has_map, BLOCK=block)
    return None
'''

# Marks slot j processed for lora_ids[j] (the index, not the id): right when the active ids
# are exactly 0, 1, 2... (every token has an adapter, every adapter is used).
NEGATIVE_SLOT_BY_INDEX = SOLUTION.replace(
    "    tl.store(active_ptr + lid, (on != 0).to(tl.int32), mask=lid >= 0)\n",
    "    tl.store(active_ptr + j, (on != 0).to(tl.int32), mask=lid >= 0)\n")

# Reads adapter_enabled at the index j of lora_ids instead of at the adapter id lora_ids[j]:
# right when every adapter is enabled, or when the active ids are 0, 1, 2...
NEGATIVE_ENABLED_BY_INDEX = SOLUTION.replace(
    "    on = tl.load(enabled_ptr + tl.maximum(lid, 0), mask=lid >= 0, other=0)\n",
    "    on = tl.load(enabled_ptr + j, mask=lid >= 0, other=0)\n")

_IDS = ("int32", "int64")


def _case(dtype: str, tokens: int, topk: int, experts: int, block: int, loras: int, *,
          none: float = 0.0, disabled: int = 0, ep: int = 0, pad: bool = True,
          idle: bool = False, cpu: bool = False) -> Case:
    if idle and loras < 2:
        raise ValueError("an idle adapter needs another one for the tokens: loras >= 2")
    extra = {"idle": True} if idle else {}
    return case("moe_lora_align_block_size", dtype, (tokens, topk), experts=experts, block=block,
                loras=loras, none=none, disabled=disabled, ep=ep, pad=pad, cpu=cpu, **extra)


@register("vllm::moe_lora_align_block_size", version=1, kind=Kind.COMPUTE)
class MoeLoraAlignBlockSize(OperatorSpec):
    entry_points = (
        EntryPoint(
            "moe_lora_align_block_size",
            "moe_lora_align_block_size(topk_ids: Tensor, token_lora_mapping: Tensor, "
            "num_experts: int, block_size: int, max_loras: int, max_num_tokens_padded: int, "
            "max_num_m_blocks: int, sorted_token_ids: Tensor, experts_ids: Tensor, "
            "num_tokens_post_pad: Tensor, adapter_enabled: Tensor, lora_ids: Tensor, "
            "expert_map: Tensor | None = None) -> None",
            "moe_align_block_size per active LoRA adapter over its own tokens, each adapter "
            "into its slot of sorted_token_ids, experts_ids and num_tokens_post_pad.",
        ),
    )
    description = (
        "Multi-LoRA MoE token alignment as vLLM's `vllm._custom_ops.moe_lora_align_block_size("
        "topk_ids, token_lora_mapping, num_experts, block_size, max_loras, "
        "max_num_tokens_padded, max_num_m_blocks, sorted_token_ids, experts_ids, "
        "num_tokens_post_pad, adapter_enabled, lora_ids, expert_map=None)`. `topk_ids` is "
        "`[num_tokens, topk]` (int32 or int64): each token's distinct experts in [0, "
        "num_experts); entry `i = t * topk + k` of the flattened ids belongs to token t. "
        "`token_lora_mapping` (int32 `[num_tokens]`) is each token's LoRA adapter, -1 for none; "
        "`lora_ids` (int32 `[max_loras + 1]`) lists adapter ids (-1 = none); `adapter_enabled` "
        "(int32 `[max_loras + 1]`) flags adapters. For each `j` in `range(max_loras)` (only the "
        "first max_loras entries of lora_ids): `l = lora_ids[j]`; skip it if `l == -1` or "
        "`adapter_enabled[l] == 0`; otherwise align the entries of the tokens t with "
        "`token_lora_mapping[t] == l` exactly as moe_align_block_size does, into slot l. "
        "Alignment of a set of entries: entry i belongs to expert `e = topk_ids.flatten()[i]` "
        "(with `expert_map` (int32 `[num_experts]`) given: local expert `expert_map[e]`, and "
        "entries mapped to -1 are dropped); `count[e]` entries of expert e, `padded[e] = "
        "ceil(count[e] / block_size) * block_size`; expert e's segment starts at `padded[0] + "
        "... + padded[e-1]` and holds its entry indices i, then the sentinel `numel = "
        "topk_ids.numel()` in its remaining slots. Slot l is `sorted_token_ids[l * "
        "max_num_tokens_padded : (l + 1) * max_num_tokens_padded]` for the segments, "
        "`experts_ids[l * max_num_m_blocks : (l + 1) * max_num_m_blocks]` for the expert of "
        "each block of block_size positions (used blocks: `num_tokens_post_pad[l] / "
        "block_size`; write -1 in the others) and `num_tokens_post_pad[l]` for the sum of "
        "padded. All outputs are int32, written in place; return None. Checked: for processed "
        "adapters only, num_tokens_post_pad[l] and the used blocks' experts exactly, and each "
        "expert's segment as a multiset (order of entries and sentinels free: use atomics); "
        "slots of skipped adapters and positions past num_tokens_post_pad[l] are not checked. "
        "max_num_tokens_padded >= numel + num_experts * (block_size - 1), max_num_m_blocks = "
        "ceil(max_num_tokens_padded / block_size), num_experts <= 1023. "
        "Do not modify any input."
    )
    solution = SOLUTION
    negatives = (
        Negative("slot_by_index", "marks slot j processed for adapter lora_ids[j] (the index, "
                 "not the id; right only when the active ids are 0, 1, 2, ...)",
                 NEGATIVE_SLOT_BY_INDEX),
        Negative("enabled_by_index", "reads adapter_enabled[j] instead of "
                 "adapter_enabled[lora_ids[j]] (right only when every adapter is enabled or the "
                 "active ids are 0, 1, 2, ...)", NEGATIVE_ENABLED_BY_INDEX),
    )

    def cases(self) -> Sequence[Case]:
        cs = [
            _case("int32", 48, 6, 64, 16, 1, cpu=True),                  # one adapter
            _case("int32", 48, 6, 64, 16, 3, cpu=True),                  # ids 0, 1, 2
            _case("int64", 30, 8, 128, 16, 4, none=0.25, disabled=2, cpu=True),  # base-model tokens
            _case("int32", 25, 8, 256, 32, 4, none=0.1, disabled=1, cpu=True),
            # EP, slots not a whole number of blocks (pad=False: 21 * 8 + 64 * 15 = 70.5
            # blocks), an adapter without tokens
            _case("int32", 21, 8, 64, 16, 4, ep=2, pad=False, idle=True, cpu=True),
            _case("int64", 7, 2, 8, 8, 8, none=0.3, cpu=True),
        ]
        for dt in _IDS:
            cs += [
                _case(dt, 100, 6, 64, 16, 2),                 # vLLM's test shapes (DeepSeek-V2-
                _case(dt, 1024, 6, 256, 16, 32, none=0.2),    # Lite: 64 experts top-6)
                _case(dt, 4096, 6, 512, 16, 2),
                _case(dt, 2048, 8, 128, 64, 8, none=0.1, disabled=2),   # Qwen3-30B-A3B
                _case(dt, 1333, 2, 8, 32, 4, none=0.5),                 # Mixtral
                _case(dt, 1000, 8, 256, 32, 16, ep=8, disabled=3),
                _case(dt, 3, 8, 256, 16, 4, none=0.4, pad=False),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _IDS:
            experts = rng.choice([8, 60, 64, 128, 256])
            topk = rng.choice([k for k in (2, 4, 6, 8) if k <= experts // 2])
            loras = rng.choice([1, 2, 3, 4] if small else [1, 2, 4, 8, 16, 32])
            # the busiest adapter's tokens sparse or dense over the experts (a local expert
            # gets as many entries per token as any: topk / experts)
            busy, block = hidden_tokens(rng, experts, topk, small)
            tokens = max(8, busy * min(loras, 2))
            ep = hidden_ep(rng, experts, busy, topk)
            # Some adapter is always processed (with base-model tokens, lora_ids[0] is -1 and
            # lora_ids[max_loras] is never read): nothing processed would check nothing.
            none = rng.choice([0.0, 0.1, 0.3]) if loras >= 3 else 0.0
            disabled = rng.randrange(0, loras // 4 + 1) if loras >= 4 else 0
            out.append(_case(dt, tokens, topk, experts, block, loras, none=none,
                             disabled=disabled, ep=ep, pad=rng.random() < 0.5, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("int32", 16384, 8, 128, 64, 8, none=0.1),   # Qwen3-30B-A3B, 8 adapters
            _case("int32", 8192, 6, 64, 64, 32, none=0.2),    # DeepSeek-V2-Lite, 32 adapters
            _case("int64", 16384, 2, 8, 128, 4),              # Mixtral, 4 adapters
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        tokens, topk = c.shape
        experts, block, loras = int(c["experts"]), int(c["block"]), int(c["loras"])
        ids = route(tokens, topk, popularity(experts, gen), gen).to(c.torch_dtype)
        # "idle": every adapter listed as active, adapter `idle` with no token (an empty batch
        # for it, whatever the seed)
        idle = int(torch.randint(loras, (1,), generator=gen)) if c.get("idle") else -1
        mapping = _adapters(tokens, loras - (idle >= 0), float(c["none"]), gen)
        if idle >= 0:
            mapping = torch.where(mapping >= idle, mapping + 1, mapping)
        lora_ids = torch.full((loras + 1,), -1, dtype=torch.int32)
        used = torch.unique(mapping)
        if idle >= 0:
            used = torch.unique(torch.cat([used, torch.arange(loras, dtype=torch.int32)]))
        lora_ids[:used.numel()] = used
        enabled = torch.ones(loras + 1, dtype=torch.int32)
        enabled[torch.randperm(loras, generator=gen)[: int(c["disabled"])]] = 0
        emap = ep_map(experts, int(c["ep"]), gen) if c["ep"] else None
        n, blocks = buffer_sizes(ids.numel(), experts, block, pad_to_block=bool(c["pad"]),
                                 cap_small=False)
        args = (ids, mapping, experts, block, loras, n, blocks,
                torch.empty(loras * n, dtype=torch.int32),
                torch.empty(loras * blocks, dtype=torch.int32),
                torch.empty(loras, dtype=torch.int32), enabled, lora_ids, emap)
        outs = frozenset({7, 8, 9})
        return Call(c.entry, args, outputs=(Out.arg(7), Out.arg(8), Out.arg(9)), mutable=outs,
                    out_buffers=outs)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        (ids, mapping, experts, block, loras, n, blocks, _, _, _, enabled, lora_ids,
         emap) = call.args
        numel = ids.numel()
        sorted_ids = torch.full((loras * n,), numel, dtype=torch.int32)
        segments = torch.full((loras * n,), -1, dtype=torch.int64)
        expert_ids = torch.full((loras * blocks,), -1, dtype=torch.int32)
        block_ids = torch.full((loras * blocks,), -1, dtype=torch.int64)
        totals = torch.zeros(loras, dtype=torch.int32)
        total_ids = torch.full((loras,), -1, dtype=torch.int64)
        owner = mapping.long()[:, None].expand(-1, ids.shape[1]).reshape(-1)
        base = local_experts(ids, emap)
        for j in range(loras):
            lid = int(lora_ids[j])
            if lid < 0 or int(enabled[lid]) == 0:
                continue
            a = align(torch.where(owner == lid, base, -1), experts, block, n, blocks,
                      sentinel=numel, tail_expert=-1)
            sorted_ids[lid * n:(lid + 1) * n] = a.sorted_ids
            segments[lid * n:(lid + 1) * n] = torch.where(a.sorted_segments >= 0,
                                                          a.sorted_segments + lid * experts, -1)
            expert_ids[lid * blocks:(lid + 1) * blocks] = a.expert_ids
            block_ids[lid * blocks:lid * blocks + a.used_blocks] = (
                torch.arange(a.used_blocks) + lid * blocks)
            totals[lid] = a.total
            total_ids[lid] = lid
        by_expert = Segments(segments, fill=numel)
        used = Segments(block_ids, fill=-1)
        processed = Segments(total_ids, fill=0)
        return (Expected(by_expert(sorted_ids), torch.int32, canonical=by_expert),
                Expected(used(expert_ids), torch.int32, canonical=used),
                Expected(processed(totals), torch.int32, canonical=processed))

    def baseline_library(self) -> str:
        return _baseline.library()

    def baseline(self, call: Call) -> object:
        ops = _baseline.for_tensor(call.args[0])
        if ops is not None:
            ops.moe_lora_align_block_size(*call.args)
            return None
        _torch_lora_align(*call.args)
        return None

    def cost(self, c: Case) -> Cost:
        tokens, topk = c.shape
        experts, block, loras = int(c["experts"]), int(c["block"]), int(c["loras"])
        numel = tokens * topk
        _, blocks = buffer_sizes(numel, experts, block, pad_to_block=bool(c["pad"]),
                                 cap_small=False)
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        # At least: the ids and the token mapping read once, every entry placed once (each
        # token has at most one adapter) and the used blocks' experts written.
        return Cost(flops=0.0, bytes=float(size * numel + 4 * tokens
                                           + 4 * (numel + loras * (blocks + 1))), dtype="int32")


def _adapters(tokens: int, loras: int, none: float, gen: torch.Generator) -> torch.Tensor:
    """Each token's adapter (int32): skewed over ``loras`` adapters, -1 with probability
    ``none`` (requests served by the base model)."""
    w = torch.cat([popularity(loras, gen) * (1.0 - none), torch.tensor([none])])
    if tokens == 0:
        return torch.empty(0, dtype=torch.int32)
    pick = torch.multinomial(w, tokens, replacement=True, generator=gen)
    return torch.where(pick == loras, -1, pick).to(torch.int32)


def _torch_lora_align(ids: torch.Tensor, mapping: torch.Tensor, experts: int, block: int,
                      loras: int, n: int, blocks: int, sorted_ids: torch.Tensor,
                      expert_ids: torch.Tensor, totals: torch.Tensor, enabled: torch.Tensor,
                      lora_ids: torch.Tensor, emap: torch.Tensor | None) -> None:
    """The op in PyTorch on the call's device: each processed adapter's entries placed by
    :func:`~operators.vllm._moe_align.place` into its slot."""
    base = local_experts(ids, emap)
    owner = mapping.long()[:, None].expand(-1, ids.shape[1]).reshape(-1)
    for j in range(loras):
        lid = int(lora_ids[j])
        if lid < 0 or int(enabled[lid]) == 0:
            continue
        mine = torch.where((owner == lid) & (base >= 0), base, experts)
        padded = place(mine, experts, block, sorted_ids[lid * n:(lid + 1) * n],
                       expert_ids[lid * blocks:(lid + 1) * blocks], ids.numel(), -1)
        totals[lid:lid + 1].copy_(padded.sum().reshape(1))
