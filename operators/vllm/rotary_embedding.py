"""vllm::rotary_embedding — ``vllm._custom_ops.rotary_embedding(positions, query, key, head_size,
cos_sin_cache, is_neox)``: rotary position embedding applied in place to query and key."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.inputs import randint, randn
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
from operators.vllm._rope import cos_sin_cache

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(x_ptr, pos_ptr, cache_ptr, n_tokens, n_heads, head_size, half,
                 sxt, sxd, sp, sct, scd,
                 IS_NEOX: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_J: tl.constexpr):
    # Tile: BLOCK_T tokens x BLOCK_J rotation pairs, pairs flattened over (head, i < half).
    pid_t = tl.program_id(0)
    pid_j = tl.program_id(1)
    t = (pid_t * BLOCK_T + tl.arange(0, BLOCK_T)).to(tl.int64)
    j = pid_j * BLOCK_J + tl.arange(0, BLOCK_J)
    tmask = t < n_tokens
    jmask = j < n_heads * half
    mask = tmask[:, None] & jmask[None, :]
    h = j // half
    i = j % half
    pos = tl.load(pos_ptr + t * sp, mask=tmask, other=0)
    c_off = pos[:, None] * sct + i[None, :] * scd
    cos = tl.load(cache_ptr + c_off, mask=mask, other=0.0).to(tl.float32)
    sin = tl.load(cache_ptr + c_off + half * scd, mask=mask, other=0.0).to(tl.float32)
    if IS_NEOX:
        # x1 = first half of the rotated part, x2 = second half.
        d1 = h * head_size + i
        d2 = d1 + half
    else:
        # GPT-J: interleaved pairs (2i, 2i+1).
        d1 = h * head_size + 2 * i
        d2 = d1 + 1
    p1 = x_ptr + t[:, None] * sxt + d1[None, :].to(tl.int64) * sxd
    p2 = x_ptr + t[:, None] * sxt + d2[None, :].to(tl.int64) * sxd
    x1 = tl.load(p1, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(p2, mask=mask, other=0.0).to(tl.float32)
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    tl.store(p1, o1.to(x_ptr.dtype.element_ty), mask=mask)
    tl.store(p2, o2.to(x_ptr.dtype.element_ty), mask=mask)


def _apply(x, positions, cos_sin_cache, head_size, is_neox):
    n_tokens = positions.shape[0]
    n_heads = x.shape[-1] // head_size
    half = cos_sin_cache.shape[-1] // 2
    n_pairs = n_heads * half
    if n_tokens == 0 or n_pairs == 0:
        return
    block_j = min(1024, triton.next_power_of_2(n_pairs))
    block_t = max(1, min(64, 4096 // block_j))
    grid = (triton.cdiv(n_tokens, block_t), triton.cdiv(n_pairs, block_j))
    _rope_kernel[grid](x, positions, cos_sin_cache, n_tokens, n_heads, head_size, half,
                       x.stride(0), x.stride(-1), positions.stride(0),
                       cos_sin_cache.stride(0), cos_sin_cache.stride(1),
                       IS_NEOX=bool(is_neox), BLOCK_T=block_t, BLOCK_J=block_j, num_warps=4)


def rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox):
    _apply(query, positions, cos_sin_cache, head_size, is_neox)
    _apply(key, positions, cos_sin_cache, head_size, is_neox)
    return None
'''

# Always rotates halves (GPT-NeoX style): right only for is_neox=True.
NEGATIVE_ALWAYS_NEOX = SOLUTION.replace("IS_NEOX=bool(is_neox)", "IS_NEOX=True")

# Steps from head to head by rot_dim instead of head_size: right only when rot_dim == head_size.
NEGATIVE_ROT_HEAD_STRIDE = SOLUTION.replace(
    "        d1 = h * head_size + i\n", "        d1 = h * (2 * half) + i\n"
).replace("        d1 = h * head_size + 2 * i\n", "        d1 = h * (2 * half) + 2 * i\n")

_FLOATS = ("float16", "bfloat16", "float32")


def _rope(tokens: int, heads: int, kv: int, hs: int, dt: str, *, rot: int, neox: bool,
          cpu: bool = False, maxpos: int = 4096, layout: str = "contiguous") -> Case:
    params: dict[str, object] = {"rot_dim": rot, "is_neox": neox, "max_position": maxpos}
    if layout != "contiguous":
        params["layout"] = layout
    return case("rotary_embedding", dt, (tokens, heads, kv, hs), cpu=cpu, **params)


@register("vllm::rotary_embedding", version=1, kind=Kind.COMPUTE)
class RotaryEmbedding(OperatorSpec):
    entry_points = (
        EntryPoint(
            "rotary_embedding",
            "rotary_embedding(positions: Tensor, query: Tensor, key: Tensor, head_size: int, "
            "cos_sin_cache: Tensor, is_neox: bool) -> None",
            "Applies rotary position embedding to query and key in place.",
        ),
    )
    description = (
        "Rotary position embedding as vLLM's `vllm._custom_ops.rotary_embedding(positions, query, "
        "key, head_size, cos_sin_cache, is_neox)`, applied in place to `query` "
        "(`[num_tokens, num_heads * head_size]`) and `key` (`[num_tokens, num_kv_heads * head_size]`, "
        "num_kv_heads may be smaller than num_heads). `positions` is int64 `[num_tokens]`; "
        "`cos_sin_cache` is `[max_position, rot_dim]` in the dtype of query/key (float16, bfloat16 "
        "or float32), row p holding cos values in its first rot_dim/2 columns and sin values in the "
        "second half. For token t with c = cache[positions[t], :rot_dim/2], "
        "s = cache[positions[t], rot_dim/2:], only the first rot_dim (<= head_size) elements of each "
        "head rotate, the rest stay unchanged. is_neox=True (GPT-NeoX): x1 = first rot_dim/2 "
        "elements, x2 = next rot_dim/2; is_neox=False (GPT-J): x1 = even elements, x2 = odd "
        "elements of the first rot_dim (pairs (2i, 2i+1) use c[i], s[i]). New values: "
        "x1 * c - x2 * s and x2 * c + x1 * s (compute in float32, round once). query and key "
        "rows may be strided (e.g. slices of a fused qkv tensor; last dim contiguous). "
        "Return None; do not modify positions or cos_sin_cache."
    )
    solution = SOLUTION
    negatives = (
        Negative("always_neox", "ignores is_neox and always rotates halves (GPT-NeoX style)",
                 NEGATIVE_ALWAYS_NEOX),
        Negative("rot_dim_head_stride", "steps between heads by rot_dim instead of head_size, "
                 "right only when rot_dim == head_size", NEGATIVE_ROT_HEAD_STRIDE),
    )
    # Each rotated output is a two-term sum x1*c - x2*s: the scale is |x1*c| + |x2*s|. vLLM's
    # native path rounds each product and the sum in the working dtype (<= 2u of the scale);
    # fp32 math rounded once is better -> 3 ulps. Unrotated elements must come back exact.
    tolerances = {
        "float16": Tolerance.ulps("float16", 3),
        "bfloat16": Tolerance.ulps("bfloat16", 3),
        "float32": Tolerance.ulps("float32", 3),
    }

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            _rope(7, 4, 2, 64, "float32", rot=64, neox=True, maxpos=128, cpu=True),
            _rope(7, 4, 2, 64, "float32", rot=64, neox=False, maxpos=128, cpu=True),
            _rope(13, 2, 1, 80, "float16", rot=32, neox=True, maxpos=256, cpu=True),
            _rope(5, 3, 3, 128, "bfloat16", rot=64, neox=False, maxpos=64, cpu=True),
            _rope(1, 8, 1, 32, "float16", rot=32, neox=False, maxpos=16, cpu=True),
            _rope(11, 4, 2, 48, "float32", rot=48, neox=True, maxpos=100, layout="qkv", cpu=True),
            _rope(9, 2, 2, 96, "bfloat16", rot=48, neox=False, maxpos=50, layout="qkv", cpu=True),
        ]
        for dt in _FLOATS:
            for neox in (True, False):
                cs += [
                    _rope(1023, 32, 8, 128, dt, rot=128, neox=neox),
                    _rope(4097, 16, 4, 64, dt, rot=64, neox=neox, maxpos=8192),
                    _rope(257, 32, 32, 128, dt, rot=64, neox=neox),
                    _rope(333, 12, 4, 80, dt, rot=32, neox=neox, maxpos=1024),
                    _rope(1, 64, 8, 256, dt, rot=256, neox=neox, maxpos=32768),
                    _rope(2049, 28, 4, 128, dt, rot=128, neox=neox, layout="qkv"),
                    _rope(511, 8, 2, 256, dt, rot=64, neox=neox, layout="qkv"),
                ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS:
            for neox in (True, False):
                tokens = rng.randrange(1, 20 if small else 3000)
                kv = rng.choice([1, 2, 4] if small else [1, 2, 4, 8])
                heads = kv * rng.choice([1, 2, 3] if small else [1, 2, 4, 7])
                hs = rng.choice([32, 64, 80, 96, 128] if small else [64, 80, 96, 128, 256])
                rot = rng.choice([hs, hs, hs // 2, 2 * rng.randrange(1, hs // 2 + 1)])
                maxpos = rng.randrange(tokens, 200 if small else 40000)
                layout = rng.choice(["contiguous", "qkv"])
                out.append(_rope(tokens, heads, kv, hs, dt, rot=rot, neox=neox, maxpos=max(1, maxpos),
                                 layout=layout, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _rope(32768, 32, 8, 128, "bfloat16", rot=128, neox=True, maxpos=65536),
            _rope(32768, 32, 8, 128, "float16", rot=128, neox=False, maxpos=65536),
            _rope(16384, 32, 8, 128, "float32", rot=128, neox=True, maxpos=32768),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dt = c.torch_dtype
        tokens, heads, kv, hs = c.shape
        rot = int(c["rot_dim"])
        maxpos = int(c["max_position"])
        q_w, k_w = heads * hs, kv * hs
        if c.get("layout", "contiguous") == "qkv":
            # query and key as column slices of a fused [tokens, q + k + v] projection output.
            qkv = randn((tokens, q_w + 2 * k_w), dt, gen)
            query = qkv[:, :q_w]
            key = qkv[:, q_w:q_w + k_w]
        else:
            query = randn((tokens, q_w), dt, gen)
            key = randn((tokens, k_w), dt, gen)
        positions = randint((tokens,), torch.int64, gen, low=0, high=maxpos)
        cache = cos_sin_cache(maxpos, rot, 10000.0, dt)
        return Call(c.entry, (positions, query, key, hs, cache, bool(c["is_neox"])),
                    outputs=(Out.arg(1), Out.arg(2)), mutable=frozenset({1, 2}))

    @staticmethod
    def _rotate(x: torch.Tensor, positions: torch.Tensor, cache: torch.Tensor, hs: int,
                neox: bool) -> Expected:
        tokens = x.shape[0]
        rot = cache.shape[-1]
        half = rot // 2
        x64 = x.double().reshape(tokens, -1, hs)
        cs = cache.double()[positions]
        cos = cs[:, None, :half]
        sin = cs[:, None, half:]
        value = x64.clone()
        scale = x64.abs()
        if neox:
            idx1 = torch.arange(half)
            idx2 = idx1 + half
        else:
            idx1 = torch.arange(0, rot, 2)
            idx2 = idx1 + 1
        x1, x2 = x64[..., idx1], x64[..., idx2]
        value[..., idx1] = x1 * cos - x2 * sin
        value[..., idx2] = x2 * cos + x1 * sin
        scale[..., idx1] = (x1 * cos).abs() + (x2 * sin).abs()
        scale[..., idx2] = (x2 * cos).abs() + (x1 * sin).abs()
        return Expected(value.reshape(x.shape), x.dtype, scale.reshape(x.shape))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        positions, query, key, hs, cache, neox = call.args
        return (self._rotate(query, positions, cache, hs, neox),
                self._rotate(key, positions, cache, hs, neox))

    def baseline(self, call: Call) -> object:
        # vLLM is not installed: an efficient PyTorch implementation of the same semantics
        # (vLLM's RotaryEmbedding.forward_native, written back in place).
        positions, query, key, hs, cache, neox = call.args
        half = cache.shape[-1] // 2
        cos_sin = cache.index_select(0, positions)
        cos = cos_sin[:, None, :half]
        sin = cos_sin[:, None, half:]
        for x in (query, key):
            xr = x.unflatten(-1, (-1, hs))[..., :2 * half]
            if neox:
                x1, x2 = xr[..., :half], xr[..., half:]
            else:
                x1, x2 = xr[..., 0::2], xr[..., 1::2]
            o1 = x1 * cos - x2 * sin
            o2 = x2 * cos + x1 * sin
            x1.copy_(o1)
            x2.copy_(o2)
        return None

    def cost(self, c: Case) -> Cost:
        tokens, heads, kv, hs = c.shape
        rot = int(c["rot_dim"])
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        rotated = tokens * (heads + kv) * rot
        cache_rows = min(tokens, int(c["max_position"]))
        # Only the rotated part must be read and written; the rest stays in place untouched.
        nbytes = 2 * rotated * size + 8 * tokens + cache_rows * rot * size
        return Cost(flops=3.0 * rotated, bytes=float(nbytes), dtype=c.dtype)

