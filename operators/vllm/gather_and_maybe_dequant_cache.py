"""vllm::gather_and_maybe_dequant_cache — ``vllm._custom_ops.gather_and_maybe_dequant_cache(
src_cache, dst, block_table, cu_seq_lens, token_to_seq, num_tokens, kv_cache_dtype, scale,
seq_starts=None)`` (vLLM 0.13.0): gathers the MLA latent cache entries of a batch of sequence
chunks into the first ``num_tokens`` rows of a workspace, dequantizing fp8 caches.

Semantics (``csrc/cache_kernels.cu``): entries are 576 wide (kv_lora_rank 512 + rope 64, the
only width the kernel accepts); token t (< num_tokens) belongs to sequence ``b =
token_to_seq[t]`` at position ``t - cu_seq_lens[b] + seq_starts[b]`` of its context; fp8 entries
become ``float(fp8) * scale`` rounded to dst's dtype. Rows of dst past num_tokens are left alone.
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
    Tolerance,
    case,
)
from operators.vllm import _baseline
from operators.vllm._kv_cache import (
    EXACT,
    HIDDEN_ELEMENTS,
    cache_dtype,
    gather_inputs,
    gathered,
    itemsize,
    random_values,
    scale_tensor,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _gather_dequant_kernel(src_ptr, dst_ptr, table_ptr, cu_ptr, seq_ptr, starts_ptr, scale_ptr,
                           block_size, s_table, s_block, s_slot, s_dst,
                           ENTRY: tl.constexpr, FP8: tl.constexpr, HAS_STARTS: tl.constexpr,
                           BLOCK_E: tl.constexpr):
    # Grid: (token, chunk of the entry).
    t = tl.program_id(0)
    b = tl.load(seq_ptr + t)
    pos = t - tl.load(cu_ptr + b)
    if HAS_STARTS:
        pos += tl.load(starts_ptr + b)
    blk = tl.load(table_ptr + b.to(tl.int64) * s_table + pos // block_size).to(tl.int64)
    e = tl.program_id(1) * BLOCK_E + tl.arange(0, BLOCK_E)
    m = e < ENTRY
    x = tl.load(src_ptr + blk * s_block + (pos % block_size) * s_slot + e, mask=m)
    if FP8:
        x = x.to(tl.float32) * tl.load(scale_ptr)
    tl.store(dst_ptr + t.to(tl.int64) * s_dst + e, x.to(dst_ptr.dtype.element_ty), mask=m)


def gather_and_maybe_dequant_cache(src_cache, dst, block_table, cu_seq_lens, token_to_seq,
                                   num_tokens, kv_cache_dtype, scale, seq_starts=None):
    if num_tokens == 0:
        return None
    entry = dst.shape[-1]
    block_e = 256
    grid = (num_tokens, triton.cdiv(entry, block_e))
    starts = seq_starts if seq_starts is not None else cu_seq_lens
    _gather_dequant_kernel[grid](src_cache, dst, block_table, cu_seq_lens, token_to_seq, starts,
                                 scale, src_cache.shape[1], block_table.stride(0),
                                 src_cache.stride(0), src_cache.stride(1), dst.stride(0),
                                 ENTRY=entry, FP8=kv_cache_dtype != "auto",
                                 HAS_STARTS=seq_starts is not None, BLOCK_E=block_e,
                                 num_warps=4)
    return None
'''

# Dequantizes without the scale: right for "auto" caches and the default scale 1.0.
NEGATIVE_NO_SCALE = SOLUTION.replace("x = x.to(tl.float32) * tl.load(scale_ptr)",
                                     "x = x.to(tl.float32)")

# Ignores seq_starts: right whenever every chunk starts at its sequence's first token.
NEGATIVE_NO_STARTS = SOLUTION.replace("HAS_STARTS=seq_starts is not None", "HAS_STARTS=False")

_FLOATS = ("bfloat16", "float16", "float32")
ENTRY = 576
SCALES = {"unit": 1.0, "test": 0.1, "odd": 0.0371}


def _gd(batch: int, tokens: int, dt: str, *, kv: str = "auto", bs: int = 16,
        starts: str = "none", scale: str = "unit", extra: int = 0, cpu: bool = False) -> Case:
    params: dict[str, object] = {"kv": kv, "block_size": bs, "starts": starts}
    if kv != "auto":
        params["scale"] = scale
    return case("gather_and_maybe_dequant_cache", dt, (batch, tokens), entry_shape=(ENTRY,),
                extra=extra, cpu=cpu, **params)


@register("vllm::gather_and_maybe_dequant_cache", version=1, kind=Kind.COMPUTE)
class GatherAndMaybeDequantCache(OperatorSpec):
    entry_points = (
        EntryPoint(
            "gather_and_maybe_dequant_cache",
            "gather_and_maybe_dequant_cache(src_cache: Tensor, dst: Tensor, block_table: Tensor, "
            "cu_seq_lens: Tensor, token_to_seq: Tensor, num_tokens: int, kv_cache_dtype: str, "
            "scale: Tensor, seq_starts: Tensor | None = None) -> None",
            "Gathers each token's MLA cache entry into dst, dequantizing fp8 caches.",
        ),
    )
    description = (
        "vLLM's `gather_and_maybe_dequant_cache` (vLLM 0.13.0, "
        "`vllm._custom_ops.gather_and_maybe_dequant_cache`), the context gather of MLA chunked "
        "prefill. `src_cache` is the latent cache `[num_blocks, block_size, 576]` (576 = "
        "kv_lora_rank 512 + rope 64; slot p of block k is `src_cache[k, p, :]`, contiguous; "
        "address blocks and slots through `stride(0)` and `stride(1)`). `dst` is the workspace "
        "`[rows, 576]` with rows >= num_tokens (row stride `dst.stride(0)`), float16, bfloat16 "
        "or float32. `block_table` is int32 `[batch, max_blocks]` (row stride `stride(0)`), "
        "`cu_seq_lens` int32 `[batch + 1]` (cu_seq_lens[0] = 0, cu_seq_lens[batch] = num_tokens; "
        "sequences may be empty), `token_to_seq` int32 `[num_tokens]` the sequence of each token, "
        "`seq_starts` None or int32 `[batch]`. For token t < num_tokens with b = "
        "token_to_seq[t]: `pos = t - cu_seq_lens[b] + seq_starts[b]` (seq_starts[b] = 0 when "
        "None; any position) and `dst[t] = convert(src_cache[block_table[b, pos // block_size], "
        "pos % block_size])`. `kv_cache_dtype` \"auto\": src_cache has dst's dtype and convert "
        "copies exactly; \"fp8\" or \"fp8_e4m3\": src_cache is float8_e4m3fn (vLLM allocates the "
        "same bytes as uint8) and convert is `float(x) * scale` in float32, rounded once to dst's "
        "dtype. `scale` is a 0-d float32 tensor. Rows of dst from num_tokens on keep their "
        "values. Slots no sequence owns, the tail of each sequence's last block and the blocks "
        "unused block-table entries point at hold NaN: never read them into dst. Return None; "
        "do not modify the other arguments."
    )
    solution = SOLUTION
    negatives = (
        Negative("no_scale", "dequantizes fp8 entries without multiplying by scale (right "
                 "for auto caches and scale 1.0)", NEGATIVE_NO_SCALE),
        Negative("no_starts", "ignores seq_starts (right whenever each chunk starts at its "
                 "sequence's first token)", NEGATIVE_NO_STARTS),
    )
    tolerances = {"float16": EXACT, "bfloat16": EXACT, "float32": EXACT}

    def tolerance(self, c: Case, dtype: torch.dtype) -> Tolerance:
        # fp8 * scale is exact in float64; vLLM rounds it through float32 to dst's dtype, which
        # stays within one unit of roundoff of |value| (a double rounding only moves a value that
        # lies within 2**-24 of a tie, and ties sit at least half an ulp above a power of two).
        return EXACT if c["kv"] == "auto" else Tolerance.ulps(dtype, 1)

    def cases(self) -> Sequence[Case]:
        cs = [
            _gd(3, 11, "bfloat16", bs=4, cpu=True),
            _gd(2, 7, "float16", kv="fp8", bs=8, starts="aligned", scale="test", cpu=True),
            _gd(3, 9, "float32", kv="fp8_e4m3", bs=2, starts="any", scale="odd", extra=3,
                cpu=True),
            _gd(2, 5, "bfloat16", kv="fp8", bs=4, extra=2, cpu=True),
            _gd(2, 0, "float16", cpu=True),
        ]
        for dt in _FLOATS:
            for kv in ("auto", "fp8"):
                cs += [
                    _gd(8, 4096, dt, kv=kv, bs=16, scale="test"),                # vLLM's test
                    _gd(16, 8192, dt, kv=kv, bs=64, starts="aligned", scale="odd", extra=100),
                    _gd(57, 3001, dt, kv=kv, bs=32, starts="any", scale="test"),
                    _gd(1, 1, dt, kv=kv, bs=64, starts="any", extra=5),
                ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS:
            bs = rng.choice([2, 4, 8] if small else [16, 32, 64])
            batch = rng.randrange(1, 5 if small else 65)
            most = HIDDEN_ELEMENTS // (2 * ENTRY) - batch * 4 * bs - 2 * bs - 64
            out.append(_gd(batch, max(0, min(rng.randrange(0, 16 if small else 12000), most)),
                           dt, kv=rng.choice(["auto", "fp8", "fp8_e4m3"]), bs=bs,
                           starts=rng.choice(["none", "aligned", "any"]),
                           scale=rng.choice(list(SCALES)), extra=rng.choice([0, 0, 3, 64]),
                           cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _gd(32, 131072, "bfloat16", bs=64, starts="aligned"),
            _gd(32, 163840, "bfloat16", kv="fp8", bs=64, starts="aligned", scale="odd"),
            _gd(64, 131072, "float32", kv="fp8", bs=16, starts="any", scale="test"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        kv = str(c["kv"])
        cache, table, cu, seq_starts = gather_inputs(c, gen, cache_dtype(kv, c.torch_dtype))
        tokens = c.shape[1]
        dst = random_values((tokens + int(c["extra"]), ENTRY), c.torch_dtype, gen)
        lens = (cu[1:] - cu[:-1]).long()
        token_to_seq = torch.repeat_interleave(torch.arange(c.shape[0]), lens).to(torch.int32)
        scale = scale_tensor(SCALES[str(c.get("scale", "unit"))])
        return Call(c.entry, (cache, dst, table, cu, token_to_seq, tokens, kv, scale, seq_starts),
                    outputs=(Out.arg(1),), mutable=frozenset({1}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        cache, dst, table, cu, _, tokens, kv, scale, seq_starts = call.args
        value = dst.double()
        rows = gathered(cache, table, cu, seq_starts).double()
        value[:tokens] = rows if kv == "auto" else rows * float(scale)
        bound = torch.zeros_like(value)
        bound[:tokens] = value[:tokens].abs()  # untouched rows: scale 0, exact
        return (Expected(value, dst.dtype, bound),)

    def baseline(self, call: Call) -> object:
        ops = _baseline.custom_ops()
        if ops is not None:
            ops.gather_and_maybe_dequant_cache(*call.args)
            return None
        cache, dst, table, cu, _, tokens, kv, scale, seq_starts = call.args
        rows = gathered(cache, table, cu, seq_starts)
        dst[:tokens] = rows if kv == "auto" else (rows.float() * scale).to(dst.dtype)
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        batch, tokens = c.shape
        src = itemsize(cache_dtype(str(c["kv"]), c.torch_dtype))
        moved = tokens * ENTRY * (src + itemsize(c.torch_dtype))
        flops = 0.0 if c["kv"] == "auto" else float(tokens * ENTRY)
        return Cost(flops=flops, bytes=float(moved + 4 * tokens // int(c["block_size"])
                                             + 4 * tokens + 8 * (batch + 1)), dtype=c.dtype)
