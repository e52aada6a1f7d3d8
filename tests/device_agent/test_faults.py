"""Faults through a real agent with real candidate files, each followed by an honest candidate
on the same agent. The limits are set before any candidate code runs, so no test here can hurt
the machine: the fork bomb is bounded and refused, the allocation is bigger than the machine."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import operators
from protos.client import AgentBusy, AgentClient
from protos.records import EvalRequest, Progress, Stage, Status
from tests.device_agent.test_agent import ADD, evaluate, fixture
from tests.helpers import running_agent

ROOT = os.geteuid() == 0


def _processes_of(uid: int) -> list[int]:
    """Processes running as ``uid`` (each worker has a private uid of its own: other agents'
    workers, such as those of tests running beside this one, are never counted)."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                status = (p / "status").read_text()
            except OSError:
                continue
            uids = next((line.split()[1:] for line in status.splitlines()
                         if line.startswith("Uid:")), [])
            if str(uid) in uids:
                pids.append(int(p.name))
    return pids


def _then_honest(address: str) -> None:
    assert evaluate(address, ADD.solution).status is Status.PASSED


@pytest.mark.skipif(not ROOT, reason="the private-uid process limit needs the agent to run as root")
def test_fork_bomb_is_refused_and_cleaned_up(cpu_agent: str) -> None:
    v = evaluate(cpu_agent, fixture("add_fork_bomb.py"))
    assert v.status is Status.RUNTIME_ERROR
    assert "fork refused after" in v.message, v.message
    refused_after = int(v.message.split("fork refused after ")[1].split()[0])
    assert refused_after < 64
    uid = int(v.message.split("(uid ")[1].split(")")[0])
    assert uid != 0
    deadline = time.monotonic() + 10  # the worker is ended in the background after the verdict
    while _processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_of(uid)  # the children (asleep for 120 s) died with their worker
    _then_honest(cpu_agent)


@pytest.mark.skipif(not ROOT, reason="private uid and network namespace need root")
def test_worker_runs_as_private_uid_without_network(cpu_agent: str) -> None:
    v = evaluate(cpu_agent, fixture("add_network.py"))
    assert v.status is Status.RUNTIME_ERROR
    assert "probe uid=" in v.message and "probe uid=0 " not in v.message, v.message
    assert "network=connected" not in v.message, v.message


def test_out_of_memory_is_a_runtime_error(cpu_agent: str) -> None:
    v = evaluate(cpu_agent, fixture("add_oom.py"))
    assert v.status is Status.RUNTIME_ERROR
    assert "alloc" in v.message.lower() or "memory" in v.message.lower(), v.message
    _then_honest(cpu_agent)


def test_stdout_flood_is_stopped(cpu_agent: str) -> None:
    v = evaluate(cpu_agent, fixture("add_stdout_flood.py"), timeout=60)
    assert v.status is Status.RUNTIME_ERROR
    # CPython ignores SIGXFSZ, so the write fails with EFBIG once the file limit is reached.
    assert "SIGXFSZ" in v.message or "File too large" in v.message, v.message
    assert len(v.log) <= 10_000  # the verdict carries a bounded tail, not the flood
    _then_honest(cpu_agent)


@pytest.mark.parametrize("name", ["add_hang_kernel.py", "add_hang_python.py"])
def test_hangs_time_out(cpu_agent: str, name: str) -> None:
    v = evaluate(cpu_agent, fixture(name), timeout=10)
    assert v.status is Status.TIMEOUT, v.message
    assert "correctness" in v.message
    _then_honest(cpu_agent)


def test_out_of_bounds_write_crashes_only_the_worker(cpu_agent: str) -> None:
    v = evaluate(cpu_agent, fixture("add_oob_write.py"))
    assert v.status is Status.RUNTIME_ERROR
    assert "SIGSEGV" in v.message or "SIGBUS" in v.message or "Error" in v.message, v.message
    _then_honest(cpu_agent)


def test_cancelled_call_frees_its_worker(cpu_agent: str) -> None:
    async def go() -> None:
        async with AgentClient(cpu_agent) as c:
            req = EvalRequest(uuid.uuid4().hex, "aten::add", fixture("add_hang_python.py"))

            async def consume() -> None:
                async for e in c.evaluate_stream(req, timeout=120):
                    if isinstance(e, Progress) and e.stage is Stage.CORRECTNESS:
                        started.set()

            started = asyncio.Event()
            task = asyncio.ensure_future(consume())
            await asyncio.wait_for(started.wait(), timeout=60)
            assert (await c.describe()).devices[0].busy == 1
            task.cancel()
            # A cancelled run holding the device kills its worker and waits for the exit (up to
            # Worker.end's 10 s: the device context's teardown must not overlap a timed case)
            # before the worker is released; a loaded CI machine took over 10 s once.
            for _ in range(250):
                await asyncio.sleep(0.1)
                if (await c.describe()).devices[0].busy == 0:
                    break
            assert (await c.describe()).devices[0].busy == 0

    asyncio.run(go())
    _then_honest(cpu_agent)


@pytest.fixture(scope="module")
def tiny_agent(agent_secret_env: None) -> Iterator[str]:
    """One worker and a queue of one: the second concurrent request is turned away."""
    with running_agent("--max-queue", "1", "--disable-layer", "static") as address:
        yield address


def test_queue_full_is_resource_exhausted_with_retry_hint(tiny_agent: str) -> None:
    async def go() -> None:
        async with AgentClient(tiny_agent) as c:
            hang = asyncio.ensure_future(c.evaluate(
                EvalRequest(uuid.uuid4().hex, "aten::add", fixture("add_hang_python.py")), timeout=8))
            await asyncio.sleep(1.0)
            with pytest.raises(AgentBusy) as err:
                await c.evaluate(EvalRequest(uuid.uuid4().hex, "aten::add", ADD.solution.encode()),
                                 timeout=60)
            assert err.value.retry_after_s > 0
            assert (await hang).status is Status.TIMEOUT
            ok = await c.evaluate(EvalRequest(uuid.uuid4().hex, "aten::add", ADD.solution.encode()),
                                  timeout=120)
            assert ok.status is Status.PASSED

    asyncio.run(go())


def test_spec_is_importable() -> None:
    assert operators.get("aten::add").version >= 1


def test_agent_secret_is_invisible_to_candidates() -> None:
    async def go(address: str) -> str:
        async with AgentClient(address) as c:
            v = await c.evaluate(EvalRequest(uuid.uuid4().hex, "aten::add",
                                             fixture("add_secret_probe.py")), timeout=120)
            return v.message

    with running_agent("--disable-layer", "static",
                       env={"KGB_AGENT_SECRET": "feedfacecafebeef"}) as address:
        message = asyncio.run(go(address))
    assert "secret probe:" in message, message
    found = message.split("found=")[1]
    assert "os.environ" not in found and "self" not in found, message
    if ROOT:  # a private uid cannot read the (root-owned) agent's /proc/<pid>/environ
        assert found.startswith("nowhere"), message
