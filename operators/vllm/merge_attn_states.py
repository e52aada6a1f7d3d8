"""vllm::merge_attn_states — ``vllm._custom_ops.merge_attn_states(output, prefix_output,
prefix_lse, suffix_output, suffix_lse, output_lse=None)`` (vLLM 0.13.0,
csrc/attention/merge_attn_states.cu): combine two partial attention results (prefix-cache and
new-token parts, or two KV splits) by their log-sum-exps (arXiv 2501.01005, section 2.2).

Per token t and head h, with ``p = prefix_lse[h, t]``, ``s = suffix_lse[h, t]`` (float32
``[num_heads, num_tokens]``) and +inf read as -inf: if both are -inf, ``output[t, h] =
prefix_output[t, h]`` and ``output_lse[h, t] = -inf``; else with ``m = max(p, s)``,
``wp = exp(p - m) / (exp(p - m) + exp(s - m))``, ``ws = 1 - wp`` (computed alike):
``output[t, h] = prefix_output[t, h] * wp + suffix_output[t, h] * ws`` and ``output_lse[h, t] =
log(exp(p - m) + exp(s - m)) + m``. The three ``[num_tokens, num_heads, head_size]`` tensors
share a dtype (float32, float16, bfloat16) and a layout rule: the last dim is dense, heads are
``stride(1)`` apart, tokens ``num_heads * stride(1)`` apart (vLLM reads the suffix with the
prefix's strides, so both have the same); ``output`` may have its own head stride. head_size is
a multiple of 16 bytes' worth of elements. ``output_lse`` (float32 ``[num_heads, num_tokens]``)
is optional. Returns None. The argument order is the ``_custom_ops`` wrapper's (``output_lse``
last), which the published benchmark calls; ``torch.ops._C.merge_attn_states`` takes it second.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

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
from operators.vllm import _baseline
from operators.vllm._rms import FLOATS

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _merge_kernel(out_ptr, out_lse_ptr, p_ptr, p_lse_ptr, s_ptr, s_lse_ptr, n_tokens, n_heads,
                  head_size, in_head_stride, out_head_stride, HAS_LSE: tl.constexpr,
                  BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    # Program (token block, head).
    head = tl.program_id(1)
    t = (tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)).to(tl.int64)
    tmask = t < n_tokens
    lse_off = head * n_tokens + t
    p_lse = tl.load(p_lse_ptr + lse_off, mask=tmask, other=float("-inf"))
    s_lse = tl.load(s_lse_ptr + lse_off, mask=tmask, other=float("-inf"))
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    m = tl.maximum(p_lse, s_lse)
    both_inf = m == float("-inf")
    m_safe = tl.where(both_inf, 0.0, m)
    p_se = tl.exp(p_lse - m_safe)
    s_se = tl.exp(s_lse - m_safe)
    total = tl.where(both_inf, 1.0, p_se + s_se)
    wp = tl.where(both_inf, 1.0, p_se / total)
    ws = tl.where(both_inf, 0.0, s_se / total)
    d = tl.arange(0, BLOCK_D)
    mask = tmask[:, None] & (d < head_size)[None, :]
    in_off = (t * n_heads + head)[:, None] * in_head_stride + d[None, :]
    po = tl.load(p_ptr + in_off, mask=mask, other=0.0).to(tl.float32)
    so = tl.load(s_ptr + in_off, mask=mask, other=0.0).to(tl.float32)
    o = po * wp[:, None] + so * ws[:, None]
    out_off = (t * n_heads + head)[:, None] * out_head_stride + d[None, :]
    tl.store(out_ptr + out_off, o.to(out_ptr.dtype.element_ty), mask=mask)
    if HAS_LSE:
        lse = tl.where(both_inf, float("-inf"), tl.log(total) + m_safe)
        tl.store(out_lse_ptr + lse_off, lse, mask=tmask)


def merge_attn_states(output, prefix_output, prefix_lse, suffix_output, suffix_lse,
                      output_lse=None):
    n_tokens, n_heads, head_size = output.shape
    if n_tokens == 0 or n_heads == 0:
        return None
    block_d = triton.next_power_of_2(head_size)
    block_t = max(1, min(64, 4096 // block_d))
    grid = (triton.cdiv(n_tokens, block_t), n_heads)
    has_lse = output_lse is not None
    _merge_kernel[grid](output, output_lse if has_lse else prefix_lse, prefix_output,
                        prefix_lse, suffix_output, suffix_lse, n_tokens, n_heads, head_size,
                        prefix_output.stride(1), output.stride(1), HAS_LSE=has_lse,
                        BLOCK_T=block_t, BLOCK_D=block_d)
    return None
'''

# Keeps +inf log-sum-exps as they are (vLLM reads them as -inf): NaN wherever one is +inf.
NEGATIVE_POS_INF = SOLUTION.replace(
    """    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
""", "")

# Reads the log-sum-exps as [num_tokens, num_heads]: right for a single token (decode).
NEGATIVE_LSE_TOKEN_MAJOR = SOLUTION.replace("    lse_off = head * n_tokens + t\n",
                                            "    lse_off = t * n_heads + head\n")

# Never writes output_lse.
NEGATIVE_NO_OUTPUT_LSE = SOLUTION.replace("    has_lse = output_lse is not None\n",
                                          "    has_lse = False\n")

# Addresses heads as packed (head stride = head_size).
NEGATIVE_PACKED_HEADS = SOLUTION.replace(
    "prefix_output.stride(1), output.stride(1), HAS_LSE", "head_size, head_size, HAS_LSE")


def _case(dt: str, tokens: int, heads: int, head_size: int, *, cpu: bool = False,
          **params: Any) -> Case:
    return case("merge_attn_states", dt, (tokens, heads, head_size), cpu=cpu, **params)


@register("vllm::merge_attn_states", version=2, kind=Kind.COMPUTE)
class MergeAttnStates(OperatorSpec):
    entry_points = (
        EntryPoint(
            "merge_attn_states",
            "merge_attn_states(output: Tensor, prefix_output: Tensor, prefix_lse: Tensor, "
            "suffix_output: Tensor, suffix_lse: Tensor, output_lse: Tensor | None = None) "
            "-> None",
            "Merges two partial attention outputs by their log-sum-exps into output (and "
            "output_lse).",
        ),
    )
    description = (
        "Merging of two partial attention results by log-sum-exp, as vLLM's "
        "`vllm._custom_ops.merge_attn_states(output, prefix_output, prefix_lse, suffix_output, "
        "suffix_lse, output_lse=None)`. `prefix_output`, `suffix_output` and `output` are "
        "`[num_tokens, num_heads, head_size]` in one dtype (float32, float16, bfloat16); last "
        "dim contiguous, heads `stride(1)` elements apart (possibly more than head_size), "
        "tokens `num_heads * stride(1)` apart; prefix and suffix have the same strides, output "
        "may have its own head stride. `prefix_lse`, `suffix_lse` and the optional "
        "`output_lse` are contiguous float32 `[num_heads, num_tokens]` (head-major!). For "
        "token t, head h: p = prefix_lse[h, t], s = suffix_lse[h, t], a +inf is read as -inf. "
        "If p and s are both -inf: output[t, h, :] = prefix_output[t, h, :] and "
        "output_lse[h, t] = -inf. Otherwise m = max(p, s), a = exp(p - m), b = exp(s - m), "
        "output[t, h, :] = prefix_output[t, h, :] * a / (a + b) + suffix_output[t, h, :] * b / "
        "(a + b) (in float32, rounded once) and, when output_lse is given, output_lse[h, t] = "
        "log(a + b) + m. Write output (and output_lse) in place, return None; do not modify "
        "the other arguments."
    )
    solution = SOLUTION
    negatives = (
        Negative("pos_inf_kept", "treats a +inf log-sum-exp as +inf instead of -inf",
                 NEGATIVE_POS_INF),
        Negative("lse_token_major", "reads the log-sum-exps as [num_tokens, num_heads]",
                 NEGATIVE_LSE_TOKEN_MAJOR),
        Negative("no_output_lse", "never writes output_lse", NEGATIVE_NO_OUTPUT_LSE),
        Negative("packed_heads", "assumes heads are head_size apart, ignoring the head "
                 "stride", NEGATIVE_PACKED_HEADS),
    )
    # output: a convex combination wp * po + ws * so with weights from exp and a division in
    # float32: scale S = |po| wp + |so| ws; 16-bit outputs round once (+ float32 noise) -> 2 ulps.
    # float32 (u = 2^-24): with x = |p - s|, a float32 kernel's exp(-x) carries a relative error
    # of about (3x + 4) u -- p - m and (p - m) * log2(e) each round (an absolute error ~x u in the
    # exponent; vLLM's expf and Triton's ex2.approx alike), plus ex2.approx's ~2 ulps. That moves
    # wp and ws by (3x + 4) u wp ws, so output by (3x + 4) u wp ws (|po| + |so|) (opposite signs
    # add up), and the sum, division, two products and a sum add ~7 u S: 16 u S + 4 x u wp ws
    # (|po| + |so|), i.e. 8 u of the float32 scale 2 S + x wp ws (|po| + |so|) / 2. x wp ws is
    # at most ~0.22, so a 16-bit intermediate (2^-9 relative) still fails. output_lse
    # (float32): log(a + b) + m, its scale |m| + 1 (log(a + b) is in [0, log 2]; its absolute
    # error is a few roundings) -> 8 u.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 8),
    }

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            _case("float32", 7, 4, 32, cpu=True),
            _case("bfloat16", 9, 3, 48, lse_out=True, cpu=True),
            _case("float16", 13, 2, 64, lse_out=True, inf=0.3, cpu=True),
            _case("bfloat16", 1, 8, 128, lse_out=True, cpu=True),
            _case("float32", 5, 4, 96, head_pad=16, out_pad=8, lse_out=True, cpu=True),
            _case("float16", 6, 2, 64, head_pad=64, cpu=True),
            _case("float32", 0, 4, 64, lse_out=True, cpu=True),
        ]
        for dt in FLOATS:
            cs += [
                # vLLM's test grid: tokens x query heads x head sizes, 10% +inf lse.
                _case(dt, 256, 4, 32, inf=0.1, lse_out=True),
                _case(dt, 613, 48, 48, inf=0.1),
                _case(dt, 1536, 16, 96, inf=0.1, lse_out=True),
                _case(dt, 4096, 32, 128, inf=0.1),
                _case(dt, 512, 64, 256, inf=0.1, lse_out=True),
                # DeepSeek-V3 MLA prefill (128 heads, v head 128); a decode step; padded heads.
                _case(dt, 1024, 128, 128, lse_out=True),
                _case(dt, 1, 64, 128, lse_out=True),
                _case(dt, 1000, 8, 128, head_pad=64, out_pad=32, lse_out=True, inf=0.3),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in FLOATS * 2:
            hs = rng.choice([32, 48, 64, 96, 128] if small else [32, 48, 64, 96, 128, 256])
            params: dict[str, Any] = {"inf": rng.choice([0.0, 0.1, 0.3])}
            if rng.random() < 0.5:
                params["lse_out"] = True
            if rng.random() < 0.3:
                params["head_pad"] = rng.choice([8, 16, 64])
            out.append(_case(dt, rng.randrange(1, 20 if small else 3000),
                             rng.randrange(1, 6 if small else 65), hs, cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("bfloat16", 16384, 32, 128, lse_out=True),
            _case("float16", 8192, 128, 128, lse_out=True),
            _case("float32", 8192, 32, 128),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dt = c.torch_dtype
        tokens, heads, hs = c.shape
        pad = int(c.get("head_pad", 0))
        prefix = randn((tokens, heads, hs + pad), dt, gen)[..., :hs]
        suffix = randn((tokens, heads, hs + pad), dt, gen)[..., :hs]
        out_pad = int(c.get("out_pad", 0))
        output = torch.empty((tokens, heads, hs + out_pad), dtype=dt)[..., :hs]
        p_lse = _lse(heads, tokens, float(c.get("inf", 0.0)), gen)
        s_lse = _lse(heads, tokens, float(c.get("inf", 0.0)), gen)
        kwargs: dict[str, Any] = {}
        outputs = [Out.arg(0)]
        mutable: set[int | str] = {0}
        if c.get("lse_out"):
            kwargs["output_lse"] = torch.empty((heads, tokens), dtype=torch.float32)
            outputs.append(Out.arg("output_lse"))
            mutable.add("output_lse")
        return Call(c.entry, (output, prefix, p_lse, suffix, s_lse), kwargs,
                    outputs=tuple(outputs), mutable=frozenset(mutable),
                    out_buffers=frozenset(mutable))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        output, prefix, p_lse, suffix, s_lse = call.args
        wp, ws, lse, m0 = _merge_weights(p_lse.double(), s_lse.double())
        po, so = prefix.double(), suffix.double()
        scale = po.abs() * wp + so.abs() * ws
        if output.dtype == torch.float32:
            scale = 2 * scale + _exp_arg_error(p_lse, s_lse) * wp * ws * (po.abs() + so.abs())
        outs = [Expected(po * wp + so * ws, output.dtype, scale)]
        if "output_lse" in call.kwargs:
            outs.append(Expected(lse, torch.float32, m0.abs() + 1.0))
        return tuple(outs)

    def baseline(self, call: Call) -> object:
        # vLLM's kernel where vLLM is installed (device tensors); else PyTorch in float32 (the
        # naive implementation of vLLM's test, with its both--inf rule).
        output, prefix, p_lse, suffix, s_lse = call.args
        ops = _baseline.custom_ops()
        if ops is not None and prefix.device.type != "cpu":
            ops.merge_attn_states(*call.args, **call.kwargs)
            return None
        wp, ws, lse, _ = _merge_weights(p_lse.float(), s_lse.float())
        output.copy_(prefix.float() * wp + suffix.float() * ws)
        if call.kwargs.get("output_lse") is not None:
            call.kwargs["output_lse"].copy_(lse)
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        tokens, heads, hs = c.shape
        n = tokens * heads * hs
        size = c.torch_dtype.itemsize
        lse = tokens * heads * 4 * (3 if c.get("lse_out") else 2)
        return Cost(flops=3.0 * n, bytes=float(3 * n * size + lse), dtype=c.dtype)


def _lse(heads: int, tokens: int, inf: float, gen: torch.Generator) -> torch.Tensor:
    """Log-sum-exps ~ N(0, 3) with a fraction ``inf`` of +inf and as many -inf (empty parts)."""
    lse = randn((heads, tokens), torch.float32, gen, std=3.0)
    if inf and lse.numel():
        u = torch.rand((heads, tokens), generator=gen)
        lse[u < inf / 2] = float("inf")
        lse[(u >= inf / 2) & (u < inf)] = float("-inf")
    return lse


def _exp_arg_error(p_lse: torch.Tensor, s_lse: torch.Tensor) -> torch.Tensor:
    """``|p - s| / 2`` as ``[tokens, heads, 1]`` float64 (0 where either is infinite): a float32
    kernel's exp(p - m) is off by ~3 |p - s| u, its argument's roundings (see the tolerance)."""
    p, s = p_lse.double(), s_lse.double()
    x = torch.where(torch.isfinite(p) & torch.isfinite(s), (p - s).abs(), 0.0)
    return (x / 2).T[:, :, None]


def _merge_weights(p_lse: torch.Tensor, s_lse: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(wp, ws, output_lse, m)`` in the inputs' precision: the weights as ``[tokens, heads,
    1]``, +inf read as -inf, both -inf giving weights (1, 0), lse -inf and m 0."""
    p = torch.where(p_lse == float("inf"), float("-inf"), p_lse)
    s = torch.where(s_lse == float("inf"), float("-inf"), s_lse)
    m = torch.maximum(p, s)
    both = torch.isinf(m)
    m0 = torch.where(both, 0.0, m)
    a, b = torch.exp(p - m0), torch.exp(s - m0)
    total = torch.where(both, 1.0, a + b)
    wp = torch.where(both, 1.0, a / total).T[:, :, None]
    ws = torch.where(both, 0.0, b / total).T[:, :, None]
    return wp, ws, torch.where(both, float("-inf"), torch.log(total) + m0), m0
