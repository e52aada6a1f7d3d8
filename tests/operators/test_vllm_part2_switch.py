"""The baseline switch of the GGML, CUTLASS scaled-mm, scale-packing and Hadacore problems: with a
stand-in ``vllm._custom_ops`` each calls vLLM's op by name with the call's own arguments where
the tensors are CUDA ones, runs its PyTorch implementation on CPU tensors, and reports which
library its baseline is (verdicts carry it)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import operators
from operators.spec import Tier
from operators.vllm import _baseline

IDS = ["vllm::ggml_dequantize", "vllm::ggml_mul_mat_vec_a8", "vllm::ggml_mul_mat_a8",
       "vllm::ggml_moe_a8", "vllm::ggml_moe_a8_vec", "vllm::cutlass_scaled_mm",
       "vllm::cutlass_scaled_mm_azp", "vllm::cutlass_pack_scale_fp8", "vllm::hadacore_transform"]


class _StandIn:
    """Records every op called on it and returns a marker."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        def op(*args: Any) -> Any:
            self.calls.append((name, args))
            return "from-vllm"
        return op


@pytest.mark.parametrize("op_id", IDS)
def test_baseline_calls_vllms_op_where_vllm_runs(op_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = operators.get(op_id)
    call = spec.make_call(spec.public_cases(Tier.CPU)[0], torch.Generator().manual_seed(3))
    assert spec.baseline_library() == "torch"  # no vLLM on this machine
    ops = _StandIn()
    monkeypatch.setattr(_baseline, "custom_ops", lambda: ops)
    assert spec.baseline_library() == "vllm"
    assert not isinstance(spec.baseline(call), str) and ops.calls == []  # CPU tensors: PyTorch
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    assert spec.baseline(call) == "from-vllm"
    [(name, args)] = ops.calls
    assert name == op_id.split("::")[1]
    assert len(args) == len(call.args) and all(x is y for x, y in zip(args, call.args, strict=True))
