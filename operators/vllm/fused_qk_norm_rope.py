"""vllm::fused_qk_norm_rope — ``vllm._custom_ops.fused_qk_norm_rope(qkv, num_heads_q,
num_heads_k, num_heads_v, head_dim, eps, q_weight, k_weight, cos_sin_cache, is_neox,
position_ids)`` (vLLM 0.13.0, csrc/fused_qknorm_rope_kernel.cu): Qwen3-style per-head RMS norm
of the query and key heads followed by rotary embedding, in place in the fused QKV projection.

``qkv`` is contiguous ``[num_tokens, (num_heads_q + num_heads_k + num_heads_v) * head_dim]``
(float16 or bfloat16): query heads, then key heads, then value heads. For every query head
(weight ``q_weight``) and key head (``k_weight``, both ``[head_dim]`` in qkv's dtype):
``y = x / sqrt(mean(x**2) + eps) * weight`` over the head's ``head_dim`` values, then the whole
head rotates (rotary dim = head_dim) with ``c = cos_sin_cache[position_ids[t], :head_dim/2]``,
``s = cos_sin_cache[position_ids[t], head_dim/2:]`` (cache ``[max_position, head_dim]``,
float32 or a 16-bit dtype): NeoX pairs ``(i, i + head_dim/2)``, GPT-J pairs ``(2i, 2i+1)``,
``(y1 * c - y2 * s, y2 * c + y1 * s)``. vLLM computes it all in float32 and rounds once.
Value heads are untouched. ``head_dim`` is 64, 128 or 256. Returns None.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.inputs import randint
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
from operators.vllm._rms import rms64, rows_input
from operators.vllm._rope import cos_sin_cache

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _qk_norm_rope_kernel(qkv_ptr, qw_ptr, kw_ptr, cache_ptr, pos_ptr, n_tokens, row_stride,
                         n_heads_q, eps, HEAD_DIM: tl.constexpr, IS_NEOX: tl.constexpr,
                         BLOCK_T: tl.constexpr):
    # Program (token block, head): head < n_heads_q is a query head, else a key head; key heads
    # follow the query heads, so head h starts at column h * HEAD_DIM either way.
    HALF: tl.constexpr = HEAD_DIM // 2
    head = tl.program_id(1)
    t = (tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)).to(tl.int64)
    tmask = t < n_tokens
    i = tl.arange(0, HALF)
    if IS_NEOX:
        d1 = i
        d2 = i + HALF
    else:
        d1 = 2 * i
        d2 = 2 * i + 1
    base = qkv_ptr + t[:, None] * row_stride + head * HEAD_DIM
    mask = tmask[:, None]
    x1 = tl.load(base + d1[None, :], mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(base + d2[None, :], mask=mask, other=0.0).to(tl.float32)
    inv = tl.rsqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / HEAD_DIM + eps)
    w_ptr = tl.where(head < n_heads_q, qw_ptr, kw_ptr)
    w1 = tl.load(w_ptr + d1).to(tl.float32)
    w2 = tl.load(w_ptr + d2).to(tl.float32)
    y1 = x1 * inv[:, None] * w1[None, :]
    y2 = x2 * inv[:, None] * w2[None, :]
    pos = tl.load(pos_ptr + t, mask=tmask, other=0)
    crow = cache_ptr + pos[:, None] * HEAD_DIM
    c = tl.load(crow + i[None, :], mask=mask, other=0.0).to(tl.float32)
    s = tl.load(crow + HALF + i[None, :], mask=mask, other=0.0).to(tl.float32)
    o1 = y1 * c - y2 * s
    o2 = y2 * c + y1 * s
    tl.store(base + d1[None, :], o1.to(qkv_ptr.dtype.element_ty), mask=mask)
    tl.store(base + d2[None, :], o2.to(qkv_ptr.dtype.element_ty), mask=mask)


def fused_qk_norm_rope(qkv, num_heads_q, num_heads_k, num_heads_v, head_dim, eps, q_weight,
                       k_weight, cos_sin_cache, is_neox, position_ids):
    n_tokens = qkv.shape[0]
    if n_tokens == 0 or num_heads_q + num_heads_k == 0:
        return None
    block_t = max(1, min(32, 4096 // head_dim))
    grid = (triton.cdiv(n_tokens, block_t), num_heads_q + num_heads_k)
    _qk_norm_rope_kernel[grid](qkv, q_weight, k_weight, cos_sin_cache, position_ids, n_tokens,
                               qkv.stride(0), num_heads_q, eps, HEAD_DIM=head_dim,
                               IS_NEOX=bool(is_neox), BLOCK_T=block_t, num_warps=4)
    return None
'''

# Ignores is_neox and always rotates halves.
NEGATIVE_ALWAYS_NEOX = SOLUTION.replace("IS_NEOX=bool(is_neox)", "IS_NEOX=True")

# Rotates first and applies the norm weight after the rotation: the same only when the weight
# is uniform (RMS is rotation invariant, the elementwise weight is not).
NEGATIVE_ROPE_BEFORE_WEIGHT = SOLUTION.replace(
    """    y1 = x1 * inv[:, None] * w1[None, :]
    y2 = x2 * inv[:, None] * w2[None, :]
""", """    y1 = x1 * inv[:, None]
    y2 = x2 * inv[:, None]
""").replace(
    """    o1 = y1 * c - y2 * s
    o2 = y2 * c + y1 * s
""", """    o1 = (y1 * c - y2 * s) * w1[None, :]
    o2 = (y2 * c + y1 * s) * w2[None, :]
""")

# Uses the token's index as its position (right for a prefill from position 0 only).
NEGATIVE_INDEX_AS_POSITION = SOLUTION.replace(
    "    pos = tl.load(pos_ptr + t, mask=tmask, other=0)\n", "    pos = t\n")

_FLOATS = ("float16", "bfloat16")


def _case(dt: str, tokens: int, hq: int, hk: int, hv: int, head_dim: int, *,
          neox: bool = True, cpu: bool = False, **params: Any) -> Case:
    p: dict[str, Any] = {"is_neox": neox, "eps": params.pop("eps", 1e-6)}
    return case("fused_qk_norm_rope", dt, (tokens, hq, hk, hv, head_dim), cpu=cpu, **p,
                **params)


@register("vllm::fused_qk_norm_rope", version=1, kind=Kind.COMPUTE)
class FusedQkNormRope(OperatorSpec):
    entry_points = (
        EntryPoint(
            "fused_qk_norm_rope",
            "fused_qk_norm_rope(qkv: Tensor, num_heads_q: int, num_heads_k: int, "
            "num_heads_v: int, head_dim: int, eps: float, q_weight: Tensor, k_weight: Tensor, "
            "cos_sin_cache: Tensor, is_neox: bool, position_ids: Tensor) -> None",
            "Per-head RMS norm then rotary embedding of the q and k heads of qkv, in place.",
        ),
    )
    description = (
        "Per-head query/key RMS norm fused with rotary embedding, as vLLM's "
        "`vllm._custom_ops.fused_qk_norm_rope`, in place in `qkv`: a contiguous "
        "`[num_tokens, (num_heads_q + num_heads_k + num_heads_v) * head_dim]` float16 or "
        "bfloat16 tensor holding, per token, the query heads, then the key heads, then the "
        "value heads (each `head_dim` wide; head_dim is 64, 128 or 256). For each query head "
        "(weight `q_weight`) and key head (weight `k_weight`; both contiguous `[head_dim]` in "
        "qkv's dtype) of token t: `y = x / sqrt(mean(x ** 2) + eps) * weight` (mean over the "
        "head), then rotary embedding over the whole head with `c = cos_sin_cache[p, "
        ":head_dim/2]`, `s = cos_sin_cache[p, head_dim/2:]`, `p = position_ids[t]` "
        "(`position_ids` int64 `[num_tokens]`; `cos_sin_cache` contiguous `[max_position, "
        "head_dim]`, float32, float16 or bfloat16, possibly another dtype than qkv). "
        "is_neox=True pairs element i with i + head_dim/2, is_neox=False pairs 2i with 2i+1; "
        "pair k = (y1, y2) uses c[k], s[k] and becomes (y1 * c - y2 * s, y2 * c + y1 * s). "
        "Compute in float32 and round once. Value heads must stay unchanged. Return None; do "
        "not modify the other arguments."
    )
    solution = SOLUTION
    negatives = (
        Negative("always_neox", "ignores is_neox and always rotates halves",
                 NEGATIVE_ALWAYS_NEOX),
        Negative("weight_after_rope", "applies the norm weight after the rotation (the same "
                 "only for a uniform weight)", NEGATIVE_ROPE_BEFORE_WEIGHT),
        Negative("index_as_position", "uses the token index instead of position_ids (right "
                 "for a prefill from position 0)", NEGATIVE_INDEX_AS_POSITION),
    )
    # Each rotated output is a two-term sum of normalized values times cos/sin: its scale is
    # |y1 c| + |y2 s| with |y| = |x| |w| / rms. vLLM rounds once (u); a kernel rounding the
    # normalized values to the dtype first adds u of the scale; float32 noise -> 3 ulps.
    # Value heads come back exact.
    tolerances = {
        "float16": Tolerance.ulps("float16", 3),
        "bfloat16": Tolerance.ulps("bfloat16", 3),
    }

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            _case("bfloat16", 4, 16, 4, 4, 128, cpu=True),
            _case("float16", 5, 4, 2, 2, 64, neox=False, eps=1e-5, cpu=True),
            _case("bfloat16", 3, 2, 1, 1, 256, neox=False, cache="float32", cpu=True),
            # A prefill from position 0 with uniform weights (freshly initialized norms).
            _case("float16", 6, 4, 1, 1, 128, positions="arange", weight="ones", cpu=True),
            _case("bfloat16", 7, 3, 3, 0, 64, cache="float32", cpu=True),
            _case("float16", 0, 8, 2, 2, 128, cpu=True),
        ]
        for dt in _FLOATS:
            for neox in (True, False):
                cs += [
                    # Qwen3-8B (32/8/8 x 128), Qwen3-30B-A3B (32/4/4), Qwen3-235B (64/4/4),
                    # their tensor-parallel shards, head_dim 64 and 256 models.
                    _case(dt, 2048, 32, 8, 8, 128, neox=neox),
                    _case(dt, 1, 32, 4, 4, 128, neox=neox),
                    _case(dt, 513, 64, 4, 4, 128, neox=neox, cache="float32"),
                    _case(dt, 4097, 8, 1, 1, 128, neox=neox, positions="arange"),
                    _case(dt, 333, 16, 8, 8, 64, neox=neox, eps=1e-5),
                    _case(dt, 129, 8, 4, 4, 256, neox=neox, cache="float32"),
                    _case(dt, 1000, 32, 8, 8, 128, neox=neox, weight="ones", std=30.0),
                ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS:
            for neox in (True, False):
                hk = rng.choice([1, 2, 4] if small else [1, 2, 4, 8])
                hq = hk * rng.choice([1, 2, 4] if small else [1, 4, 8])
                out.append(_case(dt, rng.randrange(1, 9 if small else 3000), hq, hk, hk,
                                 rng.choice([64, 128, 256]), neox=neox,
                                 eps=rng.choice([1e-6, 1e-5]),
                                 cache=rng.choice(["same", "float32"]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("bfloat16", 16384, 32, 8, 8, 128),
            _case("bfloat16", 16384, 64, 4, 4, 128, neox=False),
            _case("float16", 32768, 16, 4, 4, 128, cache="float32"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dt = c.torch_dtype
        tokens, hq, hk, hv, hd = c.shape
        qkv = rows_input((tokens, (hq + hk + hv) * hd), dt, gen, std=float(c.get("std", 1.0)))
        if c.get("weight") == "ones":
            qw, kw = torch.ones(hd, dtype=dt), torch.ones(hd, dtype=dt)
        else:
            qw = (rows_input((hd,), torch.float64, gen) * 0.1 + 1.0).to(dt)
            kw = (rows_input((hd,), torch.float64, gen) * 0.1 + 1.0).to(dt)
        max_pos = 256 if tokens <= 128 else max(4096, 2 * tokens)  # small cases: a short cache
        cache_dt = torch.float32 if c.get("cache") == "float32" else dt
        cache = cos_sin_cache(max_pos, hd, 1_000_000.0, cache_dt)
        if c.get("positions") == "arange":
            positions = torch.arange(tokens, dtype=torch.int64)
        else:
            positions = randint((tokens,), torch.int64, gen, low=0, high=max_pos)
        args = (qkv, hq, hk, hv, hd, float(c["eps"]), qw, kw, cache, bool(c["is_neox"]),
                positions)
        return Call(c.entry, args, outputs=(Out.arg(0),), mutable=frozenset({0}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        qkv, hq, hk, hv, hd, eps, qw, kw, cache, neox, positions = call.args
        tokens = qkv.shape[0]
        x = qkv.double().reshape(tokens, hq + hk + hv, hd)
        value = x.clone()
        scale = torch.zeros_like(x)
        w = torch.cat([qw.double().expand(hq, hd), kw.double().expand(hk, hd)])
        heads = x[:, :hq + hk]
        y = heads / rms64(heads, eps) * w
        cs = cache.double()[positions][:, None, :]
        half = hd // 2
        c, s = cs[..., :half], cs[..., half:]
        idx1 = torch.arange(half) if neox else torch.arange(0, hd, 2)
        idx2 = idx1 + half if neox else idx1 + 1
        y1, y2 = y[..., idx1], y[..., idx2]
        out = torch.empty_like(y)
        sc = torch.empty_like(y)
        out[..., idx1] = y1 * c - y2 * s
        out[..., idx2] = y2 * c + y1 * s
        sc[..., idx1] = (y1 * c).abs() + (y2 * s).abs()
        sc[..., idx2] = (y2 * c).abs() + (y1 * s).abs()
        value[:, :hq + hk] = out
        scale[:, :hq + hk] = sc
        return (Expected(value.reshape(qkv.shape), qkv.dtype, scale.reshape(qkv.shape)),)

    def baseline(self, call: Call) -> object:
        # vLLM's kernel where vLLM is installed (device tensors); else PyTorch in float32,
        # written back into the q and k columns.
        qkv, hq, hk, hv, hd, eps, qw, kw, cache, neox, positions = call.args
        ops = _baseline.custom_ops()
        if ops is not None and qkv.device.type != "cpu":
            ops.fused_qk_norm_rope(*call.args)
            return None
        heads = qkv[:, :(hq + hk) * hd].unflatten(-1, (hq + hk, hd))
        w = torch.cat([qw.float().expand(hq, hd), kw.float().expand(hk, hd)])
        y = torch.nn.functional.rms_norm(heads.float(), (hd,), None, eps) * w
        cs = cache.float().index_select(0, positions)[:, None, :]
        half = hd // 2
        c, s = cs[..., :half], cs[..., half:]
        y1, y2 = (y[..., :half], y[..., half:]) if neox else (y[..., 0::2], y[..., 1::2])
        o = torch.empty_like(y)
        o1, o2 = (o[..., :half], o[..., half:]) if neox else (o[..., 0::2], o[..., 1::2])
        o1.copy_(y1 * c - y2 * s)
        o2.copy_(y2 * c + y1 * s)
        heads.copy_(o)
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        tokens, hq, hk, hv, hd = c.shape
        size = c.torch_dtype.itemsize
        cache_size = 4 if c.get("cache") == "float32" else size
        rotated = tokens * (hq + hk) * hd
        # q and k read and written once, positions, a cache row per token (at most), the two
        # weights.
        nbytes = 2 * rotated * size + 8 * tokens + tokens * hd * cache_size \
            + 2 * hd * size
        return Cost(flops=8.0 * rotated, bytes=float(nbytes), dtype=c.dtype)
