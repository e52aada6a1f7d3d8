"""What vLLM's GGML MoE problems (``ggml_moe_a8``, ``ggml_moe_a8_vec``) share: routing inputs,
vLLM's block alignment of the routed rows, the per-expert reference and the cost model.

Both compute, for every routed pair ``z = token * top_k + slot`` (flat index into
``topk_ids``), ``Y[z] = Q8_1(X[z // top_k]) . W[expert(z)]`` with ``W`` a contiguous expert
stack ``[E, N, row_bytes]``; the reference evaluates each expert's rows with the dense
reference of :mod:`operators.vllm._ggml_a8`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from operators.spec import Case, Cost, Expected, Tier, case
from operators.vllm import _ggml as G
from operators.vllm._ggml_a8 import (
    Q81,
    GgmlA8Spec,
    a8_cost,
    a8_expected_rows,
    q8_1,
    torch_dequant,
    torch_q8_1,
)
from operators.vllm._ggml_dense import DTYPES, VARIANTS

# ggml_moe_get_block_size(type) on CUDA in vLLM 0.13 (moe.cuh: MOE_X_* = 4 for every type).
MOE_BLOCK = 4


def routing(tokens: int, top_k: int, experts: int, gen: torch.Generator,
            kind: str = "skewed") -> torch.Tensor:
    """int32 ``[tokens, top_k]`` distinct experts per token. ``skewed``: drawn by Zipf-like
    popularity (a few hot experts, as real routers give); ``balanced``: every expert gets the
    same share (the benchmark's unique-byte count depends on it)."""
    if kind == "balanced":
        slots = torch.arange(tokens * top_k).reshape(tokens, top_k) % experts
        return torch.randperm(experts, generator=gen)[slots].to(torch.int32)
    pop = 1.0 / torch.arange(1, experts + 1, dtype=torch.float64) ** 1.1
    pop = pop[torch.randperm(experts, generator=gen)]
    ids = torch.multinomial(pop.expand(tokens, experts), top_k, replacement=False, generator=gen)
    return ids.to(torch.int32)


def align(topk_ids: torch.Tensor, experts: int, block: int, gen: torch.Generator,
          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """vLLM 0.13's ``moe_align_block_size(topk_ids, block, experts)`` result: each expert's
    flat pair indices (in an arbitrary order, as its atomics leave them) padded with the
    sentinel ``topk_ids.numel()`` to a multiple of ``block``; ``sorted_token_ids`` of length
    ``numel + experts * (block - 1)`` (sentinel-filled tail), ``expert_ids`` per block (-1 past
    the used blocks), ``num_tokens_post_padded`` [1]."""
    flat = topk_ids.reshape(-1).to(torch.int64)
    numel = flat.numel()
    max_padded = numel + experts * (block - 1)
    if numel < experts:
        max_padded = min(numel * block, max_padded)
    sorted_ids = torch.full((max_padded,), numel, dtype=torch.int32)
    expert_ids = torch.full(((max_padded + block - 1) // block,), -1, dtype=torch.int32)
    pos = 0
    for e in range(experts):
        ids = torch.nonzero(flat == e)[:, 0]
        if ids.numel() == 0:
            continue
        ids = ids[torch.randperm(ids.numel(), generator=gen)]
        sorted_ids[pos:pos + ids.numel()] = ids.to(torch.int32)
        nblk = (ids.numel() + block - 1) // block
        expert_ids[pos // block:pos // block + nblk] = e
        pos += nblk * block
    return sorted_ids, expert_ids, torch.tensor([pos], dtype=torch.int32)


def _rows(a: Q81, idx: torch.Tensor) -> Q81:
    return Q81(a.q[idx], a.dh[idx], a.sh[idx], a.tie[idx], a.d_amb[idx], a.s_amb[idx])


def moe_expected(x: torch.Tensor, w: torch.Tensor, pairs: torch.Tensor, top_k: int, qtype: int,
                 mmq: bool) -> Expected:
    """``Y[z] = Q8_1(X[z // top_k]) . W[pairs[z]]`` for every flat pair z, with the dense bound."""
    k = x.shape[1]
    n = w.shape[1]
    a = q8_1(x)
    pairs = pairs.reshape(-1).to(torch.int64)
    value = torch.zeros(pairs.numel(), n, dtype=torch.float64, device=x.device)
    bound = torch.zeros_like(value)
    for e in torch.unique(pairs).tolist():
        z = torch.nonzero(pairs == e)[:, 0]
        v, b = a8_expected_rows(_rows(a, z // top_k), w[e], qtype, k, x.dtype, mmq)
        value[z] = v
        bound[z] = b
    return Expected(value, x.dtype, bound)


def torch_moe(x: torch.Tensor, w: torch.Tensor, pairs: torch.Tensor, top_k: int, qtype: int,
              row: int) -> torch.Tensor:
    """The PyTorch baseline: each used expert's weight dequantized once, its rows multiplied."""
    G.check_type(qtype)
    xq = torch_q8_1(x)
    y = torch.zeros(pairs.numel(), row, dtype=x.dtype, device=x.device)
    for e in torch.unique(pairs).tolist():
        z = torch.nonzero(pairs == e)[:, 0]
        y[z] = (xq[z // top_k] @ torch_dequant(w[e], qtype, x.shape[1]).T).to(x.dtype)
    return y


def pairs_from_sorted(sorted_ids: torch.Tensor, expert_ids: torch.Tensor, post_padded: int,
                      block: int, numel: int) -> torch.Tensor:
    """The expert of every flat pair, read back from the aligned layout (the reference of
    ggml_moe_a8 uses only what the op is given)."""
    pairs = torch.full((numel,), -1, dtype=torch.int64, device=sorted_ids.device)
    ids = sorted_ids[:post_padded].to(torch.int64)
    exp = expert_ids.to(torch.int64).repeat_interleave(block)[:post_padded]
    real = ids < numel
    pairs[ids[real]] = exp[real]
    return pairs


def moe_cost(tokens: int, top_k: int, experts: int, n: int, k: int, qtype: int,
             dtype: torch.dtype, balanced: bool, routing_bytes: float) -> Cost:
    """Every pair's dot products; bytes: the weights of the experts used (all ``min(E,
    tokens * top_k)`` under balanced routing, else the ``top_k`` a token must use at least),
    the activations, the outputs and the routing metadata."""
    used = min(experts, tokens * top_k) if balanced else top_k
    pairs = tokens * top_k
    return a8_cost(pairs * n * k, used * n * G.row_bytes(qtype, k) + routing_bytes,
                   tokens * k, pairs * n, dtype)


class MoeA8Spec(GgmlA8Spec):
    """Cases of the two MoE problems from ``CPU`` (type, dtype, tokens, top_k, experts, N, K,
    variant, second layer), ``FULL`` (tokens, top_k, experts, N, K, second layer: every type,
    the third with tie-heavy activations), ``BENCH`` (type, dtype, tokens, top_k, experts, N, K,
    second layer; balanced routing) and the hidden ranges; shape (tokens, top_k, experts, N,
    K). A second-layer case is vLLM's down projection: one X row per routed pair, top_k 1."""

    ENTRY: ClassVar[str]
    CPU: ClassVar[tuple[tuple[Any, ...], ...]]
    FULL: ClassVar[tuple[tuple[Any, ...], ...]]
    BENCH: ClassVar[tuple[tuple[Any, ...], ...]]
    HIDDEN_TOKENS: ClassVar[int]
    HIDDEN_EXPERTS: ClassVar[int]

    def _case(self, qtype: int, dt: str, tokens: int, top_k: int, experts: int, n: int, k: int,
              variant: str = "normal", second: bool = False, routing_kind: str = "skewed", *,
              cpu: bool = False) -> Case:
        return case(self.ENTRY, dt, (tokens, top_k, experts, n, k), quant_type=G.name(qtype),
                    x=variant, second_layer=second, routing=routing_kind, cpu=cpu)

    def cases(self) -> Sequence[Case]:
        cs = [self._case(*row[:9], cpu=True) for row in self.CPU]
        for i, qt in enumerate(G.TYPES):
            for j, (t, kk, e, n, k, s) in enumerate(self.FULL):
                cs.append(self._case(qt, DTYPES[(i + j) % 3], t, kk, e, n, k,
                                     "ties" if j == 2 else "normal", s))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(2 if small else 5):
            qt = rng.choice(tuple(G.TYPES))
            qk = G.block_elems(qt)
            k = qk * rng.randrange(1, (256 // qk + 1) if small else 2048 // qk)
            e = rng.randrange(2, 6 if small else self.HIDDEN_EXPERTS + 1)
            kk = rng.randrange(1, min(e, 3 if small else 9) + 1)
            tokens = rng.randrange(1, 4 if small else self.HIDDEN_TOKENS)
            out.append(self._case(qt, rng.choice(DTYPES), tokens, kk, e,
                                  rng.randrange(1, 40 if small else 400), k,
                                  rng.choice(VARIANTS), rng.random() < 0.3, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [self._case(qt, dt, t, kk, e, n, k, "normal", s, "balanced")
                for qt, dt, t, kk, e, n, k, s in self.BENCH]

    def routing_bytes(self, pairs: int, experts: int) -> float:
        """Bytes of the routing metadata the op reads."""
        raise NotImplementedError

    def cost(self, c: Case) -> Cost:
        tokens, top_k, experts, n, k = c.shape
        meta = self.routing_bytes(tokens * top_k, experts)
        if c["second_layer"]:
            tokens, top_k = tokens * top_k, 1
        return moe_cost(tokens, top_k, experts, n, k, G.NAMES[c["quant_type"]], c.torch_dtype,
                        c["routing"] == "balanced", meta)
