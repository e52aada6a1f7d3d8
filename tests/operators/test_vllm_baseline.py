"""The vLLM problems' baselines switch to vLLM's own kernels where ``vllm`` imports: with a
stand-in ``vllm._custom_ops``, each baseline hands the call's very tensors and arguments to the
op of its name and returns what the op returns, and ``baseline_library()`` says ``vllm``;
without one, it runs PyTorch and says ``torch``."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import operators
from operators.invoke import prepare
from operators.spec import Tier
from operators.vllm import _baseline

PROBLEMS = ["rms_norm", "fused_add_rms_norm", "fused_qk_norm_rope",
            "rms_norm_dynamic_per_token_quant", "rms_norm_per_block_quant", "scaled_fp8_quant",
            "scaled_int8_quant", "convert_fp8", "merge_attn_states", "selective_scan_fwd",
            "convert_vertical_slash_indexes"]


class StandIn:
    """Records every op called on it; each returns a marker naming the op."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def op(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return ("from vllm", name)
        return op


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return a is b
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(
            _same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@pytest.mark.parametrize("name", PROBLEMS)
def test_baseline_calls_vllm_when_it_imports(name: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    spec = operators.get(f"vllm::{name}")
    stand_in = StandIn()
    monkeypatch.setattr(_baseline, "custom_ops", lambda: stand_in)
    assert spec.baseline_library() == "vllm"
    for c in spec.public_cases(Tier.CPU):
        # vLLM's kernels take device tensors: the meta device stands in for CUDA.
        call = prepare(spec.make_call(c, torch.Generator().manual_seed(0)), "meta")
        stand_in.calls.clear()
        result = spec.baseline(call)
        assert len(stand_in.calls) == 1, c.name
        op, args, kwargs = stand_in.calls[0]
        assert op == name
        assert _same(args, call.args), c.name
        assert set(kwargs) == set(call.kwargs) and all(
            _same(kwargs[k], call.kwargs[k]) for k in kwargs), c.name
        assert result in (None, ("from vllm", name)), c.name


@pytest.mark.parametrize("name", PROBLEMS)
def test_baseline_runs_torch_without_vllm(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = operators.get(f"vllm::{name}")
    stand_in = StandIn()
    monkeypatch.setattr(_baseline, "custom_ops", lambda: None)
    assert spec.baseline_library() == "torch"
    c = spec.public_cases(Tier.CPU)[0]
    spec.baseline(prepare(spec.make_call(c, torch.Generator().manual_seed(0)), "cpu"))
    assert not stand_in.calls
