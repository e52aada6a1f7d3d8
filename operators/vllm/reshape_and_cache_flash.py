"""vllm::reshape_and_cache_flash — ``vllm._custom_ops.reshape_and_cache_flash(key, value,
key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale, v_scale)`` (vLLM 0.13.0): each
token's key and value rows are written into its slot of the flash-layout caches, in place.

Layouts (``csrc/cache_kernels.cu``): caches are ``[num_blocks, block_size, num_heads,
head_size]`` read through their strides — NHD (contiguous), HND (a ``[num_blocks, num_heads,
block_size, head_size]`` buffer permuted) or either as one half of a ``[num_blocks, 2, ...]``
joint KV buffer (FlashInfer's layout); the value cache has the key cache's strides (the kernel
uses the key cache's). ``num_tokens`` is ``slot_mapping.shape[0]``. Returns None.
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
    FP8_BOUND,
    FP8_RULE,
    TRITON_FP8_ENCODE,
    cache_dtype,
    cache_reference,
    cap_tokens,
    kv_rows,
    random_slots,
    random_values,
    scale_for,
    slot_positions,
    slot_write_cost,
    to_cache,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + TRITON_FP8_ENCODE + r'''

@triton.jit
def _reshape_and_cache_flash_kernel(key_ptr, value_ptr, kc_ptr, vc_ptr, slot_ptr, ks_ptr, vs_ptr,
                                    n_elem, head_size, block_size, sk, sv,
                                    s_block, s_page, s_head,
                                    FP8: tl.constexpr, BLOCK: tl.constexpr):
    # One token per program row; BLOCK elements of its num_heads * head_size per program.
    t = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + t)
    i = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = (i < n_elem) & (slot >= 0)
    blk = slot // block_size
    off = slot % block_size
    dst = blk * s_block + off * s_page + (i // head_size) * s_head + i % head_size
    k = tl.load(key_ptr + t * sk + i, mask=m, other=0.0)
    v = tl.load(value_ptr + t * sv + i, mask=m, other=0.0)
    if FP8:
        k = _to_e4m3(k.to(tl.float32) / tl.load(ks_ptr))
        v = _to_e4m3(v.to(tl.float32) / tl.load(vs_ptr))
    tl.store(kc_ptr + dst, k, mask=m)
    tl.store(vc_ptr + dst, v, mask=m)


def reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype,
                            k_scale, v_scale):
    num_tokens = slot_mapping.shape[0]
    n_elem = key.shape[1] * key.shape[2]
    if num_tokens == 0 or n_elem == 0:
        return None
    block = min(1024, triton.next_power_of_2(n_elem))
    grid = (num_tokens, triton.cdiv(n_elem, block))
    _reshape_and_cache_flash_kernel[grid](
        key, value, key_cache, value_cache, slot_mapping, k_scale, v_scale,
        n_elem, key.shape[2], key_cache.shape[1], key.stride(0), value.stride(0),
        key_cache.stride(0), key_cache.stride(1), key_cache.stride(2),
        FP8=kv_cache_dtype != "auto", BLOCK=block, num_warps=4)
    return None
'''

# Addresses the caches as packed NHD from their sizes: right only for contiguous NHD caches.
NEGATIVE_NHD_ONLY = SOLUTION.replace(
    "key_cache.stride(0), key_cache.stride(1), key_cache.stride(2),",
    "key_cache.shape[1] * n_elem, n_elem, key.shape[2],")

# Scales values by k_scale: right whenever both scales are equal (the default 1.0).
NEGATIVE_VALUE_K_SCALE = SOLUTION.replace("v.to(tl.float32) / tl.load(vs_ptr)",
                                          "v.to(tl.float32) / tl.load(ks_ptr)")

_FLOATS = ("float16", "bfloat16", "float32")
CACHE_LAYOUTS = ("nhd", "hnd", "nhd_kv", "hnd_kv")


def _rf(tokens: int, heads: int, head_size: int, dt: str, *, kv: str = "auto", bs: int = 16,
        cache: str = "nhd", scale: str = "unit", layout: str = "contiguous", pad: int = 0,
        spare: float = 1.25, cpu: bool = False) -> Case:
    blocks = max(1, -(-int(tokens * spare) // bs))
    params: dict[str, object] = {"kv": kv, "block_size": bs, "num_blocks": blocks,
                                 "cache": cache}
    if kv != "auto":
        params["scale"] = scale
    if layout != "contiguous":
        params["layout"] = layout
    if pad:
        params["pad"] = pad
    return case("reshape_and_cache_flash", dt, (tokens, heads, head_size), cpu=cpu, **params)


def flash_caches(nb: int, bs: int, heads: int, head_size: int, dtype: torch.dtype,
                 gen: torch.Generator, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Key and value caches viewed as ``[nb, bs, heads, head_size]`` in ``layout``."""
    hnd = layout.startswith("hnd")
    inner = (heads, bs, head_size) if hnd else (bs, heads, head_size)
    if layout.endswith("_kv"):
        both = random_values((nb, 2, *inner), dtype, gen)
        k, v = both[:, 0], both[:, 1]
    else:
        k, v = random_values((nb, *inner), dtype, gen), random_values((nb, *inner), dtype, gen)
    if hnd:
        k, v = k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)
    return k, v


@register("vllm::reshape_and_cache_flash", version=1, kind=Kind.COMPUTE)
class ReshapeAndCacheFlash(OperatorSpec):
    entry_points = (
        EntryPoint(
            "reshape_and_cache_flash",
            "reshape_and_cache_flash(key: Tensor, value: Tensor, key_cache: Tensor, "
            "value_cache: Tensor, slot_mapping: Tensor, kv_cache_dtype: str, k_scale: Tensor, "
            "v_scale: Tensor) -> None",
            "Writes each token's key and value into its slot of the flash-layout caches.",
        ),
    )
    description = (
        "vLLM's `reshape_and_cache_flash` (vLLM 0.13.0, "
        "`vllm._custom_ops.reshape_and_cache_flash`): write the keys and values of `num_tokens = "
        "slot_mapping.shape[0]` tokens into a flash-attention KV cache, in place. `key` and "
        "`value` are `[rows, num_heads, head_size]` with rows >= num_tokens (only the first "
        "num_tokens rows are cached; the rest is CUDA-graph padding); within a row heads and "
        "elements are contiguous, but rows may be strided (`stride(0)`, e.g. slices of a fused "
        "qkv tensor). `slot_mapping` is int64 `[num_tokens]`: token t goes to block `slot // "
        "block_size`, position `slot % block_size`; slot -1 is a padding token that writes "
        "nothing; slots are distinct. `key_cache` and `value_cache` are `[num_blocks, "
        "block_size, num_heads, head_size]` and must be addressed through their strides: "
        "contiguous (NHD), a permuted `[num_blocks, num_heads, block_size, head_size]` buffer "
        "(HND), or one half of a joint `[num_blocks, 2, ...]` KV buffer (block stride twice the "
        "block); the last dim is always contiguous and `value_cache` has the same strides as "
        "`key_cache`. Element d of head h goes to `key_cache[block, pos, h, d]` (and "
        "`value_cache[block, pos, h, d]`). `kv_cache_dtype` is \"auto\" (caches have the dtype of "
        "key/value: float16, bfloat16 or float32; an exact copy), \"fp8\" or \"fp8_e4m3\" (caches "
        "are float8_e4m3fn; keys stored as key / k_scale, values as value / v_scale). " + FP8_RULE
        + " `k_scale` and `v_scale` are 0-d float32 tensors. Every other cache element, and "
        "anything between the caches' strided elements, must keep its value. Return None; do "
        "not modify key, value, slot_mapping or the scales."
    )
    solution = SOLUTION
    negatives = (
        Negative("nhd_only", "addresses the caches as contiguous NHD from their sizes, ignoring "
                 "their strides (HND and joint-KV layouts land in the wrong places)",
                 NEGATIVE_NHD_ONLY),
        Negative("value_k_scale", "quantizes values with k_scale (right only when both scales "
                 "are equal)", NEGATIVE_VALUE_K_SCALE),
    )
    tolerances = {"float16": EXACT, "bfloat16": EXACT, "float32": EXACT,
                  "float8_e4m3fn": FP8_BOUND}

    def cases(self) -> Sequence[Case]:
        cs = [
            _rf(7, 2, 64, "float16", cpu=True),
            _rf(13, 2, 32, "bfloat16", kv="fp8", bs=8, cache="hnd", cpu=True),
            _rf(9, 3, 80, "float32", bs=8, cache="nhd_kv", cpu=True),
            _rf(11, 2, 64, "float16", kv="fp8_e4m3", scale="amax", layout="qkv", pad=3, cpu=True),
            _rf(5, 4, 32, "bfloat16", cache="hnd_kv", layout="extra", bs=32, cpu=True),
            _rf(6, 1, 128, "float32", kv="fp8", scale="tight", pad=1, cpu=True),
            _rf(0, 2, 64, "float16", spare=0.0, cpu=True),
        ]
        for dt in _FLOATS:
            for kv in ("auto", "fp8"):
                cs += [
                    _rf(2048, 8, 128, dt, kv=kv, scale="amax"),                  # Llama-3 8B
                    _rf(1, 8, 128, dt, kv=kv, bs=32, cache="hnd"),
                    _rf(256, 8, 128, dt, kv=kv, cache="nhd_kv", layout="qkv", pad=17),
                    _rf(1023, 4, 128, dt, kv=kv, bs=32, cache="hnd_kv", scale="tight",
                        layout="extra"),                                          # Qwen2.5-7B
                    _rf(333, 5, 96, dt, kv=kv, cache="hnd", pad=40),
                    _rf(97, 16, 256, dt, kv=kv, layout="qkv"),
                    _rf(517, 64, 64, dt, kv=kv, cache="nhd_kv", spare=3.0),
                ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS:
            heads = rng.choice([1, 2, 3] if small else [1, 4, 8, 12, 32])
            head_size = rng.choice([32, 64, 80, 96, 128] + ([] if small else [256]))
            spare = rng.choice([1.0, 1.5, 4.0])
            # keys, values and their two caches
            tokens = cap_tokens(rng.randrange(1, 24 if small else 3000), heads * head_size,
                                2 * (1 + spare))
            out.append(_rf(tokens, heads, head_size, dt, kv=rng.choice(["auto", "fp8", "fp8_e4m3"]),
                           bs=rng.choice([8, 16, 32]), cache=rng.choice(CACHE_LAYOUTS),
                           scale=rng.choice(["unit", "amax", "tight"]),
                           layout=rng.choice(["contiguous", "qkv", "extra"]),
                           pad=rng.randrange(0, tokens // 4 + 1), spare=spare, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _rf(16384, 32, 128, "float16"),
            _rf(16384, 32, 128, "bfloat16", kv="fp8", scale="amax", cache="hnd"),
            _rf(32768, 8, 128, "bfloat16", cache="nhd_kv", layout="qkv"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dt = c.torch_dtype
        tokens, heads, head_size = c.shape
        kv = str(c["kv"])
        bs, nb = int(c["block_size"]), int(c["num_blocks"])
        key, value = kv_rows(tokens, heads, head_size, dt, gen, str(c.get("layout", "contiguous")))
        slots = random_slots(gen, tokens, nb * bs, int(c.get("pad", 0)))
        key_cache, value_cache = flash_caches(nb, bs, heads, head_size, cache_dtype(kv, dt), gen,
                                              str(c["cache"]))
        kind = str(c.get("scale", "unit"))
        k_scale, v_scale = scale_for(key[:tokens], kind), scale_for(value[:tokens], kind)
        return Call(c.entry, (key, value, key_cache, value_cache, slots, kv, k_scale, v_scale),
                    outputs=(Out.arg(2), Out.arg(3)), mutable=frozenset({2, 3}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        key, value, key_cache, value_cache, slots, kv, k_scale, v_scale = call.args
        tok, blk, pos = slot_positions(slots, key_cache.shape[1])
        out = []
        for src, cache, scale in ((key, key_cache, k_scale), (value, value_cache, v_scale)):
            val, bnd = cache.double(), torch.zeros(cache.shape, dtype=torch.float64)
            v, b = cache_reference(src[tok], kv, scale)
            val[blk, pos] = v
            bnd[blk, pos] = b
            out.append(Expected(val, cache.dtype, bnd))
        return tuple(out)

    def baseline(self, call: Call) -> object:
        ops = _baseline.custom_ops()
        if ops is not None:
            ops.reshape_and_cache_flash(*call.args)
            return None
        key, value, key_cache, value_cache, slots, kv, k_scale, v_scale = call.args
        tok, blk, pos = slot_positions(slots, key_cache.shape[1])
        key_cache[blk, pos] = to_cache(key[tok], kv, k_scale)
        value_cache[blk, pos] = to_cache(value[tok], kv, v_scale)
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        two = Case(c.entry, c.dtype, (c.shape[0], 2 * c.shape[1], c.shape[2]), c.params)
        return slot_write_cost(two)  # keys and values
