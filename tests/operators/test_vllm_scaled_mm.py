"""cutlass_scaled_mm and cutlass_scaled_mm_azp: the inputs are real quantizations (the
reference is close to the float product), the zero-point reference agrees with dequantizing the
activations, and bad input fails with the errors vLLM 0.13 raises (checked on the PyTorch path,
which mirrors them). The baseline switch: test_vllm_part2_switch.py."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import operators
from operators.spec import Tier
from operators.vllm import _scaled_mm as S

IDS = ["vllm::cutlass_scaled_mm", "vllm::cutlass_scaled_mm_azp"]


def _call(op_id: str, index: int = 0) -> tuple[operators.OperatorSpec, operators.Call]:
    spec = operators.get(op_id)
    return spec, spec.make_call(spec.public_cases(Tier.CPU)[index], torch.Generator().manual_seed(5))


@pytest.mark.parametrize("dt", [torch.int8, S.FP8])
@pytest.mark.parametrize("per_row", [True, False])
def test_quantization_is_real(dt: torch.dtype, per_row: bool) -> None:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(6, 256, generator=gen, dtype=torch.float64)
    q, scale = S.quantize_rows(x, dt, per_row)
    assert q.dtype == dt and scale.dtype == torch.float32
    assert scale.shape == ((6, 1) if per_row else (1,))
    back = q.double() * scale.double().reshape(-1, 1)
    assert float((back - x).abs().max()) <= float(scale.max()) * (0.5 if dt == torch.int8 else 16)
    assert float(q.double().abs().max()) == (127.0 if dt == torch.int8 else 448.0)


@pytest.mark.parametrize("per_row", [True, False])
def test_zero_point_reference_is_the_dequantized_product(per_row: bool) -> None:
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(5, 64, generator=gen, dtype=torch.float64) + 0.7
    a, sa, azp = S.quantize_asym(x, per_row)
    assert int(a.min()) == -128 and int(a.max()) == 127  # the range is used end to end
    assert float(((a.double() - azp.double().reshape(-1, 1)) * sa.double().reshape(-1, 1) - x)
                 .abs().max()) <= float(sa.max()) * 0.51
    w = torch.randint(-127, 128, (16, 64), generator=gen, dtype=torch.int8)
    b = S.column_major(w)
    sb = torch.full((1,), 0.01)
    colsum = w.to(torch.int64).sum(1)
    corr = azp.reshape(-1, 1).to(torch.int64) * colsum.reshape(1, -1)
    exp = S.expected(a, b, sa, sb, torch.float16, None, corr)
    deq = (a.double() - azp.double().reshape(-1, 1)) * sa.double().reshape(-1, 1)
    direct = (deq @ b.double()) * sb.double()
    assert torch.allclose(exp.value, direct, rtol=1e-12, atol=0)


def _replace(call: operators.Call, index: int, value: Any) -> operators.Call:
    args = list(call.args)
    args[index] = value
    return operators.Call(call.entry, tuple(args))


def test_scaled_mm_bad_input_fails_as_vllm_does() -> None:
    spec, call = _call("vllm::cutlass_scaled_mm")  # int8, K 64, N 48: the CUTLASS path
    a, b, sa, sb, out, bias = call.args
    with pytest.raises(RuntimeError, match="a scale must be 2d tensor"):
        spec.baseline(_replace(call, 2, torch.ones(a.shape[0] + 1)))
    with pytest.raises(RuntimeError, match=r"a_scale_group_shape must be \[1, 128\]"):
        spec.baseline(_replace(call, 2, torch.ones(a.shape[0], 3)))
    with pytest.raises(AssertionError):
        spec.baseline(_replace(call, 4, torch.float32))
    with pytest.raises(AssertionError):
        spec.baseline(_replace(call, 5, torch.zeros(b.shape[1] + 1, dtype=out)))
    spec2, odd = _call("vllm::cutlass_scaled_mm", 3)  # N 24: vLLM's Triton path asserts
    with pytest.raises(AssertionError):
        spec2.baseline(_replace(odd, 3, torch.ones(odd.args[1].shape[1] + 1, 1)))


def test_scaled_mm_azp_bad_input_fails_as_vllm_does() -> None:
    spec, call = _call("vllm::cutlass_scaled_mm_azp")  # per-token azp
    a, b, sa, sb, out, adj, azp, bias = call.args
    with pytest.raises(RuntimeError, match=r"a_scales.numel\(\) == 1 \|\| a_scales.numel\(\) == a.size\(0\)"):
        spec.baseline(_replace(call, 2, torch.ones(a.shape[0] + 1, 1)))
    with pytest.raises(RuntimeError, match="azp_adj.dtype"):
        spec.baseline(_replace(call, 5, adj.to(torch.int64)))
    with pytest.raises(AssertionError):
        spec.baseline(_replace(call, 6, azp[:-1]))
    with pytest.raises(AssertionError):  # K not a multiple of 16
        spec.baseline(_replace(_replace(call, 0, a[:, :40]), 1, b[:40]))
