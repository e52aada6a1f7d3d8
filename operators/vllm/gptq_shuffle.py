"""vllm::gptq_shuffle — ``vllm._custom_ops.gptq_shuffle(q_weight, q_perm, bit)`` of vLLM 0.13.0:
rewrites a GPTQ weight in place into the layout ExLlama's kernels (``gptq_gemm`` with
``use_exllama=True``) read. Returns None; ``q_weight`` is the output.

``q_weight [K*bit/32, N]`` int32, GPTQ-packed along K (2/4/8-bit: value ``i`` of a word at
bits ``i*bit``; 3-bit: 32 values per 3 words, value ``i`` at bits ``3i..`` of the 96-bit
concatenation). ``q_perm``: int32 ``[K]`` (act order: vLLM passes ``argsort(g_idx)``) or an
empty tensor. Two steps, as ``shuffle_exllama_weight`` does them:

1. with ``q_perm`` non-empty, rows are made sequential: new row ``i`` = old row ``q_perm[i]``
   (``make_sequential_*bit_kernel``, through a temporary buffer);
2. every word block is re-laid out (``shuffle_{2,3,4,8}bit_*``): see
   :func:`operators.vllm._packing.exllama_layout` — 4-bit value ``v`` of a word goes to nibble
   ``v//2 + 4*(v%2)``, 2-bit value ``v`` to slot ``v//2 + 8*(v%2)``, 8-bit unchanged, 3-bit:
   values ``10w..10w+9`` in word ``w`` (even ones at bits 0,3,..,12, odd ones at 16,..,28), bit
   ``b`` of value 30 at bit 15 of word ``b``, bit ``b`` of value 31 at bit 31 of word ``b``.

vLLM 0.13 checks nothing here (a ``q_perm`` of the wrong length reads out of bounds; the 2/4/8-bit
sequentializer needs N even). The PyTorch baseline raises ``ValueError`` for a ``q_perm`` that
is neither empty nor ``[K]`` and for a ``q_weight`` whose rows are not a whole number of blocks.
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
    Out,
    Tier,
    case,
)
from operators.vllm import _gemm, _packing

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _code3(q_ptr, k, cols, N, mask):
    # 3-bit value of row k in the plain GPTQ packing: bits 3*(k%32).. of words 3*(k//32)+0..2.
    base = q_ptr + ((k // 32) * 3).to(tl.int64) * N + cols
    w0 = tl.load(base, mask=mask, other=0)
    w1 = tl.load(base + N, mask=mask, other=0)
    w2 = tl.load(base + 2 * N, mask=mask, other=0)
    bit = 3 * (k % 32)
    wi = bit // 32
    sh = bit % 32
    lo_n = tl.minimum(32 - sh, 3)
    first = tl.where(wi == 0, w0, tl.where(wi == 1, w1, w2))
    second = tl.where(wi == 0, w1, w2)
    return ((first >> sh) & ((1 << lo_n) - 1)) | ((second << lo_n) & 7)


@triton.jit
def _put3(o0, o1, o2, code, v: tl.constexpr):
    # ExLlama's 3-bit words: values 10w..10w+9 in word w (even ones at bits 0,3,..,12, odd ones
    # at 16,..,28); bit b of value 30 (31) goes to bit 15 (31) of word b.
    if v < 30:
        r = v % 10
        sh = 16 * (r % 2) + 3 * (r // 2)
        if v // 10 == 0:
            o0 |= code << sh
        elif v // 10 == 1:
            o1 |= code << sh
        else:
            o2 |= code << sh
    else:
        pos = 15 + 16 * (v - 30)
        o0 |= (code & 1) << pos
        o1 |= ((code >> 1) & 1) << pos
        o2 |= ((code >> 2) & 1) << pos
    return o0, o1, o2


@triton.jit
def _shuffle_kernel(q_ptr, perm_ptr, out_ptr, N, n_blocks,
                    BITS: tl.constexpr, HAS_PERM: tl.constexpr,
                    BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr):
    # One tile: BLOCK_B word blocks x BLOCK_N columns of the output.
    pid_b = tl.program_id(0)
    pid_n = tl.program_id(1)
    blk = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (blk < n_blocks)[:, None] & (cols < N)[None, :]
    if BITS == 3:
        o0 = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.int32)
        o1 = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.int32)
        o2 = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.int32)
        for v in tl.static_range(32):
            k = blk * 32 + v
            if HAS_PERM:
                k = tl.load(perm_ptr + k, mask=blk < n_blocks, other=0)
            code = _code3(q_ptr, k[:, None], cols[None, :], N, mask)
            o0, o1, o2 = _put3(o0, o1, o2, code, v)
        dst = out_ptr + (blk * 3)[:, None].to(tl.int64) * N + cols[None, :]
        tl.store(dst, o0, mask=mask)
        tl.store(dst + N, o1, mask=mask)
        tl.store(dst + 2 * N, o2, mask=mask)
    else:
        PACK: tl.constexpr = 32 // BITS
        out = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.int32)
        for v in tl.static_range(PACK):
            k = blk * PACK + v
            if HAS_PERM:
                k = tl.load(perm_ptr + k, mask=blk < n_blocks, other=0)
            word = tl.load(q_ptr + (k // PACK)[:, None].to(tl.int64) * N + cols[None, :],
                           mask=mask, other=0)
            code = (word >> ((k % PACK) * BITS)[:, None]) & ((1 << BITS) - 1)
            if BITS == 8:
                slot = v
            else:
                slot = v // 2 + (PACK // 2) * (v % 2)
            out |= code << (slot * BITS)
        tl.store(out_ptr + blk[:, None].to(tl.int64) * N + cols[None, :], out, mask=mask)


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=m), mask=m)


def gptq_shuffle(q_weight, q_perm, bit):
    rows, N = q_weight.shape
    if rows == 0 or N == 0:
        return None
    words_per_block = 3 if bit == 3 else 1
    n_blocks = rows // words_per_block
    tmp = torch.empty_like(q_weight)
    BLOCK_B, BLOCK_N = 4, 64
    grid = (triton.cdiv(n_blocks, BLOCK_B), triton.cdiv(N, BLOCK_N))
    _shuffle_kernel[grid](q_weight, q_perm, tmp, N, n_blocks, BITS=bit,
                          HAS_PERM=q_perm.numel() > 0, BLOCK_B=BLOCK_B, BLOCK_N=BLOCK_N)
    n = q_weight.numel()
    _copy_kernel[(triton.cdiv(n, 1024),)](tmp, q_weight, n, BLOCK=1024)
    return None
'''

# Never makes the rows sequential: right only without act order (empty q_perm).
NEGATIVE_NO_PERM = SOLUTION.replace("HAS_PERM=q_perm.numel() > 0", "HAS_PERM=False")

# Makes the rows sequential but keeps the plain bit layout: right only for 8-bit weights, whose
# shuffle is the identity.
NEGATIVE_NO_BITS = SOLUTION.replace("""            if BITS == 8:
                slot = v""", """            if True:
                slot = v""").replace("o0, o1, o2 = _put3(o0, o1, o2, code, v)",
                                     "o0, o1, o2 = _put3_plain(o0, o1, o2, code, v)") + r'''

@triton.jit
def _put3_plain(o0, o1, o2, code, v: tl.constexpr):
    # GPTQ's own 3-bit packing: value v at bits 3v.. of the 96-bit concatenation.
    bit = 3 * v
    if bit // 32 == 0:
        o0 |= code << (bit % 32)
        if bit % 32 > 29:
            o1 |= code >> (32 - bit % 32)
    elif bit // 32 == 1:
        o1 |= code << (bit % 32)
        if bit % 32 > 29:
            o2 |= code >> (32 - bit % 32)
    else:
        o2 |= code << (bit % 32)
    return o0, o1, o2
'''

_PROD = (  # (K, N, bits, act order)
    (4096, 11008, 4, True), (11008, 4096, 4, False), (14336, 4096, 8, True),
    (4096, 4096, 3, True), (4096, 4096, 2, False), (4096, 14336, 4, True),
)


@register("vllm::gptq_shuffle", version=1, kind=Kind.COMPUTE)
class GptqShuffle(_gemm.VllmSpec):
    entry_points = (
        EntryPoint(
            "gptq_shuffle",
            "gptq_shuffle(q_weight: Tensor, q_perm: Tensor, bit: int) -> None",
            "Rewrites q_weight in place into ExLlama's layout (rows made sequential by "
            "q_perm when it is not empty, then each word's bits re-laid out).",
        ),
    )
    description = (
        "vLLM 0.13's `gptq_shuffle(q_weight, q_perm, bit)`: rewrite a GPTQ weight in place "
        "into the layout ExLlama's GEMM kernels read; return None. `q_weight` is int32 "
        "`[K*bit/32, N]` (contiguous, K % 32 == 0, N even), packed along K: for bit 2/4/8, "
        "word row j holds the codes of rows `j*(32/bit) + i` at bits `i*bit ..` (treat words "
        "as unsigned bit patterns); for bit 3, each 32 rows use 3 word rows w0, w1, w2 and "
        "value i (row 32b + i) sits at bits `3i .. 3i+2` of `w0 | w1 << 32 | w2 << 64` "
        "(values 10 and 21 straddle two words). `q_perm` is int32 `[K]` (act order) or an "
        "empty tensor; `bit` is 2, 3, 4 or 8.\n"
        "Step 1, only when `q_perm` has elements: make the rows sequential, new code row i = "
        "old code row `q_perm[i]` (a full permutation of the unpacked K rows; read every "
        "source before overwriting: use a temporary buffer).\n"
        "Step 2: re-lay out each word block, still packed along K. 8-bit: unchanged. 4-bit: "
        "the value v (0..7) of a word moves to nibble `v//2 + 4*(v%2)` (even values in "
        "nibbles 0-3, odd ones in nibbles 4-7). 2-bit: value v (0..15) moves to 2-bit slot "
        "`v//2 + 8*(v%2)`. 3-bit: in each 3-word block (32 values), values `10w .. 10w+9` go "
        "to word w, value `10w + r` at bits `16*(r%2) + 3*(r//2) ..` (r even: bits 0,3,6,9,12; "
        "r odd: bits 16,19,22,25,28), and bit b of value 30 goes to bit 15 of word b, bit b "
        "of value 31 to bit 31 of word b (b = 0, 1, 2).\n"
        "`q_weight` holds the result when the call returns; do not modify `q_perm`."
    )
    solution = SOLUTION
    negatives = (
        Negative("no_row_perm", "never makes the rows sequential (ignores q_perm)",
                 NEGATIVE_NO_PERM),
        Negative("no_bit_shuffle", "makes the rows sequential but keeps GPTQ's plain bit "
                 "layout (right only for 8-bit)", NEGATIVE_NO_BITS),
    )

    def cases(self) -> Sequence[Case]:
        cs = [
            case("gptq_shuffle", "int32", (64, 64), bits=4, act=True, cpu=True),
            case("gptq_shuffle", "int32", (128, 98), bits=4, act=False, cpu=True),
            case("gptq_shuffle", "int32", (64, 64), bits=8, act=True, cpu=True),
            case("gptq_shuffle", "int32", (32, 40), bits=8, act=False, cpu=True),
            case("gptq_shuffle", "int32", (96, 32), bits=3, act=True, cpu=True),
            case("gptq_shuffle", "int32", (64, 66), bits=2, act=False, cpu=True),
        ]
        cs += [case("gptq_shuffle", "int32", (k, n), bits=b, act=a) for k, n, b, a in _PROD]
        cs += [case("gptq_shuffle", "int32", (2048, 1408), bits=3, act=False),
               case("gptq_shuffle", "int32", (1024, 2050), bits=2, act=True)]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for bits in ((rng.choice([2, 4]), 3) if small else (2, 3, 4, 8)):
            k = 32 * rng.randrange(1, 4 if small else 200)
            n = 2 * rng.randrange(1, 40 if small else 3000)
            k, n = _gemm.capped(k, n, 32, 2)
            out.append(case("gptq_shuffle", "int32", (k, n), bits=bits,
                            act=rng.random() < 0.6, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("gptq_shuffle", "int32", (14336, 28672), bits=4, act=True),
            case("gptq_shuffle", "int32", (14336, 28672), bits=4, act=False),
            case("gptq_shuffle", "int32", (8192, 14336), bits=8, act=True),
            case("gptq_shuffle", "int32", (8192, 28672), bits=3, act=True),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        k, n = c.shape
        bits = int(c["bits"])
        codes = torch.randint(0, 1 << bits, (k, n), generator=gen, dtype=torch.int64)
        q_weight = _packing.pack_rows(codes, bits)
        perm = (torch.randperm(k, generator=gen) if c["act"]
                else torch.empty(0, dtype=torch.int64)).to(torch.int32)
        return Call(c.entry, (q_weight, perm, bits), outputs=(Out.arg(0),),
                    mutable=frozenset({0}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        q_weight, perm, bits = call.args
        return (Expected(_packing.exllama_shuffle(q_weight, perm, bits), torch.int32),)

    def baseline(self, call: Call) -> object:
        q_weight, perm, bits = call.args
        ops = _gemm.vllm_ops(q_weight)
        if ops is not None:
            ops.gptq_shuffle(q_weight, perm, bits)
            return None
        block = 3 if bits == 3 else 1
        _gemm.require(bits in (2, 3, 4, 8), f"bit must be 2, 3, 4 or 8, got {bits}", ValueError)
        _gemm.require(q_weight.shape[0] % block == 0,
                      f"q_weight has {q_weight.shape[0]} rows, not whole 3-word blocks",
                      ValueError)
        k = q_weight.shape[0] * 32 // bits
        _gemm.require(perm.numel() in (0, k),
                      f"q_perm has {perm.numel()} elements, expected 0 or K = {k}", ValueError)
        q_weight.copy_(_packing.exllama_shuffle(q_weight, perm, bits))
        return None

    def cost(self, c: Case) -> Cost:
        k, n = c.shape
        words = k * n * int(c["bits"]) / 32
        return Cost(flops=0.0, bytes=8.0 * words + (4.0 * k if c["act"] else 0.0),
                    dtype="int32")
