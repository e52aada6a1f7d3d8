"""aten::matmul — ``torch.matmul``'s product of 1-D, 2-D and batched tensors with broadcast batch
dims (overloads default, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._matmul import FLOATS, KERNEL, TOLERANCES, dot_expected, element_size
from operators.inputs import broadcast_shapes, randn
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

def _out_shape(self, other):
    da, db = self.dim(), other.dim()
    if da == 0 or db == 0:
        raise ValueError("both arguments to matmul need to be at least 1-D")
    a = self.unsqueeze(0) if da == 1 else self
    b = other.unsqueeze(-1) if db == 1 else other
    batch = list(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    return batch + ([a.shape[-2]] if da > 1 else []) + ([b.shape[-1]] if db > 1 else [])


def _matmul(self, other, out):
    da, db = self.dim(), other.dim()
    a = self.unsqueeze(0) if da == 1 else self           # (..., M, K)
    b = other.unsqueeze(-1) if db == 1 else other        # (..., K, N)
    c = out.unsqueeze(-1) if db == 1 else out            # (..., M, N)
    c = c.unsqueeze(-2) if da == 1 else c
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if b.dim() == 2 and a.dim() > 2:
        # (..., M, K) @ (K, N): fold the batch dims into M when a and out allow it (no copy).
        a2, c2 = _merge_rows(a), _merge_rows(c)
        if a2 is not None and c2 is not None:
            return _gemm(a2, b, c2)
    batch = list(c.shape[:-2])
    a = a.expand(*batch, M, K)    # broadcast batch dims get stride 0
    b = b.expand(*batch, K, N)
    return _gemm(a, b, c)


def matmul(self, other):
    out = torch.empty(_out_shape(self, other), dtype=self.dtype, device=self.device)
    _matmul(self, other, out)
    return out


def matmul_out(self, other, *, out):
    _matmul(self, other, out)
    return out
'''

# Folds the batch dims of self into M assuming each matrix follows the previous one in memory
# (row r of the fold at r * stride(-2)): right for contiguous self, wrong for transposed
# (column-major) matrices, whose batches are not spaced M rows apart.
NEGATIVE_NAIVE_FOLD = SOLUTION.replace(
    "        a2, c2 = _merge_rows(a), _merge_rows(c)\n",
    "        rows = a.numel() // K if K else 0\n"
    "        a2 = a.as_strided((rows, K), (a.stride(-2), a.stride(-1)))\n"
    "        c2 = _merge_rows(c)\n")

# Keeps the unit row dim of a 1-D self in the result ((K,) @ (B, K, N) -> (B, 1, N)): right
# when self has 2 or more dims.
NEGATIVE_KEEPS_ROW_DIM = SOLUTION.replace(
    "    return batch + ([a.shape[-2]] if da > 1 else []) + ([b.shape[-1]] if db > 1 else [])",
    "    return batch + [a.shape[-2]] + ([b.shape[-1]] if db > 1 else [])").replace(
    "    c = c.unsqueeze(-2) if da == 1 else c\n", "")


@register("aten::matmul", version=1, kind=Kind.COMPUTE)
class Matmul(OperatorSpec):
    entry_points = (
        EntryPoint("matmul", "matmul(self: Tensor, other: Tensor) -> Tensor",
                   "The matrix product self @ other with torch.matmul's rules for 1-D, 2-D and "
                   "batched operands."),
        EntryPoint("matmul_out", "matmul_out(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor",
                   "Writes matmul(self, other) into out (already of the result shape, the inputs' "
                   "dtype) and returns out."),
    )
    description = (
        "Matrix product following PyTorch's `torch.matmul(self, other)`, both of the same dtype "
        "(float16, bfloat16 or float32); the result has that dtype. By the operands' dims: 1-D "
        "and 1-D is the dot product (a 0-d result); 2-D and 2-D the matrix product; 1-D self "
        "(K,) is treated as a (1, K) row whose dim is removed from the result; 1-D other (K,) "
        "as a (K, 1) column whose dim is removed; when either has 3 or more dims the leading "
        "(batch) dims broadcast against each other (size-1 or missing dims repeat) and the last "
        "two are multiplied: e.g. (2, 1, M, K) @ (3, K, N) -> (2, 3, M, N), (B, M, K) @ (K, N) "
        "-> (B, M, N), (K,) @ (B, K, N) -> (B, N). Operands have at most 5 dims. Sizes need "
        "not be multiples of any block size; K may be 0 (zeros) and any other size may be 0 "
        "(empty result). Inputs may be non-contiguous (e.g. transposed). Accumulate in float32 "
        "and round once. For float32 inputs use full float32 precision (as PyTorch does by "
        "default): no TF32, e.g. `tl.dot(..., input_precision=\"ieee\")`."
    )
    solution = SOLUTION
    negatives = (
        Negative("naive_batch_fold", "folds self's batch dims into M as if its matrices were "
                 "stored one after another row-major, wrong for transposed self",
                 NEGATIVE_NAIVE_FOLD),
        Negative("keeps_vector_row_dim", "keeps the (1, K) row dim of a 1-D self in the result "
                 "shape instead of removing it", NEGATIVE_KEEPS_ROW_DIM),
    )
    tolerances = TOLERANCES

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = []
        for dt in FLOATS:
            f32 = dt == "float32"
            cs += [
                case("matmul", dt, (33, 70), b=(70, 45), cpu=True),
                case("matmul", dt, (3, 17, 40), b=(40, 19), layout_b="transposed", cpu=True),
                case("matmul", dt, (2, 1, 9, 20), b=(3, 20, 11), cpu=f32),
                case("matmul_out", dt, (4, 12, 30), b=(4, 30, 14), layout_a="transposed",
                     cpu=dt != "float16"),
                case("matmul", dt, (20,), b=(4, 20, 13), cpu=f32),
                case("matmul", dt, (47, 53), b=(53,), cpu=f32),
                case("matmul", dt, (45,), b=(45, 29), cpu=dt == "bfloat16"),
                case("matmul", dt, (1000,), b=(1000,)),
                case("matmul", dt, (1000, 999), b=(999, 1001)),
                case("matmul", dt, (8, 257, 512), b=(512, 384)),
                case("matmul", dt, (4, 300, 64), b=(64, 300), layout_a="transposed"),
                case("matmul", dt, (4, 1, 128, 256), b=(1, 6, 256, 64), layout_b="transposed"),
                case("matmul", dt, (2, 3, 2, 63, 145), b=(3, 1, 145, 49)),
                case("matmul", dt, (4096,), b=(4096, 1000)),
                case("matmul", dt, (7, 1000, 999), b=(999,)),
                case("matmul_out", dt, (2, 512, 768), b=(2, 768, 1024)),
            ]
        cs += [
            case("matmul", "float32", (37,), b=(37,), cpu=True),
            case("matmul", "float32", (5, 33, 17), b=(17,), layout_a="transposed", cpu=True),
            case("matmul", "float32", (3, 1, 2, 6, 10), b=(2, 1, 10, 7), cpu=True),
            # (B, M, K) with transposed matrices cannot fold into one (B*M, K) matrix
            case("matmul_out", "float32", (3, 40, 17), b=(17, 9), layout_a="transposed",
                 cpu=True),
            # K = 0 (the one element is an empty sum, 0) and an empty batch
            case("matmul", "float32", (0,), b=(0,), cpu=True),
            case("matmul", "float32", (0, 5, 7), b=(7, 3), cpu=True),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        top = 40 if small else 600
        out = []
        for dt in FLOATS:
            if small and dt != "float32":
                continue
            m, k, n = (rng.randrange(1, top) for _ in range(3))
            form = rng.choice(["mm", "mv", "vm", "bmm", "broadcast", "fold"])
            nb = rng.randrange(1, 4 if small else 8)
            a_shape: tuple[int, ...]
            b_shape: tuple[int, ...]
            if form == "mm":
                a_shape, b_shape = (m, k), (k, n)
            elif form == "mv":
                a_shape, b_shape = (nb, m, k), (k,)
            elif form == "vm":
                a_shape, b_shape = (k,), (nb, k, n)
            elif form == "bmm":
                a_shape, b_shape = (nb, m, k), (nb, k, n)
            elif form == "broadcast":
                a_shape, b_shape = (nb, 1, m, k), (2, k, n)
            else:
                a_shape, b_shape = (nb, 2, m, k), (k, n)
            la = rng.choice(["contiguous", "transposed"])
            lb = rng.choice(["contiguous", "transposed"])
            entry = rng.choice(["matmul", "matmul_out"])
            out.append(case(entry, dt, a_shape, b=b_shape, layout_a=la, layout_b=lb, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            # 137 GFLOP in half precision (~0.2 ms on an H200), 4096-scale in every dtype
            case("matmul", "bfloat16", (4096, 4096), b=(4096, 4096)),
            case("matmul", "float16", (4, 1024, 4096), b=(4096, 4096)),
            case("matmul", "float32", (4096, 4096), b=(4096, 4096)),
            case("matmul", "bfloat16", (2, 1, 2048, 4096), b=(4, 4096, 1024)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        a = randn(c.shape, c.dtype, gen, layout=c.get("layout_a", "contiguous"))
        b = randn(c["b"], c.dtype, gen, layout=c.get("layout_b", "contiguous"))
        if c.entry == "matmul_out":
            shape = torch.matmul(torch.empty(a.shape, dtype=torch.float64, device="meta"),
                                 torch.empty(b.shape, dtype=torch.float64, device="meta")).shape
            out = torch.empty(shape, dtype=a.dtype)
            return Call(c.entry, (a, b), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, (a, b))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        return (dot_expected(call.args[0], call.args[1]),)

    def baseline(self, call: Call) -> object:
        if call.entry == "matmul_out":
            return torch.matmul(call.args[0], call.args[1], out=call.kwargs["out"])
        return torch.matmul(call.args[0], call.args[1])

    def cost(self, c: Case) -> Cost:
        a_shape, b_shape = tuple(c.shape), tuple(c["b"])
        a2 = (1, *a_shape) if len(a_shape) == 1 else a_shape
        b2 = (*b_shape, 1) if len(b_shape) == 1 else b_shape
        batch = broadcast_shapes(a2[:-2], b2[:-2])
        nb = 1
        for d in batch:
            nb *= d
        m, k, n = a2[-2], a2[-1], b2[-1]
        n_a = n_b = 1
        for d in a_shape:
            n_a *= d
        for d in b_shape:
            n_b *= d
        size = element_size(c.dtype)
        return Cost(flops=2.0 * nb * m * n * k, bytes=float(size * (n_a + n_b + nb * m * n)),
                    dtype=c.dtype)
