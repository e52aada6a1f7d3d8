"""On a GPU: every reference solution passes on the cuda platform with meaningful timings."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

import operators
from coordinator.local_agent import LocalAgent
from protos.client import AgentClient
from protos.records import EvalRequest, Status

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda_agent(agent_secret_env: None) -> Iterator[str]:
    agent = LocalAgent(platform="cuda")
    address = agent.start()
    try:
        asyncio.run(agent.wait_serving(timeout=300))
        yield address
    finally:
        agent.stop()


@pytest.mark.parametrize("spec", operators.all_specs(), ids=lambda s: s.id)
def test_reference_passes_with_real_timings(cuda_agent: str, spec: operators.OperatorSpec) -> None:
    async def go() -> None:
        async with AgentClient(cuda_agent) as c:
            v = await c.evaluate(EvalRequest(uuid.uuid4().hex, spec.id, spec.solution.encode()),
                                 timeout=600)
            assert v.status is Status.PASSED, (v.message, v.log[-2000:])
            assert v.system.platform == "cuda" and v.device_model
            assert v.timings and all(t.meaningful and t.median_us and t.median_us > 0
                                     for t in v.timings)
            assert all(t.baseline_median_us and t.speedup for t in v.timings)

    asyncio.run(go())


def test_sticky_device_error_is_contained(cuda_agent: str) -> None:
    from pathlib import Path

    bad = (Path(__file__).resolve().parent.parent / "fixtures" / "candidates"
           / "add_sticky_device_error.py").read_bytes()
    spec = operators.get("aten::add")

    async def go() -> None:
        async with AgentClient(cuda_agent) as c:
            v = await c.evaluate(EvalRequest(uuid.uuid4().hex, spec.id, bad), timeout=300)
            assert v.status is Status.RUNTIME_ERROR, v.message
            ok = await c.evaluate(EvalRequest(uuid.uuid4().hex, spec.id, spec.solution.encode()),
                                  timeout=600)
            assert ok.status is Status.PASSED, ok.message

    asyncio.run(go())


def test_peak_measurement_is_plausible() -> None:
    from device_agent import peaks
    from device_agent.platforms.cuda import DATASHEET, CudaPlatform

    m = peaks.measure("cuda")
    sheet = DATASHEET.get(CudaPlatform().device_model())
    assert m["bandwidth_gbps"] > 500 and all(v > 1 for v in m["tflops"].values())
    if sheet is not None:
        assert peaks.believable(m, sheet.bandwidth_gbps)
        assert m["bandwidth_gbps"] > 0.6 * sheet.bandwidth_gbps


def test_timer_undoes_a_persisting_l2_carve_out() -> None:
    """Row 20 of the catalogue: a call that raises the persisting-L2 carve-out (what an access
    policy window with a persisting hit property needs) finds it back at zero before the next
    timed call."""
    import ctypes

    import torch

    from device_agent.platforms.cuda import CU_LIMIT_PERSISTING_L2_CACHE_SIZE, CudaPlatform

    torch.zeros(1, device="cuda")  # a current context
    lib = ctypes.CDLL("libcuda.so.1")
    size = ctypes.c_size_t(0)
    assert lib.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(8 << 20)) == 0
    assert lib.cuCtxGetLimit(ctypes.byref(size), CU_LIMIT_PERSISTING_L2_CACHE_SIZE) == 0
    assert size.value > 0  # the device honoured the carve-out
    timer = CudaPlatform().timer("cuda")
    timer.clear_l2(torch.empty(timer.l2_bytes() * 2, dtype=torch.uint8, device="cuda"))
    assert lib.cuCtxGetLimit(ctypes.byref(size), CU_LIMIT_PERSISTING_L2_CACHE_SIZE) == 0
    assert size.value == 0


def test_workers_share_one_build_of_tritons_driver_helpers(tmp_path) -> None:
    """Triton's driver helper module is compiled once into the agent's shared cache, then only
    loaded; the private cache setting survives the detour."""
    import os
    import subprocess
    import sys

    shared = tmp_path / "driver"
    shared.mkdir()
    code = ("import os, torch; torch.zeros(1, device='cuda');"
            "from device_agent.platforms.gpu import load_triton_driver;"
            f"load_triton_driver({str(shared)!r});"
            "print(os.environ['TRITON_CACHE_DIR'])")
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "private")}
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=300, check=True)
        assert out.stdout.strip() == str(tmp_path / "private")
    built = list(shared.rglob("cuda_utils*.so"))
    assert len(built) == 1, built
    assert not (tmp_path / "private").exists() or not list((tmp_path / "private").rglob("*.so"))


DOUBLE = '''
import triton
import triton.language as tl

@triton.jit
def _double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, 2 * tl.load(x_ptr + i, mask=i < n), mask=i < n)

def double(x, out):
    _double[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)
    return out
'''


def test_a_dry_run_compiles_and_loads_without_launching(tmp_path) -> None:
    """After the dry run the kernel is in Triton's cache and nothing ran; the real call then
    compiles nothing more. In a process of its own: the test session runs Triton interpreted."""
    import os
    import subprocess
    import sys

    (tmp_path / "dry_candidate.py").write_text(DOUBLE)
    code = f"""
import sys, torch
sys.path.insert(0, {str(tmp_path)!r})
from device_agent import dry_run, triton_hooks
from operators.spec import Call
triton_hooks.install()
import dry_candidate as module
x = torch.arange(1000.0, device="cuda")
out = torch.full_like(x, -1.0)
seconds, why = dry_run.warm(module.double, Call("double", (x, out)), "cuda")
torch.cuda.synchronize()
assert why == "", why
assert bool(torch.all(out == -1.0)), "the dry run launched the kernel"
cache = module._double.device_caches[torch.cuda.current_device()][0]
assert len(cache) == 1, len(cache)
module.double(x, out)
torch.cuda.synchronize()
assert torch.equal(out, 2 * x) and len(cache) == 1
print("ok", seconds)
"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr[-3000:]


def test_the_profiler_splits_device_time_between_own_kernels_and_torch(tmp_path) -> None:
    """The profile layer's measurement: a call whose own kernel does the work carries its
    device time; one where torch computes (a 4096² matmul) and the candidate's kernel only
    touches the result is judged. In a process of its own (the test session is interpreted)."""
    import os
    import subprocess
    import sys

    (tmp_path / "prof_candidate.py").write_text(DOUBLE)
    code = f"""
import sys, torch
sys.path.insert(0, {str(tmp_path)!r})
from device_agent import triton_hooks
from device_agent.profiling import attribute, judge, profiled
triton_hooks.install()
import prof_candidate as module
x = torch.randn(1 << 24, device="cuda")
out = torch.empty_like(x)
module.double(x, out)  # compiled before it is profiled
torch.cuda.synchronize()
triton_hooks.start_recording()
_, acts = profiled(lambda: module.double(x, out), "cuda")
own = triton_hooks.kernels_of("prof_candidate")
assert own == {{"_double"}}, own
honest = attribute(acts, own)
assert honest.own_share is not None and honest.own_share > 0.95, (honest, acts)
assert judge(honest, "honest") is None
a = torch.randn(4096, 4096, device="cuda")
def torch_computes():
    y = (a @ a).flatten()[: 1 << 20]
    return module.double(y, y.clone())
triton_hooks.start_recording()
_, acts = profiled(torch_computes, "cuda")
cheat = attribute(acts, triton_hooks.kernels_of("prof_candidate"))
assert cheat.own_share is not None and cheat.own_share < 0.2, (cheat, acts)
assert judge(cheat, "cheat") is not None
print("ok", honest, cheat)
"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.startswith("ok"), (out.stdout[-2000:],
                                                                 out.stderr[-3000:])
