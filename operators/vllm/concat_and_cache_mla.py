"""vllm::concat_and_cache_mla — ``vllm._custom_ops.concat_and_cache_mla(kv_c, k_pe, kv_cache,
slot_mapping, kv_cache_dtype, scale)`` (vLLM 0.13.0): each token's compressed latent ``kv_c``
and rotary key ``k_pe`` are concatenated into its slot of the MLA cache, in place.

Layouts (``csrc/cache_kernels.cu``): ``kv_c [rows, kv_lora_rank]`` and ``k_pe [rows, pe_dim]``,
rows strided (DeepSeek splits them from one ``[rows, kv_lora_rank + pe_dim]`` projection);
``kv_cache [num_blocks, block_size, kv_lora_rank + pe_dim]`` addressed through its block and
entry strides (entries may be padded). ``num_tokens`` is ``slot_mapping.shape[0]``. The
``"fp8_ds_mla"`` format (per-tile scales computed in the kernel) is not part of this problem.
Returns None.
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
def _concat_and_cache_mla_kernel(kvc_ptr, kpe_ptr, cache_ptr, slot_ptr, scale_ptr,
                                 rank, pe_dim, block_size, s_kvc, s_kpe, s_block, s_entry,
                                 FP8: tl.constexpr, BLOCK: tl.constexpr):
    # One token per program row; BLOCK of its rank + pe_dim cache entry per program.
    t = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + t)
    i = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = (i < rank + pe_dim) & (slot >= 0)
    in_c = i < rank
    c = tl.load(kvc_ptr + t * s_kvc + i, mask=m & in_c, other=0.0)
    p = tl.load(kpe_ptr + t * s_kpe + (i - rank), mask=m & (i >= rank), other=0.0)
    val = tl.where(in_c, c, p)
    if FP8:
        val = _to_e4m3(val.to(tl.float32) / tl.load(scale_ptr))
    dst = (slot // block_size) * s_block + (slot % block_size) * s_entry + i
    tl.store(cache_ptr + dst, val, mask=m)


def concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale):
    num_tokens = slot_mapping.shape[0]
    rank, pe_dim = kv_c.shape[1], k_pe.shape[1]
    if num_tokens == 0:
        return None
    block = min(1024, triton.next_power_of_2(rank + pe_dim))
    grid = (num_tokens, triton.cdiv(rank + pe_dim, block))
    _concat_and_cache_mla_kernel[grid](kv_c, k_pe, kv_cache, slot_mapping, scale, rank, pe_dim,
                                       kv_cache.shape[1], kv_c.stride(0), k_pe.stride(0),
                                       kv_cache.stride(0), kv_cache.stride(1),
                                       FP8=kv_cache_dtype != "auto", BLOCK=block, num_warps=4)
    return None
'''

# Reads kv_c rows as packed: right unless kv_c is a slice of the joint projection.
NEGATIVE_PACKED_KV_C = SOLUTION.replace("kvc_ptr + t * s_kvc + i", "kvc_ptr + t * rank + i")

# Steps between cache entries by rank + pe_dim: right unless the entries are padded.
NEGATIVE_PACKED_ENTRIES = SOLUTION.replace("(slot % block_size) * s_entry",
                                           "(slot % block_size) * (rank + pe_dim)")

_FLOATS = ("float16", "bfloat16", "float32")


def _mla(tokens: int, rank: int, pe_dim: int, dt: str, *, kv: str = "auto", bs: int = 16,
         scale: str = "unit", layout: str = "contiguous", cache: str = "contiguous",
         pad: int = 0, spare: float = 1.25, cpu: bool = False) -> Case:
    blocks = max(1, -(-int(tokens * spare) // bs))
    params: dict[str, object] = {"kv": kv, "block_size": bs, "num_blocks": blocks}
    if kv != "auto":
        params["scale"] = scale
    if layout != "contiguous":
        params["layout"] = layout
    if cache != "contiguous":
        params["cache"] = cache
    if pad:
        params["pad"] = pad
    return case("concat_and_cache_mla", dt, (tokens, rank, pe_dim), cpu=cpu, **params)


@register("vllm::concat_and_cache_mla", version=1, kind=Kind.COMPUTE)
class ConcatAndCacheMla(OperatorSpec):
    entry_points = (
        EntryPoint(
            "concat_and_cache_mla",
            "concat_and_cache_mla(kv_c: Tensor, k_pe: Tensor, kv_cache: Tensor, "
            "slot_mapping: Tensor, kv_cache_dtype: str, scale: Tensor) -> None",
            "Writes [kv_c, k_pe] of each token into its slot of the MLA cache, in place.",
        ),
    )
    description = (
        "vLLM's `concat_and_cache_mla` (vLLM 0.13.0, `vllm._custom_ops.concat_and_cache_mla`), "
        "the cache write of multi-head latent attention (DeepSeek-V2/V3): for each of `num_tokens "
        "= slot_mapping.shape[0]` tokens, write the concatenation of `kv_c[t]` (`[rows, "
        "kv_lora_rank]`) and `k_pe[t]` (`[rows, pe_dim]`) into its slot of `kv_cache` "
        "(`[num_blocks, block_size, kv_lora_rank + pe_dim]`), in place: `kv_cache[slot // "
        "block_size, slot % block_size, :kv_lora_rank] = kv_c[t]` and `[..., kv_lora_rank:] = "
        "k_pe[t]`. rows >= num_tokens (extra rows are padding, never read). Rows of kv_c and k_pe "
        "are contiguous but strided (`stride(0)`; both may be slices of one `[rows, kv_lora_rank "
        "+ pe_dim]` tensor). kv_cache must be addressed through `stride(0)` and `stride(1)` (an "
        "entry may be padded past kv_lora_rank + pe_dim; the padding and every slot not written "
        "keep their values); its last dim is contiguous. `slot_mapping` is int64 `[num_tokens]`; "
        "slot -1 is a padding token that writes nothing; slots are distinct. `kv_cache_dtype` is "
        "\"auto\" (kv_cache has the dtype of kv_c/k_pe: float16, bfloat16 or float32; an exact "
        "copy), \"fp8\" or \"fp8_e4m3\" (kv_cache is float8_e4m3fn and both parts are stored as "
        "x / scale). " + FP8_RULE + " `scale` is a 0-d float32 tensor. Return None; do not "
        "modify kv_c, k_pe, slot_mapping or scale."
    )
    solution = SOLUTION
    negatives = (
        Negative("packed_kv_c", "reads kv_c rows at t * kv_lora_rank, ignoring kv_c.stride(0) "
                 "(right only when kv_c is not a slice of the joint projection)",
                 NEGATIVE_PACKED_KV_C),
        Negative("packed_entries", "steps between cache entries by kv_lora_rank + pe_dim "
                 "instead of kv_cache.stride(1) (right only for unpadded caches)",
                 NEGATIVE_PACKED_ENTRIES),
    )
    tolerances = {"float16": EXACT, "bfloat16": EXACT, "float32": EXACT,
                  "float8_e4m3fn": FP8_BOUND}

    def cases(self) -> Sequence[Case]:
        cs = [
            _mla(7, 64, 16, "float16", cpu=True),
            _mla(13, 128, 32, "bfloat16", kv="fp8", bs=8, layout="split", cpu=True),
            _mla(9, 96, 32, "float32", bs=8, cache="padded", cpu=True),
            _mla(11, 64, 16, "float16", kv="fp8_e4m3", scale="amax", layout="split",
                 cache="padded", pad=3, bs=4, cpu=True),
            _mla(5, 512, 64, "bfloat16", layout="extra", cpu=True),
            _mla(6, 32, 8, "float32", kv="fp8", scale="tight", pad=1, bs=2, cpu=True),
            _mla(0, 64, 16, "float16", spare=0.0, cpu=True),
        ]
        for dt in _FLOATS:
            for kv in ("auto", "fp8"):
                cs += [
                    _mla(4096, 512, 64, dt, kv=kv, bs=64, scale="amax", layout="split"),  # V3
                    _mla(1, 512, 64, dt, kv=kv, bs=64),
                    _mla(128, 512, 64, dt, kv=kv, bs=16, cache="padded", pad=9),
                    _mla(1023, 512, 64, dt, kv=kv, bs=32, scale="tight", layout="extra"),
                    _mla(333, 256, 32, dt, kv=kv, layout="split", cache="padded", pad=40),
                    _mla(77, 160, 48, dt, kv=kv, bs=8, spare=3.0),
                ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS:
            rank, pe_dim = rng.choice([(64, 16), (128, 32), (96, 32)] if small
                                      else [(512, 64), (512, 64), (256, 32), (384, 64)])
            spare = rng.choice([1.0, 1.5, 4.0])
            tokens = cap_tokens(rng.randrange(1, 20 if small else 3000), rank + pe_dim + 16,
                                1 + spare)
            out.append(_mla(tokens, rank, pe_dim, dt, kv=rng.choice(["auto", "fp8", "fp8_e4m3"]),
                            bs=rng.choice([4, 8, 16] if small else [16, 32, 64]),
                            scale=rng.choice(["unit", "amax", "tight"]),
                            layout=rng.choice(["contiguous", "split", "extra"]),
                            cache=rng.choice(["contiguous", "padded"]),
                            pad=rng.randrange(0, tokens // 4 + 1), spare=spare, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _mla(131072, 512, 64, "bfloat16", bs=64, layout="split"),
            _mla(163840, 512, 64, "bfloat16", kv="fp8", scale="amax", bs=64, layout="split"),
            _mla(65536, 512, 64, "float32", bs=16),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dt = c.torch_dtype
        tokens, rank, pe_dim = c.shape
        kv = str(c["kv"])
        bs, nb = int(c["block_size"]), int(c["num_blocks"])
        layout = str(c.get("layout", "contiguous"))
        rows = tokens + (3 if layout == "extra" else 0)
        if layout == "split":
            joint = random_values((rows, rank + pe_dim), dt, gen)
            kv_c, k_pe = joint[:, :rank], joint[:, rank:]
        else:
            kv_c = random_values((rows, rank), dt, gen)
            k_pe = random_values((rows, pe_dim), dt, gen)
        entry = rank + pe_dim + (16 if c.get("cache") == "padded" else 0)
        kv_cache = random_values((nb, bs, entry), cache_dtype(kv, dt), gen)[..., :rank + pe_dim]
        slots = random_slots(gen, tokens, nb * bs, int(c.get("pad", 0)))
        joint_rows = torch.cat([kv_c[:tokens], k_pe[:tokens]], dim=1)
        scale = scale_for(joint_rows, str(c.get("scale", "unit")))
        return Call(c.entry, (kv_c, k_pe, kv_cache, slots, kv, scale),
                    outputs=(Out.arg(2),), mutable=frozenset({2}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        kv_c, k_pe, kv_cache, slots, kv, scale = call.args
        tok, blk, pos = slot_positions(slots, kv_cache.shape[1])
        val = kv_cache.double()
        bnd = torch.zeros(kv_cache.shape, dtype=torch.float64)
        v, b = cache_reference(torch.cat([kv_c[tok], k_pe[tok]], dim=1), kv, scale)
        val[blk, pos] = v
        bnd[blk, pos] = b
        return (Expected(val, kv_cache.dtype, bnd),)

    def baseline(self, call: Call) -> object:
        ops = _baseline.custom_ops()
        if ops is not None:
            ops.concat_and_cache_mla(*call.args)
            return None
        kv_c, k_pe, kv_cache, slots, kv, scale = call.args
        tok, blk, pos = slot_positions(slots, kv_cache.shape[1])
        kv_cache[blk, pos] = to_cache(torch.cat([kv_c[tok], k_pe[tok]], dim=1), kv, scale)
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        tokens, rank, pe_dim = c.shape
        return slot_write_cost(Case(c.entry, c.dtype, (tokens, rank + pe_dim), c.params))
