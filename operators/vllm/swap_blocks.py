"""vllm::swap_blocks — ``vllm._custom_ops.swap_blocks(src, dst, block_mapping)`` (vLLM 0.13.0):
for every (src_block, dst_block) pair, block dst_block of ``dst`` becomes a copy of block
src_block of ``src``, in place.

vLLM copies ``src.element_size() * src.stride(0)`` bytes per block with ``cudaMemcpyAsync``
(blocks may be padded: the stride, not the numel), between GPU and host or within one GPU, and
wants ``block_mapping`` on the host. Here both caches and the mapping are on the device; the
baseline hands vLLM ``block_mapping.cpu()``. Returns None.
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
from operators.vllm._kv_cache import EXACT, HIDDEN_ELEMENTS, exact_value, itemsize, random_values, x_of

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _swap_blocks_kernel(src_ptr, dst_ptr, map_ptr, block_numel, block_stride,
                        BLOCK: tl.constexpr):
    # Grid: (pair, chunk of the block).
    pair = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < block_numel
    s = tl.load(map_ptr + 2 * pair)
    d = tl.load(map_ptr + 2 * pair + 1)
    x = tl.load(src_ptr + s * block_stride + j, mask=m)
    tl.store(dst_ptr + d * block_stride + j, x, mask=m)


def swap_blocks(src, dst, block_mapping):
    num_pairs = block_mapping.shape[0]
    if num_pairs == 0 or src.numel() == 0:
        return None
    block_numel = src[0].numel()  # a block's elements are contiguous; blocks may be padded
    block_stride = src.stride(0)
    block = min(4096, triton.next_power_of_2(block_numel))
    grid = (num_pairs, triton.cdiv(block_numel, block))
    _swap_blocks_kernel[grid](src, dst, block_mapping, block_numel, block_stride, BLOCK=block,
                              num_warps=4)
    return None
'''

# Steps between blocks by their numel: right only for unpadded caches.
NEGATIVE_NUMEL_STRIDE = SOLUTION.replace("block_stride = src.stride(0)",
                                         "block_stride = block_numel")

# Reads each pair as (dst, src): right only where a block keeps its number.
NEGATIVE_COLUMNS_SWAPPED = SOLUTION.replace(
    "s = tl.load(map_ptr + 2 * pair)\n    d = tl.load(map_ptr + 2 * pair + 1)",
    "d = tl.load(map_ptr + 2 * pair)\n    s = tl.load(map_ptr + 2 * pair + 1)")

_DTYPES = ("float16", "bfloat16", "float32", "uint8")
LAYOUTS = ("key", "value", "flash", "mla")


def _sb(src_blocks: int, dst_blocks: int, pairs: int, dt: str, *, layout: str = "key",
        heads: int = 2, head_size: int = 32, bs: int = 16, pad: int = 0, mapping: str = "random",
        cpu: bool = False) -> Case:
    params: dict[str, object] = {"layout": layout, "block_size": bs, "pad": pad}
    if layout == "mla":
        params["entry_size"] = head_size
    else:
        params.update(heads=heads, head_size=head_size)
    if mapping != "random":
        params["mapping"] = mapping
    return case("swap_blocks", dt, (src_blocks, dst_blocks, pairs), cpu=cpu, **params)


def block_shape(c: Case) -> tuple[int, ...]:
    """One block of the case's cache layout: paged key or value, flash (NHD) or MLA."""
    bs = int(c["block_size"])
    if c["layout"] == "mla":
        return (bs, int(c["entry_size"]))
    heads, head_size = int(c["heads"]), int(c["head_size"])
    x = x_of(c.torch_dtype)
    return {"key": (heads, head_size // x, bs, x), "value": (heads, head_size, bs),
            "flash": (bs, heads, head_size)}[str(c["layout"])]


def padded_cache(blocks: int, shape: tuple[int, ...], pad: int, dtype: torch.dtype,
                 gen: torch.Generator) -> torch.Tensor:
    """``[blocks, *shape]`` whose blocks lie ``numel + pad`` elements apart."""
    flat = random_values((blocks, math.prod(shape) + pad), dtype, gen)
    return flat[:, :math.prod(shape)].view(blocks, *shape)


@register("vllm::swap_blocks", version=1, kind=Kind.COMPUTE)
class SwapBlocks(OperatorSpec):
    entry_points = (
        EntryPoint(
            "swap_blocks",
            "swap_blocks(src: Tensor, dst: Tensor, block_mapping: Tensor) -> None",
            "For each (src_block, dst_block) pair copies src[src_block] into dst[dst_block], "
            "in place.",
        ),
    )
    description = (
        "vLLM's `swap_blocks` (vLLM 0.13.0, `vllm._custom_ops.swap_blocks`), which swaps KV-cache "
        "blocks in and out: `block_mapping` is int64 `[num_pairs, 2]`; for every row (s, d) set "
        "`dst[d] = src[s]`, in place. `src` and `dst` are caches of one layout and dtype with the "
        "block index first: a paged key cache `[num_blocks, num_kv_heads, head_size // x, "
        "block_size, x]`, a paged value cache `[num_blocks, num_kv_heads, head_size, "
        "block_size]`, a flash cache `[num_blocks, block_size, num_kv_heads, head_size]` or an "
        "MLA cache `[num_blocks, block_size, entry]`; they may hold different numbers of blocks. "
        "Within a block the elements are contiguous, but blocks may be padded: block b starts "
        "`stride(0)` elements after block b - 1 (use `src.stride(0)`, which `dst` shares, not "
        "the block's numel; vLLM copies `stride(0)` elements, padding included, which is neither "
        "required nor forbidden). Destination blocks are distinct. In vLLM one side is often "
        "host memory and the mapping lives on the host; here `src`, `dst` and `block_mapping` are "
        "all on the device. Dtypes: float16, bfloat16, float32, or uint8 (fp8 caches copied as "
        "bytes); the copy is exact. Blocks of dst not named keep their values. Return None; do "
        "not modify src or block_mapping."
    )
    solution = SOLUTION
    negatives = (
        Negative("numel_stride", "steps between blocks by their numel instead of stride(0) "
                 "(right only for unpadded caches)", NEGATIVE_NUMEL_STRIDE),
        Negative("columns_swapped", "reads each mapping row as (dst, src) (right only where a "
                 "block keeps its number)", NEGATIVE_COLUMNS_SWAPPED),
    )
    tolerances = {"float16": EXACT, "bfloat16": EXACT, "float32": EXACT}

    def cases(self) -> Sequence[Case]:
        cs = [
            _sb(12, 12, 4, "float16", cpu=True),
            _sb(8, 8, 3, "bfloat16", layout="value", bs=8, pad=64, cpu=True),
            _sb(9, 7, 5, "float32", layout="flash", heads=1, head_size=16, mapping="same",
                cpu=True),
            _sb(9, 9, 2, "uint8", layout="mla", head_size=82, bs=4, pad=16, cpu=True),
            _sb(4, 4, 0, "float16", layout="flash", cpu=True),
        ]
        for dt in _DTYPES:
            cs += [
                _sb(300, 200, 128, dt, heads=8, head_size=128),              # Llama-3 8B key
                _sb(300, 200, 128, dt, layout="value", heads=8, head_size=128, bs=32),
                _sb(300, 500, 111, dt, layout="flash", heads=4, head_size=128),
                _sb(256, 256, 64, dt, layout="mla", head_size=576, bs=64, pad=128),  # DeepSeek
                _sb(77, 33, 20, dt, layout="key", heads=3, head_size=80, bs=8, pad=40,
                    mapping="same"),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _DTYPES:
            layout = rng.choice(LAYOUTS)
            bs = rng.choice([4, 8] if small else [8, 16, 32, 64])
            head_size = rng.choice([16, 32, 64] if small else [64, 80, 128, 256])
            heads = rng.choice([1, 2] if small else [1, 4, 8])
            if layout == "mla":
                head_size = rng.choice([40, 72] if small else [576, 288])
                heads = 1
            fit = HIDDEN_ELEMENTS // (2 * heads * head_size * bs + 128)
            src_blocks = rng.randrange(1, 12 if small else min(800, fit))
            dst_blocks = rng.randrange(1, 12 if small else min(800, fit))
            pairs = rng.randrange(0, min(src_blocks, dst_blocks) + 1)
            out.append(_sb(src_blocks, dst_blocks, pairs, dt, layout=layout, heads=heads,
                           head_size=head_size, bs=bs, pad=rng.choice([0, 0, 16, 128]),
                           mapping=rng.choice(["random", "random", "same"]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _sb(8192, 8192, 8192, "float16", heads=8, head_size=128),
            _sb(8192, 8192, 8192, "bfloat16", layout="flash", heads=8, head_size=128),
            _sb(2048, 2048, 2048, "bfloat16", layout="mla", head_size=576, bs=64, pad=128),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        src_blocks, dst_blocks, pairs = c.shape
        shape, pad, dt = block_shape(c), int(c["pad"]), c.torch_dtype
        src = padded_cache(src_blocks, shape, pad, dt, gen)
        dst = padded_cache(dst_blocks, shape, pad, dt, gen)
        if c.get("mapping") == "same":  # a block keeps its number: within both caches
            d = s = torch.randperm(min(src_blocks, dst_blocks), generator=gen)[:pairs]
        else:
            d = torch.randperm(dst_blocks, generator=gen)[:pairs]
            s = torch.randperm(src_blocks, generator=gen)[:pairs]
        mapping = torch.stack([s, d], dim=1).to(torch.int64)
        return Call(c.entry, (src, dst, mapping), outputs=(Out.arg(1),), mutable=frozenset({1}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        src, dst, mapping = call.args
        val = exact_value(dst)
        val[mapping[:, 1]] = exact_value(src[mapping[:, 0]])
        return (Expected(val, dst.dtype),)

    def baseline(self, call: Call) -> object:
        src, dst, mapping = call.args
        ops = _baseline.custom_ops()
        if ops is not None:
            ops.swap_blocks(src, dst, mapping.cpu())
            return None
        dst[mapping[:, 1]] = src[mapping[:, 0]]
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        moved = c.shape[2] * math.prod(block_shape(c)) * itemsize(c.torch_dtype)
        return Cost(flops=0.0, bytes=float(2 * moved + 16 * c.shape[2]), dtype=c.dtype)
