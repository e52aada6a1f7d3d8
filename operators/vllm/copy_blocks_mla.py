"""vllm::copy_blocks_mla — ``vllm._custom_ops.copy_blocks_mla(kv_caches, block_mapping)`` (vLLM
0.13.0): copy-on-write of blocks of the joint MLA latent caches; for every (src, dst) pair, block
dst of every layer becomes a copy of block src, in place.

vLLM takes a Python list of per-layer ``[num_blocks, block_size, entry]`` caches and copies
``kv_caches[0].stride(0)`` elements per block (the stride, not the numel: blocks may be padded
for alignment). Here the layers come stacked (see ``copy_blocks``: in-place outputs must be
top-level tensors); the baseline passes ``list(kv_caches.unbind(0))`` to vLLM. Returns None.
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
    dtype_from_name,
)
from operators.vllm import _baseline
from operators.vllm._kv_cache import (
    EXACT,
    HIDDEN_ELEMENTS,
    block_pairs,
    exact_value,
    itemsize,
    pair_blocks_touched,
    random_values,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _copy_blocks_mla_kernel(cache_ptr, map_ptr, block_numel, s_layer, s_block,
                            BLOCK: tl.constexpr):
    # Grid: (pair, layer, chunk of the block's block_size * entry elements).
    pair = tl.program_id(0).to(tl.int64)
    layer = tl.program_id(1).to(tl.int64)
    j = tl.program_id(2) * BLOCK + tl.arange(0, BLOCK)
    m = j < block_numel
    src = tl.load(map_ptr + 2 * pair)
    dst = tl.load(map_ptr + 2 * pair + 1)
    x = tl.load(cache_ptr + layer * s_layer + src * s_block + j, mask=m)
    tl.store(cache_ptr + layer * s_layer + dst * s_block + j, x, mask=m)


def copy_blocks_mla(kv_caches, block_mapping):
    num_layers, num_pairs = kv_caches.shape[0], block_mapping.shape[0]
    if num_layers == 0 or num_pairs == 0:
        return None
    block_numel = kv_caches.shape[2] * kv_caches.shape[3]
    block = min(2048, triton.next_power_of_2(block_numel))
    grid = (num_pairs, num_layers, triton.cdiv(block_numel, block))
    s_layer, s_block = kv_caches.stride(0), kv_caches.stride(1)
    _copy_blocks_mla_kernel[grid](kv_caches, block_mapping, block_numel, s_layer, s_block,
                                  BLOCK=block, num_warps=4)
    return None
'''

# Steps between blocks by their numel, not their stride: right only for unpadded blocks.
NEGATIVE_NUMEL_STRIDE = SOLUTION.replace(
    "s_layer, s_block = kv_caches.stride(0), kv_caches.stride(1)",
    "s_layer, s_block = kv_caches.stride(0), block_numel")

# Never steps to the next layer: right only for a single layer.
NEGATIVE_FIRST_LAYER = SOLUTION.replace(
    "s_layer, s_block = kv_caches.stride(0), kv_caches.stride(1)",
    "s_layer, s_block = 0, kv_caches.stride(1)")

_DTYPES = ("bfloat16", "float16", "float32", "uint8")


def _cbm(layers: int, blocks: int, pairs: int, dt: str, *, bs: int = 16, entry: int = 576,
         pad: int = 0, cpu: bool = False) -> Case:
    return case("copy_blocks_mla", dt, (layers, blocks, pairs), block_size=bs, entry_size=entry,
                pad=pad, cpu=cpu)


@register("vllm::copy_blocks_mla", version=2, kind=Kind.COMPUTE)
class CopyBlocksMla(OperatorSpec):
    entry_points = (
        EntryPoint(
            "copy_blocks_mla",
            "copy_blocks_mla(kv_caches: Tensor, block_mapping: Tensor) -> None",
            "For each (src, dst) pair copies block src to block dst in every layer's MLA cache, "
            "in place.",
        ),
    )
    description = (
        "vLLM's `copy_blocks_mla` (vLLM 0.13.0, `vllm._custom_ops.copy_blocks_mla`), the "
        "copy-on-write of multi-head-latent-attention cache blocks (one joint latent cache per "
        "layer, e.g. DeepSeek-V3's kv_lora_rank 512 + rope 64 = 576 per entry). vLLM passes a "
        "list of per-layer caches; here the layers are stacked: `kv_caches` is `[num_layers, "
        "num_blocks, block_size, entry]`, layer l's cache being `kv_caches[l]`. Within a block "
        "the `block_size * entry` elements are contiguous, but blocks may be padded: block b of "
        "layer l starts at `kv_caches[l, b, 0, 0]`, `kv_caches.stride(1)` elements after block "
        "b - 1 (use the strides, not the sizes; vLLM copies `stride(1)` elements, padding "
        "included, which is neither required nor forbidden). `block_mapping` is int64 "
        "`[num_pairs, 2]`: for every row (src, dst) and every layer l, set `kv_caches[l, dst] = "
        "kv_caches[l, src]`, in place. Destinations are distinct and never a source. Caches are "
        "bfloat16, float16, float32 or uint8 (fp8 caches are copied as bytes); the copy is exact "
        "and blocks not named as a destination keep their values. Return None; do not modify "
        "block_mapping."
    )
    solution = SOLUTION
    negatives = (
        Negative("numel_stride", "steps between blocks by block_size * entry instead of the "
                 "block stride (right only for unpadded blocks)", NEGATIVE_NUMEL_STRIDE),
        Negative("first_layer_only", "never steps to the next layer (right only for one "
                 "layer)", NEGATIVE_FIRST_LAYER),
    )
    tolerances = {"float16": EXACT, "bfloat16": EXACT, "float32": EXACT}

    def cases(self) -> Sequence[Case]:
        cs = [
            _cbm(1, 8, 2, "bfloat16", bs=4, entry=72, cpu=True),
            _cbm(3, 10, 3, "float16", bs=4, entry=40, pad=24, cpu=True),
            _cbm(2, 9, 5, "float32", bs=2, entry=144, cpu=True),
            _cbm(2, 6, 2, "uint8", bs=8, entry=82, pad=16, cpu=True),
            _cbm(2, 4, 0, "bfloat16", bs=4, entry=72, cpu=True),
        ]
        for dt in _DTYPES:
            cs += [
                _cbm(61, 6, 4, dt, bs=64),                       # DeepSeek-V3, FlashMLA blocks
                _cbm(1, 600, 256, dt, bs=16),
                _cbm(27, 20, 12, dt, bs=16, pad=128),            # DeepSeek-V2-Lite
                _cbm(8, 33, 7, dt, bs=32, entry=656 // itemsize(dtype_from_name(dt)),
                     pad=64),                                    # fp8_ds_mla's 656-byte entries
                _cbm(5, 50, 21, dt, bs=8, entry=288, pad=8),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _DTYPES:
            bs = rng.choice([2, 4, 8] if small else [16, 32, 64])
            entry = rng.choice([40, 72, 144] if small else [576, 576, 288, 656])
            pad = rng.choice([0, 0, 8, 64])
            fit = HIDDEN_ELEMENTS // (bs * entry + pad)
            pairs = rng.randrange(1, 8 if small else min(200, fit * 2 // 3))
            blocks = min(fit, pairs + -(-pairs // 2) + rng.randrange(0, 10 if small else 100))
            layers = rng.randrange(1, min(4 if small else 61, fit // blocks) + 1)
            out.append(_cbm(layers, blocks, pairs, dt, bs=bs, entry=entry, pad=pad, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _cbm(61, 200, 128, "bfloat16", bs=64),
            _cbm(61, 200, 128, "uint8", bs=64, entry=656),
            _cbm(30, 400, 256, "bfloat16", bs=16, pad=64),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layers, blocks, pairs = c.shape
        bs, entry, pad = int(c["block_size"]), int(c["entry_size"]), int(c["pad"])
        flat = random_values((layers, blocks, bs * entry + pad), c.torch_dtype, gen)
        kv_caches = flat[..., :bs * entry].view(layers, blocks, bs, entry)
        return Call(c.entry, (kv_caches, block_pairs(gen, pairs, blocks)),
                    outputs=(Out.arg(0),), mutable=frozenset({0}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        kv_caches, mapping = call.args
        val = exact_value(kv_caches)
        val[:, mapping[:, 1]] = val[:, mapping[:, 0]]
        return (Expected(val, kv_caches.dtype),)

    def baseline(self, call: Call) -> object:
        kv_caches, mapping = call.args
        ops = _baseline.custom_ops()
        if ops is not None:
            ops.copy_blocks_mla(list(kv_caches.unbind(0)), mapping)
            return None
        kv_caches[:, mapping[:, 1]] = kv_caches[:, mapping[:, 0]]
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        layers, _, pairs = c.shape
        block = int(c["block_size"]) * int(c["entry_size"]) * itemsize(c.torch_dtype)
        moved = layers * pair_blocks_touched(pairs) * block
        return Cost(flops=0.0, bytes=float(moved + 16 * pairs), dtype=c.dtype)
