"""The profile layer's arithmetic and its kernel names, on the host. The profiler itself needs a
GPU: ``test_gpu.py::test_the_profiler_splits_device_time_between_own_kernels_and_torch`` and
the ``profile__*`` cheats in ``tests/adversarial/cheats_gpu/`` run on the H200."""

from __future__ import annotations

import pytest
import torch

import operators
from device_agent import triton_hooks
from device_agent.codec import decode
from device_agent.platforms.cpu import install_interpreter_support
from device_agent.profiling import MIN_DEVICE_US, DeviceTime, attribute, judge, profiled
from device_agent.protocol import Rechecked, decode_report, encode_message
from operators.invoke import invoke, prepare
from operators.spec import Tier
from operators.testing import load_module


def test_device_time_is_split_by_the_candidates_kernel_names() -> None:
    acts = [("_add_kernel", 40.0), ("Memset (Device)", 5.0), ("_add_kernel", 40.0),
            ("void at::native::elementwise_kernel<...>", 100.0), ("Memcpy DtoD", 15.0)]
    dt = attribute(acts, {"_add_kernel"})
    assert dt.own_us == 80.0 and dt.other_us == 120.0 and dt.total_us == 200.0
    assert dt.others[0] == ("void at::native::elementwise_kernel<...>", 100.0)
    assert [n for n, _ in dt.others] == ["void at::native::elementwise_kernel<...>",
                                         "Memcpy DtoD", "Memset (Device)"]
    report = Rechecked(index=0, drift=None, device_time=dt, integrity=())
    assert decode_report(decode(encode_message(report, "n")[4:])) == report  # as the agent reads it


def test_the_evidence_names_a_few_others_however_many_the_worker_reports() -> None:
    """The worker reports ``others`` (it may be the candidate's forgery): the evidence names
    the first few, each cut short."""
    many = DeviceTime(1.0, 999.0, tuple(("k" * 500, 1.0) for _ in range(10_000)))
    evidence = judge(many, "case")
    assert evidence is not None and len(evidence) < 800


def test_less_than_half_the_device_time_in_own_kernels_is_evidence() -> None:
    torch_did_it = attribute([("_copy", 30.0), ("ampere_sgemm_128x64_nn", 970.0)], {"_copy"})
    evidence = judge(torch_did_it, "mm[bf16,4096x4096x4096]")
    assert evidence is not None
    assert "3%" in evidence and "ampere_sgemm_128x64_nn 970 µs" in evidence
    assert "mm[bf16,4096x4096x4096]" in evidence
    # Most of it in own kernels, helped by a zeroed scratch buffer: fine.
    assert judge(attribute([("_k", 90.0), ("Memset (Device)", 10.0)], {"_k"}), "c") is None
    # No device work at all (an early return), or too little to mean anything: no judgement.
    assert judge(attribute([], {"_k"}), "c") is None
    assert judge(attribute([("other", MIN_DEVICE_US / 2)], {"_k"}), "c") is None
    # All of it elsewhere: the candidate launched nothing of its own.
    assert judge(attribute([("other", 50.0)], set()), "c") is not None


def test_the_host_has_no_device_profiler() -> None:
    result, activities = profiled(lambda: torch.ones(3).sum(), "cpu")
    assert float(result) == 3.0 and activities is None


def test_launches_record_the_kernel_names_a_profiler_lists() -> None:
    """A compiled Triton kernel is named after its Python function: the names recorded at
    launch are what the profiler's kernel events are matched against."""
    install_interpreter_support()
    triton_hooks.install()
    spec = operators.get("aten::add")
    module = load_module(spec.solution)
    c = spec.public_cases(Tier.CPU)[0]
    call = prepare(spec.make_call(c, torch.Generator().manual_seed(0)), "cpu")
    triton_hooks.start_recording()
    invoke(getattr(module, c.entry), call)
    names = triton_hooks.kernels_of(module.__name__)
    assert names and all(callable(getattr(module, n, None)) for n in names)
    assert triton_hooks.kernels_of("some.other.module") == set()


def test_a_profiler_that_cannot_start_leaves_the_call_unjudged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a working profiler (CUPTI unavailable in a sandbox) the call still runs and the
    layer has nothing to judge: that is never the candidate's fault."""
    import torch.profiler

    class Broken:
        def __init__(self, **kwargs: object) -> None:
            pass

        def start(self) -> None:
            raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    monkeypatch.setattr(torch.profiler, "profile", Broken)
    result, activities = profiled(lambda: 7, "cuda")
    assert result == 7 and activities is None
