"""The vLLM MoE-routing and sampling problems' baseline switch, with a stand-in
``vllm._custom_ops``: where vLLM imports (and the tensors are on CUDA), a problem's baseline is
vLLM's own op, called with the arguments of vLLM 0.13.0's signature, and ``baseline_library``
says so; elsewhere PyTorch runs."""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import operators
from operators.spec import Tier
from operators.vllm import _baseline

# vLLM 0.13.0's vllm/_custom_ops.py signatures of the ops these problems time against.
SIGNATURES = {
    "moe_sum": "input, output",
    "moe_align_block_size": "topk_ids, num_experts, block_size, sorted_token_ids, experts_ids, "
                            "num_tokens_post_pad, expert_map=None",
    "batched_moe_align_block_size": "max_tokens_per_batch, block_size, expert_num_tokens, "
                                    "sorted_ids, expert_ids, num_tokens_post_pad",
    "moe_lora_align_block_size": "topk_ids, token_lora_mapping, num_experts, block_size, "
                                 "max_loras, max_num_tokens_padded, max_num_m_blocks, "
                                 "sorted_token_ids, experts_ids, num_tokens_post_pad, "
                                 "adapter_enabled, lora_ids, expert_map=None",
    "topk_softmax": "topk_weights, topk_ids, token_expert_indices, gating_output, "
                    "renormalize=False",
    "grouped_topk": "scores, num_expert_group, topk_group, topk, renormalize, "
                    "routed_scaling_factor, bias, scoring_func=0",
    "apply_repetition_penalties_cuda": "logits, prompt_mask, output_mask, repetition_penalties",
    "permute_cols": "a, perm",
    "shuffle_rows": "input_tensor, dst2src_map",
}


def _stand_in(calls: list[tuple[str, inspect.BoundArguments]]) -> types.ModuleType:
    """A ``vllm._custom_ops`` whose ops record how they were called and return a marker."""
    module = types.ModuleType("vllm._custom_ops")
    for name, params in SIGNATURES.items():
        namespace: dict[str, Any] = {}
        exec(f"def {name}({params}): pass", namespace)  # noqa: S102 - a signature, no code
        sig = inspect.signature(namespace[name])

        def op(*args: Any, _name: str = name, _sig: inspect.Signature = sig, **kw: Any) -> str:
            calls.append((_name, _sig.bind(*args, **kw)))
            return f"vllm:{_name}"

        setattr(module, name, op)
    return module


@pytest.fixture
def vllm_present(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any]]]:
    calls: list[tuple[str, Any]] = []
    monkeypatch.setitem(sys.modules, "vllm._custom_ops", _stand_in(calls))
    _baseline.custom_ops.cache_clear()
    yield calls
    _baseline.custom_ops.cache_clear()


def test_vllm_kernels_only_where_vllm_imports_and_the_tensors_are_on_cuda(
        vllm_present: list[tuple[str, Any]]) -> None:
    assert _baseline.library() == "vllm"
    assert _baseline.for_tensor(torch.zeros(1)) is None  # validate's CPU tensors: PyTorch
    assert operators.get("vllm::moe_sum").baseline_library() == "vllm"


def test_without_vllm_the_baseline_is_pytorch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm._custom_ops", None)  # import fails
    _baseline.custom_ops.cache_clear()
    try:
        assert _baseline.library() == "torch"
        assert operators.get("vllm::shuffle_rows").baseline_library() == "torch"
    finally:
        _baseline.custom_ops.cache_clear()


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_the_baseline_is_vllms_op_on_the_calls_own_tensors(
        name: str, vllm_present: list[tuple[str, Any]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_baseline, "for_tensor", lambda t: _baseline.custom_ops())
    spec = operators.get(f"vllm::{name}")
    c = spec.public_cases(Tier.CPU)[1]
    call = spec.make_call(c, torch.Generator().manual_seed(0))
    result = spec.baseline(call)
    assert [n for n, _ in vllm_present] == [name]
    bound = vllm_present[0][1]
    passed = list(bound.arguments.values())
    assert len(passed) == len(call.args)
    assert all(p is a for p, a in zip(passed, call.args, strict=True))  # the same objects
    returns = any(o.where == "return" for o in call.outputs)
    assert result == (f"vllm:{name}" if returns else None)
