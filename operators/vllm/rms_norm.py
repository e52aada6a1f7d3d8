"""vllm::rms_norm — ``vllm._custom_ops.rms_norm(out, input, weight, epsilon)``: RMS normalization of
each row over the last dim, scaled by ``weight``, written into ``out``."""

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
    OperatorSpec,
    Out,
    Tier,
    Tolerance,
    case,
)
from operators.vllm import _baseline
from operators.vllm._rms import FLOATS, grid_cases, normalized64, rows_input, torch_rms_norm

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(out_ptr, x_ptr, w_ptr, n_rows, n_cols, inner,
                     sx0, sx1, sxc, so0, so1, soc, sw, eps,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ONE_PASS: tl.constexpr):
    # Rows are the flattened leading dims [outer, inner]; each program normalizes BLOCK_M rows.
    pid = tl.program_id(0)
    rows = (pid * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rmask = rows < n_rows
    outer_idx = rows // inner
    inner_idx = rows % inner
    x_row = outer_idx * sx0 + inner_idx * sx1
    o_row = outer_idx * so0 + inner_idx * so1
    cols0 = tl.arange(0, BLOCK_N)
    if ONE_PASS:
        cmask = cols0 < n_cols
        mask = rmask[:, None] & cmask[None, :]
        x = tl.load(x_ptr + x_row[:, None] + cols0[None, :] * sxc, mask=mask, other=0.0)
        x = x.to(tl.float32)
        mean_sq = tl.sum(x * x, axis=1) / n_cols
        r = tl.rsqrt(mean_sq + eps)
        w = tl.load(w_ptr + cols0 * sw, mask=cmask, other=0.0).to(tl.float32)
        y = x * r[:, None] * w[None, :]
        tl.store(out_ptr + o_row[:, None] + cols0[None, :] * soc,
                 y.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + cols0
            mask = rmask[:, None] & (cols < n_cols)[None, :]
            x = tl.load(x_ptr + x_row[:, None] + cols[None, :] * sxc, mask=mask, other=0.0)
            x = x.to(tl.float32)
            acc += x * x
        mean_sq = tl.sum(acc, axis=1) / n_cols
        r = tl.rsqrt(mean_sq + eps)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + cols0
            cmask = cols < n_cols
            mask = rmask[:, None] & cmask[None, :]
            x = tl.load(x_ptr + x_row[:, None] + cols[None, :] * sxc, mask=mask, other=0.0)
            x = x.to(tl.float32)
            w = tl.load(w_ptr + cols * sw, mask=cmask, other=0.0).to(tl.float32)
            y = x * r[:, None] * w[None, :]
            tl.store(out_ptr + o_row[:, None] + cols[None, :] * soc,
                     y.to(out_ptr.dtype.element_ty), mask=mask)


def _leading(t):
    # (outer stride, inner stride, inner size) of the dims before the last one.
    if t.dim() == 1:
        return 0, 0, 1
    if t.dim() == 2:
        return 0, t.stride(0), t.shape[0]
    assert t.dim() == 3, "rms_norm expects a 2-D or 3-D input"
    return t.stride(0), t.stride(1), t.shape[1]


def rms_norm(out, input, weight, epsilon):
    n_cols = input.shape[-1]
    n_rows = input.numel() // n_cols if n_cols else 0
    if n_rows == 0:
        return None
    sx0, sx1, inner = _leading(input)
    so0, so1, _ = _leading(out)
    block_n_full = triton.next_power_of_2(n_cols)
    one_pass = block_n_full <= 16384
    block_n = block_n_full if one_pass else 4096
    block_m = max(1, min(32, 4096 // block_n))
    num_warps = 4 if block_m * block_n <= 4096 else (8 if block_m * block_n <= 8192 else 16)
    grid = (triton.cdiv(n_rows, block_m),)
    _rms_norm_kernel[grid](out, input, weight, n_rows, n_cols, inner,
                           sx0, sx1, input.stride(-1), so0, so1, out.stride(-1), weight.stride(0),
                           epsilon, BLOCK_M=block_m, BLOCK_N=block_n, ONE_PASS=one_pass,
                           num_warps=num_warps)
    return None
'''

# Forgets the weight: right whenever weight is all ones, which some public cases use.
NEGATIVE_NO_WEIGHT = SOLUTION.replace("y = x * r[:, None] * w[None, :]", "y = x * r[:, None]")

# Addresses input rows as if packed (row stride = hidden): right for contiguous inputs only.
NEGATIVE_PACKED_ROWS = SOLUTION.replace(
    "x_row = outer_idx * sx0 + inner_idx * sx1", "x_row = rows * n_cols"
)

# Divides the sum of squares by the padded block width: right only when hidden is a power of two.
NEGATIVE_BLOCK_MEAN = SOLUTION.replace(
    "mean_sq = tl.sum(x * x, axis=1) / n_cols", "mean_sq = tl.sum(x * x, axis=1) / BLOCK_N"
)

@register("vllm::rms_norm", version=1, kind=Kind.COMPUTE)
class RmsNorm(OperatorSpec):
    entry_points = (
        EntryPoint(
            "rms_norm",
            "rms_norm(out: Tensor, input: Tensor, weight: Tensor, epsilon: float) -> None",
            "Writes input / sqrt(mean(input**2, last dim) + epsilon) * weight into out.",
        ),
    )
    description = (
        "RMS normalization as vLLM's `vllm._custom_ops.rms_norm(out, input, weight, epsilon)`: for "
        "every row `i` of `input` (2-D `[num_tokens, hidden]` or 3-D `[batch, seq, hidden]`), "
        "`out[i, :] = input[i, :] / sqrt(mean(input[i, :] ** 2) + epsilon) * weight`, the mean "
        "taken over the last dim. `input`, `weight` (`[hidden]`, contiguous) and `out` (same shape "
        "as `input`, contiguous) share one dtype: float16, bfloat16 or float32. The last dim of "
        "`input` is contiguous but its rows may be strided (e.g. a column slice of a wider tensor: "
        "row stride larger than hidden). Accumulate the mean of squares in float32. Write the "
        "result into `out` in place and return None; do not modify `input` or `weight`."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_weight", "never multiplies by weight (right only when weight is all ones)",
                 NEGATIVE_NO_WEIGHT),
        Negative("packed_rows", "assumes input rows are packed (row stride = hidden), ignoring the "
                 "input's row stride", NEGATIVE_PACKED_ROWS),
        Negative("block_mean", "divides the sum of squares by the padded power-of-two block width "
                 "instead of hidden", NEGATIVE_BLOCK_MEAN),
    )
    # The mean of squares has only positive terms (well conditioned), so every output's error is
    # a few roundings relative to |value| = |x_i| * |w_i| / rms: float16/bfloat16 outputs are
    # rounded once, or twice as vLLM does ((x * inv_rms) rounded, then * weight rounded) -> 3
    # ulps; float32 collects the fp32 sum, the division, rsqrt (1/sqrt: 2 roundings on CPU,
    # approximate rsqrt on GPU) and two products -> 8 ulps.
    tolerances = {
        "float16": Tolerance.ulps("float16", 3),
        "bfloat16": Tolerance.ulps("bfloat16", 3),
        "float32": Tolerance.ulps("float32", 8),
    }

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("rms_norm", "float32", (1, 32), eps=1e-6, weight="ones", cpu=True),
            case("rms_norm", "float16", (71, 497), eps=1e-5, weight="randn", cpu=True),
            case("rms_norm", "bfloat16", (128, 512), eps=1e-6, weight="randn", cpu=True),
            case("rms_norm", "float32", (37, 200), eps=1e-6, weight="randn", row_pad=56, cpu=True),
            case("rms_norm", "float16", (3, 5, 96), eps=1e-6, weight="ones", cpu=True),
            case("rms_norm", "float32", (2, 9, 64), eps=1e-5, weight="randn", row_pad=8, cpu=True),
            # Small inputs (mean square ~1e-6), so epsilon matters.
            case("rms_norm", "float32", (9, 64), eps=1e-5, weight="randn", std=1e-3, cpu=True),
        ]
        cs += grid_cases("rms_norm", cs)
        for dt in FLOATS:
            cs += [
                case("rms_norm", dt, (1000, 4096), eps=1e-6, weight="randn", row_pad=1024),
                case("rms_norm", dt, (4, 333, 2048), eps=1e-5, weight="randn"),
                case("rms_norm", dt, (7, 19, 5120), eps=1e-6, weight="randn", row_pad=64),
                case("rms_norm", dt, (257, 1536), eps=1e-5, weight="randn", std=3e-3),
                case("rms_norm", dt, (33, 20000), eps=1e-6, weight="randn"),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in FLOATS:
            rows = rng.randrange(1, 40 if small else 3000)
            hidden = rng.randrange(8, 300 if small else 9000)
            eps = rng.choice([1e-6, 1e-5])
            w = rng.choice(["ones", "randn"])
            pad = rng.choice([0, 0, rng.randrange(1, 64)])
            params: dict[str, object] = {"eps": eps, "weight": w}
            if pad:
                params["row_pad"] = pad
            out.append(case("rms_norm", dt, (rows, hidden), cpu=small, **params))
            b = rng.randrange(2, 4 if small else 8)
            s = rng.randrange(1, 10 if small else 400)
            out.append(case("rms_norm", dt, (b, s, hidden), eps=eps, weight="randn",
                            row_pad=rng.randrange(0, 40), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("rms_norm", "bfloat16", (16384, 8192), eps=1e-6, weight="randn"),
            case("rms_norm", "float16", (32768, 4096), eps=1e-6, weight="randn"),
            case("rms_norm", "float32", (8192, 8192), eps=1e-5, weight="randn"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dt = c.torch_dtype
        hidden = c.shape[-1]
        x = rows_input(c.shape, dt, gen, row_pad=int(c.get("row_pad", 0)),
                       std=float(c.get("std", 1.0)))
        weight = torch.ones(hidden, dtype=dt) if c["weight"] == "ones" else rows_input(
            (hidden,), dt, gen)
        out = torch.empty(c.shape, dtype=dt)
        return Call(c.entry, (out, x, weight, float(c["eps"])), outputs=(Out.arg(0),),
                    mutable=frozenset({0}), out_buffers=frozenset({0}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        out, x, weight, eps = call.args
        value, scale = normalized64(x.double(), weight.double(), eps)
        return (Expected(value, out.dtype, scale),)

    def baseline(self, call: Call) -> object:
        # vLLM's kernel where vLLM is installed (device tensors); else PyTorch's fused RMS norm
        # (float32 accumulation) copied into out.
        out, x, weight, eps = call.args
        ops = _baseline.custom_ops()
        if ops is not None and x.device.type != "cpu":
            ops.rms_norm(out, x, weight, eps)
            return None
        out.copy_(torch_rms_norm(x, weight, eps))
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        n = 1
        for d in c.shape:
            n *= d
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        return Cost(flops=4.0 * n, bytes=float(size * (2 * n + c.shape[-1])), dtype=c.dtype)
