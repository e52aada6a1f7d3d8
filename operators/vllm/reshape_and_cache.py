"""vllm::reshape_and_cache — ``vllm._custom_ops.reshape_and_cache(key, value, key_cache,
value_cache, slot_mapping, kv_cache_dtype, k_scale, v_scale)`` (vLLM 0.13.0): each token's key
and value rows are written into its slot of the paged caches, in place, quantized to fp8 when
the cache is fp8.

Layouts (``csrc/cache_kernels.cu``): key ``[num_tokens, num_heads, head_size]`` and value alike,
rows strided by ``stride(0)`` (heads and elements contiguous); key cache ``[num_blocks,
num_heads, head_size // x, block_size, x]`` with ``x = 16 // cache element size``, value cache
``[num_blocks, num_heads, head_size, block_size]``, both contiguous. ``num_tokens`` is
``slot_mapping.shape[0]`` (key may have more rows: CUDA-graph padding). Returns None.
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
    x_of,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + TRITON_FP8_ENCODE + r'''

@triton.jit
def _reshape_and_cache_kernel(key_ptr, value_ptr, kc_ptr, vc_ptr, slot_ptr, ks_ptr, vs_ptr,
                              n_elem, head_size, block_size, sk, sv,
                              X: tl.constexpr, FP8: tl.constexpr, BLOCK: tl.constexpr):
    # One token per program row; BLOCK elements of its num_heads * head_size per program.
    t = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + t)
    i = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = (i < n_elem) & (slot >= 0)
    blk = slot // block_size
    off = slot % block_size
    h = i // head_size
    d = i % head_size
    base = blk * n_elem * block_size + h * (head_size * block_size)
    k_dst = base + (d // X) * (block_size * X) + off * X + d % X
    v_dst = base + d * block_size + off
    k = tl.load(key_ptr + t * sk + i, mask=m, other=0.0)
    v = tl.load(value_ptr + t * sv + i, mask=m, other=0.0)
    if FP8:
        k = _to_e4m3(k.to(tl.float32) / tl.load(ks_ptr))
        v = _to_e4m3(v.to(tl.float32) / tl.load(vs_ptr))
    tl.store(kc_ptr + k_dst, k, mask=m)
    tl.store(vc_ptr + v_dst, v, mask=m)


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype,
                      k_scale, v_scale):
    num_tokens = slot_mapping.shape[0]
    n_elem = key.shape[1] * key.shape[2]
    if num_tokens == 0 or n_elem == 0:
        return None
    fp8 = kv_cache_dtype != "auto"
    x = 16 // key_cache.element_size()
    block = min(1024, triton.next_power_of_2(n_elem))
    grid = (num_tokens, triton.cdiv(n_elem, block))
    _reshape_and_cache_kernel[grid](key, value, key_cache, value_cache, slot_mapping,
                                    k_scale, v_scale, n_elem, key.shape[2], key_cache.shape[3],
                                    key.stride(0), value.stride(0),
                                    X=x, FP8=fp8, BLOCK=block, num_warps=4)
    return None
'''

# Stores the key unscaled: right whenever the scale is 1.0 (vLLM's default) or the cache is not fp8.
NEGATIVE_NO_SCALE = SOLUTION.replace("k.to(tl.float32) / tl.load(ks_ptr)", "k.to(tl.float32)")

# Reads key rows as if packed: right unless key/value are slices of a fused qkv tensor.
NEGATIVE_PACKED_ROWS = SOLUTION.replace("key_ptr + t * sk + i", "key_ptr + t * n_elem + i")

# Takes x from the input's element size, not the cache's: right unless the cache is fp8.
NEGATIVE_X_OF_INPUT = SOLUTION.replace("x = 16 // key_cache.element_size()",
                                       "x = 16 // key.element_size()")

_FLOATS = ("float16", "bfloat16", "float32")


def _rc(tokens: int, heads: int, head_size: int, dt: str, *, kv: str = "auto", bs: int = 16,
        scale: str = "unit", layout: str = "contiguous", pad: int = 0, spare: float = 1.25,
        cpu: bool = False) -> Case:
    blocks = max(1, -(-int(tokens * spare) // bs))
    params: dict[str, object] = {"kv": kv, "block_size": bs, "num_blocks": blocks}
    if kv != "auto":
        params["scale"] = scale
    if layout != "contiguous":
        params["layout"] = layout
    if pad:
        params["pad"] = pad
    return case("reshape_and_cache", dt, (tokens, heads, head_size), cpu=cpu, **params)


@register("vllm::reshape_and_cache", version=1, kind=Kind.COMPUTE)
class ReshapeAndCache(OperatorSpec):
    entry_points = (
        EntryPoint(
            "reshape_and_cache",
            "reshape_and_cache(key: Tensor, value: Tensor, key_cache: Tensor, "
            "value_cache: Tensor, slot_mapping: Tensor, kv_cache_dtype: str, k_scale: Tensor, "
            "v_scale: Tensor) -> None",
            "Writes each token's key and value into its slot of the paged caches, in place.",
        ),
    )
    description = (
        "vLLM's `reshape_and_cache` (vLLM 0.13.0, `vllm._custom_ops.reshape_and_cache`): write "
        "the keys and values of `num_tokens = slot_mapping.shape[0]` tokens into a paged KV "
        "cache, in place. `key` and `value` are `[rows, num_heads, head_size]` with rows >= "
        "num_tokens (only the first num_tokens rows are cached); within a row heads and elements "
        "are contiguous, but rows may be strided (`stride(0)` larger than num_heads * head_size, "
        "e.g. slices of a fused qkv tensor). `slot_mapping` is int64 `[num_tokens]`: token t goes "
        "to block `slot // block_size`, position `slot % block_size`; slot -1 is a padding token "
        "that writes nothing. Slots are distinct. `key_cache` is contiguous `[num_blocks, "
        "num_heads, head_size // x, block_size, x]` with `x = 16 // key_cache.element_size()` "
        "(8 for float16/bfloat16, 4 for float32, 16 for fp8): element d of head h of the token "
        "goes to `key_cache[block, h, d // x, pos, d % x]`. `value_cache` is contiguous "
        "`[num_blocks, num_heads, head_size, block_size]`: `value_cache[block, h, d, pos]`. "
        "`kv_cache_dtype` is \"auto\" (caches have the dtype of key/value: float16, bfloat16 or "
        "float32; an exact copy), \"fp8\" or \"fp8_e4m3\" (caches are float8_e4m3fn; keys stored "
        "as key / k_scale, values as value / v_scale). " + FP8_RULE + " `k_scale` and `v_scale` "
        "are 0-d float32 tensors (read only for fp8). Every other cache element must keep its "
        "value. Return None; do not modify key, value, slot_mapping or the scales."
    )
    solution = SOLUTION
    negatives = (
        Negative("no_scale", "stores key / 1 instead of key / k_scale in fp8 caches (right only "
                 "with the default scale 1.0)", NEGATIVE_NO_SCALE),
        Negative("packed_rows", "reads key rows at t * num_heads * head_size, ignoring "
                 "key.stride(0) (right only for packed keys)", NEGATIVE_PACKED_ROWS),
        Negative("x_of_input", "takes x = 16 / element size of the input instead of the cache "
                 "(wrong key-cache layout whenever the cache is fp8)", NEGATIVE_X_OF_INPUT),
    )
    tolerances = {"float16": EXACT, "bfloat16": EXACT, "float32": EXACT,
                  "float8_e4m3fn": FP8_BOUND}

    def cases(self) -> Sequence[Case]:
        cs = [
            _rc(7, 2, 64, "float16", cpu=True),
            _rc(13, 2, 32, "bfloat16", kv="fp8", bs=8, cpu=True),
            _rc(9, 3, 80, "float32", cpu=True),
            _rc(11, 2, 64, "float16", kv="fp8_e4m3", scale="amax", layout="qkv", pad=3, cpu=True),
            _rc(5, 4, 32, "bfloat16", layout="extra", bs=32, cpu=True),
            _rc(6, 1, 128, "float32", kv="fp8", scale="tight", pad=1, cpu=True),
            _rc(0, 2, 64, "float16", spare=0.0, cpu=True),
        ]
        for dt in _FLOATS:
            for kv in ("auto", "fp8"):
                cs += [
                    _rc(2048, 8, 128, dt, kv=kv, scale="amax"),                 # Llama-3 8B prefill
                    _rc(1, 8, 128, dt, kv=kv, bs=32),                            # one decode token
                    _rc(256, 8, 128, dt, kv=kv, bs=32, layout="qkv", pad=17),   # Llama-3 70B
                    _rc(1023, 4, 128, dt, kv=kv, scale="tight", layout="extra"),  # Qwen2.5-7B
                    _rc(333, 5, 96, dt, kv=kv, pad=40),
                    _rc(97, 16, 256, dt, kv=kv, bs=32, layout="qkv"),
                    _rc(517, 32, 80, dt, kv=kv, spare=3.0),
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
            out.append(_rc(tokens, heads, head_size, dt, kv=rng.choice(["auto", "fp8", "fp8_e4m3"]),
                           bs=rng.choice([8, 16, 32]),
                           scale=rng.choice(["unit", "amax", "tight"]),
                           layout=rng.choice(["contiguous", "qkv", "extra"]),
                           pad=rng.randrange(0, tokens // 4 + 1), spare=spare, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _rc(16384, 32, 128, "float16"),
            _rc(16384, 32, 128, "bfloat16", kv="fp8", scale="amax"),
            _rc(32768, 8, 128, "bfloat16", bs=32, layout="qkv"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dt = c.torch_dtype
        tokens, heads, head_size = c.shape
        kv = str(c["kv"])
        cdt = cache_dtype(kv, dt)
        x = x_of(cdt)
        bs, nb = int(c["block_size"]), int(c["num_blocks"])
        key, value = kv_rows(tokens, heads, head_size, dt, gen, str(c.get("layout", "contiguous")))
        slots = random_slots(gen, tokens, nb * bs, int(c.get("pad", 0)))
        key_cache = random_values((nb, heads, head_size // x, bs, x), cdt, gen)
        value_cache = random_values((nb, heads, head_size, bs), cdt, gen)
        kind = str(c.get("scale", "unit"))
        k_scale, v_scale = scale_for(key[:tokens], kind), scale_for(value[:tokens], kind)
        return Call(c.entry, (key, value, key_cache, value_cache, slots, kv, k_scale, v_scale),
                    outputs=(Out.arg(2), Out.arg(3)), mutable=frozenset({2, 3}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        key, value, key_cache, value_cache, slots, kv, k_scale, v_scale = call.args
        tok, blk, pos = slot_positions(slots, key_cache.shape[3])
        kc, vc = key_cache.double(), value_cache.double()
        kb, vb = torch.zeros_like(kc), torch.zeros_like(vc)
        k_val, k_bnd = cache_reference(key[tok], kv, k_scale)
        v_val, v_bnd = cache_reference(value[tok], kv, v_scale)
        shape = (len(tok), *key_cache.shape[1:3], key_cache.shape[4])
        kc[blk, :, :, pos, :] = k_val.reshape(shape)
        kb[blk, :, :, pos, :] = k_bnd.reshape(shape)
        vc[blk, :, :, pos] = v_val
        vb[blk, :, :, pos] = v_bnd
        return (Expected(kc, key_cache.dtype, kb), Expected(vc, value_cache.dtype, vb))

    def baseline(self, call: Call) -> object:
        ops = _baseline.custom_ops()
        if ops is not None:
            ops.reshape_and_cache(*call.args)
            return None
        key, value, key_cache, value_cache, slots, kv, k_scale, v_scale = call.args
        tok, blk, pos = slot_positions(slots, key_cache.shape[3])
        shape = (len(tok), *key_cache.shape[1:3], key_cache.shape[4])
        key_cache[blk, :, :, pos, :] = to_cache(key[tok], kv, k_scale).reshape(shape)
        value_cache[blk, :, :, pos] = to_cache(value[tok], kv, v_scale)
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        two = Case(c.entry, c.dtype, (c.shape[0], 2 * c.shape[1], c.shape[2]), c.params)
        return slot_write_cost(two)  # keys and values
