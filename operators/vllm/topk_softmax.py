"""vllm::topk_softmax — ``vllm._custom_ops.topk_softmax(topk_weights, topk_ids,
token_expert_indices, gating_output, renormalize=False)`` (vLLM 0.13.0,
csrc/moe/topk_softmax_kernels.cu): MoE routing, the softmax of each token's router logits and
its ``topk`` largest probabilities.

In place, returns None: ``topk_weights`` (float32 ``[num_tokens, topk]``) the selected
probabilities in descending order (ties: the lower expert index first, vLLM's rule), divided
by their sum when ``renormalize`` (by 1 if the sum is 0); ``topk_ids`` (int32 or int64) the
experts; ``token_expert_indices`` (int32) ``k * num_tokens + t``. The softmax is float32 from
float32, float16 or bfloat16 logits.

Inputs are valid by construction for an exact comparison of the ids: router logits (skewed to
a few hot experts) lie on a grid (steps of 1/32, 1/4 or 1/2, exact in every input dtype), so two
experts' probabilities are either exactly equal (a tie, decided by the index rule) or apart by
a factor of at least e^(1/32), which no float32 rounding blurs; masked experts are -inf.
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
from operators.vllm._routing import log_popularity

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _topk_softmax_kernel(x_ptr, w_ptr, ids_ptr, tei_ptr, num_tokens, num_experts, topk,
                         RENORM: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_E: tl.constexpr):
    # BLOCK_T tokens per program: float32 softmax over the experts, then topk rounds of
    # (max, lowest index holding it), each winner masked out for the next round.
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    rmask = rows < num_tokens
    cols = tl.arange(0, BLOCK_E)
    mask = rmask[:, None] & (cols[None, :] < num_experts)
    x = tl.load(x_ptr + rows[:, None].to(tl.int64) * num_experts + cols[None, :], mask=mask,
                other=float("-inf")).to(tl.float32)
    x = tl.where(rmask[:, None], x, 0.0)  # rows past the end: finite, never stored
    m = tl.max(x, 1)
    e = tl.where(mask, tl.exp(x - m[:, None]), 0.0)
    z = tl.sum(e, 1)
    p = e / tl.where(z > 0, z, 1.0)[:, None]
    p = tl.where(mask, p, -1.0)
    total = tl.zeros([BLOCK_T], dtype=tl.float32)
    for k in range(topk):
        best = tl.max(p, 1)
        idx = tl.min(tl.where(p == best[:, None], cols[None, :], BLOCK_E), 1)
        out = rows.to(tl.int64) * topk + k
        tl.store(w_ptr + out, best, mask=rmask)
        tl.store(ids_ptr + out, idx.to(ids_ptr.dtype.element_ty), mask=rmask)
        tl.store(tei_ptr + out, (k * num_tokens + rows).to(tl.int32), mask=rmask)
        total += best
        p = tl.where(cols[None, :] == idx[:, None], -1.0, p)
    if RENORM:
        denom = tl.where(total > 0, total, 1.0)
        for k in range(topk):
            out = rows.to(tl.int64) * topk + k
            w = tl.load(w_ptr + out, mask=rmask, other=0.0)
            tl.store(w_ptr + out, w / denom, mask=rmask)


def topk_softmax(topk_weights, topk_ids, token_expert_indices, gating_output, renormalize=False):
    num_tokens, num_experts = gating_output.shape
    topk = topk_weights.shape[-1]
    if num_tokens == 0:
        return None
    block_e = triton.next_power_of_2(num_experts)
    block_t = max(1, min(16, 4096 // block_e))
    grid = (triton.cdiv(num_tokens, block_t),)
    _topk_softmax_kernel[grid](gating_output, topk_weights, topk_ids, token_expert_indices,
                               num_tokens, num_experts, topk, RENORM=bool(renormalize),
                               BLOCK_T=block_t, BLOCK_E=block_e)
    return None
'''

# Never renormalizes: right whenever renormalize is False.
NEGATIVE_NO_RENORM = SOLUTION.replace("RENORM=bool(renormalize)", "RENORM=False")

# Breaks ties toward the higher expert index: right when no tie reaches the top k.
NEGATIVE_TIE_HIGH = SOLUTION.replace(
    "        idx = tl.min(tl.where(p == best[:, None], cols[None, :], BLOCK_E), 1)\n",
    "        idx = tl.max(tl.where(p == best[:, None], cols[None, :], -1), 1)\n")

# Numbers the (token, k) pairs token-major (t * topk + k) instead of vLLM's k * num_tokens + t:
# right for a single token.
NEGATIVE_TOKEN_MAJOR = SOLUTION.replace("(k * num_tokens + rows).to(tl.int32)",
                                        "(rows * topk + k).to(tl.int32)")

_FLOATS = ("float32", "float16", "bfloat16")
# (experts, topk, renormalize) of MoE routers: Mixtral-8x7B, DBRX, DeepSeek-V2-Lite, Qwen1.5-MoE
# (60 experts: vLLM's non-power-of-two path), Qwen3-30B-A3B, Arctic, GPT-OSS-20B, a 256-expert
# softmax router, and 512 (vLLM's largest fused size).
_ROUTERS = ((8, 2, True), (16, 4, False), (64, 6, False), (60, 4, False), (128, 8, True),
            (128, 2, True), (32, 4, True), (256, 8, False), (512, 8, True))
# Logit grids: (step, bound): values k * step in [-bound, bound], exact in bfloat16.
_GRIDS = {"fine": (1 / 32, 8.0), "ties": (0.5, 4.0), "large": (0.25, 40.0)}


def _case(dtype: str, tokens: int, experts: int, topk: int, renorm: bool, *, ids: str = "int32",
          logits: str = "fine", masked: int = 0, cpu: bool = False) -> Case:
    return case("topk_softmax", dtype, (tokens, experts), topk=topk, renormalize=renorm, ids=ids,
                logits=logits, masked=masked, cpu=cpu)


@register("vllm::topk_softmax", version=1, kind=Kind.COMPUTE)
class TopkSoftmax(OperatorSpec):
    entry_points = (
        EntryPoint(
            "topk_softmax",
            "topk_softmax(topk_weights: Tensor, topk_ids: Tensor, token_expert_indices: Tensor, "
            "gating_output: Tensor, renormalize: bool = False) -> None",
            "Softmax of each row of gating_output and its topk largest probabilities, written "
            "into topk_weights, topk_ids and token_expert_indices.",
        ),
    )
    description = (
        "MoE top-k routing as vLLM's `vllm._custom_ops.topk_softmax(topk_weights, topk_ids, "
        "token_expert_indices, gating_output, renormalize=False)`. `gating_output` is "
        "`[num_tokens, num_experts]` router logits (float32, float16 or bfloat16, contiguous; "
        "some may be -inf: masked experts). For each token t: `p = softmax(gating_output[t])` "
        "computed in float32; choose the `topk` largest probabilities in descending order, "
        "ties (equal probabilities) going to the lower expert index first. Write, for k in "
        "range(topk): `topk_weights[t, k]` (float32) = the k-th chosen probability, "
        "`topk_ids[t, k]` (int32 or int64, as allocated) = its expert, "
        "`token_expert_indices[t, k]` (int32) = `k * num_tokens + t`. With `renormalize` "
        "true, divide the token's topk weights by their sum (by 1 if the sum is 0). All "
        "outputs are `[num_tokens, topk]`, contiguous, written in place; return None. "
        "num_experts is up to 512 and need not be a power of two; topk <= num_experts; "
        "num_tokens may be 0. Do not modify gating_output."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_renormalize", "never renormalizes the selected weights (right only "
                 "when renormalize is false)", NEGATIVE_NO_RENORM),
        Negative("ties_to_higher_index", "breaks equal probabilities toward the higher expert "
                 "index (right only when no tie reaches the top k)", NEGATIVE_TIE_HIGH),
        Negative("token_major_indices", "numbers token_expert_indices t * topk + k instead of "
                 "k * num_tokens + t (right for one token)", NEGATIVE_TOKEN_MAJOR),
    )

    # float32 weights, relative to the scale of the reference: the softmax's roundings (x - max
    # rounded, exp, sum, divide, and the renormalizing sum and divide) are a few units each.
    tolerances = {"float32": Tolerance.ulps("float32", 16)}

    def cases(self) -> Sequence[Case]:
        cs = [
            _case("float32", 9, 8, 2, True, cpu=True),                   # Mixtral
            _case("bfloat16", 6, 64, 6, False, ids="int64", cpu=True),   # DeepSeek-V2-Lite
            _case("float16", 5, 60, 4, False, logits="ties", cpu=True),  # Qwen1.5-MoE
            _case("bfloat16", 7, 128, 8, True, logits="ties", cpu=True),
            _case("float32", 4, 256, 8, False, logits="large", cpu=True),
            _case("float16", 3, 32, 4, True, masked=8, cpu=True),
            _case("bfloat16", 1, 16, 4, False, cpu=True),                # one token
            _case("float32", 0, 8, 2, True, cpu=True),                   # empty batch
            _case("float32", 5, 7, 7, True, logits="ties", cpu=True),    # topk = num_experts
        ]
        for dt in _FLOATS:
            for experts, topk, renorm in _ROUTERS:
                cs.append(_case(dt, 1000, experts, topk, renorm))
                cs.append(_case(dt, 333, experts, topk, not renorm, logits="ties",
                                ids="int64"))
            cs += [
                _case(dt, 1, 256, 8, True),
                _case(dt, 2048, 128, 8, True, logits="large"),
                _case(dt, 777, 64, 6, False, masked=20),
                _case(dt, 100, 100, 10, True, logits="ties"),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS:
            experts = rng.choice([8, 16, 32, 60, 64, 72, 128, 256] if small else
                                 [8, 16, 32, 60, 64, 72, 128, 160, 256, 384, 512])
            topk = rng.choice([k for k in (1, 2, 4, 6, 8) if k <= experts])
            tokens = rng.randrange(4, 12 if small else 4000)
            masked = rng.choice([0, 0, rng.randrange(0, max(1, experts - topk))])
            renorm = topk > 1 and rng.random() < 0.5  # one renormalized weight is always 1
            out.append(_case(dt, tokens, experts, topk, renorm,
                             ids=rng.choice(["int32", "int64"]),
                             logits=rng.choice(list(_GRIDS)), masked=masked, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("bfloat16", 65536, 8, 2, True),      # Mixtral prefill
            _case("bfloat16", 32768, 128, 8, True),    # Qwen3-30B-A3B
            _case("float32", 32768, 256, 8, False),
            _case("bfloat16", 65536, 60, 4, False),    # Qwen1.5-MoE (non power of two)
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        tokens, experts = c.shape
        topk = int(c["topk"])
        step, bound = _GRIDS[str(c["logits"])]
        scale = bound / 3.0
        logits = (torch.randn(tokens, experts, generator=gen, dtype=torch.float64) * scale
                  + log_popularity(experts, gen) * scale / 2)
        logits = (logits / step).round().clamp(-bound / step, bound / step) * step
        masked = int(c["masked"])
        if masked and tokens:
            # -inf for `masked` experts of each row, never so many that a tie of zeros is chosen
            order = torch.rand(tokens, experts, generator=gen).argsort(dim=1)[:, :masked]
            logits.scatter_(1, order, float("-inf"))
        ids_dt = torch.int32 if c["ids"] == "int32" else torch.int64
        args = (torch.empty(tokens, topk, dtype=torch.float32),
                torch.empty(tokens, topk, dtype=ids_dt),
                torch.empty(tokens, topk, dtype=torch.int32),
                logits.to(c.torch_dtype), bool(c["renormalize"]))
        outs = frozenset({0, 1, 2})
        return Call(c.entry, args, outputs=(Out.arg(0), Out.arg(1), Out.arg(2)), mutable=outs,
                    out_buffers=outs)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        weights, ids, _, x, renorm = call.args
        tokens, topk = weights.shape
        x64 = x.double()
        d = x64 - x64.amax(dim=1, keepdim=True)
        e = d.exp()
        p = e / e.sum(dim=1, keepdim=True)
        order = torch.sort(x64, dim=1, descending=True, stable=True).indices[:, :topk]
        w = p.gather(1, order)
        dsel = d.gather(1, order).abs()
        # exp(x - max) inherits |x - max| u from rounding x - max; the normalizing sums
        # inherit the probability-weighted mean of those (masked experts weigh nothing)
        spread = torch.where(p > 0, p * d.abs(), 0.0).sum(dim=1, keepdim=True)
        cond = 1.0 + dsel + spread
        if renorm:
            s = w.sum(dim=1, keepdim=True)
            w = w / torch.where(s > 0, s, 1.0)
            cond = cond + (w * dsel).sum(dim=1, keepdim=True)
        k = torch.arange(topk, dtype=torch.int32)[None, :]
        t = torch.arange(tokens, dtype=torch.int32)[:, None]
        return (Expected(w, torch.float32, w * cond),
                Expected(order.to(ids.dtype), ids.dtype),
                Expected(k * tokens + t, torch.int32, from_shapes=True))

    def baseline_library(self) -> str:
        return _baseline.library()

    def baseline(self, call: Call) -> object:
        weights, ids, tei, x, renorm = call.args
        ops = _baseline.for_tensor(x)
        if ops is not None:
            ops.topk_softmax(weights, ids, tei, x, renorm)
            return None
        tokens, topk = weights.shape
        p = torch.softmax(x.float(), dim=1)
        # a stable descending sort: equal probabilities keep the lower expert first
        top, order = torch.sort(p, dim=1, descending=True, stable=True)
        top, order = top[:, :topk], order[:, :topk]
        if renorm:
            s = top.sum(dim=1, keepdim=True)
            top = top / torch.where(s > 0, s, torch.ones_like(s))
        weights.copy_(top)
        ids.copy_(order)
        k = torch.arange(topk, device=x.device, dtype=torch.int32)[None, :]
        t = torch.arange(tokens, device=x.device, dtype=torch.int32)[:, None]
        tei.copy_(k * tokens + t)
        return None

    def cost(self, c: Case) -> Cost:
        tokens, experts = c.shape
        topk = int(c["topk"])
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        ids = 4 if c["ids"] == "int32" else 8
        # max, subtract, exp, sum, divide per logit, and a compare per logit per selection
        return Cost(flops=float(tokens * experts * (5 + topk)),
                    bytes=float(tokens * (experts * size + topk * (4 + ids + 4))),
                    dtype="float32")
