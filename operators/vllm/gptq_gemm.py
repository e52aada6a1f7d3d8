"""vllm::gptq_gemm — ``vllm._custom_ops.gptq_gemm(a, b_q_weight, b_gptq_qzeros, b_gptq_scales,
b_g_idx, use_exllama, use_v2_format, bit)`` of vLLM 0.13.0: float16 activations times a GPTQ
2/3/4/8-bit weight, returned as a new ``[M, N]`` float16 tensor. Nothing is written in place.

Arguments: ``a [M, K]`` float16 (contiguous), ``b_q_weight [K*bit/32, N]`` int32 (packed along
K), ``b_gptq_qzeros [G, N*bit/32]`` int32 (packed along N), ``b_gptq_scales [G, N]`` float16,
``b_g_idx`` int32, ``use_exllama``, ``use_v2_format``, ``bit``.

Packing along a dim (GPTQ): 2/4/8-bit values ``i`` of a word at bits ``i*bit``; 3-bit values in
blocks of 32 over 3 words, value ``i`` at bits ``3i..3i+2`` of the 96-bit concatenation.

Two weight layouts, as vLLM's ``GPTQLinearMethod`` uses them:

- ``use_exllama=False`` (ExLlama disabled): ``b_q_weight`` is the checkpoint's packing and
  ``b_g_idx [K]`` the group of every row (``k // G`` without act order, shuffled with it):
  ``W[k, n] = (q[k, n] - z[g_idx[k], n]) * s[g_idx[k], n]``, ``out = a @ W``.
- ``use_exllama=True``: ``b_q_weight`` went through ``gptq_shuffle(q, perm, bit)`` (rows made
  sequential, ``q'[i] = q[perm[i]]``, then words re-laid out: see ``vllm::gptq_shuffle`` and
  :func:`operators.vllm._packing.exllama_layout`), and ``b_g_idx`` is that ``perm``
  (``argsort(g_idx)``) or empty without act order. Row ``i`` of the sequential weight belongs to
  group ``i // (K / G)``, and ``out = a[:, perm] @ W'`` (``perm`` = identity when empty).

Zero points: ``use_v2_format=False`` (GPTQ v1 checkpoints) stores ``zero - 1``, so the kernel
adds 1; v2 stores the zero itself. The result does not depend on ``use_exllama``'s other
effects (vLLM picks fused kernels or dequantize + cuBLAS by M).

vLLM 0.13's ``gptq_gemm`` checks nothing on the host: a scale tensor of the wrong shape or a
group count that does not divide K is undefined behaviour there (out-of-bounds reads). The
PyTorch baseline raises ``ValueError`` for both.
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
    Tier,
    case,
)
from operators.vllm import _gemm, _packing, _quant

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _pick(w0, w1, w2, idx):
    return tl.where(idx == 0, w0, tl.where(idx == 1, w1, w2))


@triton.jit
def _code3_plain(w0, w1, w2, v):
    # Value v (0..31) at bits 3v.. of the 96-bit little-endian concatenation w0|w1|w2.
    bit = 3 * v
    wi = bit // 32
    sh = bit % 32
    lo_n = tl.minimum(32 - sh, 3)
    lo = (_pick(w0, w1, w2, wi) >> sh) & ((1 << lo_n) - 1)
    hi = (_pick(w0, w1, w2, wi + 1) << lo_n) & 7
    return lo | hi


@triton.jit
def _code3_exllama(w0, w1, w2, v):
    # gptq_shuffle's 3-bit words: values 10w..10w+9 in word w (even ones at bits 0,3,..,12, odd
    # ones at 16,19,..,28); bit b of value 30 (31) is bit 15 (31) of word b.
    r = v % 10
    sh = 16 * (r % 2) + 3 * (r // 2)
    main = (_pick(w0, w1, w2, v // 10) >> sh) & 7
    pos = 15 + 16 * (v - 30)
    pos = tl.where(v >= 30, pos, 0)
    tail = ((w0 >> pos) & 1) | (((w1 >> pos) & 1) << 1) | (((w2 >> pos) & 1) << 2)
    return tl.where(v >= 30, tail, main)


@triton.jit
def _gptq_kernel(a_ptr, q_ptr, z_ptr, s_ptr, gidx_ptr, c_ptr, M, N, K, group_rows, zero_offset,
                 BITS: tl.constexpr, EXLLAMA: tl.constexpr, HAS_PERM: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = rm < M
    n_mask = rn < N
    PACK: tl.constexpr = 32 // BITS
    MASK: tl.constexpr = (1 << BITS) - 1
    ZW = N * BITS // 32  # int32 words per row of zero points
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        k_mask = rk < K
        wmask = k_mask[:, None] & n_mask[None, :]
        if EXLLAMA:
            if HAS_PERM:
                src = tl.load(gidx_ptr + rk, mask=k_mask, other=0)
            else:
                src = rk
            g = rk // group_rows
        else:
            src = rk
            g = tl.load(gidx_ptr + rk, mask=k_mask, other=0)
        a = tl.load(a_ptr + rm[:, None].to(tl.int64) * K + src[None, :],
                    mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        # weight codes
        if BITS == 3:
            base = (rk // 32) * 3
            v = (rk % 32)[:, None]
            qp = q_ptr + base[:, None].to(tl.int64) * N + rn[None, :]
            w0 = tl.load(qp, mask=wmask, other=0)
            w1 = tl.load(qp + N, mask=wmask, other=0)
            w2 = tl.load(qp + 2 * N, mask=wmask, other=0)
            if EXLLAMA:
                q = _code3_exllama(w0, w1, w2, v)
            else:
                q = _code3_plain(w0, w1, w2, v)
        else:
            v = rk % PACK
            if EXLLAMA and BITS != 8:
                # gptq_shuffle: even values in the low half-word, odd values in the high one.
                slot = v // 2 + (PACK // 2) * (v % 2)
            else:
                slot = v
            word = tl.load(q_ptr + (rk // PACK)[:, None].to(tl.int64) * N + rn[None, :],
                           mask=wmask, other=0)
            q = (word >> (slot * BITS)[:, None]) & MASK
        # zero points (packed along N, GPTQ order)
        if BITS == 3:
            zp = z_ptr + g[:, None] * ZW + ((rn // 32) * 3)[None, :]
            z0 = tl.load(zp, mask=wmask, other=0)
            z1 = tl.load(zp + 1, mask=wmask, other=0)
            z2 = tl.load(zp + 2, mask=wmask, other=0)
            z = _code3_plain(z0, z1, z2, (rn % 32)[None, :])
        else:
            zw = tl.load(z_ptr + g[:, None] * ZW + (rn // PACK)[None, :], mask=wmask, other=0)
            z = (zw >> ((rn % PACK) * BITS)[None, :]) & MASK
        z = z + zero_offset
        s = tl.load(s_ptr + g[:, None] * N + rn[None, :], mask=wmask, other=0.0)
        w = ((q - z).to(tl.float32) * s.to(tl.float32)).to(tl.float16)
        acc += tl.dot(a, w)
    tl.store(c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc.to(tl.float16),
             mask=m_mask[:, None] & n_mask[None, :])


def gptq_gemm(a, b_q_weight, b_gptq_qzeros, b_gptq_scales, b_g_idx, use_exllama,
              use_v2_format, bit):
    M, K = a.shape
    N = b_q_weight.shape[1]
    groups = b_gptq_scales.shape[0]
    out = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0:
        return out
    has_perm = bool(use_exllama) and b_g_idx.numel() > 0
    BLOCK_M = 16 if M <= 16 else 64
    BLOCK_N = 64
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _gptq_kernel[grid](a, b_q_weight, b_gptq_qzeros, b_gptq_scales, b_g_idx, out, M, N, K,
                       K // groups, 0 if use_v2_format else 1,
                       BITS=bit, EXLLAMA=bool(use_exllama), HAS_PERM=has_perm,
                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=32)
    return out
'''

# GPTQ v1 everywhere: adds 1 to the stored zero points even for v2 checkpoints.
NEGATIVE_ALWAYS_V1 = SOLUTION.replace("0 if use_v2_format else 1,", "1,")

# Reads ExLlama-shuffled words in the checkpoint's plain order (right for 8-bit, whose shuffle
# is the identity, and with ExLlama off).
NEGATIVE_UNSHUFFLED = SOLUTION.replace("if EXLLAMA and BITS != 8:", "if False:").replace(
    "q = _code3_exllama(w0, w1, w2, v)", "q = _code3_plain(w0, w1, w2, v)")

# Ignores the act-order permutation ExLlama passes in b_g_idx (right without act order).
NEGATIVE_NO_PERM = SOLUTION.replace(
    "has_perm = bool(use_exllama) and b_g_idx.numel() > 0", "has_perm = False")

_PROD = (  # (M, K, N, bits, G): Llama/Mistral projections
    (1, 4096, 11008, 4, 128), (8, 11008, 4096, 4, 128), (31, 4096, 4096, 8, 128),
    (4, 14336, 4096, 4, 32), (64, 4096, 14336, 4, 64), (2, 4096, 4096, 3, 128),
    (3, 4096, 4096, 2, 64), (60, 4096, 11008, 8, -1),
)


@register("vllm::gptq_gemm", version=1, kind=Kind.COMPUTE)
class GptqGemm(_gemm.QuantGemmSpec):
    entry_points = (
        EntryPoint(
            "gptq_gemm",
            "gptq_gemm(a: Tensor, b_q_weight: Tensor, b_gptq_qzeros: Tensor, "
            "b_gptq_scales: Tensor, b_g_idx: Tensor, use_exllama: bool, use_v2_format: bool, "
            "bit: int) -> Tensor",
            "Returns a @ W (float16 [M, N]) for the GPTQ weight W.",
        ),
    )
    description = (
        "GPTQ weight-only GEMM as vLLM 0.13's `gptq_gemm(a, b_q_weight, b_gptq_qzeros, "
        "b_gptq_scales, b_g_idx, use_exllama, use_v2_format, bit)`; returns a new float16 "
        "tensor `[M, N]`, accumulated in float32 (rounding the dequantized weight to float16 "
        "before the product is fine). `a` is float16 `[M, K]` contiguous; `bit` is 2, 3, 4 or "
        "8; K % 32 == 0, N % 32 == 0; G = `b_gptq_scales.shape[0]` groups (K % G == 0); all "
        "tensors contiguous.\n"
        "GPTQ packing: `b_q_weight` int32 `[K*bit/32, N]` packs along K, `b_gptq_qzeros` int32 "
        "`[G, N*bit/32]` packs along N. For bit 2/4/8, word j along the packed dim holds "
        "values `j*(32/bit) + i` at bits `i*bit ..`. For bit 3, each 32 consecutive values "
        "use 3 consecutive words w0, w1, w2 (rows for the weight, columns for the zeros): "
        "value i sits at bits `3i .. 3i+2` of the 96-bit number `w0 | w1 << 32 | w2 << 64` "
        "(values 10 and 21 straddle two words). Words are int32; treat them as unsigned bit "
        "patterns. `b_gptq_scales` is float16 `[G, N]`.\n"
        "Zero points: with `use_v2_format=False` the stored value is `zero - 1` (use "
        "`stored + 1`); with `use_v2_format=True` it is the zero itself.\n"
        "`use_exllama=False`: `b_q_weight` is in the plain packing above and `b_g_idx` int32 "
        "`[K]` gives each row's group: `W[k, n] = (q[k, n] - zero[g_idx[k], n]) * "
        "scales[g_idx[k], n]`, out = `a @ W`.\n"
        "`use_exllama=True`: `b_q_weight` was rewritten by vLLM's `gptq_shuffle`: its rows are "
        "in 'sequential' order (row i of it is original row `perm[i]`) and every word's "
        "values are re-laid out. 8-bit: unchanged. 4-bit: value v (0..7) of a word is in "
        "nibble `v//2 + 4*(v%2)` (even values in nibbles 0-3, odd ones in 4-7). 2-bit: value "
        "v (0..15) is in slot `v//2 + 8*(v%2)`. 3-bit: in each block of 3 words w0..w2 "
        "(32 values), values `10w .. 10w+9` are in word w, value `10w + r` at bits "
        "`16*(r%2) + 3*(r//2) ..` (even r at bits 0,3,..,12; odd r at 16,19,..,28), and bit b "
        "of value 30 is bit 15 of word b, bit b of value 31 is bit 31 of word b. `b_g_idx` is "
        "`perm` (int32 `[K]`, act order) or an empty int32 tensor (no act order: perm = "
        "identity). Sequential row i belongs to group `i // (K // G)`: "
        "`W'[i, n] = (q'[i, n] - zero[i // (K//G), n]) * scales[i // (K//G), n]` and out = "
        "`a[:, perm] @ W'` (column i of the activations is `a[:, perm[i]]`).\n"
        "Do not modify the inputs."
    )
    solution = SOLUTION
    negatives = (
        Negative("always_v1", "adds 1 to the stored zero points whatever use_v2_format says",
                 NEGATIVE_ALWAYS_V1),
        Negative("unshuffled", "decodes ExLlama-shuffled words in the plain GPTQ order "
                 "(right only for 8-bit and with ExLlama off)", NEGATIVE_UNSHUFFLED),
        Negative("no_act_perm", "ignores the act-order permutation passed in b_g_idx with "
                 "ExLlama", NEGATIVE_NO_PERM),
    )

    def cases(self) -> Sequence[Case]:
        def mk(shape: tuple[int, int, int], bits: int, group: int, *, cpu: bool = False,
               **kw: object) -> Case:
            return case("gptq_gemm", "float16", shape, bits=bits, group=group, cpu=cpu, **kw)

        cs = [
            mk((3, 128, 64), 4, 32, exllama=True, act=True, v2=False, cpu=True),
            mk((1, 256, 64), 4, 128, exllama=True, act=False, v2=False, cpu=True),
            mk((5, 128, 96), 8, 64, exllama=True, act=True, v2=False, cpu=True),
            mk((2, 160, 64), 3, 32, exllama=True, act=True, v2=True, sym=False, cpu=True),
            mk((4, 128, 64), 2, 64, exllama=False, act=True, v2=True, sym=False, cpu=True),
            mk((6, 96, 128), 4, 32, exllama=False, act=False, v2=False, sym=False, cpu=True),
        ]
        for m, k, n, bits, g in _PROD:
            cs.append(mk((m, k, n), bits, g, exllama=True, act=g != -1, v2=False))
        cs += [
            mk((9, 4096, 11008), 4, 128, exllama=False, act=True, v2=False),
            mk((1, 4096, 4096), 4, 128, exllama=True, act=False, v2=True, sym=False),
            mk((70, 1024, 2048), 4, 32, exllama=True, act=True, v2=False, outliers=True),
            mk((17, 2048, 1376), 3, 64, exllama=False, act=False, v2=False, sym=False),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for bits in ((4, rng.choice([2, 3, 8])) if small else (2, 3, 4, 8)):
            g = rng.choice([32, 64, 128])
            k = g * rng.randrange(1, 3 if small else 48)
            n = 32 * rng.randrange(2, 5 if small else 200)
            k, n = _gemm.capped(k, n, g, 32)
            m = rng.randrange(1, 9 if small else 80)
            exllama = rng.random() < 0.6
            params: dict[str, object] = {"exllama": exllama, "act": rng.random() < 0.5,
                            "v2": rng.random() < 0.3, "sym": rng.random() < 0.5}
            if not small and rng.random() < 0.3:
                params["outliers"] = True
            out.append(case("gptq_gemm", "float16", (m, k, n), bits=bits, group=g, cpu=small,
                            **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("gptq_gemm", "float16", (16, 8192, 28672), bits=4, group=128, exllama=True,
                 act=False, v2=False),
            case("gptq_gemm", "float16", (32, 14336, 8192), bits=4, group=128, exllama=True,
                 act=True, v2=False),
            case("gptq_gemm", "float16", (16, 8192, 28672), bits=8, group=128, exllama=True,
                 act=False, v2=False),
            case("gptq_gemm", "float16", (512, 4096, 14336), bits=4, group=128, exllama=True,
                 act=False, v2=False),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        m, k, n = c.shape
        bits, group = int(c["bits"]), int(c["group"])
        v2, exllama = bool(c["v2"]), bool(c["exllama"])
        a = _gemm.activations(m, k, torch.float16, gen, outliers=bool(c.get("outliers", False)))
        w = _quant.weights(k, n, gen)
        if c.get("sym", True):
            qw = _quant.quantize_sym(w, bits, group, torch.float16)
        else:
            qw = _quant.quantize_zp(w, bits, group, torch.float16, zero_min=0 if v2 else 1)
        if c["act"] and qw.num_groups > 1:
            qw = _quant.shuffle_rows(qw, gen)
        qzeros = _packing.pack_cols(qw.zeros - (0 if v2 else 1), bits)
        raw = _packing.pack_rows(qw.codes, bits)
        if exllama:
            perm = (torch.argsort(qw.g_idx, stable=True) if c["act"] and qw.num_groups > 1
                    else torch.empty(0, dtype=torch.int64))
            qweight = _packing.exllama_shuffle(raw, perm, bits)
            g_idx = perm.to(torch.int32)
        else:
            qweight, g_idx = raw, qw.g_idx.to(torch.int32)
        return Call(c.entry, (a, qweight, qzeros, qw.scales, g_idx, exllama, v2, bits))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        a, src, w = _operands(*call.args[1:], a=call.args[0], dtype=torch.float64)
        return (_gemm.gemm_expected(a[:, src], w, a.dtype),)

    def baseline(self, call: Call) -> object:
        a = call.args[0]
        ops = _gemm.vllm_ops(a)
        if ops is not None:
            return ops.gptq_gemm(*call.args)
        _check(*call.args)
        a, src, w = _operands(*call.args[1:], a=a, dtype=torch.float32)
        return torch.matmul(a[:, src], w.to(a.dtype))

    def cost(self, c: Case) -> Cost:
        m, k, n = c.shape
        bits, group = int(c["bits"]), int(c["group"])
        groups = 1 if group == -1 else k // group
        return _gemm.gemm_cost(m, n, k, c.dtype, weight_bytes=k * n * bits / 8,
                               other_bytes=groups * n * (2 + bits / 8) + 4 * k)


def _check(a: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
           g_idx: torch.Tensor, use_exllama: bool, use_v2_format: bool, bit: int) -> None:
    """What vLLM's kernels assume but do not check (they read out of bounds instead)."""
    k, n = a.shape[1], qweight.shape[1]
    groups = scales.shape[0]
    _gemm.require(bit in (2, 3, 4, 8), f"bit must be 2, 3, 4 or 8, got {bit}", ValueError)
    _gemm.require(qweight.shape[0] * 32 == k * bit, f"b_q_weight has {qweight.shape[0]} rows, "
                  f"expected K*bit/32 = {k * bit // 32}", ValueError)
    _gemm.require(groups > 0 and k % groups == 0 and tuple(scales.shape) == (groups, n),
                  f"b_gptq_scales shape {tuple(scales.shape)} is not [G, N] with G dividing "
                  f"K = {k}", ValueError)
    _gemm.require(tuple(qzeros.shape) == (groups, n * bit // 32),
                  f"b_gptq_qzeros shape {tuple(qzeros.shape)} is not [G, N*bit/32]", ValueError)
    _gemm.require(g_idx.numel() in ((0, k) if use_exllama else (k,)),
                  f"b_g_idx has {g_idx.numel()} elements, expected {k}", ValueError)


def _operands(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
              g_idx: torch.Tensor, use_exllama: bool, use_v2_format: bool, bit: int, *,
              a: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor,
                                                             torch.Tensor]:
    """(a, the activation columns to use, the weight ``[K, N]`` in ``dtype``): ``a[:, src] @ W``
    is the result."""
    k = a.shape[1]
    z = _packing.unpack_cols(qzeros, bit) + (0 if use_v2_format else 1)
    dev = qweight.device
    if use_exllama:
        q = _packing.unshuffle(qweight, bit)
        src = g_idx.to(torch.int64) if g_idx.numel() else torch.arange(k, device=dev)
        g = torch.arange(k, device=dev) // (k // scales.shape[0])
    else:
        q = _packing.unpack_rows(qweight, bit)
        src = torch.arange(k, device=dev)
        g = g_idx.to(torch.int64)
    w = (q - z[g]).to(dtype) * scales.to(dtype)[g]
    return a, src, w
