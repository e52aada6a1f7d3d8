"""aten::bmm — batched matrix product ``out[b] = self[b] @ mat2[b]`` (overloads default, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._matmul import FLOATS, KERNEL, TOLERANCES, dot_expected, element_size
from operators.inputs import randn, sprinkle_specials
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
    case,
)

SOLUTION = KERNEL + r'''

def bmm(self, mat2):
    out = torch.empty((self.shape[0], self.shape[1], mat2.shape[2]), dtype=self.dtype,
                      device=self.device)
    return _gemm(self, mat2, out)


def bmm_out(self, mat2, *, out):
    return _gemm(self, mat2, out)
'''

# Uses batch 0's strides for the batch dim of mat2 as if it were packed contiguously: right for
# contiguous mat2, wrong when mat2's batches are laid out otherwise (transposed, batch-inner).
NEGATIVE_PACKED_BATCH = SOLUTION.replace(
    "    sb = _pad3(b.stride()[:-2], 0)\n",
    "    sb = _pad3([K * N] * len(batch), 0)\n")

# Launches one batch's worth of tiles: right for a batch of one, wrong for every other batch.
NEGATIVE_FIRST_BATCH = SOLUTION.replace(
    "grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn) * nb,)",
    "grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)")


def _layout(shape: tuple[int, int, int], dt: str, gen: torch.Generator, layout: str
            ) -> torch.Tensor:
    """A (B, R, C) tensor laid out as asked: ``transposed`` stores each matrix column-major,
    ``batch_inner`` stores it as (R, B, C) (batch not outermost, as a permuted view is)."""
    if layout == "batch_inner":
        b, r, c = shape
        return randn((r, b, c), dt, gen).permute(1, 0, 2)
    return randn(shape, dt, gen, layout=layout)


@register("aten::bmm", version=1, kind=Kind.COMPUTE)
class Bmm(OperatorSpec):
    entry_points = (
        EntryPoint("bmm", "bmm(self: Tensor, mat2: Tensor) -> Tensor",
                   "The batched product self[b] @ mat2[b] of a (B, M, K) and a (B, K, N) tensor, "
                   "as (B, M, N)."),
        EntryPoint("bmm_out", "bmm_out(self: Tensor, mat2: Tensor, *, out: Tensor) -> Tensor",
                   "Writes bmm(self, mat2) into out (already (B, M, N), the inputs' dtype) and "
                   "returns out."),
    )
    description = (
        "Batched matrix multiplication following PyTorch's `torch.bmm`: `out[b, i, j] = sum_k "
        "self[b, i, k] * mat2[b, k, j]` for `self` of shape (B, M, K) and `mat2` of shape "
        "(B, K, N), both 3-D (no broadcasting) and of the same dtype (float16, bfloat16 or "
        "float32); the result has that dtype. Sizes need not be multiples of any block size; "
        "K may be 0 (the result is then all zeros) and B, M or N may be 0 (empty result). Either "
        "input may be non-contiguous in any dim: matrices stored column-major, or the batch dim "
        "not outermost (e.g. a permuted (M, B, K) tensor). Inputs may hold inf and NaN, which "
        "propagate as IEEE arithmetic says. Accumulate in float32 and round once. For float32 "
        "inputs use full float32 precision (as PyTorch does by default): no TF32, e.g. "
        "`tl.dot(..., input_precision=\"ieee\")`."
    )
    solution = SOLUTION
    negatives = (
        Negative("assumes_packed_batches", "steps through mat2's batches as if they were packed "
                 "contiguously (B, K, N), ignoring its batch stride", NEGATIVE_PACKED_BATCH),
        Negative("first_batch_only", "launches the tiles of one batch only, leaving the other "
                 "batches unwritten", NEGATIVE_FIRST_BATCH),
    )
    tolerances = TOLERANCES

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = []
        for dt in FLOATS:
            f32 = dt == "float32"
            cs += [
                case("bmm", dt, (3, 33, 45, 29), cpu=True),
                case("bmm", dt, (2, 17, 70, 31), layout_a="transposed", cpu=True),
                case("bmm", dt, (4, 9, 40, 23), layout_b="batch_inner", cpu=f32),
                case("bmm_out", dt, (3, 7, 17, 31), layout_b="transposed", cpu=dt != "float16"),
                case("bmm", dt, (1, 1, 200, 5), cpu=f32),
                case("bmm", dt, (16, 145, 63, 49)),
                case("bmm", dt, (8, 512, 768, 384)),
                case("bmm", dt, (5, 257, 1000, 129), layout_a="batch_inner",
                     layout_b="transposed"),
                case("bmm", dt, (64, 64, 128, 64), layout_a="transposed", layout_b="transposed"),
                case("bmm_out", dt, (2, 1000, 999, 1001)),
                case("bmm", dt, (1000, 1, 64, 1)),
            ]
        cs += [
            # K = 0: every output element is an empty sum, 0 (one element: validate's
            # informative check rejects larger outputs that are constant whatever the seed).
            case("bmm", "float32", (1, 1, 0, 1), cpu=True),
            case("bmm_out", "float32", (0, 5, 7, 3), cpu=True),
            # inf and NaN propagate (an inf row of self times mat2 gives inf / NaN entries).
            case("bmm", "float32", (2, 20, 32, 24), specials=True, cpu=True),
            case("bmm", "float16", (4, 100, 200, 100), specials=True),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        top = 40 if small else 700
        out = []
        for dt in FLOATS:
            if small and dt != "float32":
                continue
            b = rng.randrange(1, 4 if small else 12)
            m, k, n = (rng.randrange(1, top) for _ in range(3))
            la = rng.choice(["contiguous", "transposed", "batch_inner"])
            lb = rng.choice(["contiguous", "transposed", "batch_inner"])
            entry = rng.choice(["bmm", "bmm_out"])
            out.append(case(entry, dt, (b, m, k, n), layout_a=la, layout_b=lb, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            # 137 GFLOP each in half precision (~0.2 ms on an H200), 69 GFLOP in float32;
            # kept to ~32M input elements so building the inputs on the CPU stays quick.
            case("bmm", "bfloat16", (4, 4096, 1024, 4096)),
            case("bmm", "float16", (4, 4096, 1024, 4096)),
            case("bmm", "float32", (2, 4096, 1024, 4096)),
            # attention-score shaped: small K, output-bound (128 MB written)
            case("bmm", "bfloat16", (64, 1024, 64, 1024)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        b, m, k, n = c.shape
        a = _layout((b, m, k), c.dtype, gen, c.get("layout_a", "contiguous"))
        w = _layout((b, k, n), c.dtype, gen, c.get("layout_b", "contiguous"))
        if c.get("specials"):
            a = sprinkle_specials(a, gen, fraction=0.005)
        if c.entry == "bmm_out":
            out = torch.empty((b, m, n), dtype=a.dtype)
            return Call(c.entry, (a, w), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, (a, w))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        return (dot_expected(call.args[0], call.args[1]),)

    def baseline(self, call: Call) -> object:
        if call.entry == "bmm_out":
            return torch.bmm(call.args[0], call.args[1], out=call.kwargs["out"])
        return torch.bmm(call.args[0], call.args[1])

    def cost(self, c: Case) -> Cost:
        b, m, k, n = c.shape
        size = element_size(c.dtype)
        return Cost(flops=2.0 * b * m * n * k, bytes=float(size * b * (m * k + k * n + m * n)),
                    dtype=c.dtype)
