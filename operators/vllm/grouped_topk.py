"""vllm::grouped_topk — ``vllm._custom_ops.grouped_topk(scores, num_expert_group, topk_group,
topk, renormalize, routed_scaling_factor, bias, scoring_func=0)`` (vLLM 0.13.0,
csrc/moe/grouped_topk_kernels.cu): DeepSeek-V3's group-limited routing with the score
correction bias fused in. Returns ``(topk_values float32, topk_indices int32)``, each
``[num_tokens, topk]``.

Rule (vLLM's): score ``s = sigmoid(x)`` (``scoring_func=1``) or ``s = x`` (0); selection key
``s + bias``; a group's score is the sum of its two largest keys; the ``topk_group`` best
groups are kept (ties: lower group index); among their experts the ``topk`` largest keys, in
descending order (ties: lower expert index); values are the unbiased ``s``, divided by
``sum(s) + 1e-20`` with ``renormalize``, times ``routed_scaling_factor``.

vLLM computes keys in the scores' dtype (bfloat16 rounds them), so the ids are only comparable
exactly on inputs where that cannot matter; the inputs are built so (see :func:`_scores`):
``scoring_func=0`` cases put scores and bias on a grid whose sums are exact in every dtype (ties
are exact, and many: the tie rule decides them); sigmoid cases plant the selection with margins
far above any rounding (winners 1/32 apart, groups 0.03+ apart), with decoy groups whose single
hot expert a routing that ignores groups would pick.
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
    unit_roundoff,
)
from operators.vllm import _baseline
from operators.vllm._routing import popularity

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _grouped_topk_kernel(x_ptr, bias_ptr, val_ptr, idx_ptr, num_tokens, num_experts, per_group,
                         n_group, topk_group, topk, scale, SIGMOID: tl.constexpr,
                         RENORM: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_E: tl.constexpr,
                         BLOCK_G: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    rmask = rows < num_tokens
    cols = tl.arange(0, BLOCK_E)
    cmask = cols < num_experts
    mask = rmask[:, None] & cmask[None, :]
    x = tl.load(x_ptr + rows[:, None].to(tl.int64) * num_experts + cols[None, :], mask=mask,
                other=0.0).to(tl.float32)
    if SIGMOID:
        s = 1.0 / (1.0 + tl.exp(-x))
    else:
        s = x
    b = tl.load(bias_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    key = tl.where(mask, s + b[None, :], float("-inf"))
    grp = cols // per_group
    gcols = tl.arange(0, BLOCK_G)
    # group score: the sum of the group's two largest keys
    gscore = tl.full([BLOCK_T, BLOCK_G], float("-inf"), tl.float32)
    for g in range(n_group):
        ing = (grp == g)[None, :]
        kg = tl.where(ing, key, float("-inf"))
        m1 = tl.max(kg, 1)
        n1 = tl.sum((kg == m1[:, None]).to(tl.int32), 1)
        m2 = tl.max(tl.where(kg == m1[:, None], float("-inf"), kg), 1)
        top2 = m1 + tl.where(n1 >= 2, m1, m2)
        gscore = tl.where(gcols[None, :] == g, top2[:, None], gscore)
    # keep the topk_group best groups (ties: lower group index)
    keep = tl.zeros([BLOCK_T, BLOCK_G], tl.int32)
    for _ in range(topk_group):
        best = tl.max(gscore, 1)
        gi = tl.min(tl.where(gscore == best[:, None], gcols[None, :], BLOCK_G), 1)
        hit = gcols[None, :] == gi[:, None]
        keep = tl.where(hit, 1, keep)
        gscore = tl.where(hit, float("-inf"), gscore)
    kept = tl.zeros([BLOCK_T, BLOCK_E], tl.int32)
    for g in range(n_group):
        on = tl.sum(tl.where(gcols[None, :] == g, keep, 0), 1)
        kept = tl.where((grp == g)[None, :], on[:, None] + kept * 0, kept)
    key = tl.where(kept != 0, key, float("-inf"))
    # topk experts of the kept groups by key, descending (ties: lower expert index)
    kcols = tl.arange(0, BLOCK_K)
    vals = tl.zeros([BLOCK_T, BLOCK_K], tl.float32)
    ids = tl.zeros([BLOCK_T, BLOCK_K], tl.int32)
    for k in range(topk):
        best = tl.max(key, 1)
        ei = tl.min(tl.where(key == best[:, None], cols[None, :], BLOCK_E), 1)
        hit = cols[None, :] == ei[:, None]
        v = tl.sum(tl.where(hit, s, 0.0), 1)
        vals = tl.where(kcols[None, :] == k, v[:, None], vals)
        ids = tl.where(kcols[None, :] == k, ei[:, None], ids)
        key = tl.where(hit, float("-inf"), key)
    if RENORM:
        vals = vals / (tl.sum(vals, 1) + 1e-20)[:, None]
    vals = vals * scale
    out = rows[:, None].to(tl.int64) * topk + kcols[None, :]
    omask = rmask[:, None] & (kcols[None, :] < topk)
    tl.store(val_ptr + out, vals, mask=omask)
    tl.store(idx_ptr + out, ids, mask=omask)


def grouped_topk(scores, num_expert_group, topk_group, topk, renormalize, routed_scaling_factor,
                 bias, scoring_func=0):
    num_tokens, num_experts = scores.shape
    values = torch.empty(num_tokens, topk, dtype=torch.float32, device=scores.device)
    indices = torch.empty(num_tokens, topk, dtype=torch.int32, device=scores.device)
    if num_tokens == 0:
        return values, indices
    block_e = triton.next_power_of_2(num_experts)
    block_t = max(1, min(16, 2048 // block_e))
    grid = (triton.cdiv(num_tokens, block_t),)
    _grouped_topk_kernel[grid](scores, bias, values, indices, num_tokens, num_experts,
                               num_experts // num_expert_group, num_expert_group, topk_group,
                               topk, float(routed_scaling_factor), SIGMOID=scoring_func == 1,
                               RENORM=bool(renormalize), BLOCK_T=block_t, BLOCK_E=block_e,
                               BLOCK_G=triton.next_power_of_2(max(num_expert_group, 2)),
                               BLOCK_K=triton.next_power_of_2(max(topk, 2)))
    return values, indices
'''

# Ignores the groups: the plain biased top-k over all experts (right with one group).
NEGATIVE_NO_GROUPS = SOLUTION.replace("    key = tl.where(kept != 0, key, float(\"-inf\"))\n",
                                      "")

# Scores a group by its largest key alone (the unbiased DeepSeek-V2 rule) instead of the sum of
# its two largest: right with one group.
NEGATIVE_GROUP_MAX = SOLUTION.replace("        top2 = m1 + tl.where(n1 >= 2, m1, m2)\n",
                                      "        top2 = m1\n")

# Returns the biased keys as the weights: right when the bias is zero.
NEGATIVE_BIASED_WEIGHTS = SOLUTION.replace("        v = tl.sum(tl.where(hit, s, 0.0), 1)\n",
                                           "        v = tl.sum(tl.where(hit, s + b[None, :], "
                                           "0.0), 1)\n")

_FLOATS = ("bfloat16", "float16", "float32")
# Routers: (experts, groups, topk_group, topk, scoring_func, renormalize, scaling):
# DeepSeek-V3/R1, Kimi-K2 (one group), DeepSeek-V2 (softmax scores, no renormalize, x16),
# DeepSeek-V2-Lite (one group), GLM-4.5 (one group), a 64-expert 8-group router.
_ROUTERS = ((256, 8, 4, 8, 1, True, 2.5), (384, 1, 1, 8, 1, True, 2.827),
            (160, 8, 3, 6, 0, False, 16.0), (64, 1, 1, 6, 0, False, 1.0),
            (160, 1, 1, 8, 1, True, 2.5), (64, 8, 2, 4, 1, False, 1.0))
_GRID = 2.0 ** -10  # scoring_func=0: scores and bias are multiples of this, below 2**-4
_GAP = 1.0 / 32.0   # sigmoid: winners' keys apart by this


def _case(dtype: str, tokens: int, experts: int, groups: int, topk_group: int, topk: int,
          scoring: int, renorm: bool, scaling: float, *, bias: str = "skewed",
          cpu: bool = False) -> Case:
    return case("grouped_topk", dtype, (tokens, experts), groups=groups, topk_group=topk_group,
                topk=topk, scoring=scoring, renormalize=renorm, scaling=scaling, bias=bias,
                cpu=cpu)


@register("vllm::grouped_topk", version=1, kind=Kind.COMPUTE)
class GroupedTopk(OperatorSpec):
    entry_points = (
        EntryPoint(
            "grouped_topk",
            "grouped_topk(scores: Tensor, num_expert_group: int, topk_group: int, topk: int, "
            "renormalize: bool, routed_scaling_factor: float, bias: Tensor, "
            "scoring_func: int = 0) -> tuple[Tensor, Tensor]",
            "Group-limited top-k routing with the score-correction bias; returns "
            "(topk_values float32, topk_indices int32), each [num_tokens, topk].",
        ),
    )
    description = (
        "Group-limited MoE routing (DeepSeek-V3) as vLLM's `vllm._custom_ops.grouped_topk("
        "scores, num_expert_group, topk_group, topk, renormalize, routed_scaling_factor, "
        "bias, scoring_func=0)`. `scores` is `[num_tokens, num_experts]` (float32, float16 or "
        "bfloat16, contiguous): raw router logits when `scoring_func == 1`, already-computed "
        "scores (e.g. softmax probabilities) when 0. `bias` (`[num_experts]`, same dtype) is "
        "the score-correction bias. The experts form `num_expert_group` consecutive groups of "
        "`num_experts / num_expert_group` (at least 2). Per token: `s = sigmoid(scores)` if "
        "scoring_func == 1 else `s = scores`; `key = s + bias`; a group's score is the sum of "
        "its two largest keys (the same value twice if two keys tie for the largest); keep the "
        "`topk_group` groups with the largest scores (ties: lower group index); among the "
        "experts of the kept groups choose the `topk` largest keys, in descending order of key "
        "(ties: lower expert index). Return `(topk_values, topk_indices)`, new tensors "
        "`[num_tokens, topk]` of float32 and int32: the chosen experts' ids and their "
        "unbiased `s`, divided by `sum of the token's chosen s + 1e-20` when `renormalize`, "
        "then multiplied by `routed_scaling_factor`. num_expert_group <= 32, topk <= 32, topk "
        "<= topk_group * group size; scores are finite; num_tokens may be 0. Computing s and "
        "the keys in float32 is fine: inputs never put two different keys close enough for "
        "the precision to change the choice. Do not modify scores or bias."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_groups", "takes the biased top-k over all experts, never limiting "
                 "it to the best groups (right with one group)", NEGATIVE_NO_GROUPS),
        Negative("group_max_only", "scores a group by its largest key instead of the sum of "
                 "its two largest (right with one group)", NEGATIVE_GROUP_MAX),
        Negative("biased_weights", "returns the biased keys s + bias as the weights instead "
                 "of s (right when the bias is zero)", NEGATIVE_BIASED_WEIGHTS),
    )

    def tolerance(self, case: Case, dtype: torch.dtype) -> Tolerance:
        if dtype != torch.float32:
            return super().tolerance(case, dtype)  # the int32 ids: exact
        u32 = unit_roundoff(torch.float32)
        if int(case["scoring"]) == 0:
            # exact inputs: the division by the sum and the scaling, a few float32 roundings
            return Tolerance(rtol=8 * u32, atol=8 * torch.finfo(torch.float32).tiny)
        # vLLM rounds sigmoid(x) to the scores' dtype (u of it) and computes it as
        # 0.5 * tanh(x / 2) + 0.5, an absolute error of a few float32 units: the reference's
        # scale carries that absolute part
        return Tolerance(rtol=2 * unit_roundoff(case.torch_dtype) + 8 * u32,
                         atol=8 * torch.finfo(torch.float32).tiny)

    def cases(self) -> Sequence[Case]:
        cs = [
            _case("bfloat16", 5, 256, 8, 4, 8, 1, True, 2.5, cpu=True),         # DeepSeek-V3
            _case("bfloat16", 4, 384, 1, 1, 8, 1, True, 2.827, cpu=True),       # Kimi-K2
            _case("float16", 6, 160, 8, 3, 6, 0, False, 16.0, cpu=True),        # DeepSeek-V2
            _case("float32", 5, 64, 8, 2, 4, 1, False, 1.0, bias="zeros", cpu=True),
            _case("float32", 7, 12, 4, 2, 3, 0, True, 1.0, cpu=True),           # groups of 3
            _case("bfloat16", 1, 256, 8, 4, 8, 0, True, 2.5, cpu=True),         # one token
            _case("bfloat16", 0, 256, 8, 4, 8, 1, True, 2.5, cpu=True),         # empty batch
        ]
        for dt in _FLOATS:
            for experts, groups, tg, topk, scoring, renorm, scaling in _ROUTERS:
                cs.append(_case(dt, 1000, experts, groups, tg, topk, scoring, renorm, scaling))
                cs.append(_case(dt, 77, experts, groups, tg, topk, 1 - scoring, not renorm,
                                scaling))
            cs += [
                _case(dt, 4096, 256, 8, 4, 8, 1, True, 2.5),
                _case(dt, 513, 256, 16, 5, 16, 0, True, 1.0),
                _case(dt, 300, 96, 32, 8, 8, 0, False, 1.0),
                _case(dt, 64, 256, 8, 4, 8, 1, True, 2.5, bias="zeros"),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS:
            groups = rng.choice([1, 2, 4, 8, 16])
            per = rng.choice([2, 3, 8, 16, 20, 32] if groups > 1 else [16, 64, 160, 256])
            tg = rng.randrange(1, groups + 1)
            scoring = rng.choice([0, 1])
            topk = rng.choice([k for k in (1, 2, 4, 6, 8) if k <= tg * per])
            tokens = rng.randrange(4, 10 if small else 3000)
            renorm = topk > 1 and rng.random() < 0.5  # one renormalized weight is always 1
            out.append(_case(dt, tokens, groups * per, groups, tg, topk, scoring, renorm,
                             rng.choice([1.0, 2.5, 16.0]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("bfloat16", 65536, 256, 8, 4, 8, 1, True, 2.5),   # DeepSeek-V3 prefill chunk
            _case("bfloat16", 65536, 384, 1, 1, 8, 1, True, 2.827),  # Kimi-K2
            _case("float32", 32768, 256, 8, 4, 8, 1, True, 2.5),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        tokens, experts = c.shape
        groups, tg, topk = int(c["groups"]), int(c["topk_group"]), int(c["topk"])
        if int(c["scoring"]) == 0:
            scores, bias = _grid_scores(tokens, experts, str(c["bias"]), gen)
        else:
            scores, bias = _planted_logits(tokens, experts, groups, tg, topk, str(c["bias"]),
                                           gen)
        scores, bias = scores.to(c.torch_dtype), bias.to(c.torch_dtype)
        if int(c["scoring"]) == 1:
            _check_margins(scores.double(), bias.double(), groups, tg, topk)
        args = (scores, groups, tg, topk, bool(c["renormalize"]), float(c["scaling"]), bias,
                int(c["scoring"]))
        return Call(c.entry, args, outputs=(Out.ret(0), Out.ret(1)))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, groups, tg, topk, renorm, scaling, bias, scoring = call.args
        s, order = _select(x.double(), bias.double(), groups, tg, topk, scoring)
        w = s.gather(1, order)
        total = w.sum(dim=1, keepdim=True)
        if renorm:
            w = w / (total + 1e-20)
        if scoring == 1:
            # sigmoid computed with an absolute error of a few float32 units: relative to 1
            # for a plain weight; for a renormalized one, 1/sum for its own error and k w /sum
            # for the sum's
            cond = (1.0 + topk * w) / total if renorm else torch.ones_like(w)
            scale = (w + cond) * scaling
        else:
            scale = w * scaling
        return (Expected(w * scaling, torch.float32, scale),
                Expected(order.to(torch.int32), torch.int32))

    def baseline_library(self) -> str:
        return _baseline.library()

    def baseline(self, call: Call) -> object:
        x, groups, tg, topk, renorm, scaling, bias, scoring = call.args
        ops = _baseline.for_tensor(x)
        if ops is not None:
            return ops.grouped_topk(x, groups, tg, topk, renorm, scaling, bias, scoring)
        s, order = _select(x.float(), bias.float(), groups, tg, topk, scoring)
        w = s.gather(1, order)
        if renorm:
            w = w / (w.sum(dim=1, keepdim=True) + 1e-20)
        return (w * scaling).float(), order.to(torch.int32)

    def cost(self, c: Case) -> Cost:
        tokens, experts = c.shape
        topk = int(c["topk"])
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        # sigmoid (~4), bias add, group top-2 and one compare per selection per expert
        return Cost(flops=float(tokens * experts * (8 + topk)),
                    bytes=float(tokens * experts * size + experts * size + tokens * topk * 8),
                    dtype="float32")


def _select(x: torch.Tensor, bias: torch.Tensor, groups: int, tg: int, topk: int,
            scoring: int) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's selection in ``x``'s precision: (the unbiased scores, the chosen ids in order).
    Stable descending sorts give ties to the lower group and expert index."""
    s = torch.sigmoid(x) if scoring == 1 else x
    key = s + bias
    tokens, experts = key.shape
    gscore = key.view(tokens, groups, experts // groups).topk(2, dim=2).values.sum(dim=2)
    keep_groups = torch.sort(gscore, dim=1, descending=True, stable=True).indices[:, :tg]
    keep = torch.zeros(tokens, groups, dtype=torch.bool, device=x.device)
    keep.scatter_(1, keep_groups, True)
    keep = keep[:, :, None].expand(-1, -1, experts // groups).reshape(tokens, experts)
    masked = torch.where(keep, key, torch.full_like(key, float("-inf")))
    order = torch.sort(masked, dim=1, descending=True, stable=True).indices[:, :topk]
    return s, order


def _grid_scores(tokens: int, experts: int, bias_kind: str,
                 gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``scoring_func=0`` inputs (float64): scores like small softmax probabilities, skewed to
    hot experts, and a bias, all multiples of 2**-10 below 2**-4, so keys and two-key group
    sums are exact in bfloat16: ties are exact and the tie rule decides them."""
    w = popularity(experts, gen)
    hot = (w / w.max()).sqrt()
    m = 1 + (62 * hot[None, :] * torch.rand(tokens, experts, generator=gen,
                                            dtype=torch.float64)).floor()
    n = torch.randint(0, 64, (experts,), generator=gen).to(torch.float64)
    if bias_kind == "zeros":
        n.zero_()
    return m * _GRID, n * _GRID


def _planted_logits(tokens: int, experts: int, groups: int, tg: int, topk: int, bias_kind: str,
                    gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Sigmoid inputs (float64 logits, bias) whose selection no rounding can change: per token
    random kept groups, ``topk`` winners among their experts (hot experts likelier), keys
    ``top - j/32`` for the winners (``top`` in 0.90..0.95 per token), 0.45..0.65 for the
    second key a kept group needs, 0.05..0.30 elsewhere; in half the rows one dropped group
    holds a decoy key of 0.70..0.78 over keys of at most 0.08 (its score stays under every
    kept group's) and one kept group no winner."""
    if topk > 8:
        raise ValueError("sigmoid cases plant at most 8 winners (their keys 1/32 apart)")
    per = experts // groups
    g = gen
    bias = torch.randint(-10, 11, (experts,), generator=g).to(torch.float64) / 256
    if bias_kind == "zeros":
        bias.zero_()
    if tokens == 0:
        return torch.empty(0, experts, dtype=torch.float64), bias
    group_rank = torch.rand(tokens, groups, generator=g).argsort(dim=1)
    kept = torch.zeros(tokens, groups, dtype=torch.bool)
    kept.scatter_(1, group_rank[:, :tg], True)
    decoy_rows = (torch.rand(tokens, generator=g) < 0.5) & (tg < groups)
    # in a decoy row with two kept groups or more, the last kept group gets no winner: its
    # largest key (a supporter's) is below the decoy's, which only the two-key sum outranks
    quiet = decoy_rows & (tg >= 2) & (topk <= (tg - 1) * per)
    winnable = kept.clone()
    winnable[quiet, group_rank[quiet, tg - 1]] = False
    weights = popularity(experts, g)[None, :] * winnable[:, :, None].expand(
        -1, -1, per).reshape(tokens, experts)
    winners = torch.multinomial(weights, topk, replacement=False, generator=g)
    key = 0.05 + 0.25 * torch.rand(tokens, experts, generator=g, dtype=torch.float64)
    ranks = torch.rand(tokens, topk, generator=g).argsort(dim=1).to(torch.float64)
    top = 0.90 + 0.05 * torch.rand(tokens, 1, generator=g, dtype=torch.float64)
    key.scatter_(1, winners, top - _GAP * ranks)
    is_winner = torch.zeros(tokens, experts, dtype=torch.bool)
    is_winner.scatter_(1, winners, True)
    # supporters: a kept group with fewer than two winners gets its missing top keys
    need = (2 - is_winner.view(tokens, groups, per).sum(dim=2)).clamp(min=0) * kept
    pick = torch.rand(tokens, groups, per, generator=g).masked_fill(
        is_winner.view(tokens, groups, per), 2.0)
    place = pick.argsort(dim=2).argsort(dim=2)  # random rank of each non-winner in its group
    support = (place < need[:, :, None]).view(tokens, experts)
    key = torch.where(support, 0.45 + 0.2 * torch.rand(tokens, experts, generator=g,
                                                         dtype=torch.float64), key)
    if tg < groups:
        dg = group_rank[:, tg]  # a dropped group
        low = (torch.arange(experts)[None, :] // per == dg[:, None]) & decoy_rows[:, None]
        key = torch.where(low, 0.05 + 0.03 * torch.rand(tokens, experts, generator=g,
                                                         dtype=torch.float64), key)
        spot = dg * per + torch.randint(0, per, (tokens,), generator=g)
        hot = torch.zeros(tokens, experts, dtype=torch.bool)
        hot.scatter_(1, spot[:, None], True)
        key = torch.where(hot & decoy_rows[:, None],
                          0.70 + 0.08 * torch.rand(tokens, experts, generator=g,
                                                   dtype=torch.float64), key)
    sig = key - bias[None, :]
    return torch.log(sig / (1.0 - sig)), bias


MARGIN = 0.02  # keys and group scores that decide the choice are at least this far apart


def _check_margins(x: torch.Tensor, bias: torch.Tensor, groups: int, tg: int,
                   topk: int) -> None:
    """The planted sigmoid inputs, as rounded to their dtype, still decide every choice by a
    margin no dtype's rounding of the keys reaches (bfloat16: ~0.005 at keys below 1)."""
    key = torch.sigmoid(x) + bias
    tokens, experts = key.shape
    gscore = key.view(tokens, groups, experts // groups).topk(2, dim=2).values.sum(dim=2)
    ranked = torch.sort(gscore, dim=1, descending=True).values
    if tg < groups and tokens and bool((ranked[:, tg - 1] - ranked[:, tg] < MARGIN).any()):
        raise ValueError("planted group scores too close")
    # the chosen keys in order, and the best one left out when the kept groups have more
    runner_up = 1 if tg * (experts // groups) > topk else 0
    _, order = _select(x, bias, groups, tg, topk + runner_up, 1)
    chosen = key.gather(1, order)
    if bool((chosen[:, :-1] - chosen[:, 1:] < MARGIN).any()):
        raise ValueError("planted keys too close")
