"""vllm::apply_repetition_penalties_cuda — ``vllm._custom_ops.apply_repetition_penalties_cuda(
logits, prompt_mask, output_mask, repetition_penalties)`` (vLLM 0.13.0, csrc/sampler.cu): the
sampler's repetition penalty, in place on the logits.

For every token that appears in the sequence's prompt or output (``prompt_mask | output_mask``,
bool ``[num_seqs, vocab]``), a positive logit is divided by the sequence's penalty and any other
logit multiplied by it; other logits are untouched. ``logits`` (``[num_seqs, vocab]``, float32,
float16 or bfloat16, contiguous) and ``repetition_penalties`` (``[num_seqs]``, the logits'
dtype) as vLLM's kernel takes them (the wrapper falls back to PyTorch for other layouts).
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

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _repetition_kernel(logits_ptr, prompt_ptr, output_ptr, pen_ptr, vocab,
                       BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < vocab
    offs = row.to(tl.int64) * vocab + cols
    x = tl.load(logits_ptr + offs, mask=mask, other=0.0)
    seen = (tl.load(prompt_ptr + offs, mask=mask, other=0) != 0) | \
        (tl.load(output_ptr + offs, mask=mask, other=0) != 0)
    p = tl.load(pen_ptr + row).to(tl.float32)
    xf = x.to(tl.float32)
    y = tl.where(xf > 0, xf / p, xf * p)
    tl.store(logits_ptr + offs, y.to(x.dtype), mask=mask & seen)


def apply_repetition_penalties_cuda(logits, prompt_mask, output_mask, repetition_penalties):
    num_seqs, vocab = logits.shape
    if num_seqs == 0 or vocab == 0:
        return None
    block = 1024
    grid = (num_seqs, triton.cdiv(vocab, block))
    _repetition_kernel[grid](logits, prompt_mask, output_mask, repetition_penalties, vocab,
                             BLOCK=block)
    return None
'''

# Divides every repeated logit by the penalty, whatever its sign: right when the penalties are
# all 1 (vLLM's default, repetition penalty off).
NEGATIVE_ALWAYS_DIVIDE = SOLUTION.replace("    y = tl.where(xf > 0, xf / p, xf * p)\n",
                                          "    y = xf / p\n")

# Penalizes only tokens of the output, forgetting the prompt's.
NEGATIVE_OUTPUT_ONLY = SOLUTION.replace(
    "    seen = (tl.load(prompt_ptr + offs, mask=mask, other=0) != 0) | \\\n"
    "        (tl.load(output_ptr + offs, mask=mask, other=0) != 0)\n",
    "    seen = tl.load(output_ptr + offs, mask=mask, other=0) != 0\n")

# Launches vocab // BLOCK programs per row: the tail of a vocabulary that is not a multiple of
# the block is never penalized (right for vocab sizes such as 4096).
NEGATIVE_NO_TAIL = SOLUTION.replace("grid = (num_seqs, triton.cdiv(vocab, block))",
                                    "grid = (num_seqs, vocab // block)")

_FLOATS = ("float32", "float16", "bfloat16")
# Vocabularies: Llama-2 (32000), GPT-2/NeoX (50257, odd), Llama-3 (128256), DeepSeek-V3
# (129280), Qwen2/3 (151936).
_VOCABS = (32000, 50257, 128256, 129280, 151936)


def _case(dtype: str, seqs: int, vocab: int, *, penalties: str = "mixed",
          values: str = "normal", cpu: bool = False) -> Case:
    return case("apply_repetition_penalties_cuda", dtype, (seqs, vocab), penalties=penalties,
                values=values, cpu=cpu)


@register("vllm::apply_repetition_penalties_cuda", version=1, kind=Kind.COMPUTE)
class ApplyRepetitionPenaltiesCuda(OperatorSpec):
    entry_points = (
        EntryPoint(
            "apply_repetition_penalties_cuda",
            "apply_repetition_penalties_cuda(logits: Tensor, prompt_mask: Tensor, "
            "output_mask: Tensor, repetition_penalties: Tensor) -> None",
            "In place: logits of tokens seen in the prompt or output divided (if positive) or "
            "multiplied (otherwise) by the sequence's repetition penalty.",
        ),
    )
    description = (
        "The sampler's repetition penalty as vLLM's "
        "`vllm._custom_ops.apply_repetition_penalties_cuda(logits, prompt_mask, output_mask, "
        "repetition_penalties)`, in place on `logits` (`[num_seqs, vocab]`, float32, float16 "
        "or bfloat16, contiguous). `prompt_mask` and `output_mask` are bool `[num_seqs, "
        "vocab]` (contiguous): whether the token appears in the sequence's prompt / generated "
        "output. `repetition_penalties` is `[num_seqs]` in the logits' dtype (> 0; 1.0 means "
        "off). For every (s, v) with `prompt_mask[s, v] or output_mask[s, v]`: if `logits[s, "
        "v] > 0` set it to `logits[s, v] / repetition_penalties[s]`, else to `logits[s, v] * "
        "repetition_penalties[s]`; leave every other logit unchanged. Logits may be -inf "
        "(masked tokens) or +inf. Return None; do not modify the masks or the penalties."
    )
    solution = SOLUTION
    negatives = (
        Negative("always_divide", "divides every repeated logit by the penalty, whatever its "
                 "sign (right only when every penalty is 1)", NEGATIVE_ALWAYS_DIVIDE),
        Negative("output_only", "penalizes only tokens of the output, never reading "
                 "prompt_mask", NEGATIVE_OUTPUT_ONLY),
        Negative("no_vocab_tail", "launches vocab // BLOCK programs per sequence: the end of a "
                 "vocabulary that is not a multiple of the block is never penalized",
                 NEGATIVE_NO_TAIL),
    )
    # One division or multiplication: the output dtype's rounding (float16/bfloat16, computed
    # in float32 first), or float32 division as Triton and CUDA compile it by default (within
    # 2 ulps).
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 4),
    }

    def cases(self) -> Sequence[Case]:
        cs = [
            _case("float32", 3, 4096, penalties="ones", cpu=True),        # penalty off
            _case("float32", 4, 1000, cpu=True),
            _case("bfloat16", 2, 3001, cpu=True),
            _case("float16", 5, 777, values="specials", cpu=True),        # -inf, +inf, 0
            _case("float32", 1, 2048, values="large", cpu=True),
            _case("float16", 3, 2500, penalties="below_one", cpu=True),
            _case("bfloat16", 0, 1000, cpu=True),                          # no sequences
        ]
        for dt in _FLOATS:
            for vocab in _VOCABS:
                cs.append(_case(dt, 64, vocab))
            cs += [
                _case(dt, 1, 151936, values="specials"),
                _case(dt, 7, 128256, values="large"),
                _case(dt, 33, 32000, penalties="ones"),
                _case(dt, 17, 50257, penalties="below_one"),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS:
            seqs = rng.randrange(1, 6 if small else 200)
            vocab = rng.randrange(100, 3000) if small else rng.choice(
                [*_VOCABS, rng.randrange(1000, 200000)])
            out.append(_case(dt, seqs, vocab, penalties=rng.choice(["mixed", "below_one"]),
                             values=rng.choice(["normal", "normal", "specials", "large"]),
                             cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("float32", 512, 151936),     # Qwen3, 512 sequences
            _case("float32", 1024, 128256),    # Llama-3
            _case("bfloat16", 1024, 129280),   # DeepSeek-V3
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        seqs, vocab = c.shape
        values = str(c["values"])
        std = {"normal": 4.0, "specials": 4.0}.get(values, 1.0)
        x = torch.randn(seqs, vocab, generator=gen, dtype=torch.float64) * std
        if values == "large":
            big = {"float32": 1e30, "float16": 2e4, "bfloat16": 1e30}[c.dtype]
            x = x * (big / 4)  # |x * penalty| stays finite in the dtype
        if values == "specials" and x.numel():
            flat = x.view(-1)
            picks = torch.randperm(flat.numel(), generator=gen)[: max(3, flat.numel() // 10)]
            flat[picks] = torch.tensor([float("-inf"), float("inf"), 0.0, -0.0])[
                torch.arange(picks.numel()) % 4].to(torch.float64)
        # prompts cover a few hundred distinct tokens, outputs fewer (overlapping them)
        prompt = torch.rand(seqs, vocab, generator=gen) < 0.05
        output = torch.rand(seqs, vocab, generator=gen) < 0.01
        kind = str(c["penalties"])
        if kind == "ones":
            pen = torch.ones(seqs, dtype=torch.float64)
        elif kind == "below_one":  # rewarding repetition: penalties in (0.5, 1)
            pen = 0.5 + 0.5 * torch.rand(seqs, generator=gen, dtype=torch.float64)
        else:  # 1.0 (off) for some sequences, 1.05..2 for the rest
            pen = 1.05 + 0.95 * torch.rand(seqs, generator=gen, dtype=torch.float64)
            pen[torch.rand(seqs, generator=gen) < 0.25] = 1.0
        args = (x.to(c.torch_dtype), prompt, output, pen.to(c.torch_dtype))
        return Call(c.entry, args, outputs=(Out.arg(0),), mutable=frozenset({0}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, prompt, output, pen = call.args
        x64 = x.double()
        p = pen.double()[:, None]
        y = torch.where(prompt | output, torch.where(x64 > 0, x64 / p, x64 * p), x64)
        return (Expected(y, x.dtype),)

    def baseline_library(self) -> str:
        return _baseline.library()

    def baseline(self, call: Call) -> object:
        x, prompt, output, pen = call.args
        ops = _baseline.for_tensor(x)
        if ops is not None:
            ops.apply_repetition_penalties_cuda(x, prompt, output, pen)
            return None
        # vLLM's PyTorch fallback (apply_repetition_penalties_torch) multiplies by a rounded
        # 1 / p; dividing rounds once
        p = pen.unsqueeze(1)
        y = torch.where(x > 0, x / p, x * p)
        torch.where(prompt | output, y, x, out=x)
        return None

    def cost(self, c: Case) -> Cost:
        seqs, vocab = c.shape
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        # logits read and written, both masks read, one divide or multiply each
        return Cost(flops=float(seqs * vocab), bytes=float(seqs * vocab * (2 * size + 2)
                                                            + seqs * size), dtype=c.dtype)
