"""vllm::cp_gather_cache — ``vllm._custom_ops.cp_gather_cache(src_cache, dst, block_table,
cu_seq_lens, batch_size, seq_starts=None)`` (vLLM 0.13.0): gathers the cache entries of a batch
of sequences (MLA chunked prefill, context parallelism) into one packed tensor.

Semantics (``csrc/cache_kernels.cu``): sequence b's ``cu_seq_lens[b + 1] - cu_seq_lens[b]``
tokens start at position ``seq_starts[b]`` (0 without seq_starts; any position, not only a block
boundary) of its context; token i of b goes to row ``cu_seq_lens[b] + i`` of ``dst``. An entry
is ``src_cache[block, slot]``'s contiguous elements, addressed by the block and slot strides
(the entry stride may be padded). ``src_cache`` and ``dst`` share one dtype of 8, 16 or 32
bits: a bit copy. Returns None.
"""

from __future__ import annotations

import math
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
    HIDDEN_ELEMENTS,
    exact_value,
    gather_inputs,
    gathered,
    itemsize,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _cp_gather_cache_kernel(src_ptr, dst_ptr, table_ptr, cu_ptr, starts_ptr, batch, block_size,
                            entry, s_table, s_block, s_slot, s_dst,
                            HAS_STARTS: tl.constexpr, BLOCK_B: tl.constexpr,
                            BLOCK_E: tl.constexpr):
    # Grid: (dst row, chunk of the entry). The row's sequence is the number of sequences that
    # end at or before it.
    t = tl.program_id(0)
    bi = tl.arange(0, BLOCK_B)
    ends = tl.load(cu_ptr + 1 + bi, mask=bi < batch, other=2147483647)
    b = tl.sum((ends <= t).to(tl.int32), axis=0)
    pos = t - tl.load(cu_ptr + b)
    if HAS_STARTS:
        pos += tl.load(starts_ptr + b)
    blk = tl.load(table_ptr + b.to(tl.int64) * s_table + pos // block_size).to(tl.int64)
    e = tl.program_id(1) * BLOCK_E + tl.arange(0, BLOCK_E)
    m = e < entry
    x = tl.load(src_ptr + blk * s_block + (pos % block_size) * s_slot + e, mask=m)
    tl.store(dst_ptr + t.to(tl.int64) * s_dst + e, x, mask=m)


def cp_gather_cache(src_cache, dst, block_table, cu_seq_lens, batch_size, seq_starts=None):
    num_tokens = dst.shape[0]
    entry = src_cache[0][0].numel()
    if num_tokens == 0 or batch_size == 0 or entry == 0:
        return None
    block_e = min(1024, triton.next_power_of_2(entry))
    grid = (num_tokens, triton.cdiv(entry, block_e))
    starts = seq_starts if seq_starts is not None else cu_seq_lens
    _cp_gather_cache_kernel[grid](src_cache, dst, block_table, cu_seq_lens, starts, batch_size,
                                  src_cache.shape[1], entry, block_table.stride(0),
                                  src_cache.stride(0), src_cache.stride(1), dst.stride(0),
                                  HAS_STARTS=seq_starts is not None,
                                  BLOCK_B=triton.next_power_of_2(batch_size), BLOCK_E=block_e,
                                  num_warps=4)
    return None
'''

# Rounds seq_starts down to a block boundary: right whenever chunks start on whole blocks.
NEGATIVE_BLOCK_STARTS = SOLUTION.replace(
    "pos += tl.load(starts_ptr + b)",
    "pos += (tl.load(starts_ptr + b) // block_size) * block_size")

# Steps between cache slots by the entry's numel: right only for unpadded entries.
NEGATIVE_PACKED_SLOTS = SOLUTION.replace("src_cache.stride(0), src_cache.stride(1),",
                                         "src_cache.stride(0), entry,")

_DTYPES = ("bfloat16", "float16", "float32", "uint8")


def _cg(batch: int, tokens: int, entry: tuple[int, ...], dt: str, *, bs: int = 16,
        starts: str = "none", pad: int = 0, cpu: bool = False) -> Case:
    return case("cp_gather_cache", dt, (batch, tokens), entry_shape=entry, block_size=bs,
                starts=starts, pad=pad, cpu=cpu)


@register("vllm::cp_gather_cache", version=1, kind=Kind.COMPUTE)
class CpGatherCache(OperatorSpec):
    entry_points = (
        EntryPoint(
            "cp_gather_cache",
            "cp_gather_cache(src_cache: Tensor, dst: Tensor, block_table: Tensor, "
            "cu_seq_lens: Tensor, batch_size: int, seq_starts: Tensor | None = None) -> None",
            "Gathers each sequence's cache entries into consecutive rows of dst.",
        ),
    )
    description = (
        "vLLM's `cp_gather_cache` (vLLM 0.13.0, `vllm._custom_ops.cp_gather_cache`), which "
        "gathers paged cache entries of a batch of sequences into one packed tensor (MLA chunked "
        "prefill). `src_cache` is `[num_blocks, block_size, *entry]`: slot p of block k is "
        "`src_cache[k, p]`, whose `E = prod(entry)` elements are contiguous; address blocks and "
        "slots through `src_cache.stride(0)` and `stride(1)` (entries may be padded). `dst` is "
        "`[num_tokens, *entry]` (rows `dst.stride(0)` apart, each row contiguous) with the same "
        "dtype (float16, bfloat16, float32, or uint8 for fp8 caches: a bit copy). `block_table` "
        "is int32 `[batch_size, max_blocks]` (row stride `block_table.stride(0)`), `cu_seq_lens` "
        "int32 `[batch_size + 1]` with cu_seq_lens[0] = 0 and cu_seq_lens[batch_size] = "
        "num_tokens; sequences may be empty. `seq_starts` is None or int32 `[batch_size]`. For "
        "sequence b, token i (0 <= i < cu_seq_lens[b+1] - cu_seq_lens[b]) sits at position "
        "`pos = i + seq_starts[b]` (seq_starts[b] = 0 when None; any position, not necessarily a "
        "block boundary) of its context: `dst[cu_seq_lens[b] + i] = src_cache[block_table[b, pos "
        "// block_size], pos % block_size]`. Every row of dst is written. Slots no sequence "
        "owns, the tail of each sequence's last block and the blocks that unused block-table "
        "entries point at hold NaN (0x7F bytes in uint8 caches): never copy them. Return None; "
        "do not modify the other arguments."
    )
    solution = SOLUTION
    negatives = (
        Negative("block_starts", "rounds seq_starts down to a block boundary (right whenever "
                 "chunks start on whole blocks)", NEGATIVE_BLOCK_STARTS),
        Negative("packed_slots", "steps between cache slots by the entry's numel instead of "
                 "src_cache.stride(1) (right only for unpadded entries)", NEGATIVE_PACKED_SLOTS),
    )
    tolerances = {"float16": EXACT, "bfloat16": EXACT, "float32": EXACT}

    def cases(self) -> Sequence[Case]:
        cs = [
            _cg(3, 20, (64,), "bfloat16", bs=4, cpu=True),
            _cg(2, 13, (4, 16), "float32", bs=8, starts="aligned", cpu=True),
            _cg(4, 17, (72,), "uint8", bs=4, starts="any", pad=8, cpu=True),
            _cg(3, 9, (40,), "float16", bs=2, starts="any", cpu=True),
            _cg(2, 0, (32,), "float16", cpu=True),
        ]
        for dt in _DTYPES:
            cs += [
                _cg(8, 4096, (576,), dt, bs=64, starts="aligned"),     # DeepSeek-V3 MLA
                _cg(8, 2048, (576,), dt, bs=16),                       # vLLM's test
                _cg(64, 4096, (576,), dt, bs=32, starts="any", pad=64),
                _cg(16, 3000, (656,), dt, bs=64, starts="aligned"),
                _cg(5, 777, (8, 96), dt, bs=16, starts="any", pad=16),
                _cg(1, 1, (576,), dt, bs=16, starts="any"),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _DTYPES:
            entry = rng.choice([(32,), (72,), (2, 16)] if small else [(576,), (576,), (656,),
                                                                        (8, 128), (4, 80)])
            bs = rng.choice([2, 4, 8] if small else [16, 32, 64])
            batch = rng.randrange(1, 5 if small else 65)
            # the cache (tokens, starts, tails, two free blocks) and dst, whole
            most = HIDDEN_ELEMENTS // (2 * math.prod(entry)) - batch * 4 * bs - 2 * bs
            tokens = max(0, min(rng.randrange(0, 24 if small else 20000), most))
            out.append(_cg(batch, tokens, entry, dt, bs=bs,
                           starts=rng.choice(["none", "aligned", "any"]),
                           pad=rng.choice([0, 0, 8, 64]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _cg(32, 131072, (576,), "bfloat16", bs=64, starts="aligned"),
            _cg(32, 262144, (656,), "uint8", bs=64, starts="aligned"),
            _cg(256, 65536, (576,), "float32", bs=16, starts="any"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        cache, table, cu, seq_starts = gather_inputs(c, gen, c.torch_dtype)
        dst = torch.empty((c.shape[1], *cache.shape[2:]), dtype=cache.dtype)
        return Call(c.entry, (cache, dst, table, cu, c.shape[0], seq_starts),
                    outputs=(Out.arg(1),), mutable=frozenset({1}), out_buffers=frozenset({1}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        cache, dst, table, cu, _, seq_starts = call.args
        return (Expected(exact_value(gathered(cache, table, cu, seq_starts)), dst.dtype),)

    def baseline(self, call: Call) -> object:
        ops = _baseline.custom_ops()
        if ops is not None:
            ops.cp_gather_cache(*call.args)
            return None
        cache, dst, table, cu, _, seq_starts = call.args
        dst.copy_(gathered(cache, table, cu, seq_starts))
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        batch, tokens = c.shape
        moved = tokens * math.prod(c["entry_shape"]) * itemsize(c.torch_dtype)
        return Cost(flops=0.0, bytes=float(2 * moved + 4 * tokens // int(c["block_size"])
                                           + 8 * (batch + 1)), dtype=c.dtype)
