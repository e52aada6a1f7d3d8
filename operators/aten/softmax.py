"""aten::softmax — ``exp(x - max) / sum(exp(x - max))`` along one dim (overloads int, int_out)."""

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
    dtype_from_name,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl

MAX_DIMS = 5          # the softmax dim plus up to four others
MAX_BLOCK_L = 4096    # longest row kept in registers in one pass
TILE = 4096           # elements per program


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_rows, L,
                    s1, s2, s3,
                    xs0, xs1, xs2, xs3, xsl,
                    os0, os1, os2, os3, osl,
                    BLOCK_R: tl.constexpr, BLOCK_L: tl.constexpr, ONE_BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    rows = (pid * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    row_mask = rows < n_rows
    rem = rows
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    x_row = i0 * xs0 + i1 * xs1 + i2 * xs2 + i3 * xs3
    o_row = i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3
    cols = tl.arange(0, BLOCK_L).to(tl.int64)
    if ONE_BLOCK:
        mask = row_mask[:, None] & (cols[None, :] < L)
        x = tl.load(x_ptr + x_row[:, None] + cols[None, :] * xsl, mask=mask, other=float("-inf"))
        x = x.to(out_ptr.dtype.element_ty).to(tl.float32)  # the op casts self to dtype first
        x = tl.where(row_mask[:, None], x, 0.0)
        m = tl.max(x, axis=1)
        e = tl.exp(x - m[:, None])
        s = tl.sum(e, axis=1)
        y = e / s[:, None]
        tl.store(out_ptr + o_row[:, None] + cols[None, :] * osl, y.to(out_ptr.dtype.element_ty),
                 mask=mask)
    else:
        # Online pass: running max and a running sum rescaled whenever the max grows.
        m = tl.full([BLOCK_R], float("-inf"), tl.float32)
        s = tl.zeros([BLOCK_R], dtype=tl.float32)
        for start in range(0, L, BLOCK_L):
            c = start + cols
            mask = row_mask[:, None] & (c[None, :] < L)
            x = tl.load(x_ptr + x_row[:, None] + c[None, :] * xsl, mask=mask, other=float("-inf"))
            x = x.to(out_ptr.dtype.element_ty).to(tl.float32)
            x = tl.where(row_mask[:, None], x, 0.0)
            m_new = tl.maximum(m, tl.max(x, axis=1))
            # while every element so far is -inf, subtract 0 (not -inf: -inf - -inf is NaN)
            m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)
            s = s * tl.exp(m - m_sub) + tl.sum(tl.exp(x - m_sub[:, None]), axis=1)
            m = m_new
        for start in range(0, L, BLOCK_L):
            c = start + cols
            mask = row_mask[:, None] & (c[None, :] < L)
            x = tl.load(x_ptr + x_row[:, None] + c[None, :] * xsl, mask=mask, other=float("-inf"))
            x = x.to(out_ptr.dtype.element_ty).to(tl.float32)
            y = tl.exp(x - m[:, None]) / s[:, None]
            tl.store(out_ptr + o_row[:, None] + c[None, :] * osl, y.to(out_ptr.dtype.element_ty),
                     mask=mask)


def _softmax(x, dim, out):
    if x.dim() == 0:
        x = x.reshape(1)
        out = out.reshape(1)
    nd = x.dim()
    if nd > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dims supported")
    dim = dim % nd
    if x.numel() == 0:
        return
    others = [i for i in range(nd) if i != dim]
    pad = MAX_DIMS - 1 - len(others)
    sizes = [1] * pad + [x.shape[i] for i in others]
    xs = [0] * pad + [x.stride(i) for i in others]
    os_ = [0] * pad + [out.stride(i) for i in others]
    L = x.shape[dim]
    n_rows = x.numel() // L
    block_l = min(triton.next_power_of_2(L), MAX_BLOCK_L)
    one_block = L <= block_l
    block_r = max(1, min(triton.next_power_of_2(n_rows), TILE // block_l))
    grid = (triton.cdiv(n_rows, block_r),)
    _softmax_kernel[grid](x, out, n_rows, L, *sizes[1:], *xs, x.stride(dim), *os_, out.stride(dim),
                          BLOCK_R=block_r, BLOCK_L=block_l, ONE_BLOCK=one_block,
                          num_warps=8 if block_r * block_l >= 2048 else 4)


def softmax_int(self, dim, dtype=None):
    out = torch.empty(self.shape, dtype=dtype if dtype is not None else self.dtype, device=self.device)
    _softmax(self, dim, out)
    return out


def softmax_int_out(self, dim, dtype=None, *, out):
    _softmax(self, dim, out)
    return out
'''

# Forgets the max subtraction: exact for moderate inputs, overflows (inf / inf = NaN) once a row
# holds values above ~88.
NEGATIVE_NO_MAX = (
    SOLUTION
    .replace("e = tl.exp(x - m[:, None])", "e = tl.exp(x)")
    .replace("s = s * tl.exp(m - m_sub) + tl.sum(tl.exp(x - m_sub[:, None]), axis=1)",
             "s = s + tl.sum(tl.exp(x), axis=1)")
    .replace("y = tl.exp(x - m[:, None]) / s[:, None]", "y = tl.exp(x) / s[:, None]")
)

# Online softmax that forgets to rescale the running sum when the running max grows: right
# whenever a row fits in one block, wrong for rows longer than MAX_BLOCK_L.
NEGATIVE_NO_RESCALE = SOLUTION.replace(
    "s = s * tl.exp(m - m_sub) + tl.sum(tl.exp(x - m_sub[:, None]), axis=1)",
    "s = s + tl.sum(tl.exp(x - m_new[:, None]), axis=1)")

# Treats the softmax dim as the innermost, unit-stride one: right for contiguous last-dim cases.
NEGATIVE_UNIT_STRIDE = SOLUTION.replace(
    "*xs, x.stride(dim), *os_, out.stride(dim),", "*xs, 1, *os_, 1,")

_FLOATS = ("float16", "bfloat16", "float32")


@register("aten::softmax", version=1, kind=Kind.COMPUTE)
class Softmax(OperatorSpec):
    entry_points = (
        EntryPoint("softmax_int",
                   "softmax_int(self: Tensor, dim: int, dtype: ScalarType | None = None) -> Tensor",
                   "Softmax of self along dim; when dtype (a torch.dtype) is given, self is cast "
                   "to it first and the result has that dtype."),
        EntryPoint("softmax_int_out",
                   "softmax_int_out(self: Tensor, dim: int, dtype: ScalarType | None = None, *, "
                   "out: Tensor) -> Tensor",
                   "Writes softmax(self, dim, dtype) into out (same shape, the result dtype) and "
                   "returns out."),
    )
    description = (
        "Softmax along one dimension, following PyTorch's `torch.softmax(self, dim, dtype)`: "
        "`out = exp(x - max(x)) / sum(exp(x - max(x)))` over `dim`, for every position of the "
        "other dims. `dim` may be negative and need not be the last dim. `dtype` is None or a "
        "torch.dtype; when given, the input is cast to it before the op and the result has that "
        "dtype, otherwise the result has the input's dtype (float16, bfloat16 or float32). Inputs "
        "may be non-contiguous (transposed or strided), have up to 5 dims, rows may be long "
        "(tens of thousands of elements) and values large in magnitude (std ~30), so subtract the "
        "row maximum. Compute in float32 and round once."
    )
    solution = SOLUTION
    negatives = (
        Negative("no_max_subtraction", "computes exp(x) / sum(exp(x)) without subtracting the row "
                 "max, so large inputs overflow", NEGATIVE_NO_MAX),
        Negative("online_no_rescale", "online softmax that does not rescale the running sum when "
                 "the running max increases; wrong for rows spanning several blocks",
                 NEGATIVE_NO_RESCALE),
        Negative("assumes_unit_stride_dim", "treats dim as contiguous (stride 1) in input and "
                 "output; wrong for dim != last or non-contiguous layouts", NEGATIVE_UNIT_STRIDE),
    )
    # float32: relative to y * (1 + |x - m| + sum_j y_j |x_j - m|) (see reference): rounding
    # x - m and the exp/div/sum in float32. 32 because PyTorch's CPU kernel sums a non-last dim
    # sequentially: ~20 u measured for rows of 1000 (Triton and CUDA stay under ~4 u).
    # Half outputs: the final rounding (<= 1 u of |value|) dominates.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 32),
    }

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("softmax_int", "float32", (1, 2), dim=-1, cpu=True),
            case("softmax_int", "float32", (63, 145), dim=1, cpu=True),
            case("softmax_int", "float16", (63, 145), dim=-1, cast="float32", std=30.0, cpu=True),
            case("softmax_int", "float32", (7, 17, 31), dim=0, std=30.0, cpu=True),
            case("softmax_int", "bfloat16", (7, 17, 31), dim=-2, cpu=True),
            case("softmax_int", "float32", (33, 65), dim=-1, layout="transposed", cpu=True),
            case("softmax_int", "float16", (24, 50), dim=1, layout="strided", std=4.0, cpu=True),
            case("softmax_int", "float32", (5, 12289), dim=1, std=30.0, cpu=True),
            case("softmax_int_out", "float32", (40, 300), dim=-1, std=30.0, cpu=True),
            case("softmax_int_out", "bfloat16", (5, 9, 130), dim=2, cast="float32", cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case("softmax_int", dt, (4096, 256), dim=-1),
                case("softmax_int", dt, (1000, 1000), dim=0, std=30.0),
                # PyTorch's CPU kernel sums a strided dim sequentially (error ~ sqrt(L) float32
                # ulps), so the very long strided rows are for half outputs only.
                case("softmax_int", dt, (20, 40999, 3) if dt != "float32" else (64, 1000, 3), dim=1,
                     std=10.0),
                case("softmax_int", dt, (8, 16, 33, 257), dim=-1, layout="transposed"),
                case("softmax_int_out", dt, (333, 7001), dim=1, std=30.0),
                case("softmax_int_out", dt, (2, 3, 4, 5, 129), dim=-3, layout="strided"),
            ]
        cs += [
            case("softmax_int", "float16", (1024, 3000), dim=-1, cast="float32", std=30.0),
            case("softmax_int_out", "bfloat16", (4096, 513), dim=1, cast="float32"),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS:
            rank = rng.choice([1, 2, 3])
            shape = [rng.randrange(1, 12 if small else 48) for _ in range(rank)]
            shape[-1] = rng.randrange(2, 300 if small else 9000)
            dim = rng.randrange(-rank, rank)
            params: dict[str, object] = {"dim": dim, "std": rng.choice([1.0, 5.0, 30.0]),
                                         "layout": rng.choice(["contiguous", "transposed", "strided"])}
            if dt != "float32" and rng.random() < 0.5:
                params["cast"] = "float32"
            entry = rng.choice(["softmax_int", "softmax_int_out"])
            out.append(case(entry, dt, shape, cpu=small, **params))
        long_len = rng.randrange(4100, 6000 if small else 70000)
        out.append(case("softmax_int", rng.choice(_FLOATS), (2, long_len), dim=-1, std=8.0, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("softmax_int", "float32", (16384, 4096), dim=-1),
            case("softmax_int", "bfloat16", (32768, 4096), dim=-1),
            case("softmax_int", "float16", (4096, 32768), dim=-1, std=30.0),
            case("softmax_int", "float16", (32768, 1024), dim=-1, cast="float32"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = randn(c.shape, c.dtype, gen, std=c.get("std", 1.0), layout=c.get("layout", "contiguous"))
        dim = c["dim"]
        dtype = c.get("cast")
        args: tuple[object, ...] = (x, dim) if dtype is None else (x, dim, dtype_from_name(dtype))
        if c.entry == "softmax_int_out":
            out = torch.empty(c.shape, dtype=dtype_from_name(dtype) if dtype else x.dtype)
            return Call(c.entry, args, {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, args)

    @staticmethod
    def _operands(call: Call) -> tuple[torch.Tensor, int, torch.dtype | None]:
        dtype = call.args[2] if len(call.args) > 2 else call.kwargs.get("dtype")
        return call.args[0], call.args[1], dtype

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, dim, dtype = self._operands(call)
        out_dtype = dtype if dtype is not None else x.dtype
        x64 = x.to(out_dtype).double()
        m = x64.amax(dim=dim, keepdim=True)
        d = x64 - m
        e = d.exp()
        y = e / e.sum(dim=dim, keepdim=True)
        scale = None
        if out_dtype == torch.float32:
            # Rounding x - m costs a relative error |x - m| u in exp; the row sum inherits the
            # y-weighted mean of those; exp, sum and division add a few u more.
            ad = d.abs()
            scale = y * (1.0 + ad + (y * ad).sum(dim=dim, keepdim=True))
        return (Expected(y, out_dtype, scale),)

    def baseline(self, call: Call) -> object:
        x, dim, dtype = self._operands(call)
        if call.entry == "softmax_int_out":
            return torch.ops.aten.softmax.int_out(x, dim, dtype, out=call.kwargs["out"])
        return torch.softmax(x, dim, dtype=dtype)

    def cost(self, c: Case) -> Cost:
        n = 1
        for d in c.shape:
            n *= d
        in_size = torch.empty((), dtype=c.torch_dtype).element_size()
        out_dt = dtype_from_name(c.get("cast", c.dtype))
        out_size = torch.empty((), dtype=out_dt).element_size()
        # max, subtract, exp, sum, divide
        return Cost(flops=5.0 * n, bytes=float(n * (in_size + out_size)), dtype="float32")
