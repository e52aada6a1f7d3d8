"""aten::diff — the n-th forward difference along one dim, optionally after prepending and
appending tensors along that dim (overloads default, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._reduce import itemsize, make_input, numel
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

MAX_DIMS = 5    # the diff dim plus up to four others
TILE = 4096     # output elements per program


@triton.jit
def _diff_kernel(x_ptr, p_ptr, a_ptr, out_ptr, n_rows, n, P, L, A, Lo,
                 s1, s2, s3,
                 xs0, xs1, xs2, xs3, xsl,
                 ps0, ps1, ps2, ps3, psl,
                 as0, as1, as2, as3, asl,
                 os0, os1, os2, os3, osl,
                 INT_ACC: tl.constexpr, IS_BOOL: tl.constexpr,
                 BLOCK_R: tl.constexpr, BLOCK_L: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    cols = (tl.program_id(1) * BLOCK_L + tl.arange(0, BLOCK_L)).to(tl.int64)
    row_mask = rows < n_rows
    mask = row_mask[:, None] & (cols < Lo)[None, :]
    rem = rows
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    x_row = (i0 * xs0 + i1 * xs1 + i2 * xs2 + i3 * xs3)[:, None]
    p_row = (i0 * ps0 + i1 * ps1 + i2 * ps2 + i3 * ps3)[:, None]
    a_row = (i0 * as0 + i1 * as1 + i2 * as2 + i3 * as3)[:, None]
    o_row = (i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3)[:, None]
    if INT_ACC:
        acc = tl.zeros([BLOCK_R, BLOCK_L], dtype=tl.int64)
    else:
        acc = tl.zeros([BLOCK_R, BLOCK_L], dtype=tl.float32)
    # out[i] = sum_k (-1)^(n-k) C(n, k) cat[i + k], cat = prepend ++ self ++ append along dim
    # tensors from the start: n may arrive specialized as a constant (n == 1)
    mag = tl.full([], 1, tl.int32)                   # C(n, k), updated exactly as k grows
    sgn = tl.full([], 1, tl.int32) - 2 * (n % 2)     # (-1)^(n-k)
    for k in range(0, n + 1):
        j = cols[None, :] + k            # position in the concatenation
        in_p = mask & (j < P)
        in_x = mask & (j >= P) & (j < P + L)
        in_a = mask & (j >= P + L)
        xp = tl.load(p_ptr + p_row + j * psl, mask=in_p, other=0)
        xs = tl.load(x_ptr + x_row + (j - P) * xsl, mask=in_x, other=0)
        xa = tl.load(a_ptr + a_row + (j - P - L) * asl, mask=in_a, other=0)
        if INT_ACC:
            v = xp.to(tl.int64) + xs.to(tl.int64) + xa.to(tl.int64)
            acc += (sgn * mag).to(tl.int64) * v
        else:
            v = xp.to(tl.float32) + xs.to(tl.float32) + xa.to(tl.float32)
            acc += (sgn * mag).to(tl.float32) * v
        mag = mag * (n - k) // (k + 1)
        sgn = -sgn
    if IS_BOOL:
        # repeated logical_xor: the parity of the signed binomial sum
        tl.store(out_ptr + o_row + cols[None, :] * osl, (acc & 1) != 0, mask=mask)
    else:
        tl.store(out_ptr + o_row + cols[None, :] * osl, acc.to(out_ptr.dtype.element_ty),
                 mask=mask)


def _diff(self, n, dim, prepend, append, out):
    nd = self.dim()
    if nd > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dims supported")
    dim = dim % nd
    Lo = out.shape[dim]
    if out.numel() == 0:
        return out
    P = prepend.shape[dim] if prepend is not None else 0
    A = append.shape[dim] if append is not None else 0
    p = prepend if prepend is not None else self   # never read when absent (P == 0)
    a = append if append is not None else self
    others = [i for i in range(nd) if i != dim]
    pad = MAX_DIMS - 1 - len(others)
    sizes = [1] * pad + [out.shape[i] for i in others]

    def strides(t):
        return [0] * pad + [t.stride(i) for i in others] + [t.stride(dim)]

    n_rows = out.numel() // Lo
    if self.stride(dim) == 1 or n_rows == 1:
        block_l = min(triton.next_power_of_2(Lo), 1024)
        block_r = max(1, min(triton.next_power_of_2(n_rows), TILE // block_l))
    else:
        # dim strided: neighbouring rows are what lies close in memory, so rows go wide
        block_l = min(triton.next_power_of_2(Lo), 64)
        block_r = max(1, min(triton.next_power_of_2(n_rows), TILE // block_l))
    grid = (triton.cdiv(n_rows, block_r), triton.cdiv(Lo, block_l))
    int_acc = not out.dtype.is_floating_point
    _diff_kernel[grid](self, p, a, out, n_rows, n, P, self.shape[dim], A, Lo, *sizes[1:],
                       *strides(self), *strides(p), *strides(a), *strides(out),
                       INT_ACC=int_acc, IS_BOOL=out.dtype == torch.bool,
                       BLOCK_R=block_r, BLOCK_L=block_l,
                       num_warps=8 if block_r * block_l >= 2048 else 4)
    return out


def _out_shape(self, n, dim, prepend, append):
    dim = dim % self.dim()
    length = self.shape[dim]
    length += prepend.shape[dim] if prepend is not None else 0
    length += append.shape[dim] if append is not None else 0
    shape = list(self.shape)
    shape[dim] = max(length - n, 0)
    return shape


def diff(self, n=1, dim=-1, prepend=None, append=None):
    out = torch.empty(_out_shape(self, n, dim, prepend, append), dtype=self.dtype,
                      device=self.device)
    return _diff(self, n, dim, prepend, append, out)


def diff_out(self, n=1, dim=-1, prepend=None, append=None, *, out):
    return _diff(self, n, dim, prepend, append, out)
'''

# Forgets the appended tensor (its values count as 0): right whenever append is None.
NEGATIVE_NO_APPEND = SOLUTION.replace(
    "xa = tl.load(a_ptr + a_row + (j - P - L) * asl, mask=in_a, other=0)",
    "xa = tl.zeros_like(xs)")

# Computes the first difference whatever n is: right for n == 1 only.
NEGATIVE_FIRST_ONLY = SOLUTION.replace("_diff_kernel[grid](self, p, a, out, n_rows, n,",
                                       "_diff_kernel[grid](self, p, a, out, n_rows, 1,")
assert NEGATIVE_NO_APPEND != SOLUTION and NEGATIVE_FIRST_ONLY != SOLUTION

_FLOATS = ("float16", "bfloat16", "float32")


@register("aten::diff", version=1, kind=Kind.COMPUTE)
class Diff(OperatorSpec):
    entry_points = (
        EntryPoint("diff",
                   "diff(self: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None, "
                   "append: Tensor | None = None) -> Tensor",
                   "The n-th forward difference of cat(prepend, self, append) along dim."),
        EntryPoint("diff_out",
                   "diff_out(self: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = "
                   "None, append: Tensor | None = None, *, out: Tensor) -> Tensor",
                   "Writes diff(self, n, dim, prepend, append) into out (already of the result "
                   "shape and dtype) and returns out."),
    )
    description = (
        "Forward differences, following PyTorch's `torch.diff(self, n, dim, prepend, append)`: "
        "along `dim` (may be negative), `prepend` and `append` (when given; same dtype and "
        "number of dims as self, same sizes except along dim) are concatenated before and after "
        "self, then `out[i] = c[i + 1] - c[i]` is applied n times (n >= 0; n = 0 returns a "
        "copy), so the result is `sum_k (-1)^(n-k) C(n, k) c[i + k]` with length "
        "`max(len(c) - n, 0)` along dim and self's sizes elsewhere. The result has self's dtype: "
        "float16, bfloat16, float32 (compute in float32, round once), int32 (exact, wrapping as "
        "int32 arithmetic does) or bool (the difference of bools is logical_xor, applied n "
        "times). inf and nan propagate as in IEEE arithmetic. Inputs may be non-contiguous "
        "(transposed or strided), have up to 5 dims and be long along dim (~40k)."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_append", "never reads the appended tensor; right only without append",
                 NEGATIVE_NO_APPEND),
        Negative("first_difference_only", "applies one difference whatever n is",
                 NEGATIVE_FIRST_ONLY),
    )

    def tolerance(self, case: Case, dtype: torch.dtype) -> Tolerance:
        if not dtype.is_floating_point:
            return Tolerance(0.0, 0.0)
        # Relative to sum_k C(n, k) |c[i + k]|. PyTorch differences n times, each step rounding
        # to self's dtype (<= 1 u of that scale per step); a float32 sum of the n + 1 binomial
        # terms costs <= (n + 1) u32, far below a half's u, plus one final rounding (<= 2 u for
        # bfloat16 under Triton's interpreter, which truncates). So n + 1 units, at least 2.
        return Tolerance.ulps(dtype, max(2, case.get("n", 1) + 1))

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("diff", "float32", (1, 2), n=1, dim=-1, cpu=True),
            case("diff", "float32", (63, 145), n=1, dim=-1, specials=0.01, cpu=True),
            case("diff", "float16", (7, 17, 31), n=2, dim=0, cpu=True),
            case("diff", "bfloat16", (33, 65), n=1, dim=1, layout="transposed", cpu=True),
            case("diff", "float32", (20, 40), n=1, dim=-1, prepend=3, append=5,
                 layout="strided", cpu=True),
            case("diff", "int32", (49, 63), n=3, dim=0, prepend=2, cpu=True),
            case("diff", "bool", (7, 17, 31), n=2, dim=1, append=1, cpu=True),
            case("diff_out", "float32", (5, 7, 11, 13), n=1, dim=2, append=4, cpu=True),
            case("diff", "float32", (2065,), n=4, dim=0, cpu=True),
            case("diff", "float32", (5, 1), n=1, dim=1, cpu=True),      # empty result
            case("diff", "float32", (6, 4), n=0, dim=0, cpu=True),      # a copy
        ]
        for dt in (*_FLOATS, "int32"):
            cs += [
                case("diff", dt, (1, 2), n=1, dim=1),
                case("diff", dt, (4096, 256), n=1, dim=-1),
                case("diff", dt, (4096, 256), n=2, dim=0),
                case("diff", dt, (200, 40999, 3), n=1, dim=1),
                case("diff", dt, (200, 40999, 3), n=1, dim=0, prepend=1, append=2),
                case("diff", dt, (511, 257), n=2, dim=-1, layout="transposed", append=3),
                case("diff", dt, (16, 7, 57, 32, 29), n=1, dim=2, layout="strided"),
                case("diff_out", dt, (2, 3, 4, 5, 6), n=3, dim=-1, prepend=2),
            ]
        for dt in _FLOATS:
            cs += [
                case("diff", dt, (4096, 256), n=1, dim=1, specials=0.001),
                case("diff_out", dt, (7, 17, 31), n=1, dim=0, std=100.0, append=7),
            ]
        cs += [
            case("diff", "bool", (4096, 256), n=1, dim=-1),
            case("diff", "bool", (200, 40999, 3), n=3, dim=1, prepend=2),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in (*_FLOATS, "int32", "bool"):
            rank = rng.choice([1, 2, 3, 4])
            cap = {1: 3000, 2: 60, 3: 14, 4: 7}[rank] if small else \
                {1: 3_000_000, 2: 3000, 3: 200, 4: 40}[rank]
            shape = tuple(rng.randrange(4, cap + 4) for _ in range(rank))
            params: dict[str, object] = {
                "n": rng.choice([1, 1, 2, 3]), "dim": rng.randrange(-rank, rank),
                "layout": rng.choice(["contiguous", "transposed", "strided"]),
            }
            if rng.random() < 0.4:
                params["prepend"] = rng.randrange(1, 4)
            if rng.random() < 0.4:
                params["append"] = rng.randrange(1, 4)
            out.append(case(rng.choice(["diff", "diff_out"]), dt, shape, cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # 64-100 MB read and as much written: memory-bound, not launch-bound on an H200.
        return [
            case("diff", "float32", (4096, 4096), n=1, dim=-1),
            case("diff", "float32", (200, 40999, 3), n=1, dim=1),
            case("diff", "bfloat16", (8192, 4096), n=2, dim=0),
            case("diff", "float16", (4096, 8192), n=1, dim=-1, append=1),
        ]

    @staticmethod
    def _part(c: Case, size: int, gen: torch.Generator) -> torch.Tensor:
        dim = c["dim"] % len(c.shape)
        shape = list(c.shape)
        shape[dim] = size
        sub = Case(c.entry, c.dtype, tuple(shape), tuple(p for p in c.params
                                                         if p[0] not in ("layout", "specials")))
        return make_input(sub, gen)

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = make_input(c, gen)
        prepend = self._part(c, c["prepend"], gen) if c.get("prepend") else None
        append = self._part(c, c["append"], gen) if c.get("append") else None
        args = (x, c["n"], c["dim"], prepend, append)
        if c.entry == "diff_out":
            shape = _out_shape(x, c["n"], c["dim"], prepend, append)
            out = torch.empty(shape, dtype=x.dtype)
            return Call(c.entry, args, {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, args)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, n, dim, prepend, append = call.args
        parts = [t for t in (prepend, x, append) if t is not None]
        if x.dtype == torch.bool:
            cat = torch.cat(parts, dim)
            return (Expected(torch.diff(cat, n, dim), torch.bool),)
        if not x.dtype.is_floating_point:
            y = torch.cat([t.to(torch.int64) for t in parts], dim)
            for _ in range(n):
                y = _step(y, dim, -1)
            return (Expected(y.to(x.dtype), x.dtype),)
        y = torch.cat([t.double() for t in parts], dim)
        s = y.abs()
        for _ in range(n):
            y = _step(y, dim, -1)
            s = _step(s, dim, 1)
        return (Expected(y, x.dtype, s),)

    def baseline(self, call: Call) -> object:
        if call.entry == "diff_out":
            return torch.diff(*call.args, out=call.kwargs["out"])
        return torch.diff(*call.args)

    def cost(self, c: Case) -> Cost:
        n_in = numel(c.shape)
        dim = c["dim"] % len(c.shape)
        extra = (c.get("prepend") or 0) + (c.get("append") or 0)
        other = n_in // c.shape[dim]
        n_cat = n_in + other * extra
        n_out = other * max(c.shape[dim] + extra - c["n"], 0)
        size = itemsize(c.torch_dtype)
        return Cost(flops=float(n_out * max(c["n"], 1)), bytes=float((n_cat + n_out) * size),
                    dtype=c.dtype if c.torch_dtype.is_floating_point else "float32")


def _step(y: torch.Tensor, dim: int, sign: int) -> torch.Tensor:
    """One difference (sign -1) or one pairwise sum (sign +1) along dim."""
    m = max(y.shape[dim] - 1, 0)
    return y.narrow(dim, 1, m) + sign * y.narrow(dim, 0, m)


def _out_shape(x: torch.Tensor, n: int, dim: int, prepend: torch.Tensor | None,
               append: torch.Tensor | None) -> tuple[int, ...]:
    d = dim % x.dim()
    length = x.shape[d] + sum(t.shape[d] for t in (prepend, append) if t is not None)
    shape = list(x.shape)
    shape[d] = max(length - n, 0)
    return tuple(shape)
