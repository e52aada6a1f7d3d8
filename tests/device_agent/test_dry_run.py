"""The dry run touches no device memory and compiles without launching; a case run dry first
gets the same verdict as without. Here the host plays the device (``device="cpu"``): every
tensor counts as device memory, so nothing may be read or written."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

import operators
from device_agent import dry_run, triton_hooks
from device_agent.platforms.cpu import CpuPlatform
from operators.spec import Call
from protos.records import Status
from tests.helpers import evaluate_in_process


@pytest.fixture(autouse=True)
def hooks() -> None:
    triton_hooks.install()


def test_torch_operators_on_device_tensors_only_allocate() -> None:
    x = torch.randn(4, 6).t()
    before = x.clone()
    with dry_run.dry("cpu"):
        y = x + 1
        c = x.contiguous()
        z = torch.zeros(5)
        z.fill_(3.0)
        x.mul_(0)  # in place: returns x itself, changes nothing
        view = x[1:]
        drawn = torch.randn(3, 2, generator=torch.Generator().manual_seed(1))
    assert torch.equal(x, before)
    assert y.shape == (6, 4) and y.stride() == (1, 6)  # the layout torch itself gives
    assert c.stride() == (4, 1)
    assert z.shape == (5,) and drawn.shape == (3, 2)
    assert view.data_ptr() == x.data_ptr() + x.stride(0) * x.element_size()  # still a view


def test_reading_a_value_stops_the_dry_run() -> None:
    with dry_run.dry("cpu"), pytest.raises(dry_run.DryRunStop):
        torch.ones(3).sum().item()
    with dry_run.dry("cpu"), pytest.raises(dry_run.DryRunStop):
        torch.ones(3).nonzero()  # its shape depends on values


def test_host_tensors_are_left_alone_when_another_device_is_dry() -> None:
    x = torch.arange(4.0)
    with dry_run.NoDeviceWork("cuda"):
        y = x * 2
        assert y.tolist() == [0.0, 2.0, 4.0, 6.0]


def test_uninitialised_memory_is_not_filled_while_dry() -> None:
    from torch.utils import deterministic

    deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
    try:
        with dry_run.dry("cpu"):
            assert not deterministic.fill_uninitialized_memory  # type: ignore[attr-defined]
        assert deterministic.fill_uninitialized_memory  # type: ignore[attr-defined]
    finally:
        deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]


def test_dry_calls_copy_layouts_not_values() -> None:
    base = torch.arange(40.0)
    strided = base[3:].as_strided((4, 5), (1, 7), 3)
    call = Call("f", (strided, 2.0, [torch.ones(3)]), {"out": torch.zeros(2, 2).t()})
    dry = dry_run.dry_call(call, "cpu")
    t = dry.args[0]
    assert (t.shape, t.stride(), t.storage_offset()) == ((4, 5), (1, 7), 3)
    assert t.untyped_storage().data_ptr() != strided.untyped_storage().data_ptr()
    assert dry.args[1] == 2.0 and dry.args[2][0].shape == (3,)
    assert dry.kwargs["out"].stride() == (1, 2)


def test_warm_never_raises_for_what_the_candidate_does() -> None:
    def exits(x: torch.Tensor) -> None:
        raise SystemExit(3)

    seconds, why = dry_run.warm(exits, Call("f", (torch.ones(2),)), "cpu")
    assert seconds >= 0 and why.startswith("SystemExit")
    seconds, why = dry_run.warm(lambda x: x + 1, Call("f", (torch.ones(2),)), "cpu")
    assert why == ""


def test_an_autotuner_run_dry_compiles_every_config_and_chooses_none() -> None:
    """Each config is asked to compile (``warmup=True``); no benchmark, no cached choice."""
    asked: list[dict[str, Any]] = []

    class Config:
        def __init__(self, block: int) -> None:
            self.block = block

        def all_kwargs(self) -> dict[str, Any]:
            return {"BLOCK": self.block}

    class Fn:
        def run(self, *args: Any, **kwargs: Any) -> None:
            asked.append(kwargs)

    class Tuner:
        arg_names = ["x", "n"]
        fn = Fn()
        nargs: Any = None
        cache: dict[Any, Any] = {}

        def prune_configs(self, kwargs: dict[str, Any]) -> list[Config]:
            assert self.nargs == {"x": "X", "n": 7}
            return [Config(64), Config(128)]

    tuner = Tuner()
    triton_hooks._compile_configs(tuner, ("X", 7), {"grid": (1,), "warmup": False})
    assert [a["BLOCK"] for a in asked] == [64, 128]
    assert all(a["warmup"] is True and a["grid"] == (1,) for a in asked)
    assert tuner.nargs is None and tuner.cache == {}


AUTOTUNED = '''
import torch
import triton
import triton.language as tl

@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def _double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, 2 * tl.load(x_ptr + i, mask=i < n), mask=i < n)

def double(x, out):
    _double[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
    return out
'''


def test_an_autotuned_kernel_run_dry_launches_nothing(tmp_path: Path) -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("runs kernels through Triton's interpreter")
    from device_agent.platforms.cpu import install_interpreter_support

    install_interpreter_support()  # the autotuner's timer on the host, as in a cpu worker
    path = tmp_path / "autotuned_candidate.py"
    path.write_text(AUTOTUNED)
    import importlib.util

    spec = importlib.util.spec_from_file_location("autotuned_candidate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x, out = torch.arange(100.0), torch.full((100,), -1.0)
    with triton_hooks.compiling_only():
        module.double(x, out)
    assert torch.all(out == -1.0)  # nothing ran
    assert module._double.cache == {}  # and nothing was chosen
    module.double(x, out)  # the real call tunes and runs as usual
    assert torch.equal(out, 2 * x) and len(module._double.cache) == 1


class _CompilingCpu(CpuPlatform):
    """The cpu platform told its kernels compile: every case goes through the dry run."""

    compiles_kernels = True


def _evaluate_dry_first(op: str, source: str) -> Any:
    return evaluate_in_process(_CompilingCpu(), op, source)


def test_verdicts_with_a_dry_run_first_are_the_verdicts_without(agent_secret_env: None) -> None:
    """The honest reference still passes (its inputs and outputs untouched by the dry run) and
    the negative still fails on the same case."""
    add = operators.get("aten::add")
    passed = _evaluate_dry_first("aten::add", add.solution)
    assert passed.status is Status.PASSED, passed.message
    wrong = _evaluate_dry_first("aten::add", add.negatives[0].source)
    assert wrong.status is Status.WRONG_ANSWER, wrong.message


def test_a_dry_run_that_stops_early_changes_nothing(agent_secret_env: None,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """`_local_scalar_dense` reads its value back to the host: its dry runs stop there (the
    agent's log says so), and the real calls still decide (PASSED)."""
    import logging

    caplog.set_level(logging.DEBUG, logger="device_agent")
    spec = operators.get("aten::_local_scalar_dense")
    v = _evaluate_dry_first(spec.id, spec.solution)
    assert v.status is Status.PASSED, v.message
    assert "dry run stopped: DryRunStop" in caplog.text
