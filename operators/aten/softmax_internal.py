"""aten::_softmax — softmax along one dim with ``half_to_float`` (a float16 input giving a float32
result), the internal overload ``torch.softmax`` and autograd dispatch to (overloads default,
out). The file is not named ``_softmax.py``: the registry skips modules whose names start with
an underscore (those are shared helpers)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.inputs import sprinkle_specials, with_layout
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
        x = tl.where(row_mask[:, None], x.to(tl.float32), 0.0)
        m = tl.max(x, axis=1)
        e = tl.exp(x - m[:, None])   # a row of -inf only: -inf - -inf = NaN, as PyTorch gives
        s = tl.sum(e, axis=1)
        y = e / s[:, None]
        tl.store(out_ptr + o_row[:, None] + cols[None, :] * osl, y.to(out_ptr.dtype.element_ty),
                 mask=mask)
    else:
        # Online pass: running max and a running sum rescaled whenever the max grows. While a
        # row has seen only -inf (a masked prefix) its max is -inf; exponents are then taken
        # against 0 so that exp(-inf - -inf) = NaN never enters the sum.
        m = tl.full([BLOCK_R], float("-inf"), tl.float32)
        s = tl.zeros([BLOCK_R], dtype=tl.float32)
        for start in range(0, L, BLOCK_L):
            c = start + cols
            mask = row_mask[:, None] & (c[None, :] < L)
            x = tl.load(x_ptr + x_row[:, None] + c[None, :] * xsl, mask=mask, other=float("-inf"))
            x = tl.where(row_mask[:, None], x.to(tl.float32), 0.0)
            m_new = tl.maximum(m, tl.max(x, axis=1))
            m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
            s = s * tl.exp(m - m_ref) + tl.sum(tl.exp(x - m_ref[:, None]), axis=1)
            m = m_new
        m_ref = tl.where(m == float("-inf"), 0.0, m)
        for start in range(0, L, BLOCK_L):
            c = start + cols
            mask = row_mask[:, None] & (c[None, :] < L)
            x = tl.load(x_ptr + x_row[:, None] + c[None, :] * xsl, mask=mask, other=float("-inf"))
            y = tl.exp(x.to(tl.float32) - m_ref[:, None]) / s[:, None]
            tl.store(out_ptr + o_row[:, None] + c[None, :] * osl, y.to(out_ptr.dtype.element_ty),
                     mask=mask)


def _launch(x, dim, out):
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


def _result_dtype(self, half_to_float):
    return torch.float32 if half_to_float else self.dtype


def _softmax(self, dim, half_to_float):
    out = torch.empty(self.shape, dtype=_result_dtype(self, half_to_float), device=self.device)
    _launch(self, dim, out)
    return out


def _softmax_out(self, dim, half_to_float, *, out):
    _launch(self, dim, out)
    return out
'''

# Ignores half_to_float: returns float16 where float32 is asked for.
NEGATIVE_NO_HALF_TO_FLOAT = SOLUTION.replace(
    "return torch.float32 if half_to_float else self.dtype", "return self.dtype")

# The textbook online softmax: exponents against the running max even while it is -inf, so a
# row whose first block is fully masked (-inf) turns into NaN.
NEGATIVE_MASKED_PREFIX = SOLUTION.replace(
    "            m_ref = tl.where(m_new == float(\"-inf\"), 0.0, m_new)\n", "").replace(
    "            s = s * tl.exp(m - m_ref) + tl.sum(tl.exp(x - m_ref[:, None]), axis=1)",
    "            s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)").replace(
    "        m_ref = tl.where(m == float(\"-inf\"), 0.0, m)\n", "        m_ref = m\n")

_FLOATS = ("float16", "bfloat16", "float32")


@register("aten::_softmax", version=1, kind=Kind.COMPUTE)
class SoftmaxInternal(OperatorSpec):
    entry_points = (
        EntryPoint("_softmax", "_softmax(self: Tensor, dim: int, half_to_float: bool) -> Tensor",
                   "Softmax of self along dim; with half_to_float=True (float16 self only) the "
                   "result is float32."),
        EntryPoint("_softmax_out",
                   "_softmax_out(self: Tensor, dim: int, half_to_float: bool, *, out: Tensor) "
                   "-> Tensor",
                   "Writes _softmax(self, dim, half_to_float) into out (self's shape, float32 "
                   "when half_to_float else self's dtype) and returns out."),
    )
    description = (
        "Softmax along one dimension, following ATen's internal `torch._softmax(self, dim, "
        "half_to_float)` (what `torch.softmax` calls): `out = exp(x - max(x)) / sum(exp(x - "
        "max(x)))` over `dim`, for every position of the other dims. `dim` may be negative and "
        "need not be the last dim. `half_to_float` is a bool: when True (only used with a "
        "float16 self) the float16 input is read as is and the result is float32; when False "
        "the result has self's dtype (float16, bfloat16 or float32). Inputs may be "
        "non-contiguous (transposed or strided), 0-d or empty, have up to 5 dims; rows may be "
        "long (tens of thousands of elements) and values large in magnitude (std ~30), so "
        "subtract the row maximum. Masked inputs hold -inf (exp(-inf) = 0): a row that is all "
        "-inf gives NaN everywhere as in PyTorch, but a row with a long -inf prefix and finite "
        "values later is an ordinary softmax. NaN or +inf in a row make the whole row NaN. "
        "Compute in float32 and round once."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_half_to_float", "returns self's dtype even when half_to_float asks "
                 "for float32", NEGATIVE_NO_HALF_TO_FLOAT),
        Negative("online_nan_on_masked_prefix", "online softmax that exponentiates against a "
                 "running max of -inf: rows whose first block is all -inf become NaN",
                 NEGATIVE_MASKED_PREFIX),
    )
    # float32 (also the half_to_float result): relative to y * (1 + |x - m| + sum_j y_j |x_j - m|)
    # (see reference): rounding x - m and the exp/div/sum in float32. 32 because PyTorch's CPU
    # kernel sums a non-last dim sequentially (~20 u measured for rows of 1000, as for
    # aten::softmax). Half outputs: the final rounding (<= 1 u of |value|) dominates.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 32),
    }

    def cases(self) -> Sequence[Case]:
        e, eo = "_softmax", "_softmax_out"
        cs: list[Case] = [
            case(e, "float32", (1, 2), dim=-1, cpu=True),
            case(e, "float32", (63, 145), dim=1, cpu=True),
            case(e, "float16", (63, 145), dim=-1, half_to_float=True, std=30.0, cpu=True),
            case(e, "float32", (7, 17, 31), dim=0, std=30.0, cpu=True),
            case(e, "bfloat16", (7, 17, 31), dim=-2, cpu=True),
            case(e, "float16", (33, 65), dim=0, half_to_float=True, layout="transposed",
                 cpu=True),
            case(e, "float32", (24, 50), dim=1, layout="strided", masked=True, cpu=True),
            case(e, "float32", (1, 4500), dim=-1, std=5.0, masked_prefix=4200, cpu=True),
            case(e, "float32", (), dim=0, cpu=True),
            case(eo, "float16", (40, 300), dim=-1, half_to_float=True, masked=True, cpu=True),
            case(eo, "float32", (5, 9, 130), dim=2, cpu=True),
            case(e, "float32", (0, 5), dim=1, cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case(e, dt, (4096, 256), dim=-1),
                case(e, dt, (1000, 1000), dim=0, std=30.0),
                case(e, dt, (8, 16, 33, 257), dim=-1, layout="transposed"),
                case(e, dt, (64, 2048), dim=-1, masked=True, std=10.0),
                case(e, dt, (4, 40999), dim=-1, std=10.0, masked_prefix=20000),
                case(eo, dt, (333, 7001), dim=1, std=30.0),
                case(eo, dt, (2, 3, 4, 5, 129), dim=-3, layout="strided"),
                case(e, dt, (16, 7, 57, 32), dim=1, specials=True),
            ]
        cs += [
            case(e, "float16", (1024, 3000), dim=-1, half_to_float=True, std=30.0),
            # float32 results: PyTorch's CPU kernel sums a strided dim sequentially (error ~
            # sqrt(L) u), so the strided softmax dim stays short, as for aten::softmax
            case(e, "float16", (64, 1000, 3), dim=1, half_to_float=True, std=10.0),
            case(eo, "float16", (4096, 513), dim=1, half_to_float=True, masked=True),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS:
            rank = rng.choice([1, 2, 3])
            shape = [rng.randrange(1, 12 if small else 48) for _ in range(rank)]
            shape[-1] = rng.randrange(2, 300 if small else 9000)
            params: dict[str, object] = {
                "dim": rng.randrange(-rank, rank), "std": rng.choice([1.0, 5.0, 30.0]),
                "layout": rng.choice(["contiguous", "transposed", "strided"]),
                "masked": rng.random() < 0.3,
            }
            if dt == "float16" and rng.random() < 0.6:
                params["half_to_float"] = True
            entry = rng.choice(["_softmax", "_softmax_out"])
            out.append(case(entry, dt, shape, cpu=small, **params))
        long_len = rng.randrange(4100, 5000 if small else 70000)
        out.append(case("_softmax", rng.choice(_FLOATS), (1 if small else 4, long_len), dim=-1,
                        std=8.0, masked_prefix=rng.randrange(long_len // 2, long_len - 10),
                        cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            # >= 64 MB of traffic each, no more (inputs are drawn in float64 on the CPU)
            case("_softmax", "float32", (4096, 2048), dim=-1),
            case("_softmax", "bfloat16", (4096, 4096), dim=-1),
            case("_softmax", "float16", (8192, 2048), dim=-1, half_to_float=True, std=30.0),
            case("_softmax", "float16", (512, 32768), dim=-1, half_to_float=True, masked=True),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        n = 1
        for d in c.shape:
            n *= d
        # benchmark-sized tensors are drawn in float32 (the float64 draw is 4x slower)
        work = torch.float64 if n < 1 << 22 else torch.float32
        x64 = torch.randn(c.shape, generator=gen, dtype=work) * c.get("std", 1.0)
        rows = x64.movedim(c["dim"], -1) if x64.dim() > 0 else x64  # a view into x64
        if c.get("masked") and x64.dim() >= 2 and x64.numel() > 0:
            # an attention-style mask: ~30% of the entries -inf, and one row fully masked
            drop = torch.rand(c.shape, generator=gen, dtype=work) < 0.3
            x64.masked_fill_(drop, float("-inf"))
            rows[(0,) * (rows.dim() - 1)].fill_(float("-inf"))
        if c.get("masked_prefix"):
            rows[..., :c["masked_prefix"]] = float("-inf")
        if c.get("specials"):
            x64 = sprinkle_specials(x64, gen, fraction=0.0005)
        xt = with_layout(x64.to(c.torch_dtype), c.get("layout", "contiguous"))
        h2f = bool(c.get("half_to_float", False))
        args = (xt, c["dim"], h2f)
        if c.entry == "_softmax_out":
            out = torch.empty(c.shape, dtype=torch.float32 if h2f else xt.dtype)
            return Call(c.entry, args, {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, args)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, dim, h2f = call.args
        out_dtype = torch.float32 if h2f else x.dtype
        x64 = x.double()
        m = x64.amax(dim=dim, keepdim=True)
        d = x64 - m
        e = d.exp()
        y = e / e.sum(dim=dim, keepdim=True)
        scale = None
        if out_dtype == torch.float32:
            # Rounding x - m costs a relative error |x - m| u in exp; the row sum inherits the
            # y-weighted mean of those; exp, sum and division add a few u more. Masked entries
            # (d = -inf, y = 0) add nothing.
            ad = torch.where(torch.isfinite(d), d.abs(), torch.zeros_like(d))
            scale = y * (1.0 + ad + (y * ad).sum(dim=dim, keepdim=True))
        return (Expected(y, out_dtype, scale),)

    def baseline(self, call: Call) -> object:
        x, dim, h2f = call.args
        if h2f and x.device.type == "cpu":
            # PyTorch's CPU kernel has no half_to_float; softmax with dtype=float32 is the same
            # computation (the float16 input widened exactly, float32 math and result).
            if call.entry == "_softmax_out":
                return torch.ops.aten.softmax.int_out(x, dim, torch.float32,
                                                      out=call.kwargs["out"])
            return torch.softmax(x, dim, dtype=torch.float32)
        if call.entry == "_softmax_out":
            return torch.ops.aten._softmax.out(x, dim, h2f, out=call.kwargs["out"])
        return torch.ops.aten._softmax(x, dim, h2f)

    def cost(self, c: Case) -> Cost:
        n = 1
        for d in c.shape:
            n *= d
        in_size = torch.empty((), dtype=c.torch_dtype).element_size()
        out_size = 4 if c.get("half_to_float") else in_size
        # max, subtract, exp, sum, divide
        return Cost(flops=5.0 * n, bytes=float(n * (in_size + out_size)), dtype="float32")
