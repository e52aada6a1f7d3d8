"""The quantized-GEMM problems' baselines: vLLM's own op (through a stand-in
``vllm._custom_ops``) where vLLM runs, the PyTorch implementation elsewhere, and bad input
failing with the errors vLLM 0.13 raises (checked on the PyTorch path, which mirrors them)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
import torch

import operators
from operators.spec import Tier
from operators.vllm import _baseline, _gemm

IDS = ["vllm::awq_gemm", "vllm::gptq_gemm", "vllm::gptq_shuffle", "vllm::gptq_marlin_gemm",
       "vllm::gptq_marlin_24_gemm", "vllm::gptq_marlin_moe_repack",
       "vllm::awq_marlin_moe_repack", "vllm::marlin_int4_fp8_preprocess",
       "vllm::allspark_w8a16_gemm"]
TYPED = {"vllm::gptq_marlin_gemm": 11, "vllm::gptq_marlin_24_gemm": 5}  # b_q_type position


def _call(op_id: str, index: int = 0) -> tuple[operators.OperatorSpec, Any]:
    spec = operators.get(op_id)
    c = spec.public_cases(Tier.CPU)[index]
    return spec, spec.make_call(c, torch.Generator().manual_seed(7))


class _StandIn(types.SimpleNamespace):
    """Records every op called on it and returns a marker."""

    def __getattr__(self, name: str) -> Any:
        def op(*args: Any) -> Any:
            self.calls.append((name, args))
            return "from-vllm"
        return op


@pytest.mark.parametrize("op_id", IDS)
def test_baseline_calls_vllms_op_with_its_scalar_type(op_id: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    ops = _StandIn(calls=[])
    scalar_types = types.SimpleNamespace(**{n: ("ScalarType", n) for n in _gemm.SCALAR_TYPES})
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.scalar_type",
                        types.SimpleNamespace(scalar_types=scalar_types))
    monkeypatch.setattr(_gemm, "vllm_ops", lambda t: ops)
    spec, call = _call(op_id)
    result = spec.baseline(call)
    name = op_id.split("::")[1]
    assert [c[0] for c in ops.calls] == [name]
    args = ops.calls[0][1]
    assert len(args) == len(call.args)
    if op_id in TYPED:  # the stand-in name became vLLM's ScalarType
        assert args[TYPED[op_id]] == ("ScalarType", call.args[TYPED[op_id]])
    if name != "gptq_shuffle":
        assert result == "from-vllm"


def test_vllm_ops_only_for_cuda_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in = types.SimpleNamespace()
    monkeypatch.setattr(_baseline, "custom_ops", lambda: stand_in)
    assert _gemm.vllm_ops(torch.zeros(1)) is None  # a CPU tensor: PyTorch path
    assert operators.get("vllm::gptq_marlin_gemm").baseline_library() == "vllm"
    monkeypatch.setattr(_baseline, "custom_ops", lambda: None)
    assert operators.get("vllm::gptq_marlin_gemm").baseline_library() == "torch"


def _replace(call: Any, index: int, value: Any) -> Any:
    args = list(call.args)
    args[index] = value
    return type(call)(call.entry, tuple(args), call.kwargs, call.outputs, call.mutable,
                      call.out_buffers)


def test_awq_gemm_group_not_dividing_k() -> None:
    spec, call = _call("vllm::awq_gemm")  # K = 128, G = 32
    scales = call.args[2]
    with pytest.raises(ValueError, match="Group size should be a multiple of 32"):
        spec.baseline(_replace(call, 2, scales[:3]))  # 128 // 3 = 42


def test_gptq_marlin_gemm_bad_scales() -> None:
    spec, call = _call("vllm::gptq_marlin_gemm", 2)  # uint4, K = 128, 2 groups
    scales = call.args[4]
    three = torch.cat([scales, scales[:1]])
    with pytest.raises(RuntimeError, match="size_k = 128, is not divisible by b_scales.size"):
        spec.baseline(_replace(call, 4, three))
    with pytest.raises(RuntimeError, match="b_scales dim 1 = 32 is not size_n = 64"):
        spec.baseline(_replace(call, 4, scales[:, :32].contiguous()))


def test_gptq_marlin_24_gemm_bad_scales() -> None:
    spec, call = _call("vllm::gptq_marlin_24_gemm", 1)  # K = 256, group 128
    scales = call.args[3]
    with pytest.raises(RuntimeError, match="size_k = 256, is not divisible by b_scales.size"):
        spec.baseline(_replace(call, 3, torch.cat([scales, scales[:1]])))
    with pytest.raises(RuntimeError, match="Unexpected groupsize = 32"):
        spec.baseline(_replace(call, 3, scales.repeat(2, 1)))  # group 64


def test_gptq_gemm_bad_scales() -> None:
    spec, call = _call("vllm::gptq_gemm")  # K = 128, group 32
    scales = call.args[3]
    with pytest.raises(ValueError, match="is not \\[G, N\\] with G dividing K = 128"):
        spec.baseline(_replace(call, 3, scales[:3]))


def test_allspark_group_size() -> None:
    spec, call = _call("vllm::allspark_w8a16_gemm")
    with pytest.raises(RuntimeError, match="Currently only supports group_size = -1"):
        spec.baseline(_replace(call, 5, 128))


def test_preprocess_zero_rows_not_dividing_k() -> None:
    spec, call = _call("vllm::marlin_int4_fp8_preprocess", 2)  # AWQ, K = 128, group 32
    zeros = call.args[1]
    with pytest.raises(RuntimeError, match="qweight.size\\(0\\) % qzeros.size\\(0\\) != 0"):
        spec.baseline(_replace(call, 1, zeros[:3]))


def test_repack_bad_sizes() -> None:
    spec, call = _call("vllm::gptq_marlin_moe_repack")
    with pytest.raises(RuntimeError, match="size_n = 96 is not divisible by tile_n_size = 64"):
        spec.baseline(_replace(call, 3, 96))
    with pytest.raises(AssertionError):
        spec.baseline(_replace(call, 2, 40))


def test_gptq_shuffle_bad_perm() -> None:
    spec, call = _call("vllm::gptq_shuffle")
    with pytest.raises(ValueError, match="q_perm has 5 elements"):
        spec.baseline(_replace(call, 1, call.args[1][:5]))
