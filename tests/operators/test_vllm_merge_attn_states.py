"""vllm::merge_attn_states' float32 bound admits a GPU-like float32 kernel (its exp arguments
round, its exps are off by ulps; an H100 failed the reference under the old, |po| wp + |so| ws
at 8 u, bound) and still rejects one that merges through a 16-bit intermediate."""

from __future__ import annotations

import math

import pytest
import torch

import operators
from operators.checking import compare
from operators.spec import Call, Expected, Tolerance
from operators.vllm.merge_attn_states import _merge_weights

SPEC = operators.get("vllm::merge_attn_states")
LOG2E = torch.tensor(math.log2(math.e), dtype=torch.float32)
OLD_TOL = Tolerance.ulps("float32", 8)  # with scale |po| wp + |so| ws


def _failing_call(seed: int) -> Call:
    """The case that failed on the H100: cancelling outputs, 10% infinite log-sum-exps."""
    case = next(c for c in SPEC.cases()
                if c.shape == (1536, 16, 96) and c.dtype == "float32" and c.get("lse_out"))
    return SPEC.make_call(case, torch.Generator().manual_seed(seed))


def _exp(d: torch.Tensor, ulps: int, sign: float) -> torch.Tensor:
    """Triton's float32 exp: 2 ** fl(d * log2(e)), then ``ulps`` steps toward ``sign`` * inf."""
    r = torch.exp2(d * LOG2E)
    for _ in range(ulps):
        r = torch.nextafter(r, torch.full_like(r, sign * math.inf))
    return r


def _merge(call: Call, ulps: int, half: torch.dtype | None = None) -> torch.Tensor:
    """The merge as a float32 kernel computes it (``half``: weights rounded to it)."""
    _, po, p_lse, so, s_lse = call.args
    p = torch.where(p_lse == math.inf, -math.inf, p_lse)
    s = torch.where(s_lse == math.inf, -math.inf, s_lse)
    m = torch.maximum(p, s)
    both = torch.isinf(m)
    m0 = torch.where(both, 0.0, m)
    a, b = _exp(p - m0, ulps, 1.0), _exp(s - m0, ulps, -1.0)
    total = torch.where(both, 1.0, a + b)
    wp = torch.where(both, 1.0, a / total).T[:, :, None]
    ws = torch.where(both, 0.0, b / total).T[:, :, None]
    if half is not None:
        wp, ws = wp.to(half).float(), ws.to(half).float()
    return po * wp + so * ws


def _old_bound_fails(call: Call, got: torch.Tensor) -> bool:
    """Whether ``got`` fails the version-1 bound: 8 u of |po| wp + |so| ws."""
    _, po, p_lse, so, s_lse = call.args
    wp, ws, _, _ = _merge_weights(p_lse.double(), s_lse.double())
    pd, sd = po.double(), so.double()
    old = Expected(pd * wp + sd * ws, torch.float32, pd.abs() * wp + sd.abs() * ws)
    return compare(got, old, OLD_TOL) is not None


@pytest.mark.parametrize("ulps", [0, 2])
def test_gpu_like_float32_merge_passes_new_bound_not_old(ulps: int) -> None:
    call = _failing_call(0)
    got = _merge(call, ulps)
    exp = SPEC.reference(call)[0]
    assert compare(got, exp, SPEC.tolerances["float32"]) is None
    assert _old_bound_fails(call, got)


@pytest.mark.parametrize("half", [torch.bfloat16, torch.float16])
def test_half_precision_weights_still_fail(half: torch.dtype) -> None:
    call = _failing_call(1)
    assert compare(_merge(call, 0, half), SPEC.reference(call)[0],
                   SPEC.tolerances["float32"]) is not None


def test_half_precision_inputs_and_dropped_term_still_fail() -> None:
    call = _failing_call(2)
    exp, tol = SPEC.reference(call)[0], SPEC.tolerances["float32"]
    out, po, p_lse, so, s_lse = call.args
    halved = Call(call.entry, (out, po.bfloat16().float(), p_lse, so.bfloat16().float(), s_lse),
                  call.kwargs)
    assert compare(_merge(halved, 0), exp, tol) is not None
    no_suffix = Call(call.entry, (out, po, p_lse, torch.zeros_like(so), s_lse), call.kwargs)
    assert compare(_merge(no_suffix, 0), exp, tol) is not None
