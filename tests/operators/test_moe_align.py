"""The align-block-size problems' shared layout code (operators/vllm/_moe_align.py) and inputs."""

from __future__ import annotations

import random

import pytest
import torch

import operators
from operators.spec import Tier
from operators.vllm._moe_align import segment_ids


@pytest.mark.parametrize("lengths", [[], [0], [0, 0, 0], [3], [0, 3], [3, 0], [0, 3, 0],
                                     [1, 0, 0, 2, 0], [5, 0, 0, 0], [0, 0, 0, 5], [1] * 10])
def test_segment_ids_are_repeat_interleaves_including_empty_segments(lengths: list[int]) -> None:
    t = torch.tensor(lengths, dtype=torch.int64)
    want = torch.repeat_interleave(torch.arange(len(lengths)), t)
    got = segment_ids(t, int(t.sum()))
    assert got.dtype == torch.int64 and torch.equal(got, want)


def test_segment_ids_match_repeat_interleave_on_random_lengths() -> None:
    rng = random.Random(0)
    for _ in range(500):
        zeros = rng.random()  # from no empty segment to nearly all empty
        t = torch.tensor([0 if rng.random() < zeros else rng.randrange(1, 20)
                          for _ in range(rng.randrange(0, 40))], dtype=torch.int64)
        want = torch.repeat_interleave(torch.arange(t.numel()), t)
        assert torch.equal(segment_ids(t, int(t.sum())), want)


def test_the_lora_idle_case_has_an_active_adapter_without_tokens_whatever_the_seed() -> None:
    spec = operators.get("vllm::moe_lora_align_block_size")
    idle = [c for c in spec.public_cases(Tier.CPU) if c.get("idle")]
    assert idle
    for seed in range(40):
        call = spec.make_call(idle[0], torch.Generator().manual_seed(seed))
        mapping, loras, enabled, lora_ids = (call.args[1], call.args[4], call.args[10],
                                             call.args[11])
        active = [int(x) for x in lora_ids[:loras] if int(x) >= 0 and int(enabled[int(x)])]
        assert any(int((mapping == a).sum()) == 0 for a in active), seed
        assert any(int((mapping == a).sum()) > 0 for a in active), seed
