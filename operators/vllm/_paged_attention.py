"""What ``paged_attention_v1`` and ``paged_attention_v2`` share: inputs, the float64 reference
with its error bound, the PyTorch baseline, cases and cost.

Semantics of vLLM 0.13.0 (``csrc/attention/attention_kernels.cuh``): one query token per
sequence attends to the ``seq_lens[s]`` cached tokens its block table names; query head h reads
KV head ``h // (num_heads // num_kv_heads)``; logits are ``scale * q.k`` plus, with ALiBi,
``slope[h] * (t - seq_len + 1)``; the softmax runs in float32. vLLM rounds the probabilities
(and, for fp8 caches, the dequantized keys and values) to the query's dtype and adds 1e-6 to
the softmax denominators: the bound below admits both that and exact arithmetic.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.spec import (
    Call,
    Case,
    Cost,
    Expected,
    OperatorSpec,
    Out,
    Tier,
    Tolerance,
    case,
    unit_roundoff,
)
from operators.vllm import _baseline
from operators.vllm._kv_cache import (
    FP8,
    block_table,
    cache_dtype,
    itemsize,
    poison_unused,
    random_values,
    scale_tensor,
    x_of,
)

PARTITION_SIZE = 512  # vLLM's v2 partition, in tokens
BLOCKSPARSE_DEFAULTS = (0, 0, 0, 64, 0)  # tp_rank, local_blocks, vert_stride, block_size, step
CACHE_TOKENS = 8192  # tokens of context in a correctness case at most (caches travel whole)
REFERENCE_ELEMENTS = 1 << 22  # float64 elements of a [seqs, tokens, heads, d] group at most
SMALL = 1 << 16  # elements of a product computed by broadcasting
K_SCALES = {"unit": 1.0, "half": 0.5, "odd": 0.0731}

# Rounding units the bound allows on sum(P |V|): the output's rounding, vLLM's rounding of the
# probabilities (and of fp8 values) to the output dtype, float32 accumulation, and for v2 the
# partial outputs kept in that dtype. float32 outputs carry float32 sums of up to 16K terms.
OUTPUT_ULPS = {"float16": 4.0, "bfloat16": 4.0, "float32": 16.0}
EXP_ULPS = 4.0  # exp's relative error per unit of its argument (ex2.approx, __expf)
DENOMINATOR_EPS = 2e-6  # vLLM adds 1e-6 to a softmax denominator >= 1, twice in v2

DESCRIPTION = (
    "Paged attention for decoding, as vLLM 0.13.0's `{name}`: one query token per sequence "
    "attends to that sequence's cached keys and values. `query` is `[num_seqs, num_heads, "
    "head_size]` (float16, bfloat16 or float32; heads and elements contiguous, rows `stride(0)` "
    "apart, e.g. a slice of a fused qkv tensor); `out` has its shape and dtype, contiguous. "
    "`key_cache` is `[num_blocks, num_kv_heads, head_size // x, block_size, x]` and "
    "`value_cache` `[num_blocks, num_kv_heads, head_size, block_size]`, both contiguous, `x = 16 "
    "// key_cache.element_size()`: element d of the key at slot p of block k for KV head j is "
    "`key_cache[k, j, d // x, p, d % x]`, of the value `value_cache[k, j, d, p]`. "
    "`block_tables` is int32 `[num_seqs, max_blocks_per_seq]`, `seq_lens` int32 `[num_seqs]` "
    "(>= 1): token t < seq_lens[s] of sequence s is at slot `t % block_size` of block "
    "`block_tables[s, t // block_size]`. Block-table entries past a sequence's blocks point at "
    "blocks no sequence owns; those blocks and the slots past a sequence's last token hold NaN: "
    "reading them poisons the answer. "
    "`max_seq_len` is max(seq_lens). Query head h uses KV head `h // (num_heads // "
    "num_kv_heads)`. For each sequence s and head h: `logit[t] = scale * dot(query[s, h], "
    "key[t]) + (alibi_slopes[h] * (t - seq_len + 1) if alibi_slopes is not None else 0)` and "
    "`out[s, h] = sum_t softmax(logit)[t] * value[t]`. `alibi_slopes` is None or float32 "
    "`[num_heads]`. `kv_cache_dtype` \"auto\": the caches have the query's dtype; \"fp8\" or "
    "\"fp8_e4m3\": the caches are float8_e4m3fn (vLLM allocates the same bytes as uint8) and a "
    "key is `float(fp8) * k_scale`, a value `float(fp8) * v_scale` (`k_scale`, `v_scale`: 0-d "
    "float32 tensors). Compute the softmax and the sums in float32 (float32 inputs: no TF32). "
    "`tp_rank` is 0 and the blocksparse arguments are always 0, 0, 64, 0 (dense attention). "
    "{extra}Write `out` in place and return None; do not modify any other argument{scratch}."
)


# The attention loop the reference solutions share: online softmax over the tokens
# [start, end) of one sequence and query head, BLOCK_N tokens (gathered through the block table)
# at a time.
TRITON_ATTEND = r'''
@triton.jit
def _attend(q, k_base, v_base, table, seq_len, start, end, block_size, head_size, scale, slope,
            k_scale, v_scale, s_block, X: tl.constexpr, HAS_ALIBI: tl.constexpr,
            BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    d = tl.arange(0, BLOCK_D)
    dmask = d < head_size
    m = tl.full((), float("-inf"), tl.float32)
    l = tl.full((), 0.0, tl.float32)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for n0 in range(start, end, BLOCK_N):
        t = n0 + tl.arange(0, BLOCK_N)
        tmask = t < end
        blk = tl.load(table + t // block_size, mask=tmask, other=0).to(tl.int64)
        slot = t % block_size
        mask = tmask[:, None] & dmask[None, :]
        k_off = blk[:, None] * s_block + (d // X)[None, :] * (block_size * X) \
            + slot[:, None] * X + (d % X)[None, :]
        k = tl.load(k_base + k_off, mask=mask, other=0.0).to(tl.float32) * k_scale
        qk = tl.sum(k * q[None, :], axis=1) * scale
        if HAS_ALIBI:
            qk += slope * (t - seq_len + 1).to(tl.float32)
        qk = tl.where(tmask, qk, float("-inf"))
        m_new = tl.maximum(m, tl.max(qk, axis=0))
        alpha = tl.exp(m - m_new)
        p = tl.exp(qk - m_new)
        v_off = blk[:, None] * s_block + d[None, :] * block_size + slot[:, None]
        v = tl.load(v_base + v_off, mask=mask, other=0.0).to(tl.float32) * v_scale
        l = l * alpha + tl.sum(p, axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        m = m_new
    return m, l, acc
'''


def pa_case(entry: str, seqs: int, heads: int, kv_heads: int, head_size: int, dt: str, *,
            kv: str = "auto", bs: int = 16, max_len: int = 64, alibi: bool = False,
            layout: str = "contiguous", k_scale: str = "unit", qstd: float = 1.0,
            cpu: bool = False) -> Case:
    params: dict[str, object] = {"kv": kv, "block_size": bs, "max_len": max_len}
    if kv != "auto":
        params["k_scale"] = k_scale
    if alibi:
        params["alibi"] = True
    if layout != "contiguous":
        params["layout"] = layout
    if qstd != 1.0:
        params["qstd"] = qstd
    return case(entry, dt, (seqs, heads, kv_heads, head_size), cpu=cpu, **params)


def hidden(entry: str, rng: random.Random, tier: Tier) -> list[Case]:
    small = tier is Tier.CPU
    out = []
    for dt in ("float16", "bfloat16", "float32"):
        kv_heads = rng.choice([1, 2] if small else [1, 2, 4, 8])
        heads = kv_heads * rng.choice([1, 2] if small else [1, 4, 8])
        head_size = rng.choice([32, 64] if small else [64, 80, 96, 112, 128, 192, 256])
        bs = rng.choice([8, 16, 32])
        seqs = rng.randrange(1, 3 if small else 40)
        most = 40 if small else CACHE_TOKENS * 1024 // max(1024, kv_heads * head_size) // seqs
        max_len = rng.randrange(1, max(2, min(most, 6000)))
        out.append(pa_case(entry, seqs, heads, kv_heads, head_size, dt,
                           kv=rng.choice(["auto", "fp8", "fp8_e4m3"]), bs=bs, max_len=max_len,
                           alibi=rng.random() < 0.3, layout=rng.choice(["contiguous", "qkv"]),
                           k_scale=rng.choice(list(K_SCALES)), qstd=rng.choice([1.0, 4.0]),
                           cpu=small))
    return out


def _caches(c: Case, gen: torch.Generator, seq_lens: list[int]
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Paged key and value caches holding NaN wherever no sequence's token lies, and the block
    table (entries past a sequence's blocks point at free, NaN blocks)."""
    _, _, kv_heads, head_size = c.shape
    bs = int(c["block_size"])
    dt = cache_dtype(str(c["kv"]), c.torch_dtype)
    need = sum(-(-n // bs) for n in seq_lens)
    num_blocks = need + 2 + need // 8
    width = -(-int(c["max_len"]) // bs) + 1
    table, used = block_table(gen, seq_lens, bs, num_blocks, width)
    x = x_of(dt)
    slots_k = poison_unused(random_values((num_blocks, bs, kv_heads, head_size), dt, gen), used)
    slots_v = poison_unused(random_values((num_blocks, bs, kv_heads, head_size), dt, gen), used)
    key_cache = slots_k.view(num_blocks, bs, kv_heads, head_size // x, x).permute(0, 2, 3, 1, 4)
    value_cache = slots_v.permute(0, 2, 3, 1)
    return key_cache.contiguous(), value_cache.contiguous(), table


def make_paged_call(c: Case, gen: torch.Generator, v2: bool) -> Call:
    seqs, heads, kv_heads, head_size = c.shape
    dt, max_len = c.torch_dtype, int(c["max_len"])
    lens = torch.randint(1, max_len + 1, (seqs,), generator=gen)
    if seqs:
        lens[-1] = max_len
    seq_lens = lens.tolist()
    key_cache, value_cache, table = _caches(c, gen, seq_lens)
    qstd = float(c.get("qstd", 1.0))
    if c.get("layout") == "qkv":
        qkv = random_values((seqs, heads + 2 * kv_heads, head_size), dt, gen, std=qstd)
        query = qkv[:, :heads]
    else:
        query = random_values((seqs, heads, head_size), dt, gen, std=qstd)
    alibi = (torch.randn(heads, generator=gen, dtype=torch.float32)
             if c.get("alibi") else None)
    k_scale = scale_tensor(K_SCALES[str(c.get("k_scale", "unit"))])
    v_scale = scale_tensor(K_SCALES[str(c.get("k_scale", "unit"))] * 1.5)
    out = torch.empty((seqs, heads, head_size), dtype=dt)
    core = (query, key_cache, value_cache, kv_heads, 1.0 / math.sqrt(head_size), table,
            lens.to(torch.int32), int(c["block_size"]), max_len, alibi, str(c["kv"]), k_scale,
            v_scale, *BLOCKSPARSE_DEFAULTS)
    if not v2:
        return Call(c.entry, (out, *core), outputs=(Out.arg(0),), mutable=frozenset({0}),
                    out_buffers=frozenset({0}))
    # Scratch: written by the op (vLLM's partition results), neither compared nor kept.
    parts = -(-max_len // PARTITION_SIZE)
    exp_sums = torch.empty((seqs, heads, parts), dtype=torch.float32)
    max_logits = torch.empty((seqs, heads, parts), dtype=torch.float32)
    tmp_out = torch.empty((seqs, heads, parts, head_size), dtype=dt)
    scratch = frozenset({1, 2, 3})
    return Call(c.entry, (out, exp_sums, max_logits, tmp_out, *core), outputs=(Out.arg(0),),
                mutable=frozenset({0}) | scratch, out_buffers=frozenset({0}) | scratch)


def core_args(call: Call, v2: bool) -> tuple[Any, ...]:
    """(out, query, key_cache, value_cache, num_kv_heads, scale, block_tables, seq_lens,
    block_size, max_seq_len, alibi_slopes, kv_cache_dtype, k_scale, v_scale)."""
    args = call.args[4:] if v2 else call.args[1:]
    return (call.args[0], *args[:13])


def slot_major(key_cache: torch.Tensor, value_cache: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Both caches as ``[num_blocks, block_size, num_kv_heads, head_size]`` views."""
    nb, kvh, dx, bs, x = key_cache.shape
    return (key_cache.permute(0, 3, 1, 2, 4).reshape(nb, bs, kvh, dx * x),
            value_cache.permute(0, 3, 1, 2))


def paged_reference(call: Call, v2: bool) -> tuple[Expected, ...]:
    """The float64 answer and its absolute error bound (Expected.scale, tolerance rtol 1):
    OUTPUT_ULPS of sum(P |V|), plus each logit's error (the keys' rounding, the float32 dot
    product, exp's argument, ALiBi) carried through the softmax, plus vLLM's denominator eps.
    Sequences go in groups padded to the longest, to bound both memory and the op count."""
    out, query = call.args[0], core_args(call, v2)[1]
    seqs, heads, d = query.shape
    value = torch.zeros((seqs, heads, d), dtype=torch.float64)
    bound = torch.zeros_like(value)
    table = core_args(call, v2)[6]
    step = max(1, REFERENCE_ELEMENTS // max(1, table.shape[1] * int(core_args(call, v2)[8])
                                            * heads * d))
    for s0 in range(0, seqs, step):
        value[s0:s0 + step], bound[s0:s0 + step] = _reference_group(call, v2, s0, s0 + step)
    return (Expected(value, out.dtype, bound),)


def _contract(eq: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.einsum(eq, a, b)``; small operands as a broadcast product and sum instead, which
    stays on one thread (einsum's batched matmul hands even tiny problems to the thread pool,
    slow on a loaded host)."""
    if eq == "skgd,stkd->skgt" and a.numel() * b.shape[1] < SMALL:
        return (a[:, :, :, None, :] * b.permute(0, 2, 1, 3)[:, :, None]).sum(-1)
    if eq == "skgt,stkd->skgd" and a.numel() * b.shape[-1] < SMALL:
        return (a[..., None] * b.permute(0, 2, 1, 3)[:, :, None]).sum(-2)
    return torch.einsum(eq, a, b)


def _reference_group(call: Call, v2: bool, s0: int, s1: int
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    (out, query, kc, vc, kvh, scale, table, seq_lens, bs, _, alibi, kv, k_scale,
     v_scale) = core_args(call, v2)
    query, table, seq_lens = query[s0:s1], table[s0:s1], seq_lens[s0:s1]
    seqs, heads, d = query.shape
    keys, values = slot_major(kc, vc)
    k = keys[table.long()].flatten(1, 2).double()  # [seqs, tokens, kv heads, d]
    v = values[table.long()].flatten(1, 2).double()
    t = torch.arange(k.shape[1], dtype=torch.float64)
    n = seq_lens.double()[:, None]
    valid = (t[None, :] < n)[:, None, None, :]  # [seqs, 1, 1, tokens]
    zero = torch.zeros((), dtype=torch.float64)
    k = torch.where(valid.squeeze(1).squeeze(1)[:, :, None, None], k, zero)
    v = torch.where(valid.squeeze(1).squeeze(1)[:, :, None, None], v, zero)
    if kv != "auto":
        k, v = k * float(k_scale), v * float(v_scale)
    u32 = unit_roundoff(torch.float32)
    u_k = 0.0 if kv == "auto" else unit_roundoff(query.dtype)
    q = query.double().view(seqs, kvh, heads // kvh, d)
    logits = _contract("skgd,stkd->skgt", q, k) * scale
    lam = (u_k + d * u32) * _contract("skgd,stkd->skgt", q.abs(), k.abs()) * scale
    if alibi is not None:
        bias = alibi.double().view(1, kvh, heads // kvh, 1) * (t - n + 1)[:, None, None, :]
        logits = logits + bias
        lam = lam + u32 * bias.abs()
    logits = logits.masked_fill(~valid, float("-inf"))
    shifted = logits - logits.amax(dim=-1, keepdim=True)
    p = torch.softmax(logits, dim=-1)
    lam = torch.where(valid, lam + EXP_ULPS * u32 * (1 + shifted.abs()), zero)
    o = _contract("skgt,stkd->skgd", p, v)
    pl = p * lam
    spread = _contract("skgt,stkd->skgd", pl, v.abs()) + o.abs() * pl.sum(-1, keepdim=True)
    b = (OUTPUT_ULPS[str(out.dtype).removeprefix("torch.")] * unit_roundoff(out.dtype)
         * _contract("skgt,stkd->skgd", p, v.abs()) + 4 * spread
         + DENOMINATOR_EPS * o.abs() + torch.finfo(out.dtype).tiny)
    return o.reshape(seqs, heads, d), b.reshape(seqs, heads, d)


def paged_torch(call: Call, v2: bool) -> None:
    """vLLM's semantics in PyTorch, float32, all sequences at once (padded to the longest);
    writes out. Masked tokens' values are zeroed: their slots may hold NaN."""
    (out, query, kc, vc, kvh, scale, table, seq_lens, bs, _, alibi, kv, k_scale,
     v_scale) = core_args(call, v2)
    seqs, heads, d = query.shape
    if seqs == 0:
        return
    keys, values = slot_major(kc, vc)
    blocks = table.long()
    k = keys[blocks].flatten(1, 2).float()  # [seqs, tokens, kvh, d]
    v = values[blocks].flatten(1, 2).float()
    if kv != "auto":
        k, v = k * k_scale, v * v_scale
    t = torch.arange(k.shape[1], device=query.device)
    valid = t[None, :] < seq_lens[:, None].long()  # [seqs, tokens]
    v = torch.where(valid[:, :, None, None], v, torch.zeros((), device=v.device))
    q = query.float().view(seqs, kvh, heads // kvh, d)
    logits = _contract("skgd,stkd->skgt", q, torch.nan_to_num(k)) * scale
    if alibi is not None:
        rel = (t[None, :] - seq_lens[:, None].long() + 1).float()
        logits = logits + alibi.view(1, kvh, heads // kvh, 1) * rel[:, None, None, :]
    logits = logits.masked_fill(~valid[:, None, None, :], float("-inf"))
    o = _contract("skgt,stkd->skgd", torch.softmax(logits, dim=-1), v)
    out.copy_(o.reshape(seqs, heads, d))


def paged_cost(c: Case) -> Cost:
    """The caches' tokens read once (half the longest on average, the longest once), the
    queries read and outputs written; 4 flops per cached element and head (q.k and p.v)."""
    seqs, heads, kv_heads, head_size = c.shape
    max_len = int(c["max_len"])
    tokens = (seqs - 1) * (max_len + 1) / 2 + max_len if seqs else 0
    cache = itemsize(FP8 if c["kv"] != "auto" else c.torch_dtype)
    elem = itemsize(c.torch_dtype)
    nbytes = (2 * tokens * kv_heads * head_size * cache + 2 * seqs * heads * head_size * elem
              + 4 * tokens / int(c["block_size"]) + 4 * seqs)
    return Cost(flops=4.0 * tokens * heads * head_size, bytes=float(nbytes), dtype=c.dtype)


def public_cases(entry: str, long: int) -> Sequence[Case]:
    """Production shapes shared by both versions; ``long`` is the longest context."""
    cs = []
    for dt in ("float16", "bfloat16", "float32"):
        for kv in ("auto", "fp8"):
            cs += [
                pa_case(entry, 8, 32, 8, 128, dt, kv=kv, max_len=1024, k_scale="half"),  # 8B
                pa_case(entry, 2, 64, 8, 128, dt, kv=kv, bs=32, max_len=long,
                        layout="qkv"),                                          # Llama-3 70B
                pa_case(entry, 5, 28, 4, 128, dt, kv=kv, max_len=777, k_scale="odd"),  # Qwen2.5
                pa_case(entry, 3, 40, 40, 128, dt, kv=kv, max_len=300, alibi=True),  # MHA ALiBi
                pa_case(entry, 7, 16, 2, 80, dt, kv=kv, bs=8, max_len=129, qstd=4.0),
                pa_case(entry, 2, 8, 1, 256, dt, kv=kv, max_len=1000, alibi=True),
                pa_case(entry, 1, 12, 4, 64, dt, kv=kv, bs=32, max_len=1),
            ]
    return cs


class PagedAttentionSpec(OperatorSpec):
    """Both versions' inputs, reference, baseline and cost; a subclass sets ``v2`` and its
    entry point, cases, description and controls."""

    v2: bool = False
    # Expected.scale is each output's absolute error bound (paged_reference).
    tolerances = {"float16": Tolerance(1.0), "bfloat16": Tolerance(1.0),
                  "float32": Tolerance(1.0)}

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return hidden(self.entry_points[0].name, rng, tier)

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return make_paged_call(c, gen, v2=self.v2)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        return paged_reference(call, v2=self.v2)

    def baseline(self, call: Call) -> object:
        ops = _baseline.custom_ops()
        if ops is not None:
            getattr(ops, call.entry)(*call.args)
        else:
            paged_torch(call, v2=self.v2)
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        return paged_cost(c)
