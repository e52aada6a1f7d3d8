"""What ``ggml_mul_mat_vec_a8`` (MMVQ) and ``ggml_mul_mat_a8`` (MMQ) share: one op
``Y = Q8_1(X) @ dequant(W).T`` with ``W`` [row, bytes], ``X`` [M, K] contiguous; the two differ
in vLLM's kernel (and so in the accepted vLLM form, see :mod:`operators.vllm._ggml_a8`) and in
the row counts they serve (decode vs prefill). Each problem sets the tables of its cases."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from operators.spec import Call, Case, Cost, Expected, Tier, case
from operators.vllm import _ggml as G
from operators.vllm._ggml_a8 import (
    GgmlA8Spec,
    a8_cost,
    a8_expected,
    activations,
    torch_dequant,
    torch_q8_1,
    weights,
)
from operators.vllm._vllm_ops import vllm_ops

TYPES = tuple(G.TYPES)
DTYPES = ("float16", "bfloat16", "float32")
VARIANTS = ("normal", "normal", "ties", "small")


class DenseA8Spec(GgmlA8Spec):
    """Cases from ``CPU`` (type, dtype, M, N, K, variant), ``FULL`` (M, N, K: every type, the
    third with tie-heavy activations), ``BENCH`` (type, dtype, M, N, K) and the hidden M range;
    shape (M, N, K)."""

    MMQ: ClassVar[bool]
    ENTRY: ClassVar[str]
    CPU: ClassVar[tuple[tuple[Any, ...], ...]]
    FULL: ClassVar[tuple[tuple[int, int, int], ...]]
    BENCH: ClassVar[tuple[tuple[Any, ...], ...]]
    HIDDEN_M: ClassVar[tuple[int, int]]

    def _case(self, qtype: int, dt: str, m: int, n: int, k: int, variant: str = "normal", *,
              cpu: bool = False) -> Case:
        return case(self.ENTRY, dt, (m, n, k), quant_type=G.name(qtype), x=variant, cpu=cpu)

    def cases(self) -> Sequence[Case]:
        cs = [self._case(qt, dt, m, n, k, v, cpu=True) for qt, dt, m, n, k, v in self.CPU]
        # Two dtypes per type (each dtype still meets most types): every (type, dtype) pair is
        # a kernel variant a candidate compiles within the correctness stage's budget, and all
        # thirty made ggml_mul_mat_a8's reference run past it on an H100 under load.
        for i, qt in enumerate(TYPES):
            for j, (m, n, k) in enumerate(self.FULL):
                cs.append(self._case(qt, DTYPES[(i + j // 2) % 3], m, n, k,
                                     "ties" if j == 2 else "normal"))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(2 if small else 6):
            qt = rng.choice(TYPES)
            qk = G.block_elems(qt)
            k = qk * rng.randrange(1, (256 // qk + 1) if small else 4096 // qk)
            m = rng.randrange(1, 4) if small else rng.randrange(*self.HIDDEN_M)
            n = rng.randrange(1, 40 if small else 2000)
            out.append(self._case(qt, rng.choice(DTYPES), m, n, k, rng.choice(VARIANTS),
                                  cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [self._case(qt, dt, m, n, k) for qt, dt, m, n, k in self.BENCH]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        qt = G.NAMES[c["quant_type"]]
        m, n, k = c.shape
        w = weights((n, k), qt, gen)
        x = activations(m, k, c.torch_dtype, gen, c["x"])
        return Call(c.entry, (w, x, qt, n))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        w, x, qt, _ = call.args
        return (a8_expected(x, w, qt, mmq=self.MMQ),)

    def baseline(self, call: Call) -> object:
        w, x, qt, row = call.args
        ops = vllm_ops(x)
        if ops is not None:
            return getattr(ops, self.ENTRY)(w, x, qt, row)
        G.check_type(qt)
        return (torch_q8_1(x) @ torch_dequant(w, qt, x.shape[1]).T).to(x.dtype)

    def cost(self, c: Case) -> Cost:
        m, n, k = c.shape
        qt = G.NAMES[c["quant_type"]]
        return a8_cost(m * n * k, n * G.row_bytes(qt, k), m * k, m * n, c.torch_dtype)
