"""vllm::fused_add_rms_norm — ``vllm._custom_ops.fused_add_rms_norm(input, residual, weight,
epsilon)`` (vLLM 0.13.0, csrc/layernorm_kernels.cu): the residual add before a decoder layer's
norm, fused with the norm, both in place.

For every row ``i`` of ``input`` (``[num_tokens, hidden]``): ``z = input[i] + residual[i]``
rounded to the dtype; ``residual[i] = z``; ``input[i] = z / sqrt(mean(z**2) + epsilon) *
weight``. Returns None. ``input``'s rows may be strided (vLLM reads ``input.stride(-2)``; the
last dim is dense); ``residual`` and ``weight`` are contiguous; all three share one dtype
(float16, bfloat16, float32). The op is called through the ``_custom_ops`` name, whose wrapper
passes its arguments straight to ``torch.ops._C.fused_add_rms_norm``.

vLLM normalizes the rounded sum and rounds twice on the way out (``(z * inv_rms)`` to the dtype,
then ``* weight``); the tolerance admits that and a float32 path rounded once (see below).
"""

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
def _fused_add_rms_norm_kernel(x_ptr, r_ptr, w_ptr, n_rows, n_cols, sx, sr, eps,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               ONE_PASS: tl.constexpr):
    # Each program handles BLOCK_M rows: z = x + r (rounded to the dtype) goes to the residual,
    # z / rms(z) * w goes back into x.
    pid = tl.program_id(0)
    rows = (pid * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rmask = rows < n_rows
    x_row = rows * sx
    r_row = rows * sr
    cols0 = tl.arange(0, BLOCK_N)
    if ONE_PASS:
        cmask = cols0 < n_cols
        mask = rmask[:, None] & cmask[None, :]
        x = tl.load(x_ptr + x_row[:, None] + cols0[None, :], mask=mask, other=0.0)
        r = tl.load(r_ptr + r_row[:, None] + cols0[None, :], mask=mask, other=0.0)
        z = (x.to(tl.float32) + r.to(tl.float32)).to(r_ptr.dtype.element_ty)
        tl.store(r_ptr + r_row[:, None] + cols0[None, :], z, mask=mask)
        z = z.to(tl.float32)
        mean_sq = tl.sum(z * z, axis=1) / n_cols
        inv = tl.rsqrt(mean_sq + eps)
        w = tl.load(w_ptr + cols0, mask=cmask, other=0.0).to(tl.float32)
        y = z * inv[:, None] * w[None, :]
        tl.store(x_ptr + x_row[:, None] + cols0[None, :], y.to(x_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + cols0
            mask = rmask[:, None] & (cols < n_cols)[None, :]
            x = tl.load(x_ptr + x_row[:, None] + cols[None, :], mask=mask, other=0.0)
            r = tl.load(r_ptr + r_row[:, None] + cols[None, :], mask=mask, other=0.0)
            z = (x.to(tl.float32) + r.to(tl.float32)).to(r_ptr.dtype.element_ty)
            tl.store(r_ptr + r_row[:, None] + cols[None, :], z, mask=mask)
            z = z.to(tl.float32)
            acc += z * z
        inv = tl.rsqrt(tl.sum(acc, axis=1) / n_cols + eps)
        tl.debug_barrier()
        for start in range(0, n_cols, BLOCK_N):
            cols = start + cols0
            cmask = cols < n_cols
            mask = rmask[:, None] & cmask[None, :]
            z = tl.load(r_ptr + r_row[:, None] + cols[None, :], mask=mask, other=0.0)
            w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
            y = z.to(tl.float32) * inv[:, None] * w[None, :]
            tl.store(x_ptr + x_row[:, None] + cols[None, :], y.to(x_ptr.dtype.element_ty),
                     mask=mask)


def fused_add_rms_norm(input, residual, weight, epsilon):
    n_cols = input.shape[-1]
    n_rows = input.numel() // n_cols if n_cols else 0
    if n_rows == 0:
        return None
    block_n_full = triton.next_power_of_2(n_cols)
    one_pass = block_n_full <= 16384
    block_n = block_n_full if one_pass else 4096
    block_m = max(1, min(16, 4096 // block_n))
    num_warps = 4 if block_m * block_n <= 4096 else (8 if block_m * block_n <= 8192 else 16)
    grid = (triton.cdiv(n_rows, block_m),)
    _fused_add_rms_norm_kernel[grid](input, residual, weight, n_rows, n_cols,
                                     input.stride(-2) if input.dim() > 1 else 0,
                                     residual.stride(-2) if residual.dim() > 1 else 0,
                                     epsilon, BLOCK_M=block_m, BLOCK_N=block_n,
                                     ONE_PASS=one_pass, num_warps=num_warps)
    return None
'''

# Addresses input rows as if packed (row stride = hidden): right for contiguous inputs only.
NEGATIVE_PACKED_ROWS = SOLUTION.replace("    x_row = rows * sx\n", "    x_row = rows * n_cols\n")

# Divides the sum of squares by the padded block width: right only when hidden is a power of two.
NEGATIVE_BLOCK_MEAN = SOLUTION.replace(
    "mean_sq = tl.sum(z * z, axis=1) / n_cols", "mean_sq = tl.sum(z * z, axis=1) / BLOCK_N")

# Normalizes the input alone, though it stores the sum into the residual: right only where the
# residual is zero (a first layer's).
NEGATIVE_NORM_OF_INPUT = SOLUTION.replace(
    "        z = z.to(tl.float32)\n        mean_sq",
    "        z = x.to(tl.float32)\n        mean_sq")


def _case(dt: str, shape: Sequence[int], *, eps: float = 1e-6, weight: str = "randn",
          cpu: bool = False, **params: object) -> Case:
    return case("fused_add_rms_norm", dt, shape, eps=eps, weight=weight, cpu=cpu, **params)


@register("vllm::fused_add_rms_norm", version=1, kind=Kind.COMPUTE)
class FusedAddRmsNorm(OperatorSpec):
    entry_points = (
        EntryPoint(
            "fused_add_rms_norm",
            "fused_add_rms_norm(input: Tensor, residual: Tensor, weight: Tensor, "
            "epsilon: float) -> None",
            "In place: residual = input + residual; input = rms_norm(residual) * weight.",
        ),
    )
    description = (
        "Residual add fused with RMS normalization, as vLLM's "
        "`vllm._custom_ops.fused_add_rms_norm(input, residual, weight, epsilon)`, both results "
        "written in place. `input` is 2-D `[num_tokens, hidden]`; its last dim is contiguous but "
        "its rows may be strided (a column slice of a wider tensor: row stride = "
        "`input.stride(0)` >= hidden). `residual` (`[num_tokens, hidden]`) and `weight` "
        "(`[hidden]`) are contiguous. All three share one dtype: float16, bfloat16 or float32. "
        "For every row i: `z = input[i, :] + residual[i, :]` rounded to the dtype; "
        "`residual[i, :] = z`; `input[i, :] = z / sqrt(mean(z ** 2) + epsilon) * weight` (mean "
        "over the row; accumulate in float32). num_tokens may be 0. Return None; do not modify "
        "`weight`, and write nothing outside the `[num_tokens, hidden]` views."
    )
    solution = SOLUTION
    negatives = (
        Negative("packed_rows", "assumes input rows are packed (row stride = hidden), ignoring "
                 "the input's row stride", NEGATIVE_PACKED_ROWS),
        Negative("block_mean", "divides the sum of squares by the padded power-of-two block "
                 "width instead of hidden", NEGATIVE_BLOCK_MEAN),
        Negative("norm_of_input", "normalizes input instead of input + residual (right only "
                 "when the residual is zero)", NEGATIVE_NORM_OF_INPUT),
    )
    # residual: the sum rounded once (twice through float32): <= 2u of |z|. input: vLLM rounds
    # z (u), its rms follows from the rounded z (u), then rounds z * inv_rms (u) and the product
    # with weight (u): 4u of |z| * |w| / rms, plus float32 accumulation noise -> 5 ulps for
    # 16-bit dtypes. float32: rms_norm's 8 ulps (sum, division, rsqrt, two products) plus the
    # rounded sum and its effect on the rms -> 10.
    tolerances = {
        "float16": Tolerance.ulps("float16", 5),
        "bfloat16": Tolerance.ulps("bfloat16", 5),
        "float32": Tolerance.ulps("float32", 10),
    }

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            _case("float32", (1, 32), weight="ones", cpu=True),
            _case("float16", (71, 497), eps=1e-5, cpu=True),
            _case("bfloat16", (128, 512), cpu=True),
            _case("float32", (37, 200), row_pad=56, cpu=True),
            _case("float16", (5, 96), weight="ones", row_pad=8, cpu=True),
            # The residual stream of a first layer: zero, so input + residual = input.
            _case("bfloat16", (16, 256), residual="zeros", cpu=True),
            # Small activations (mean square ~1e-6): epsilon matters.
            _case("float32", (9, 64), eps=1e-5, std=1e-3, cpu=True),
            _case("float16", (0, 128), cpu=True),
        ]
        # Four float32 tensors of 5333 x 8192 pass the 512 MiB correctness-case budget: half
        # the rows there.
        cs += grid_cases("fused_add_rms_norm", cs, lambda dt, shape: (
            (2667, 8192) if dt == "float32" and shape == (5333, 8192) else shape))
        for dt in FLOATS:
            cs += [
                # vLLM's own test shapes: odd hidden sizes, rows strided by 2 x hidden.
                _case(dt, (83, 769), row_pad=769),
                _case(dt, (7, 5125), eps=1e-5, row_pad=5125),
                _case(dt, (4096, 768), row_pad=768),
                # Production hidden sizes: Qwen2.5-7B, DeepSeek-V3, a slice of a fused output.
                _case(dt, (1000, 3584)),
                _case(dt, (513, 7168), row_pad=64),
                _case(dt, (33, 20000), eps=1e-5),
                _case(dt, (257, 1536), std=3e-3),
                _case(dt, (0, 4096)),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in FLOATS:
            rows = rng.randrange(1, 40 if small else 3000)
            hidden = rng.randrange(8, 300 if small else 9000)
            params: dict[str, object] = {}
            pad = rng.choice([0, 0, rng.randrange(1, 64)])
            if pad:
                params["row_pad"] = pad
            out.append(_case(dt, (rows, hidden), eps=rng.choice([1e-6, 1e-5]),
                             weight=rng.choice(["ones", "randn"]), cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("bfloat16", (16384, 8192)),
            _case("bfloat16", (16384, 7168)),
            _case("float16", (32768, 4096)),
            _case("float32", (8192, 8192), eps=1e-5),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dt = c.torch_dtype
        hidden = c.shape[-1]
        x = rows_input(c.shape, dt, gen, row_pad=int(c.get("row_pad", 0)),
                       std=float(c.get("std", 1.0)))
        if c.get("residual") == "zeros":
            residual = torch.zeros(c.shape, dtype=dt)
        else:
            residual = rows_input(c.shape, dt, gen, std=float(c.get("std", 1.0)))
        weight = torch.ones(hidden, dtype=dt) if c["weight"] == "ones" else rows_input(
            (hidden,), dt, gen)
        return Call(c.entry, (x, residual, weight, float(c["eps"])),
                    outputs=(Out.arg(0), Out.arg(1)), mutable=frozenset({0, 1}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, residual, weight, eps = call.args
        z64 = x.double() + residual.double()
        value, scale = normalized64(z64, weight.double(), eps)
        return (Expected(value, x.dtype, scale), Expected(z64, residual.dtype, z64.abs()))

    def baseline(self, call: Call) -> object:
        # vLLM's kernel where vLLM is installed (device tensors); else PyTorch: the sum rounded
        # to the dtype, then its fused RMS norm.
        x, residual, weight, eps = call.args
        ops = _baseline.custom_ops()
        if ops is not None and x.device.type != "cpu":
            ops.fused_add_rms_norm(x, residual, weight, eps)
            return None
        residual.add_(x)
        x.copy_(torch_rms_norm(residual, weight, eps))
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        tokens, hidden = c.shape
        n = tokens * hidden
        size = c.torch_dtype.itemsize
        # Read input and residual, write both back; the weight once.
        return Cost(flops=5.0 * n, bytes=float(size * (4 * n + hidden)), dtype=c.dtype)
