"""vllm::cp_gather_indexer_k_quant_cache — ``vllm._custom_ops.cp_gather_indexer_k_quant_cache(
kv_cache, dst_k, dst_scale, block_table, cu_seq_lens)`` (vLLM 0.13.0): gathers the fp8 keys and
their float32 scales of DeepSeek-V3.2's sparse-attention indexer out of its paged cache.

Layout (``csrc/cache_kernels.cu``, written by ``indexer_k_quant_and_cache``): ``kv_cache`` is
uint8 ``[num_blocks, block_size, head_dim + head_dim // quant_block_size * 4]``, but a block is
two regions, not rows of entries: first the ``[block_size, head_dim]`` fp8 keys, then the
``[block_size, head_dim // quant_block_size]`` float32 scales. Sequence b's token i lies in slot
``i % block_size`` of block ``block_table[b, i // block_size]``. ``dst_k`` is
``[num_tokens, head_dim]`` float8_e4m3fn, ``dst_scale`` uint8 ``[num_tokens, head_dim //
quant_block_size * 4]`` (the scales' bytes); ``quant_block_size = head_dim * 4 //
dst_scale.shape[1]``, 128 in DeepSeek-V3.2 (vLLM's kernel writes only the first scale of every
128 bytes of keys, so smaller quantization blocks are not cases). A byte copy. Returns None.
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
from operators.vllm._kv_cache import (
    EXACT,
    FP8,
    HIDDEN_ELEMENTS,
    block_table,
    blocks_needed,
    cu_lens,
    fp8_quantize,
    split_tokens,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _gather_indexer_kernel(cache_ptr, k_ptr, scale_ptr, table_ptr, cu_ptr, batch, block_size,
                           width, s_block, head_dim, scale_bytes,
                           BLOCK_B: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr):
    # One token per program: its sequence is the number of sequences ending at or before it.
    t = tl.program_id(0)
    bi = tl.arange(0, BLOCK_B)
    ends = tl.load(cu_ptr + 1 + bi, mask=bi < batch, other=2147483647)
    b = tl.sum((ends <= t).to(tl.int32), axis=0)
    pos = t - tl.load(cu_ptr + b)
    blk = tl.load(table_ptr + b.to(tl.int64) * width + pos // block_size).to(tl.int64)
    slot = pos % block_size
    base = cache_ptr + blk * s_block
    d = tl.arange(0, BLOCK_D)
    keys = tl.load(base + slot * head_dim + d, mask=d < head_dim)
    tl.store(k_ptr + t.to(tl.int64) * head_dim + d, keys.to(tl.float8e4nv, bitcast=True),
             mask=d < head_dim)
    s = tl.arange(0, BLOCK_S)
    scales = tl.load(base + block_size * head_dim + slot * scale_bytes + s, mask=s < scale_bytes)
    tl.store(scale_ptr + t.to(tl.int64) * scale_bytes + s, scales, mask=s < scale_bytes)


def cp_gather_indexer_k_quant_cache(kv_cache, dst_k, dst_scale, block_table, cu_seq_lens):
    num_tokens, head_dim = dst_k.shape
    batch = block_table.shape[0]
    if num_tokens == 0 or batch == 0:
        return None
    _gather_indexer_kernel[(num_tokens,)](
        kv_cache, dst_k, dst_scale, block_table, cu_seq_lens, batch, kv_cache.shape[1],
        block_table.shape[1], kv_cache.stride(0), head_dim, dst_scale.shape[1],
        BLOCK_B=triton.next_power_of_2(batch), BLOCK_D=triton.next_power_of_2(head_dim),
        BLOCK_S=triton.next_power_of_2(dst_scale.shape[1]), num_warps=4)
    return None
'''

# Copies one 4-byte scale per token, DeepSeek-V3.2's head_dim of 128: wrong for wider heads.
NEGATIVE_ONE_SCALE = SOLUTION.replace("head_dim, dst_scale.shape[1],", "head_dim, 4,")

# Assumes a sequence's blocks are consecutive: right while no sequence leaves its first block.
NEGATIVE_CONTIGUOUS_BLOCKS = SOLUTION.replace(
    "blk = tl.load(table_ptr + b.to(tl.int64) * width + pos // block_size).to(tl.int64)",
    "blk = tl.load(table_ptr + b.to(tl.int64) * width).to(tl.int64) + pos // block_size")

QUANT_BLOCK = 128


def _gi(batch: int, tokens: int, *, head_dim: int = 128, bs: int = 64, lens: str = "random",
        cpu: bool = False) -> Case:
    """``lens="ones"``: every sequence one token (batch == tokens), as in decode."""
    if lens == "ones" and batch != tokens:
        raise ValueError("one-token sequences need batch == tokens")
    params: dict[str, object] = {"head_dim": head_dim, "block_size": bs}
    if lens != "random":
        params["lens"] = lens
    return case("cp_gather_indexer_k_quant_cache", "float8_e4m3fn", (batch, tokens), cpu=cpu,
                **params)


def indexer_cache(gen: torch.Generator, ctx: list[int], bs: int, head_dim: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """The indexer cache ``indexer_k_quant_and_cache`` leaves for contexts of lengths ``ctx``
    (keys quantized per 128 elements with scale amax / 448), and its block table. Free slots hold
    0x7F key bytes (e4m3 NaN) and NaN scales."""
    num_blocks = blocks_needed(ctx, bs) + 2
    width = max([-(-n // bs) for n in ctx] + [0]) + 1
    table, used = block_table(gen, ctx, bs, num_blocks, width)
    k = torch.randn((num_blocks, bs, head_dim // QUANT_BLOCK, QUANT_BLOCK), generator=gen,
                    dtype=torch.float32).to(torch.bfloat16).float()
    scales = k.abs().amax(dim=-1).clamp(min=1e-4) / 448.0
    keys = fp8_quantize(k, scales[..., None]).view(torch.uint8).reshape(num_blocks, bs, head_dim)
    keys[~used] = 0x7F
    scales[~used] = float("nan")
    flat = torch.cat([keys.reshape(num_blocks, -1),
                      scales.view(torch.uint8).reshape(num_blocks, -1)], dim=1)
    return flat.reshape(num_blocks, bs, -1), table


@register("vllm::cp_gather_indexer_k_quant_cache", version=1, kind=Kind.COMPUTE)
class CpGatherIndexerKQuantCache(OperatorSpec):
    entry_points = (
        EntryPoint(
            "cp_gather_indexer_k_quant_cache",
            "cp_gather_indexer_k_quant_cache(kv_cache: Tensor, dst_k: Tensor, dst_scale: Tensor, "
            "block_table: Tensor, cu_seq_lens: Tensor) -> None",
            "Gathers each sequence's fp8 indexer keys and their scales into dst_k and dst_scale.",
        ),
    )
    description = (
        "vLLM's `cp_gather_indexer_k_quant_cache` (vLLM 0.13.0, "
        "`vllm._custom_ops.cp_gather_indexer_k_quant_cache`), which gathers the quantized keys of "
        "DeepSeek-V3.2's sparse-attention indexer for prefill. `kv_cache` is uint8 `[num_blocks, "
        "block_size, head_dim + head_dim // quant_block_size * 4]`, contiguous, but each block "
        "(`kv_cache.stride(0)` bytes) holds two regions rather than rows: bytes `[0, block_size "
        "* head_dim)` are the fp8 keys, slot p's `head_dim` key bytes at offset `p * head_dim`; "
        "then come the float32 scales, slot p's `head_dim // quant_block_size` scales (4 bytes "
        "each) at offset `block_size * head_dim + p * head_dim // quant_block_size * 4`. "
        "`dst_k` is float8_e4m3fn `[num_tokens, head_dim]` and `dst_scale` uint8 `[num_tokens, "
        "head_dim // quant_block_size * 4]` (the scales' bytes), both contiguous, so "
        "`quant_block_size = head_dim * 4 // dst_scale.shape[1]` (128 here). `block_table` is "
        "int32 `[batch, max_blocks]`, contiguous; `cu_seq_lens` int32 `[batch + 1]` with "
        "cu_seq_lens[0] = 0 and cu_seq_lens[batch] = num_tokens (sequences may be empty). Token "
        "i of sequence b lies in slot `i % block_size` of block `block_table[b, i // "
        "block_size]`; copy its key bytes to `dst_k[cu_seq_lens[b] + i]` and its scale bytes to "
        "`dst_scale[cu_seq_lens[b] + i]`, exactly. Slots no sequence owns hold 0x7F key bytes "
        "and NaN scales. Return None; do not modify kv_cache, block_table or cu_seq_lens."
    )
    solution = SOLUTION
    negatives = (
        Negative("one_scale", "copies one float32 scale per token, as for head_dim 128 (wrong "
                 "whenever head_dim spans several quantization blocks)", NEGATIVE_ONE_SCALE),
        Negative("contiguous_blocks", "takes a sequence's blocks as consecutive from its first "
                 "(right while every sequence fits its first block)",
                 NEGATIVE_CONTIGUOUS_BLOCKS),
    )
    tolerances = {"float8_e4m3fn": EXACT}

    def cases(self) -> Sequence[Case]:
        cs = [
            _gi(3, 10, bs=16, cpu=True),
            _gi(4, 4, bs=8, lens="ones", cpu=True),
            _gi(2, 40, bs=8, cpu=True),
            _gi(2, 21, head_dim=256, bs=4, cpu=True),
            _gi(2, 0, bs=16, cpu=True),
        ]
        cs += [
            _gi(8, 16384, bs=64),                    # DeepSeek-V3.2 prefill chunk
            _gi(1, 65536, bs=64),                    # one long context
            _gi(64, 64, bs=64, lens="ones"),
            _gi(37, 5003, bs=16),
            _gi(5, 777, head_dim=256, bs=32),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(3):
            head_dim = rng.choice([128, 128, 256])
            bs = rng.choice([4, 8, 16] if small else [16, 32, 64])
            batch = rng.randrange(1, 5 if small else 65)
            most = HIDDEN_ELEMENTS // (2 * (head_dim + 8)) - batch * bs - 2 * bs
            tokens = max(0, min(rng.randrange(0, 40 if small else 40000), most))
            if rng.random() < 0.3:
                out.append(_gi(batch, batch, head_dim=head_dim, bs=bs, lens="ones", cpu=small))
            else:
                out.append(_gi(batch, tokens, head_dim=head_dim, bs=bs, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _gi(16, 1 << 20, bs=64),
            _gi(256, 1 << 20, bs=64),
            _gi(4, 1 << 19, head_dim=256, bs=64),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        batch, tokens = c.shape
        head_dim, bs = int(c["head_dim"]), int(c["block_size"])
        lens = [1] * batch if c.get("lens") == "ones" else split_tokens(gen, tokens, batch)
        cache, table = indexer_cache(gen, lens, bs, head_dim)
        dst_k = torch.empty((tokens, head_dim), dtype=FP8)
        dst_scale = torch.empty((tokens, head_dim // QUANT_BLOCK * 4), dtype=torch.uint8)
        return Call(c.entry, (cache, dst_k, dst_scale, table, cu_lens(lens)),
                    outputs=(Out.arg(1), Out.arg(2)), mutable=frozenset({1, 2}),
                    out_buffers=frozenset({1, 2}))

    @staticmethod
    def _gather(cache: torch.Tensor, head_dim: int, table: torch.Tensor, cu: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """(key bytes, scale bytes) of every token, in order (PyTorch, any device)."""
        nb, bs, _ = cache.shape
        flat = cache.reshape(nb, -1)
        keys = flat[:, :bs * head_dim].reshape(nb, bs, head_dim)
        scales = flat[:, bs * head_dim:].reshape(nb, bs, -1)
        lens = (cu[1:] - cu[:-1]).long()
        seq = torch.repeat_interleave(torch.arange(len(lens), device=cu.device), lens)
        pos = torch.arange(len(seq), device=cu.device) - cu[:-1].long()[seq]
        blk = table.long()[seq, torch.div(pos, bs, rounding_mode="floor")]
        return keys[blk, pos % bs], scales[blk, pos % bs]

    def reference(self, call: Call) -> tuple[Expected, ...]:
        cache, dst_k, dst_scale, table, cu = call.args
        keys, scales = self._gather(cache, dst_k.shape[1], table, cu)
        return (Expected(keys.view(FP8).double(), FP8), Expected(scales.clone(), torch.uint8))

    def baseline(self, call: Call) -> object:
        ops = _baseline.custom_ops()
        if ops is not None:
            ops.cp_gather_indexer_k_quant_cache(*call.args)
            return None
        cache, dst_k, dst_scale, table, cu = call.args
        keys, scales = self._gather(cache, dst_k.shape[1], table, cu)
        dst_k.view(torch.uint8).copy_(keys)
        dst_scale.copy_(scales)
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        batch, tokens = c.shape
        row = int(c["head_dim"]) + int(c["head_dim"]) // QUANT_BLOCK * 4  # key and scale bytes
        return Cost(flops=0.0, bytes=float(2 * tokens * row + 4 * tokens // int(c["block_size"])
                                           + 4 * (batch + 1)), dtype=c.dtype)
