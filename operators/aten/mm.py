"""aten::mm — the matrix product ``self @ mat2`` of two 2-D tensors (overloads default, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.inputs import randn
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
    Tolerance,
    case,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
               sam, sak, sbk, sbn, scm, scn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               GROUP_M: tl.constexpr, IEEE: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    # Grouped ordering: GROUP_M row-blocks share the column blocks they read, for L2 reuse.
    per_group = GROUP_M * num_n
    group = pid // per_group
    first_m = group * GROUP_M
    group_size = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_size
    pid_n = (pid % per_group) // group_size

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Rows/columns past the edge wrap onto valid ones (always in bounds); their results are
    # never stored.
    am = (rm % M).to(tl.int64)
    bn = (rn % N).to(tl.int64)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + am[:, None] * sam + rk[None, :].to(tl.int64) * sak
    b_ptrs = b_ptr + rk[:, None].to(tl.int64) * sbk + bn[None, :] * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * scm + rn[None, :].to(tl.int64) * scn
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _mm(a, b, out):
    M, K = a.shape
    N = b.shape[1]
    if M == 0 or N == 0:
        return out
    if a.dtype == torch.float32:
        bm, bn, bk, warps, stages, ieee = 64, 64, 32, 4, 3, True
    else:
        bm, bn, bk, warps, stages, ieee = 128, 256, 64, 8, 3, False
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _mm_kernel[grid](a, b, out, M, N, K,
                     a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                     out.stride(0), out.stride(1),
                     BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, IEEE=ieee,
                     num_warps=warps, num_stages=stages)
    return out


def mm(self, mat2):
    out = torch.empty((self.shape[0], mat2.shape[1]), dtype=self.dtype, device=self.device)
    return _mm(self, mat2, out)


def mm_out(self, mat2, *, out):
    return _mm(self, mat2, out)
'''

# Drops the partial last K block: right whenever K is a multiple of BLOCK_K.
NEGATIVE_K_TAIL = SOLUTION.replace("for k in range(0, tl.cdiv(K, BLOCK_K)):",
                                   "for k in range(0, K // BLOCK_K):")

# Assumes a row-major (contiguous) self: right for contiguous inputs, wrong for transposed ones.
NEGATIVE_ROW_MAJOR = SOLUTION.replace("a.stride(0), a.stride(1), b.stride(0)", "K, 1, b.stride(0)")

_FLOATS = ("float16", "bfloat16", "float32")


@register("aten::mm", version=2, kind=Kind.COMPUTE)
class Mm(OperatorSpec):
    entry_points = (
        EntryPoint("mm", "mm(self: Tensor, mat2: Tensor) -> Tensor",
                   "The matrix product self @ mat2 of an (M, K) and a (K, N) tensor, as (M, N)."),
        EntryPoint("mm_out", "mm_out(self: Tensor, mat2: Tensor, *, out: Tensor) -> Tensor",
                   "Writes self @ mat2 into out (already (M, N), the inputs' dtype) and returns out."),
    )
    description = (
        "Matrix multiplication following PyTorch's `torch.mm`: `out[i, j] = sum_k self[i, k] * "
        "mat2[k, j]` for `self` of shape (M, K) and `mat2` of shape (K, N), both of the same dtype "
        "(float16, bfloat16 or float32); the result has that dtype. Sizes need not be multiples "
        "of any block size, and either input may be non-contiguous (e.g. transposed, column-major). "
        "Accumulate in float32 and round once. For float32 inputs use full float32 precision "
        "(as PyTorch does by default): no TF32, e.g. `tl.dot(..., input_precision=\"ieee\")`."
    )
    solution = SOLUTION
    negatives = (
        Negative("drops_k_tail", "loops over K // BLOCK_K blocks, dropping the partial last K "
                 "block", NEGATIVE_K_TAIL),
        Negative("assumes_row_major_self", "ignores self's strides and indexes it as contiguous "
                 "row-major", NEGATIVE_ROW_MAJOR),
    )
    # Relative to |self| @ |mat2|: float32 accumulation errors are a few u of that scale (up to
    # ~6 u measured for Triton, cuBLAS and PyTorch's CPU GEMM at K = 4096; TF32 would be ~8000 u);
    # half outputs cost one final rounding (<= 1 u of |value| <= scale).
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 16),
    }

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = []
        for dt in _FLOATS:
            # v2: bfloat16 joins the cpu tier (the cpu platform runs bf16 dots in fp32).
            cpu = True
            cs += [
                case("mm", dt, (63, 145, 49), cpu=cpu),
                case("mm", dt, (48, 128, 80), cpu=cpu),
                case("mm", dt, (33, 70, 45), layout_a="transposed", cpu=cpu),
                case("mm", dt, (40, 96, 37), layout_b="transposed", cpu=cpu and dt == "float32"),
                case("mm_out", dt, (17, 31, 23), cpu=cpu),
                case("mm", dt, (1, 200, 5), cpu=cpu and dt == "float32"),
                case("mm", dt, (512, 1024, 768)),
                case("mm", dt, (1000, 999, 1001)),
                case("mm", dt, (2048, 64, 2048), layout_a="transposed", layout_b="transposed"),
                case("mm", dt, (1, 4096, 4096)),
                case("mm", dt, (257, 4100, 129), layout_b="transposed"),
                case("mm_out", dt, (768, 3072, 1024)),
                case("mm", dt, (129, 1, 255)),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        top = 90 if small else 1500
        out = []
        for dt in _FLOATS:
            if small and dt == "bfloat16":
                continue
            m, k, n = (rng.randrange(1, top) for _ in range(3))
            la = rng.choice(["contiguous", "transposed"])
            lb = rng.choice(["contiguous", "transposed"])
            entry = rng.choice(["mm", "mm_out"])
            out.append(case(entry, dt, (m, k, n), layout_a=la, layout_b=lb, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("mm", "bfloat16", (4096, 4096, 4096)),
            case("mm", "float16", (4096, 4096, 4096)),
            case("mm", "float32", (2048, 2048, 2048)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        m, k, n = c.shape
        a = randn((m, k), c.dtype, gen, layout=c.get("layout_a", "contiguous"))
        b = randn((k, n), c.dtype, gen, layout=c.get("layout_b", "contiguous"))
        if c.entry == "mm_out":
            out = torch.empty((m, n), dtype=a.dtype)
            return Call(c.entry, (a, b), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, (a, b))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        a, b = call.args[0], call.args[1]
        a64, b64 = a.double(), b.double()
        return (Expected(a64 @ b64, a.dtype, a64.abs() @ b64.abs()),)

    def baseline(self, call: Call) -> object:
        if call.entry == "mm_out":
            return torch.mm(call.args[0], call.args[1], out=call.kwargs["out"])
        return torch.mm(call.args[0], call.args[1])

    def cost(self, c: Case) -> Cost:
        m, k, n = c.shape
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        return Cost(flops=2.0 * m * n * k, bytes=float(size * (m * k + k * n + m * n)), dtype=c.dtype)
