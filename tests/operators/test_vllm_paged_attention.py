"""Paged attention's checks: the error bound admits vLLM's own arithmetic (probabilities and fp8
keys and values rounded to the query dtype, 1e-6 in the denominators, v2's partitions) and not a
small real bug; v2's scratch buffers are writable and never compared, its inputs are."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

import operators
from operators.checking import check
from operators.invoke import prepare
from operators.spec import Call, Tier
from operators.vllm._paged_attention import PARTITION_SIZE, core_args, pa_case, slot_major


def _vllm_like(call: Call, v2: bool, *, drop_rescale: bool = False) -> torch.Tensor:
    """vLLM 0.13.0's arithmetic in PyTorch (float32 logits and sums, probabilities and fp8 cache
    values rounded to the query dtype, 1e-6 added to every denominator, v2's partition outputs
    kept in that dtype and merged by rescaled exp sums)."""
    (out, query, kc, vc, kvh, scale, table, seq_lens, bs, _, alibi, kv, ks,
     vs) = core_args(call, v2)
    keys, values = slot_major(kc, vc)
    dt, d = query.dtype, query.shape[2]
    g = query.shape[1] // kvh
    for s in range(query.shape[0]):
        n = int(seq_lens[s])
        blocks = table[s, :-(-n // bs)].long()
        k = keys[blocks].reshape(-1, kvh, d)[:n]
        v = values[blocks].reshape(-1, kvh, d)[:n]
        if kv != "auto":
            k, v = (k.float() * ks).to(dt), (v.float() * vs).to(dt)
        logits = torch.einsum("kgd,tkd->kgt", query[s].float().view(kvh, g, d), k.float()) * scale
        if alibi is not None:
            logits += alibi.view(kvh, g, 1) * (torch.arange(n).float() - n + 1)
        part = PARTITION_SIZE if v2 else n
        maxes, sums, outs = [], [], []
        for p0 in range(0, n, part):
            m = logits[..., p0:p0 + part].amax(-1, keepdim=True)
            e = torch.exp(logits[..., p0:p0 + part] - m)
            p = (e / (e.sum(-1, keepdim=True) + 1e-6)).to(dt).float()
            outs.append(torch.einsum("kgt,tkd->kgd", p, v[p0:p0 + part].float()).to(dt).float())
            maxes.append(m)
            sums.append(e.sum(-1, keepdim=True))
        top = torch.stack(maxes).amax(0)
        w = [e if drop_rescale else e * torch.exp(m - top) for e, m in zip(sums, maxes, strict=True)]
        o = sum(wi * oi for wi, oi in zip(w, outs, strict=True)) / (sum(w) + (1e-6 if v2 else 0))
        out[s] = o.reshape(out.shape[1:]).to(dt)
    return out


@pytest.mark.parametrize("v2", [False, True])
@pytest.mark.parametrize("dt,kv,alibi", [("bfloat16", "fp8", False), ("float16", "auto", True),
                                         ("float32", "fp8_e4m3", True)])
def test_bound_admits_vllms_arithmetic(v2: bool, dt: str, kv: str, alibi: bool) -> None:
    spec = operators.get("vllm::paged_attention_v2" if v2 else "vllm::paged_attention_v1")
    c = pa_case(spec.entry_points[0].name, 3, 8, 2, 128, dt, kv=kv, max_len=1300, alibi=alibi,
                k_scale="unit", qstd=4.0)
    call = spec.make_call(c, torch.Generator().manual_seed(11))
    (expected,) = spec.reference(call)
    got = _vllm_like(prepare(call, "cpu"), v2)
    assert check(got, expected, spec.tolerance(c, expected.dtype)) is None


def test_bound_catches_unrescaled_partitions() -> None:
    """Merging v2's partitions without rescaling them to the global maximum is a real bug."""
    spec = operators.get("vllm::paged_attention_v2")
    c = pa_case("paged_attention_v2", 3, 8, 2, 128, "float16", max_len=1300, qstd=4.0)
    call = spec.make_call(c, torch.Generator().manual_seed(11))
    (expected,) = spec.reference(call)
    tol = spec.tolerance(c, expected.dtype)
    assert check(_vllm_like(prepare(call, "cpu"), True), expected, tol) is None
    assert check(_vllm_like(prepare(call, "cpu"), True, drop_rescale=True), expected,
                 tol) is not None


V2_FROM_V1 = '''

@triton.jit
def _flip(ptr, n, BLOCK: tl.constexpr):
    # flips the lowest bit of every element (through an integer view)
    i = tl.arange(0, BLOCK)
    tl.store(ptr + i, tl.load(ptr + i, mask=i < n) ^ 1, mask=i < n)


def _touch(t):
    _flip[(1,)](t.view(torch.int16 if t.element_size() == 2 else torch.int32), t.numel(),
                BLOCK=triton.next_power_of_2(max(1, t.numel())))


def paged_attention_v2(out, exp_sum, max_logits, tmp_out, *rest):
    {touch}
    return paged_attention_v1(out, *rest)
'''


def _run_first_cases(source: str) -> list[Any]:
    from device_agent.platforms.cpu import install_interpreter_support
    from operators.testing import run_cases

    os.environ["TRITON_INTERPRET"] = "1"
    install_interpreter_support()
    spec = operators.get("vllm::paged_attention_v2")
    first = spec.public_cases(Tier.CPU)[:2]

    class Two(type(spec)):  # type: ignore[misc]
        def cases(self) -> list[Any]:
            return first

    return run_cases(Two(), source, hidden=False)


@pytest.mark.parametrize("touch,passes", [
    ("pass  # leaves the scratch as the harness poisoned it", True),
    ("_touch(tmp_out)  # scribbles on scratch", True),
    ("_touch(exp_sum)  # scribbles on scratch", True),
    ("_touch(rest[0])  # scribbles on the query", False),
])
def test_scratch_is_free_but_inputs_are_not(touch: str, passes: bool) -> None:
    v1 = operators.get("vllm::paged_attention_v1").solution
    outcomes = _run_first_cases(v1 + V2_FROM_V1.format(touch=touch))
    assert all(o.error is None for o in outcomes), outcomes
    assert all(o.passed for o in outcomes) is passes
    if not passes:
        assert any(o.mismatch and "argument 4 was modified" in o.mismatch.summary
                   for o in outcomes)
