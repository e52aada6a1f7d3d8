"""vllm::gptq_marlin_gemm — ``vllm._custom_ops.gptq_marlin_gemm(a, c, b_q_weight, b_bias,
b_scales, a_scales, global_scale, b_zeros, g_idx, perm, workspace, b_q_type, size_m, size_n,
size_k, is_k_full=True, use_atomic_add=False, use_fp32_reduce=False, is_zp_float=False)`` of
vLLM 0.13.0: 16-bit activations times a Marlin-packed 4/8-bit or FP8 weight.

Returns ``c`` (written in place) when ``c`` is given, else a new ``[M, N]`` tensor of ``a``'s
dtype. ``workspace`` (int32, zeros, at least one entry per SM) is scratch: declared mutable and
never compared. ``b_q_type`` is a vLLM ``ScalarType``; candidates get its name (``"uint4b8"``,
``"uint8b128"``, ``"uint4"``, ``"float8_e4m3fn"``), which maps to
``vllm.scalar_type.scalar_types.<name>`` (see :mod:`operators.vllm._gemm`).

Semantics (``K = size_k``, ``N = size_n``, ``G = b_scales.size(0)``): the weight codes ``q[k, n]``
are :func:`operators.vllm._marlin.unpack` of ``b_q_weight [K/16, N*16*bits/32]``; the scales
``s = permute_scales(b_scales, inverse=True)`` (the 64-column permutation when ``G > 1``, the
32-column one when ``G == 1``); ``bias = permute_bias(b_bias, inverse=True)``. Group of row
``k``: ``g_idx[k]`` with act order (``g_idx`` sorted, ``perm`` the sort indices: the codes are
stored in sorted order and ``a``'s columns are taken as ``a[:, perm]``), else ``k // (K / G)``.
``W[k, n] = (q - 8|128) * s`` (uint4b8 / uint8b128), ``(q - z) * s`` with ``z`` from
:func:`operators.vllm._marlin.unpack_zero_points` of ``b_zeros`` (uint4), or
``fp8(q) * s / 2**E`` (float8_e4m3fn: vLLM folds ``2**E`` — 8 for float16, 120 for bfloat16 —
into the scales, ``fp8_fused_exponent_bias_into_scales``). ``out = a[:, perm] @ W + bias``.
``is_k_full``, ``use_atomic_add`` and ``use_fp32_reduce`` choose how the kernel reduces; they do
not change the result.

Not covered (stated in the prompt): 8-bit activations (``a_scales``), NVFP4/MXFP4 weights
(``global_scale``, ``float4_e2m1f``), float zero points (``is_zp_float``, HQQ), uint8 zero
points. Those arguments are always None/False.

vLLM 0.13's checks (``TORCH_CHECK``, RuntimeError), among them: "size_k = K is not divisible by
tile_size = 16", "Shape mismatch: b_q_weight.size(0) = .., size_k = .., tile_size = 16",
"size_n = N, actual_size_n = ..", "b_scales dim 1 = X is not size_n = N", "size_k = K, is not
divisible by b_scales.size(0) = G" (a group count that does not divide K), "For act_order,
num_groups must be > 1", "b_zeros dim 0 = .. is not num_groups = ..", "size_n = N, is not
divisible by min_thread_n = 64", "workspace.numel = .. is below min_workspace_size = ..".
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

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
    Out,
    Tier,
    case,
)
from operators.vllm import _gemm, _marlin, _marlin_text, _quant

WORKSPACE = 1024  # int32 entries: more than any GPU's SM count
FP8_EXPONENT_BIAS = {"float16": 8, "bfloat16": 120}

SOLUTION = r'''
import torch
import triton
import triton.language as tl

_TYPES = {"uint4b8": (4, 0, 8), "uint8b128": (8, 0, 128), "uint4": (4, 1, 0),
          "float8_e4m3fn": (8, 2, 0)}  # name -> (bits, kind: 0 bias, 1 zero points, 2 fp8, bias)


@triton.jit
def _single_perm_col(n):
    # Where logical column n sits in a [.., N] row permuted by Marlin's 32-column permutation.
    return (n // 32) * 32 + 8 * ((n % 8) // 2) + 2 * ((n % 32) // 8) + n % 2


@triton.jit
def _grouped_perm_col(n):
    # The same for the 64-column permutation (grouped scales, zero points).
    return (n // 64) * 64 + 8 * (n % 8) + (n % 64) // 8


@triton.jit
def _marlin_kernel(a_ptr, b_ptr, s_ptr, z_ptr, bias_ptr, gidx_ptr, perm_ptr, c_ptr,
                   M, N, K, s_am, group_rows, row_words, fp8_scale,
                   BITS: tl.constexpr, KIND: tl.constexpr, BIAS: tl.constexpr,
                   GROUPED: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = rm < M
    n_mask = rn < N
    nn = rn % 16
    if GROUPED:
        s_col = _grouped_perm_col(rn)
    else:
        s_col = _single_perm_col(rn)
    p1 = _grouped_perm_col(rn)
    z_word = p1 // 8
    z_shift = 4 * ((p1 % 8) // 2 + 4 * (p1 % 2))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        k_mask = rk < K
        wmask = k_mask[:, None] & n_mask[None, :]
        if ACT:
            src = tl.load(perm_ptr + rk, mask=k_mask, other=0)
            g = tl.load(gidx_ptr + rk, mask=k_mask, other=0)
        else:
            src = rk
            g = rk // group_rows
        a = tl.load(a_ptr + rm[:, None].to(tl.int64) * s_am + src[None, :],
                    mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        # Marlin's tile permutation in closed form: (k, n) -> (word column, shift) in band k//16.
        kk = (rk % 16)[:, None]
        i = (nn % 8)[None, :] * 4 + (kk % 8) // 2
        r = kk % 2 + 2 * (kk // 8)
        if BITS == 4:
            e = (nn // 8)[None, :] * 4 + r
            col = (rn // 64)[None, :] * 128 + i * 4 + ((rn // 16) % 4)[None, :]
            shift = 4 * ((e % 2) * 4 + e // 2)
        else:
            slot = tl.where(r == 1, 2, tl.where(r == 2, 1, r))
            col = (rn // 64)[None, :] * 256 + i * 8 + ((rn // 16) % 4)[None, :] * 2 \
                + (nn // 8)[None, :]
            shift = 8 * slot
        word = tl.load(b_ptr + (rk // 16)[:, None].to(tl.int64) * row_words + col,
                       mask=wmask, other=0)
        q = (word >> shift) & ((1 << BITS) - 1)
        s = tl.load(s_ptr + g[:, None] * N + s_col[None, :], mask=wmask, other=0.0)
        s = s.to(tl.float32)
        if KIND == 0:
            w = (q - BIAS).to(tl.float32) * s
        elif KIND == 1:
            zw = tl.load(z_ptr + g[:, None] * (N // 8) + z_word[None, :], mask=wmask, other=0)
            z = (zw >> z_shift[None, :]) & 0xF
            w = (q - z).to(tl.float32) * s
        else:
            f = q.to(tl.uint8).to(tl.float8e4nv, bitcast=True).to(tl.float32)
            w = (f * s) * fp8_scale
        acc += tl.dot(a, w.to(a_ptr.dtype.element_ty))
    if HAS_BIAS:
        b = tl.load(bias_ptr + _single_perm_col(rn), mask=n_mask, other=0.0)
        acc += b.to(tl.float32)[None, :]
    tl.store(c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :],
             acc.to(c_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def _has(t):
    return t is not None and t.numel() > 0


def gptq_marlin_gemm(a, c, b_q_weight, b_bias, b_scales, a_scales, global_scale, b_zeros,
                     g_idx, perm, workspace, b_q_type, size_m, size_n, size_k, is_k_full=True,
                     use_atomic_add=False, use_fp32_reduce=False, is_zp_float=False):
    bits, kind, bias = _TYPES[b_q_type]
    if c is None:
        c = torch.empty((size_m, size_n), dtype=a.dtype, device=a.device)
    if size_m == 0:
        return c
    groups = b_scales.shape[0]
    act = _has(g_idx) and _has(perm)
    fp8_scale = 2.0 ** -(8 if a.dtype == torch.float16 else 120)
    BLOCK_M = 16 if size_m <= 16 else 64
    BLOCK_N = 64
    grid = (triton.cdiv(size_m, BLOCK_M), triton.cdiv(size_n, BLOCK_N))
    _marlin_kernel[grid](a, b_q_weight, b_scales, b_zeros if _has(b_zeros) else b_scales,
                         b_bias if _has(b_bias) else b_scales, g_idx if act else b_scales,
                         perm if act else b_scales, c, size_m, size_n, size_k, a.stride(0),
                         size_k // groups, b_q_weight.shape[1], fp8_scale,
                         BITS=bits, KIND=kind, BIAS=bias, GROUPED=groups > 1, ACT=act,
                         HAS_BIAS=_has(b_bias), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=32)
    return c
'''

# Ignores act order (g_idx / perm): right for checkpoints without it.
NEGATIVE_NO_ACT = SOLUTION.replace("act = _has(g_idx) and _has(perm)", "act = False")

# Un-permutes every scale tensor with the grouped (64-column) permutation, also per-channel
# scales (which use the 32-column one): right only for grouped scales.
NEGATIVE_SCALE_PERM = SOLUTION.replace("""    if GROUPED:
        s_col = _grouped_perm_col(rn)""", """    if True:
        s_col = _grouped_perm_col(rn)""")

# Reads the zero-point nibbles without Marlin's 0,2,4,6,1,3,5,7 interleave: right when there are
# no zero points.
NEGATIVE_ZP_ORDER = SOLUTION.replace("z_shift = 4 * ((p1 % 8) // 2 + 4 * (p1 % 2))",
                                     "z_shift = 4 * (p1 % 8)")

_BITS = {"uint4b8": 4, "uint8b128": 8, "uint4": 4, "float8_e4m3fn": 8}


def _mk(dtype: str, shape: tuple[int, int, int], qtype: str, group: int, *,
        cpu: bool = False, **flags: Any) -> Case:
    params = {k: v for k, v in flags.items() if v}
    return case("gptq_marlin_gemm", dtype, shape, qtype=qtype, group=group, cpu=cpu, **params)


@register("vllm::gptq_marlin_gemm", version=1, kind=Kind.COMPUTE)
class GptqMarlinGemm(_gemm.QuantGemmSpec):
    entry_points = (
        EntryPoint(
            "gptq_marlin_gemm",
            "gptq_marlin_gemm(a: Tensor, c: Tensor | None, b_q_weight: Tensor, "
            "b_bias: Tensor | None, b_scales: Tensor, a_scales: Tensor | None, "
            "global_scale: Tensor | None, b_zeros: Tensor | None, g_idx: Tensor | None, "
            "perm: Tensor | None, workspace: Tensor, b_q_type: str, size_m: int, size_n: int, "
            "size_k: int, is_k_full: bool = True, use_atomic_add: bool = False, "
            "use_fp32_reduce: bool = False, is_zp_float: bool = False) -> Tensor",
            "Returns a[:, perm] @ W + bias for the Marlin-packed weight W (into c when given).",
        ),
    )
    description = (
        "Marlin weight-only GEMM as vLLM 0.13's `gptq_marlin_gemm(...)`. `a` is float16 or "
        "bfloat16 `[M, K]` (M = size_m, K = size_k; last dim contiguous, row stride a multiple "
        "of 8); N = size_n; K % 128 == 0, N % 64 == 0. Return `a[:, perm] @ W + bias` in a's "
        "dtype, accumulated in float32 (rounding the dequantized weight to a's dtype before "
        "the product is fine): into `c` (contiguous `[M, N]`, written in place and returned) "
        "when `c` is not None, else as a new tensor. `b_q_type` is a string naming vLLM's "
        "ScalarType: 'uint4b8' (4-bit codes, weight = code - 8), 'uint8b128' (8-bit, code - "
        "128), 'uint4' (4-bit with zero points: code - zero), 'float8_e4m3fn' (8-bit codes "
        "are float8_e4m3fn bit patterns). `a_scales`, `global_scale` are always None and "
        "`is_zp_float` False (8-bit activations, FP4 weights and float zero points are not "
        "part of this problem). `workspace` is an int32 scratch buffer (all zeros) you may "
        "use or ignore; it is not checked. `is_k_full`, `use_atomic_add`, `use_fp32_reduce` "
        "are vLLM's reduction strategy hints: they do not change the result.\n"
        "Scales: G = `b_scales.shape[0]` groups, `b_scales` `[G, N]` in a's dtype, stored "
        "permuted: with G > 1, within each run of 64 columns the logical scale of column "
        "`i + 8j` is stored at `8i + j` (i, j < 8); with G == 1, within each run of 32 "
        "columns the logical column `2i + (0,1,8,9,16,17,24,25)[t]` is stored at `8i + t` "
        "(i < 4, t < 8). `b_bias` (None, an empty tensor, or `[N]` in a's dtype) is stored "
        "with that same 32-column permutation. Group of weight row k: `g_idx[k]` with act "
        "order, else `k // (K // G)`.\n"
        "Act order: when `g_idx` and `perm` are int32 `[K]` tensors (else both None or both "
        "empty), the weight rows are stored sorted by group (`g_idx` is that sorted order) "
        "and `perm` says which column of `a` each row multiplies: the result is "
        "`a[:, perm] @ W`.\n"
        "Weight: `b_q_weight` int32 `[K/16, 16*N*bits/32]` holds the `[K, N]` codes (bits = "
        "4 or 8) in Marlin's layout for 16-bit activations (`is_a_8bit` False below). "
        + _marlin_text.WEIGHT_LAYOUT.replace(" (R = 16; R = 32 when `is_a_8bit`)", " (R = 16)")
        + "\nDequantization: `W[k, n] = (code - 8) * s[g, n]` (uint4b8), `(code - 128) * "
        "s[g, n]` (uint8b128), `(code - z[g, n]) * s[g, n]` (uint4), `fp8(code) * s[g, n] / "
        "2**E` (float8_e4m3fn; vLLM folds 2**E into the stored scales: E = 8 for float16, "
        "120 for bfloat16), with g the row's group. Zero points (uint4 only): `b_zeros` int32 "
        "`[G, N/8]`: take the logical `[G, N]` zeros, apply the 64-column permutation above "
        "(logical column `i + 8j` at position `8i + j`), then in each group of 8 consecutive "
        "positions store position `(0,2,4,6,1,3,5,7)[t]` in nibble t (bits 4t..4t+3) of one "
        "int32. For other types `b_zeros` is None or empty. Do not modify the inputs other "
        "than `c` and `workspace`."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_act_order", "treats act-order weights as unordered (ignores g_idx "
                 "and perm)", NEGATIVE_NO_ACT),
        Negative("grouped_scale_perm", "un-permutes per-channel scales with the grouped "
                 "64-column permutation", NEGATIVE_SCALE_PERM),
        Negative("zp_no_interleave", "reads zero-point nibbles without Marlin's 0,2,4,6,1,3,5,7 "
                 "interleave", NEGATIVE_ZP_ORDER),
    )

    def cases(self) -> Sequence[Case]:
        cs = [
            _mk("float16", (3, 128, 64), "uint4b8", 32, act=True, cpu=True),
            _mk("bfloat16", (5, 128, 128), "uint4b8", -1, bias=True, c=True, cpu=True),
            _mk("float16", (1, 128, 64), "uint4", 64, cpu=True),
            _mk("bfloat16", (2, 256, 64), "uint8b128", 128, act=True, k_partial=True, cpu=True),
            _mk("float16", (4, 128, 64), "float8_e4m3fn", -1, empty=True, cpu=True),
            _mk("bfloat16", (7, 256, 128), "uint4", -1, bias=True, row_pad=8, cpu=True),
        ]
        cs += [
            _mk("float16", (1, 4096, 11008), "uint4b8", 128, act=True),
            _mk("bfloat16", (16, 11008, 4096), "uint4b8", 128, bias=True, empty=True),
            _mk("float16", (7, 14336, 4096), "uint4", 128),
            _mk("bfloat16", (64, 4096, 14336), "uint8b128", 64, act=True, k_partial=True),
            _mk("float16", (33, 4096, 4096), "float8_e4m3fn", -1, c=True),
            _mk("bfloat16", (5, 4096, 6144), "float8_e4m3fn", 128, bias=True),
            _mk("float16", (128, 4096, 4096), "uint4b8", -1, c=True, fp32_reduce=True),
            _mk("bfloat16", (3, 2048, 5120), "uint4", 32, bias=True, row_pad=16,
                outliers=True),
            _mk("float16", (0, 4096, 4096), "uint4b8", 128),
            _mk("bfloat16", (257, 1024, 2816), "uint4b8", 128, act=True, atomic=True),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(2 if small else 5):
            qtype = rng.choice(list(_BITS))
            group = rng.choice([-1, 32, 64, 128])
            k = 128 * rng.randrange(1, 3 if small else 64)
            n = 64 * rng.randrange(1, 3 if small else 100)
            k, n = _gemm.capped(k, n, 128, 64)
            m = rng.randrange(1, 9 if small else 300)
            act = qtype in ("uint4b8", "uint8b128") and group != -1 and group < k \
                and rng.random() < 0.5
            if qtype == "float8_e4m3fn" and group != -1:
                group = 128
            out.append(_mk(rng.choice(["float16", "bfloat16"]), (m, k, n), qtype, group,
                           act=act, k_partial=act and rng.random() < 0.3, bias=rng.random() < 0.4,
                           c=rng.random() < 0.3, empty=rng.random() < 0.5,
                           row_pad=rng.choice([0, 0, 8]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _mk("float16", (16, 8192, 28672), "uint4b8", 128),
            _mk("bfloat16", (4096, 4096, 14336), "uint4b8", 128),
            _mk("float16", (1024, 8192, 28672), "uint4", 128),
            _mk("bfloat16", (2048, 4096, 4096), "float8_e4m3fn", -1),
            _mk("float16", (64, 28672, 8192), "uint8b128", 128, act=True),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        m, k, n = c.shape
        dt, qtype = c.torch_dtype, str(c["qtype"])
        a = _gemm.activations(m, k, dt, gen, row_pad=int(c.get("row_pad", 0)),
                              outliers=bool(c.get("outliers", False)))
        qw, zeros, scales = _quantize(_quant.weights(k, n, gen), qtype, int(c["group"]), dt)
        g_idx: Any = None
        perm: Any = None
        if c.get("act", False):
            qw, perm_t = _quant.sort_rows(_quant.shuffle_rows(qw, gen))
            g_idx, perm = qw.g_idx.to(torch.int32), perm_t.to(torch.int32)
        elif c.get("empty", False):  # vLLM's layers pass empty tensors, not None
            g_idx = perm = torch.empty(0, dtype=torch.int32)
        codes = qw.codes.view(torch.uint8).to(torch.int64) if qtype == "float8_e4m3fn" \
            else qw.codes
        bias = (_marlin.permute_bias((torch.randn(n, generator=gen) * 0.1).to(dt))
                if c.get("bias", False) else None)
        if zeros is None and c.get("empty", False):
            zeros = torch.empty(0, dtype=torch.int32)
        out = torch.empty(m, n, dtype=dt) if c.get("c", False) else None
        args = (a, out, _marlin.pack(codes, _BITS[qtype]), bias, _marlin.permute_scales(scales),
                None, None, zeros, g_idx, perm, torch.zeros(WORKSPACE, dtype=torch.int32),
                qtype, m, n, k, not c.get("k_partial", False), bool(c.get("atomic", False)),
                bool(c.get("fp32_reduce", False)), False)
        given = frozenset({1}) if out is not None else frozenset()
        return Call(c.entry, args, outputs=(Out.ret(),), mutable=given | {10},
                    out_buffers=given)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        a, c = call.args[0], call.args[1]
        src, w, bias = _operands(call.args, torch.float64)
        e = _gemm.gemm_expected(a[:, src], w, a.dtype, bias)
        return (Expected(e.value, e.dtype, e.scale, view_of=1 if c is not None else None),)

    def baseline(self, call: Call) -> object:
        args = list(call.args)
        a, c = args[0], args[1]
        ops = _gemm.vllm_ops(a)
        if ops is not None:
            args[11] = _gemm.vllm_scalar_type(args[11])
            return ops.gptq_marlin_gemm(*args)
        _check(args)
        src, w, bias = _operands(args, torch.float32)
        out = torch.matmul(a[:, src], w.to(a.dtype))
        if bias is not None:
            out = out + bias.to(a.dtype)
        if c is None:
            return out
        c.copy_(out)
        return c

    def cost(self, c: Case) -> Cost:
        m, k, n = c.shape
        bits = _BITS[str(c["qtype"])]
        group = int(c["group"])
        groups = 1 if group == -1 else k // group
        return _gemm.gemm_cost(m, n, k, c.dtype, weight_bytes=k * n * bits / 8,
                               other_bytes=groups * n * 2.5 + 8 * k + 2 * n)


def _quantize(w: torch.Tensor, qtype: str, group: int, dt: torch.dtype
              ) -> tuple[_quant.QuantWeight, torch.Tensor | None, torch.Tensor]:
    """(logical weight, Marlin-packed zero points or None, scales as vLLM stores them before
    the permutation)."""
    if qtype == "uint4":
        qw = _quant.quantize_zp(w, 4, group, dt)
        return qw, _marlin.pack_zero_points(qw.zeros, 4), qw.scales
    if qtype == "float8_e4m3fn":
        qw = _quant.quantize_fp8(w, group, dt)
        return qw, None, qw.scales * 2.0 ** FP8_EXPONENT_BIAS[str(dt).removeprefix("torch.")]
    qw = _quant.quantize_sym(w, _BITS[qtype], group, dt)
    return qw, None, qw.scales


def _present(t: torch.Tensor | None) -> bool:
    return t is not None and t.numel() > 0


def _operands(args: Sequence[Any], dtype: torch.dtype
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(the activation columns, the weight ``[K, N]`` in ``dtype``, the logical bias)."""
    a, _, qweight, b_bias, b_scales, _, _, b_zeros, g_idx, perm = args[:10]
    qtype, _, n, k = args[11], args[12], args[13], args[14]
    codes = _marlin.unpack(qweight, k, n, _BITS[qtype])
    s = _marlin.permute_scales(b_scales, inverse=True).to(dtype)
    dev = codes.device
    if _present(g_idx) and _present(perm):
        g, src = g_idx.to(torch.int64), perm.to(torch.int64)
    else:
        g = torch.arange(k, device=dev) // (k // b_scales.shape[0])
        src = torch.arange(k, device=dev)
    if qtype == "uint4":
        z = _marlin.unpack_zero_points(b_zeros, 4)
        w = (codes - z[g]).to(dtype) * s[g]
    elif qtype == "float8_e4m3fn":
        e = FP8_EXPONENT_BIAS[str(a.dtype).removeprefix("torch.")]
        f = codes.to(torch.uint8).view(torch.float8_e4m3fn).to(dtype)
        w = f * s[g] * 2.0 ** -e
    else:
        w = (codes - (8 if qtype == "uint4b8" else 128)).to(dtype) * s[g]
    bias = _marlin.permute_bias(b_bias, inverse=True) if _present(b_bias) else None
    return src, w, bias


def _check(args: Sequence[Any]) -> None:
    """vLLM 0.13's host checks that apply to the covered types, with its messages."""
    a, c, qweight, b_bias, b_scales, _, _, b_zeros, g_idx, perm = args[:10]
    qtype, size_m, size_n, size_k = args[11], args[12], args[13], args[14]
    req = _gemm.require
    req(qtype in _BITS, f"b_q_type {qtype!r} is not one of {sorted(_BITS)}")
    pack = 32 // _BITS[qtype]
    req(a.shape[0] == size_m, f"Shape mismatch: a.size(0) = {a.shape[0]}, size_m = {size_m}")
    req(a.shape[1] == size_k, f"Shape mismatch: a.size(1) = {a.shape[1]}, size_k = {size_k}")
    req(size_k % 16 == 0, f"size_k = {size_k} is not divisible by tile_size = 16")
    req(size_k // 16 == qweight.shape[0], f"Shape mismatch: b_q_weight.size(0) = "
        f"{qweight.shape[0]}, size_k = {size_k}, tile_size = 16")
    actual_n = qweight.shape[1] // 16 * pack
    req(size_n == actual_n, f"size_n = {size_n}, actual_size_n = {actual_n}")
    if c is not None:
        req(tuple(c.shape) == (size_m, size_n), f"Shape mismatch: c.size(0) = {c.shape[0]}, "
            f"size_m = {size_m}")
    req(b_scales.dim() == 2, f"b_scales rank = {b_scales.dim()} is not 2")
    req(b_scales.shape[1] == size_n, f"b_scales dim 1 = {b_scales.shape[1]} is not size_n = "
        f"{size_n}")
    groups = b_scales.shape[0]
    act = _present(g_idx) and _present(perm)
    if act:
        req(g_idx.shape[-1] == size_k and perm.shape[-1] == size_k,
            f"Unexpected g_idx.size(-1) = {g_idx.shape[-1]} and perm.size(-1) = "
            f"{perm.shape[-1]}, where size_k = {size_k}")
        req(groups > 1, "For act_order, num_groups must be > 1")
        req(size_k % groups == 0, f"size_k = {size_k}, is not divisible by num_groups = {groups}")
    elif groups > 1:
        req(size_k % groups == 0, f"size_k = {size_k}, is not divisible by b_scales.size(0) = "
            f"{groups}")
    if _present(b_zeros):
        req(qtype == "uint4", f"b_type must be u4 or u8 when has_zp = True. Got = {qtype}")
        req(b_zeros.shape[0] == groups, f"b_zeros dim 0 = {b_zeros.shape[0]} is not "
            f"num_groups = {groups}")
        req(b_zeros.shape[1] == size_n // pack, f"b_zeros dim 1 = {b_zeros.shape[1]} is not "
            f"size_n / pack_factor = {size_n // pack}")
    else:
        req(qtype != "uint4", "b_type must be uint4b8, uint8b128, int4, int8, float8_e4m3fn or "
            f"float4_e2m1f when has_zp = False. Got = {qtype}")
    if _present(b_bias):
        req(b_bias.shape[0] == size_n, "b_bias.size(0) != size_n")
    req(size_n % 64 == 0, f"size_n = {size_n}, is not divisible by min_thread_n = 64")
