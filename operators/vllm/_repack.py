"""The Marlin MoE repack problems (``gptq_marlin_moe_repack``, ``awq_marlin_moe_repack``):
per expert, GPTQ- or AWQ-packed 4/8-bit codes -> Marlin's tile-permuted words.

vLLM 0.13's Python wrappers assert ``size_k % 16 == 0`` (a bare ``AssertionError``), allocate
``[E, K/16, N*bits/2]`` int32 and call the per-expert C++ repack, whose checks raise
``RuntimeError``: "size_n = N is not divisible by tile_n_size = 64", "num_bits must be 4 or 8.
Got = b", and shape mismatches of ``b_q_weight`` against ``size_k``/``size_n``.

Codes come from real quantizations of float weights (per expert); benchmark-sized experts use
uniform codes, which a layout op cannot tell apart.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import ClassVar

import torch

from operators.inputs import HIDDEN_MAX_NUMEL
from operators.spec import Call, Case, Cost, Expected, Tier, case
from operators.vllm import _gemm, _marlin, _quant

KERNEL_SOURCE = r'''
@triton.jit
def _repack_kernel(src_ptr, perm_ptr, tab_ptr, out_ptr, N, row_words, n_words, src_stride,
                   perm_stride, BITS: tl.constexpr, AWQ: tl.constexpr,
                   HAS_PERM: tl.constexpr, A8: tl.constexpr, BLOCK_W: tl.constexpr):
    # One program: BLOCK_W consecutive output words of expert e (band row r = idx // row_words).
    e = tl.program_id(0).to(tl.int64)
    idx = tl.program_id(1) * BLOCK_W + tl.arange(0, BLOCK_W)
    wmask = idx < n_words
    r = idx // row_words
    w = idx % row_words
    PACK: tl.constexpr = 32 // BITS
    acc = tl.zeros((BLOCK_W,), dtype=tl.int32)
    for t in tl.static_range(PACK):
        p = w * PACK + t  # position in the permuted band row
        o = (p // 1024) * 1024 + tl.load(tab_ptr + p % 1024, mask=wmask, other=0)
        if A8:  # 32x16 tiles: band row r is half of the 32-row band r // 2
            f = (r % 2) * 16 * N + o
            k = (r // 2) * 32 + (f % 512) // 16
            n = (f // 512) * 16 + f % 16
        else:  # 16x16 tiles
            k = r * 16 + (o % 256) // 16
            n = (o // 256) * 16 + o % 16
        if HAS_PERM:
            k = tl.load(perm_ptr + e * perm_stride + k, mask=wmask, other=0)
        if AWQ:  # packed along N, AWQ's interleaved slots
            word = tl.load(src_ptr + e * src_stride + k.to(tl.int64) * (N // PACK) + n // PACK,
                           mask=wmask, other=0)
            c = n % PACK
            slot = c // 2 + (PACK // 2) * (c % 2)
        else:  # GPTQ: packed along K
            word = tl.load(src_ptr + e * src_stride + (k // PACK).to(tl.int64) * N + n,
                           mask=wmask, other=0)
            slot = k % PACK
        acc |= ((word >> (slot * BITS)) & ((1 << BITS) - 1)) << (t * BITS)
    tl.store(out_ptr + e * n_words + idx, acc, mask=wmask)


def _launch(src, perm, size_k, size_n, num_bits, is_a_8bit, awq):
    E = src.shape[0]
    row_words = 16 * size_n * num_bits // 32
    out = torch.empty((E, size_k // 16, row_words), dtype=torch.int32, device=src.device)
    if E == 0 or size_k == 0:
        return out
    tab = torch.tensor(_marlin_perm(num_bits, is_a_8bit), dtype=torch.int32, device=src.device)
    has_perm = perm.numel() > 0
    n_words = out[0].numel()
    BLOCK_W = 1024
    grid = (E, triton.cdiv(n_words, BLOCK_W))
    _repack_kernel[grid](src, perm, tab, out, size_n, row_words, n_words, src[0].numel(),
                         perm.shape[-1], BITS=num_bits, AWQ=awq,
                         HAS_PERM=has_perm, A8=bool(is_a_8bit), BLOCK_W=BLOCK_W)
    return out
'''

REAL_CODES_MAX = 1 << 23  # per expert: larger (benchmark) experts get uniform codes


class MoeRepack(_gemm.VllmSpec):
    """Shared cases, inputs, reference and cost; subclasses say how the source is packed."""

    entry: ClassVar[str]
    awq: ClassVar[bool]
    # (E, K, N, bits, act order, is_a_8bit)
    cpu_cases: ClassVar[tuple[tuple[int, int, int, int, bool, bool], ...]]
    full_cases: ClassVar[tuple[tuple[int, int, int, int, bool, bool], ...]]
    bench: ClassVar[tuple[tuple[int, int, int, int, bool, bool], ...]]

    def _case(self, e: int, k: int, n: int, bits: int, act: bool, a8: bool,
              cpu: bool = False) -> Case:
        params: dict[str, object] = {"bits": bits, "a8": a8}
        if not self.awq:
            params["act"] = act
        return case(self.entry, "int32", (e, k, n), cpu=cpu, **params)

    def cases(self) -> Sequence[Case]:
        return ([self._case(*c, cpu=True) for c in self.cpu_cases]
                + [self._case(*c) for c in self.full_cases])

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for bits in (4, 8):
            a8 = rng.random() < 0.3
            act = not a8 and not self.awq and rng.random() < 0.5
            e = rng.randrange(1, 4 if small else 65)
            k = (32 if a8 else 16) * rng.randrange(1, 5 if small else 129)
            n = 64 * rng.randrange(1, 3 if small else 48)
            while e * k * n > HIDDEN_MAX_NUMEL and e > 1:
                e = (e + 1) // 2
            k, n = _gemm.capped(k, n, 32 if a8 else 16, 64)
            out.append(self._case(e, k, n, bits, act, a8, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [self._case(*c) for c in self.bench]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        e, k, n = c.shape
        bits, a8 = int(c["bits"]), bool(c["a8"])
        src, perms = [], []
        for _ in range(e):
            codes, perm = self._expert_codes(k, n, bits, bool(c.get("act", False)), gen)
            src.append(self.pack_source(codes, bits))
            perms.append(perm)
        weights = torch.stack(src) if src else torch.empty(0, 0, 0, dtype=torch.int32)
        if c.get("act", False):
            perm_t = torch.stack(perms).to(torch.int32)
        else:
            perm_t = torch.empty(e, 0, dtype=torch.int32)
        return Call(c.entry, (weights, perm_t, k, n, bits, a8))

    def _expert_codes(self, k: int, n: int, bits: int, act: bool,
                      gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """One expert's ``[K, N]`` codes as its checkpoint stores them, and (act order) the
        sort permutation vLLM passes (``argsort(g_idx)``)."""
        if k * n > REAL_CODES_MAX:
            return (torch.randint(0, 1 << bits, (k, n), generator=gen, dtype=torch.int64),
                    torch.randperm(k, generator=gen))
        w = _quant.weights(k, n, gen)
        group = next((g for g in (128, 64, 32, 16) if k % g == 0 and g < k), k)
        if self.awq:
            qw = _quant.quantize_zp(w, bits, group, torch.float16)
        else:
            qw = _quant.quantize_sym(w, bits, group, torch.float16)
        if act:
            qw = _quant.shuffle_rows(qw, gen)
        return qw.codes, torch.argsort(qw.g_idx, stable=True)

    def pack_source(self, codes: torch.Tensor, bits: int) -> torch.Tensor:
        raise NotImplementedError

    def unpack_source(self, words: torch.Tensor, bits: int) -> torch.Tensor:
        raise NotImplementedError

    def reference(self, call: Call) -> tuple[Expected, ...]:
        return (Expected(self._repack(*call.args), torch.int32),)

    def _repack(self, weights: torch.Tensor, perm: torch.Tensor, size_k: int, size_n: int,
                bits: int, a8: bool) -> torch.Tensor:
        out = torch.empty(weights.shape[0], size_k // 16, size_n * bits // 2, dtype=torch.int32,
                          device=weights.device)
        for i in range(weights.shape[0]):
            q = self.unpack_source(weights[i], bits)
            if perm.shape[-1]:
                q = q[perm[i].to(torch.int64)]
            out[i] = _marlin.pack(q, bits, a8)
        return out

    def baseline(self, call: Call) -> object:
        weights, perm, size_k, size_n, bits, a8 = call.args
        ops = _gemm.vllm_ops(weights)
        if ops is not None:
            return getattr(ops, self.entry)(weights, perm, size_k, size_n, bits, a8)
        if size_k % 16:
            raise AssertionError
        _gemm.require(size_n % 64 == 0,
                      f"size_n = {size_n} is not divisible by tile_n_size = 64")
        _gemm.require(bits in (4, 8), f"num_bits must be 4 or 8. Got = {bits}")
        return self._repack(weights, perm, size_k, size_n, bits, a8)

    def cost(self, c: Case) -> Cost:
        e, k, n = c.shape
        words = e * k * n * int(c["bits"]) / 32
        return Cost(flops=0.0, bytes=8.0 * words + (4.0 * e * k if c.get("act") else 0.0),
                    dtype="int32")
