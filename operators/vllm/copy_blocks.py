"""vllm::copy_blocks — ``vllm._custom_ops.copy_blocks(key_caches, value_caches, block_mapping)``
(vLLM 0.13.0): copy-on-write of KV-cache blocks; for every (src, dst) pair, block dst of every
layer's key and value cache becomes a copy of block src, in place.

vLLM takes Python lists of per-layer caches (``csrc/cache_kernels.cu`` builds a pointer table).
Here the layers come stacked, ``key_caches[l]`` being layer l's cache: the harness checks
in-place outputs and input mutation per top-level tensor argument, and a list's members are
neither. The semantics are vLLM's; the baseline passes ``list(key_caches.unbind(0))`` to vLLM.
A block is ``key_caches[l][b]``: ``numel(key_caches[0][0])`` contiguous elements (value blocks have
as many). Returns None.
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
    block_pairs,
    exact_value,
    itemsize,
    pair_blocks_touched,
    random_values,
    x_of,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _copy_blocks_kernel(kc_ptr, vc_ptr, map_ptr, block_numel, s_layer_k, s_layer_v,
                        BLOCK: tl.constexpr):
    # Grid: (pair, layer, chunk of the block).
    pair = tl.program_id(0).to(tl.int64)
    layer = tl.program_id(1).to(tl.int64)
    j = tl.program_id(2) * BLOCK + tl.arange(0, BLOCK)
    m = j < block_numel
    src = tl.load(map_ptr + 2 * pair)
    dst = tl.load(map_ptr + 2 * pair + 1)
    k = tl.load(kc_ptr + layer * s_layer_k + src * block_numel + j, mask=m)
    tl.store(kc_ptr + layer * s_layer_k + dst * block_numel + j, k, mask=m)
    v = tl.load(vc_ptr + layer * s_layer_v + src * block_numel + j, mask=m)
    tl.store(vc_ptr + layer * s_layer_v + dst * block_numel + j, v, mask=m)


def copy_blocks(key_caches, value_caches, block_mapping):
    num_layers, num_pairs = key_caches.shape[0], block_mapping.shape[0]
    if num_layers == 0 or num_pairs == 0:
        return None
    block_numel = key_caches[0][0].numel()
    block = min(2048, triton.next_power_of_2(block_numel))
    grid = (num_pairs, num_layers, triton.cdiv(block_numel, block))
    _copy_blocks_kernel[grid](key_caches, value_caches, block_mapping, block_numel,
                              key_caches.stride(0), value_caches.stride(0), BLOCK=block,
                              num_warps=4)
    return None
'''

# Never steps to the next layer: right only for a single layer (vLLM's own test uses one).
NEGATIVE_FIRST_LAYER = SOLUTION.replace(
    "key_caches.stride(0), value_caches.stride(0), BLOCK=block", "0, 0, BLOCK=block")

# Reads block_mapping as [2, num_pairs] (sources, then destinations): right for one pair.
NEGATIVE_MAPPING_TRANSPOSED = SOLUTION.replace(
    "src = tl.load(map_ptr + 2 * pair)\n    dst = tl.load(map_ptr + 2 * pair + 1)",
    "src = tl.load(map_ptr + pair)\n    dst = tl.load(map_ptr + tl.num_programs(0) + pair)")

_DTYPES = ("float16", "bfloat16", "float32", "uint8")
HIDDEN_ELEMENTS = 16 << 20


def _cb(layers: int, blocks: int, pairs: int, dt: str, *, heads: int = 2, head_size: int = 32,
        bs: int = 16, cpu: bool = False) -> Case:
    return case("copy_blocks", dt, (layers, blocks, pairs), heads=heads, head_size=head_size,
                block_size=bs, cpu=cpu)


@register("vllm::copy_blocks", version=2, kind=Kind.COMPUTE)
class CopyBlocks(OperatorSpec):
    entry_points = (
        EntryPoint(
            "copy_blocks",
            "copy_blocks(key_caches: Tensor, value_caches: Tensor, block_mapping: Tensor) -> None",
            "For each (src, dst) pair copies block src to block dst in every layer's key and "
            "value cache, in place.",
        ),
    )
    description = (
        "vLLM's `copy_blocks` (vLLM 0.13.0, `vllm._custom_ops.copy_blocks`), the copy-on-write "
        "of paged KV-cache blocks. vLLM passes lists of per-layer caches; here the layers are "
        "stacked: `key_caches` is `[num_layers, num_blocks, num_kv_heads, head_size // x, "
        "block_size, x]` and `value_caches` is `[num_layers, num_blocks, num_kv_heads, "
        "head_size, block_size]`, both contiguous (`x = 16 // element size`), so layer l's cache "
        "is `key_caches[l]`. A block is `key_caches[l, b]`: `block_numel = key_caches[0][0]"
        ".numel()` contiguous elements, and a value block has as many. `block_mapping` is int64 "
        "`[num_pairs, 2]`: for every row (src, dst) and every layer l, set `key_caches[l, dst] = "
        "key_caches[l, src]` and `value_caches[l, dst] = value_caches[l, src]`, in place. "
        "Destinations are distinct and never a source (the pairs are independent; a source "
        "usually appears twice). Caches are float16, bfloat16, float32 or uint8 (fp8 caches "
        "are copied as bytes); the copy is exact. Blocks not named as a destination keep their "
        "values. Return None; do not modify block_mapping."
    )
    solution = SOLUTION
    negatives = (
        Negative("first_layer_only", "never steps to the next layer (right only for one "
                 "layer, as in vLLM's own test)", NEGATIVE_FIRST_LAYER),
        Negative("mapping_transposed", "reads block_mapping as [2, num_pairs] (right only for "
                 "a single pair)", NEGATIVE_MAPPING_TRANSPOSED),
    )
    tolerances = {"float16": EXACT, "bfloat16": EXACT, "float32": EXACT}

    def cases(self) -> Sequence[Case]:
        cs = [
            _cb(1, 12, 4, "float16", cpu=True),
            _cb(3, 10, 1, "bfloat16", bs=8, cpu=True),
            _cb(2, 9, 5, "float32", heads=1, head_size=16, cpu=True),
            _cb(4, 16, 6, "uint8", head_size=32, bs=8, cpu=True),
            _cb(2, 4, 0, "float16", cpu=True),
        ]
        for dt in _DTYPES:
            cs += [
                _cb(32, 12, 4, dt, heads=8, head_size=128),             # Llama-3 8B
                _cb(1, 600, 256, dt, heads=8, head_size=64),            # vLLM's test
                _cb(80, 3, 1, dt, heads=8, head_size=128, bs=32),       # Llama-3 70B
                _cb(28, 40, 25, dt, heads=4, head_size=128),            # Qwen2.5-7B
                _cb(5, 77, 25, dt, heads=3, head_size=80, bs=8),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _DTYPES:
            heads = rng.choice([1, 2] if small else [1, 4, 8])
            head_size = rng.choice([16, 32] if small else [64, 80, 128, 256])
            bs = rng.choice([8, 16] if small else [8, 16, 32])
            # Both caches travel whole and are checked: at most HIDDEN_ELEMENTS of them.
            fit = HIDDEN_ELEMENTS // (2 * heads * head_size * bs)
            pairs = rng.randrange(1, 8 if small else min(200, fit * 2 // 3))
            blocks = min(fit, pairs + -(-pairs // 2) + rng.randrange(0, 10 if small else 100))
            layers = rng.randrange(1, min(4 if small else 12, fit // blocks) + 1)
            out.append(_cb(layers, blocks, pairs, dt, heads=heads, head_size=head_size, bs=bs,
                           cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _cb(16, 400, 256, "float16", heads=8, head_size=128),
            _cb(8, 400, 256, "bfloat16", heads=8, head_size=128, bs=32),
            _cb(32, 400, 256, "uint8", heads=8, head_size=128),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layers, blocks, pairs = c.shape
        dt = c.torch_dtype
        heads, head_size, bs = int(c["heads"]), int(c["head_size"]), int(c["block_size"])
        x = x_of(dt)
        key_caches = random_values((layers, blocks, heads, head_size // x, bs, x), dt, gen)
        value_caches = random_values((layers, blocks, heads, head_size, bs), dt, gen)
        mapping = block_pairs(gen, pairs, blocks)
        return Call(c.entry, (key_caches, value_caches, mapping),
                    outputs=(Out.arg(0), Out.arg(1)), mutable=frozenset({0, 1}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        key_caches, value_caches, mapping = call.args
        out = []
        for cache in (key_caches, value_caches):
            val = exact_value(cache)
            val[:, mapping[:, 1]] = val[:, mapping[:, 0]]
            out.append(Expected(val, cache.dtype))
        return tuple(out)

    def baseline(self, call: Call) -> object:
        key_caches, value_caches, mapping = call.args
        ops = _baseline.custom_ops()
        if ops is not None:
            ops.copy_blocks(list(key_caches.unbind(0)), list(value_caches.unbind(0)), mapping)
            return None
        key_caches[:, mapping[:, 1]] = key_caches[:, mapping[:, 0]]
        value_caches[:, mapping[:, 1]] = value_caches[:, mapping[:, 0]]
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        layers, _, pairs = c.shape
        block = int(c["heads"]) * int(c["head_size"]) * int(c["block_size"])
        moved = 2 * layers * pair_blocks_touched(pairs) * block * itemsize(c.torch_dtype)  # K, V
        return Cost(flops=0.0, bytes=float(moved + 16 * pairs), dtype=c.dtype)
