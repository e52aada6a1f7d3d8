"""vllm::gptq_marlin_24_gemm — ``vllm._custom_ops.gptq_marlin_24_gemm(a, b_q_weight, b_meta,
b_scales, workspace, b_q_type, size_m, size_n, size_k)`` of vLLM 0.13.0: float16 activations
times a 2:4-sparse GPTQ weight (uint4b8 or uint8b128) in Marlin's sparse layout; returns a new
``[M, N]`` float16 tensor.

The weight: in every quad of 4 consecutive rows of a column, at most two entries are non-zero.
``b_q_weight [K/32, N*16*bits/32]`` int32 holds the kept codes (``[K/2, N]``, rows ``2q, 2q+1``
for quad ``q``, bias 8/128 included) in Marlin's tile layout with the 2:4 kernel's own run
permutation (:func:`operators.vllm._marlin24.weight_perm_24`); ``b_meta [K/32, 2N]`` int16 says
where they go (:mod:`operators.vllm._marlin24`); ``b_scales [G, N]`` float16 (G = 1, or K/128
groups), within each run of 64 columns permuted ``new[8i + t] = old[8i + (0,4,1,5,2,6,3,7)[t]]``
when G > 1. ``workspace`` (int32 zeros, ``N/128*64`` entries) is scratch: mutable, not compared.
``b_q_type`` is a vLLM ``ScalarType``; candidates get its name.

vLLM 0.13's checks (``TORCH_CHECK``, RuntimeError): "num_bits must be uint4b8 or uint8b128. Got
= ..", "Shape mismatch: a.size(0) = .., size_m = ..", "size_k = K is not divisible by tile_size
= 16", "Shape mismatch: b_q_weight.size(0) = ..", "b_scales.size(1) = X, size_n = N",
"b_meta.size(0) = .. is not size_k / 8 / 2 / 2 = ..", "A is not float16, currently only float16
is supported", "size_k = K, is not divisible by b_scales.size(0) = G" (a group count that does
not divide K), "Unexpected groupsize = .." (only 128 or per channel), "size_n = N, is not
divisible by min_thread_n = 128", "workspace.numel = .. is below min_workspace_size = ..";
the launcher also needs N % 256 == 0 when M > 16 and K % 64 (K % 128 when M <= 16).
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
    Tier,
    case,
)
from operators.vllm import _gemm, _marlin24, _quant

_TYPES = {"uint4b8": (4, 8), "uint8b128": (8, 128)}

SOLUTION = r'''
import torch
import triton
import triton.language as tl


def _perm24(bits):
    # The 2:4 kernel's 1024-entry run permutation (new[j] = old[perm[j]]), and its inverse.
    perm = []
    for i in range(32):
        col, q = i // 4, i % 4
        rows = [2 * q, 2 * q + 1, 2 * q + 8, 2 * q + 9]
        block = [16 * r + (col // 2) * 256 + 8 * (col % 2) + 4 * b for b in (0, 1) for r in rows]
        perm += [p + j for j in range(4) for p in block]
    il = (0, 2, 4, 6, 1, 3, 5, 7) if bits == 4 else (0, 2, 1, 3)
    g = len(il)
    perm = [perm[s + il[t]] for s in range(0, 1024, g) for t in range(g)]
    inv = [0] * 1024
    for j, p in enumerate(perm):
        inv[p] = j
    return inv


@triton.jit
def _kept(b_ptr, inv_ptr, kc, n, s, mask, row_words, BITS: tl.constexpr, BIAS: tl.constexpr):
    # Row kc of the compressed codes C, dequantized: find it in Marlin's tile layout.
    PACK: tl.constexpr = 32 // BITS
    pos = (n // 16)[None, :] * 256 + (kc % 16)[:, None] * 16 + (n % 16)[None, :]
    newpos = (pos // 1024) * 1024 + tl.load(inv_ptr + pos % 1024, mask=mask, other=0)
    word = tl.load(b_ptr + (kc // 16)[:, None].to(tl.int64) * row_words + newpos // PACK,
                   mask=mask, other=0)
    code = (word >> ((newpos % PACK) * BITS)) & ((1 << BITS) - 1)
    return ((code - BIAS).to(tl.float32) * s).to(tl.float16)


@triton.jit
def _decode_kernel(b_ptr, meta_ptr, s_ptr, inv_ptr, w_ptr, K, N, row_words, group_rows,
                   BITS: tl.constexpr, BIAS: tl.constexpr, GROUPED: tl.constexpr,
                   BLOCK_Q: tl.constexpr, BLOCK_N: tl.constexpr):
    # Dense float16 W[K, N] from the compressed codes, the metadata and the scales.
    quad = tl.program_id(0) * BLOCK_Q + tl.arange(0, BLOCK_Q)
    n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (quad < K // 4)[:, None] & (n < N)[None, :]
    # metadata nibble of (n, quad): int16 meta[n, quad // 4] at CUTLASS's reordered position
    c = (quad // 4)[:, None]
    r = (n // 64) * 64 + (n % 2) * 2 + (n % 8) // 4 + ((n % 4) // 2) * 32 + ((n % 64) // 8) * 4
    r = r[None, :]
    tr = ((r % 2 == 0) & (c % 2 == 1)).to(tl.int32)
    bl = ((r % 2 == 1) & (c % 2 == 0)).to(tl.int32)
    off = ((c - tr + bl) // 2) * (2 * N) + (r + tr - bl) * 2 + (c - tr + bl) % 2
    word16 = tl.load(meta_ptr + off, mask=mask, other=0).to(tl.int32) & 0xFFFF
    nib = (word16 >> (4 * (quad % 4))[:, None]) & 0xF
    if GROUPED:
        o = n % 64
        s_col = (n // 64) * 64 + 8 * (o // 8) + 2 * (o % 4) + (o % 8) // 4
    else:
        s_col = n
    g = (4 * quad) // group_rows
    s = tl.load(s_ptr + g[:, None] * N + s_col[None, :], mask=mask, other=0.0).to(tl.float32)
    v0 = _kept(b_ptr, inv_ptr, 2 * quad, n, s, mask, row_words, BITS, BIAS)
    v1 = _kept(b_ptr, inv_ptr, 2 * quad + 1, n, s, mask, row_words, BITS, BIAS)
    i0 = nib & 3
    i1 = nib >> 2
    zero = tl.zeros((BLOCK_Q, BLOCK_N), dtype=tl.float16)
    for p in tl.static_range(4):
        w = tl.where(i0 == p, v0, tl.where(i1 == p, v1, zero))
        tl.store(w_ptr + (4 * quad + p)[:, None].to(tl.int64) * N + n[None, :], w, mask=mask)


@triton.jit
def _gemm_kernel(a_ptr, w_ptr, c_ptr, M, N, K,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None].to(tl.int64) * K + rk[None, :],
                    mask=(rm < M)[:, None] & (rk < K)[None, :], other=0.0)
        w = tl.load(w_ptr + rk[:, None].to(tl.int64) * N + rn[None, :],
                    mask=(rk < K)[:, None] & (rn < N)[None, :], other=0.0)
        acc += tl.dot(a, w)
    tl.store(c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc.to(tl.float16),
             mask=(rm < M)[:, None] & (rn < N)[None, :])


def gptq_marlin_24_gemm(a, b_q_weight, b_meta, b_scales, workspace, b_q_type, size_m, size_n,
                        size_k):
    bits, bias = {"uint4b8": (4, 8), "uint8b128": (8, 128)}[b_q_type]
    out = torch.empty((size_m, size_n), dtype=a.dtype, device=a.device)
    if size_m == 0:
        return out
    inv = torch.tensor(_perm24(bits), dtype=torch.int32, device=a.device)
    w = torch.empty((size_k, size_n), dtype=torch.float16, device=a.device)
    groups = b_scales.shape[0]
    BQ, BN = 32, 128
    _decode_kernel[(triton.cdiv(size_k // 4, BQ), triton.cdiv(size_n, BN))](
        b_q_weight, b_meta, b_scales, inv, w, size_k, size_n, b_q_weight.shape[1],
        size_k // groups, BITS=bits, BIAS=bias, GROUPED=groups > 1, BLOCK_Q=BQ, BLOCK_N=BN)
    BM = 16 if size_m <= 16 else 64
    _gemm_kernel[(triton.cdiv(size_m, BM), triton.cdiv(size_n, 64))](
        a, w, out, size_m, size_n, size_k, BLOCK_M=BM, BLOCK_N=64, BLOCK_K=64)
    return out
'''

# Reads the stored scales as if unpermuted: right only for per-channel scales (G == 1).
NEGATIVE_SCALE_ORDER = SOLUTION.replace("""    if GROUPED:
        o = n % 64""", """    if False:
        o = n % 64""")

# Builds the run permutation with the 4-bit interleave whatever the width: right for 4-bit.
NEGATIVE_PERM_4BIT = SOLUTION.replace("inv = torch.tensor(_perm24(bits)",
                                      "inv = torch.tensor(_perm24(4)")


def _mk(shape: tuple[int, int, int], qtype: str, group: int, cpu: bool = False,
        **flags: Any) -> Case:
    return case("gptq_marlin_24_gemm", "float16", shape, qtype=qtype, group=group, cpu=cpu,
                **{k: v for k, v in flags.items() if v})


@register("vllm::gptq_marlin_24_gemm", version=1, kind=Kind.COMPUTE)
class GptqMarlin24Gemm(_gemm.QuantGemmSpec):
    entry_points = (
        EntryPoint(
            "gptq_marlin_24_gemm",
            "gptq_marlin_24_gemm(a: Tensor, b_q_weight: Tensor, b_meta: Tensor, "
            "b_scales: Tensor, workspace: Tensor, b_q_type: str, size_m: int, size_n: int, "
            "size_k: int) -> Tensor",
            "Returns a @ W (float16 [M, N]) for the 2:4-sparse Marlin weight W.",
        ),
    )
    description = (
        "2:4-sparse Marlin GEMM as vLLM 0.13's `gptq_marlin_24_gemm(a, b_q_weight, b_meta, "
        "b_scales, workspace, b_q_type, size_m, size_n, size_k)`: return a new float16 tensor "
        "`a @ W` of shape `[M, N]`, accumulated in float32 (rounding the dequantized weight to "
        "float16 first is fine). `a` float16 `[M, K]` contiguous (M = size_m, K = size_k, N = "
        "size_n; K % 128 == 0, N % 128 == 0). `b_q_type` is 'uint4b8' (bits 4, bias 8) or "
        "'uint8b128' (bits 8, bias 128). `workspace` is int32 scratch (zeros) you may use or "
        "ignore.\n"
        "The dense weight W `[K, N]` has in every column at most 2 non-zeros per quad of 4 "
        "rows (rows 4q..4q+3). Kept codes: a `[K/2, N]` matrix C, rows 2q and 2q+1 holding "
        "the two kept entries of quad q (codes include the bias). Positions: `b_meta` int16 "
        "`[K/32, 2N]`; for column n and quad q, with c = q // 4, t = q % 4, the 16-bit word "
        "`meta[n, c]` has nibble t (bits 4t..4t+3) = `i0 | i1 << 2`: C[2q, n] belongs to row "
        "4q + i0 and C[2q+1, n] to row 4q + i1 (i0 < i1); the other two rows of the quad are "
        "zero. `meta[n, c]` is stored at flat position `off` of b_meta (int16 elements, "
        "row-major): `r = (n//64)*64 + (n%2)*2 + (n%8)//4 + ((n%4)//2)*32 + ((n%64)//8)*4`; if "
        "r is even and c odd: r += 1, c -= 1; if r is odd and c even: r -= 1, c += 1; "
        "`off = (c//2)*2N + 2r + c%2`.\n"
        "`b_q_weight` int32 `[K/32, 16*N*bits/32]` holds C in Marlin's tile layout: cut C "
        "into 16x16 tiles, lay the tiles of each 16-row band side by side, each flattened "
        "row-major (`T = C.reshape(K//32, 16, N//16, 16).permute(0, 2, 1, 3).reshape(K//32, "
        "16*N)`), permute every run of 1024 consecutive values of a row of T, `new[j] = "
        "old[perm[j]]`, with\n"
        "```\n"
        "perm = []\n"
        "for i in range(32):\n"
        "    col, q = i // 4, i % 4\n"
        "    rows = [2*q, 2*q + 1, 2*q + 8, 2*q + 9]\n"
        "    block = [16*r + (col//2)*256 + 8*(col % 2) + 4*b for b in (0, 1) for r in rows]\n"
        "    perm += [p + j for j in range(4) for p in block]\n"
        "IL = (0, 2, 4, 6, 1, 3, 5, 7) if bits == 4 else (0, 2, 1, 3)\n"
        "perm = [perm[s + IL[t]] for s in range(0, 1024, len(IL)) for t in range(len(IL))]\n"
        "```\n"
        "then pack each row of T: word w holds `T[:, w*P + t]` at bits `t*bits ..` (P = "
        "32/bits; treat words as unsigned).\n"
        "Scales: `b_scales` float16 `[G, N]`, G = 1 (per column) or K/128 (group size 128); "
        "for G > 1 the logical scale of column `8i + (0,4,1,5,2,6,3,7)[t]` of each run of 64 "
        "columns is stored at `8i + t`; for G == 1 unpermuted. Row k's group is `k // (K//G)`. "
        "`W[k, n] = (code - bias) * scale[k // (K//G), n]` at the kept positions, 0 "
        "elsewhere. Do not modify the inputs (other than workspace)."
    )
    solution = SOLUTION
    negatives = (
        Negative("scale_order", "reads grouped scales as if unpermuted (right for per-column "
                 "scales)", NEGATIVE_SCALE_ORDER),
        Negative("perm_4bit", "builds the run permutation with the 4-bit interleave for 8-bit "
                 "weights too", NEGATIVE_PERM_4BIT),
    )

    def cases(self) -> Sequence[Case]:
        return [
            _mk((3, 128, 128), "uint4b8", -1, cpu=True),
            _mk((5, 256, 128), "uint4b8", 128, cpu=True),
            _mk((2, 128, 128), "uint8b128", -1, cpu=True),
            _mk((8, 256, 128), "uint8b128", 128, outliers=True, cpu=True),
            _mk((1, 4096, 11008), "uint4b8", 128),
            _mk((16, 11008, 4096), "uint4b8", 128),
            _mk((32, 4096, 14336), "uint4b8", -1),
            _mk((64, 14336, 4096), "uint8b128", 128),
            _mk((7, 4096, 4096), "uint8b128", -1, outliers=True),
            _mk((200, 2048, 5120), "uint4b8", 128),
        ]

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for qtype in _TYPES:
            m = rng.randrange(1, 9 if small else 100)
            k = 128 * rng.randrange(1, 3 if small else 64)
            step = 128 if m <= 16 else 256
            n = step * rng.randrange(1, 2 if small else 40)
            k, n = _gemm.capped(k, n, 128, step)
            out.append(_mk((m, k, n), qtype, rng.choice([-1, 128]),
                           outliers=rng.random() < 0.3, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _mk((64, 28672, 8192), "uint4b8", 128),
            _mk((4096, 4096, 14336), "uint4b8", 128),
            _mk((1024, 8192, 28672), "uint8b128", 128),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        m, k, n = c.shape
        qtype = str(c["qtype"])
        bits, bias = _TYPES[qtype]
        a = _gemm.activations(m, k, torch.float16, gen, outliers=bool(c.get("outliers", False)))
        w = _quant.weights(k, n, gen)
        w = w * _marlin24.keep_mask(w)
        qw = _quant.quantize_sym(w, bits, int(c["group"]), torch.float16)
        kept, i0, i1 = _marlin24.compress(qw.codes - bias)
        args = (a, _marlin24.pack_weights_24(kept + bias, bits), _marlin24.pack_meta(i0, i1),
                _marlin24.permute_scales_24(qw.scales),
                torch.zeros(n // 128 * 64, dtype=torch.int32), qtype, m, n, k)
        return Call(c.entry, args, mutable=frozenset({4}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        a = call.args[0]
        return (_gemm.gemm_expected(a, _dense(call.args, torch.float64), a.dtype),)

    def baseline(self, call: Call) -> object:
        args = list(call.args)
        ops = _gemm.vllm_ops(args[0])
        if ops is not None:
            args[5] = _gemm.vllm_scalar_type(args[5])
            return ops.gptq_marlin_24_gemm(*args)
        _check(args)
        return torch.matmul(args[0], _dense(args, torch.float32).to(torch.float16))

    def cost(self, c: Case) -> Cost:
        m, k, n = c.shape
        bits = _TYPES[str(c["qtype"])][0]
        groups = 1 if int(c["group"]) == -1 else k // 128
        return _gemm.gemm_cost(m, n, k, c.dtype, weight_bytes=k / 2 * n * bits / 8 + k * n / 8,
                               other_bytes=2.0 * groups * n, macs=m * n * k / 2)


def _dense(args: Sequence[Any], dtype: torch.dtype) -> torch.Tensor:
    """The dense weight ``[K, N]`` in ``dtype``."""
    _, qweight, meta, scales, _, qtype, _, n, k = args
    bits, bias = _TYPES[qtype]
    kept = _marlin24.unpack_weights_24(qweight, k, n, bits) - bias
    i0, i1 = _marlin24.unpack_meta(meta, k, n)
    codes = _marlin24.decompress(kept, i0, i1)
    s = _marlin24.permute_scales_24(scales, inverse=True).to(dtype)
    g = torch.arange(k, device=codes.device) // (k // scales.shape[0])
    return codes.to(dtype) * s[g]


def _check(args: Sequence[Any]) -> None:
    a, qweight, meta, scales, workspace, qtype, size_m, size_n, size_k = args
    req = _gemm.require
    req(qtype in _TYPES, f"num_bits must be uint4b8 or uint8b128. Got = {qtype}")
    pack = 32 // _TYPES[qtype][0]
    req(size_m == a.shape[0], f"Shape mismatch: a.size(0) = {a.shape[0]}, size_m = {size_m}")
    req(size_k == a.shape[1], f"Shape mismatch: a.size(1) = {a.shape[1]}, size_k = {size_k}")
    req(size_k % 16 == 0, f"size_k = {size_k} is not divisible by tile_size = 16")
    req(size_k // 16 // 2 == qweight.shape[0], f"Shape mismatch: b_q_weight.size(0) = "
        f"{qweight.shape[0]}, size_k = {size_k}, tile_size = 16")
    req(scales.shape[1] == size_n, f"b_scales.size(1) = {scales.shape[1]}, size_n = {size_n}")
    req(size_n == qweight.shape[1] // 16 * pack,
        f"size_n = {size_n}, actual_size_n = {qweight.shape[1] // 16 * pack}")
    req(meta.shape[0] == size_k // 32, f"b_meta.size(0) = {meta.shape[0]} is not size_k / 8 / "
        f"2 / 2 = {size_k // 32}")
    req(meta.shape[1] == size_n * 2, f"b_meta.size(1) = {meta.shape[1]} is not size_n * 2 = "
        f"{size_n * 2}")
    req(a.dtype == torch.float16, "A is not float16, currently only float16 is supported")
    groupsize = -1
    if scales.shape[0] > 1:
        req(size_k % scales.shape[0] == 0, f"size_k = {size_k}, is not divisible by "
            f"b_scales.size(0) = {scales.shape[0]}")
        groupsize = size_k // scales.shape[0] // 2
    req(groupsize in (-1, 64), f"Unexpected groupsize = {groupsize}")
    req(size_n % 128 == 0, f"size_n = {size_n}, is not divisible by min_thread_n = 128")
    req(workspace.numel() >= size_n // 128 * 64, f"workspace.numel = {workspace.numel()} is "
        f"below min_workspace_size = {size_n // 128 * 64}")
