"""Routing as real MoE routers produce it, for the MoE problems' inputs.

Real routers are skewed: a few hot experts take a large share of the tokens and many experts get
few or none in a small batch (DeepSeek-V3's 256 experts at top-8, Mixtral's 8 at top-2). The
popularity here is Zipf-like over a random order of the experts, drawn from the case's
generator, so every case has its own hot experts.
"""

from __future__ import annotations

import torch


def popularity(num_experts: int, gen: torch.Generator, skew: float = 1.1) -> torch.Tensor:
    """Probabilities ``[num_experts]`` (float64, summing to 1): expert of rank r gets
    ``(r + 1) ** -skew``, ranks a random permutation of the experts."""
    ranks = torch.randperm(num_experts, generator=gen).to(torch.float64)
    w = (ranks + 1.0) ** -skew
    return w / w.sum()


def route(num_tokens: int, topk: int, weights: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """``[num_tokens, topk]`` int64 expert ids: each token's ``topk`` distinct experts, drawn
    without replacement with probabilities ``weights``, most likely first."""
    if num_tokens == 0:
        return torch.empty((0, topk), dtype=torch.int64)
    probs = weights.unsqueeze(0).expand(num_tokens, -1).contiguous()
    return torch.multinomial(probs, topk, replacement=False, generator=gen)


def log_popularity(num_experts: int, gen: torch.Generator, skew: float = 1.1) -> torch.Tensor:
    """A per-expert logit bias (float64, max 0) that makes router logits favour hot experts."""
    w = popularity(num_experts, gen, skew)
    return (w / w.max()).log()
