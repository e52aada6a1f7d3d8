"""A real agent process on loopback (cpu platform), driven over gRPC with real candidate files.

Each fault is followed, on the same agent, by honest candidates that still pass: no candidate
can hurt the agent or the ones after it.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import grpc
import pytest

import operators
from protos.client import AgentClient, BadRequest
from protos.kgb.agent.v1 import agent_pb2, agent_pb2_grpc
from protos.records import EvalRequest, Progress, Stage, Status, Verdict
from tests.helpers import running_agent

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "candidates"
ADD = operators.get("aten::add")


def _req(source: bytes | str, op: str = "aten::add", rid: str | None = None,
         version: int | None = None) -> EvalRequest:
    src = source.encode() if isinstance(source, str) else source
    return EvalRequest(rid or uuid.uuid4().hex, op, src, operator_version=version)


async def _eval(address: str, req: EvalRequest, timeout: float = 120) -> Verdict:
    async with AgentClient(address) as c:
        return await c.evaluate(req, timeout=timeout)


def evaluate(address: str, source: bytes | str, timeout: float = 120, **kw: object) -> Verdict:
    return asyncio.run(_eval(address, _req(source, **kw), timeout))  # type: ignore[arg-type]


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def test_health_and_describe(cpu_agent: str) -> None:
    async def go() -> None:
        async with AgentClient(cpu_agent) as c:
            assert await c.health() == "SERVING"
            assert await c.health("") == "SERVING"
            d = await c.describe()
            assert d.system.platform == "cpu"
            assert d.capacity == 2 and d.devices[0].capacity == 2
            assert not d.timings_meaningful
            assert ("aten::add", ADD.version) in d.suite
            assert d.harness_version
            # Learned from the workers at warm-up: no vLLM and no CUDA here.
            assert d.system.baselines == {"aten": "torch", "vllm": "torch", "cublas": "torch"}

    asyncio.run(go())


def test_describe_names_vllms_kernels_where_vllm_imports_on_the_workers(
        agent_secret_env: None, tmp_path: Path) -> None:
    """A stand-in ``vllm._custom_ops`` on the agent's import path: its workers find vLLM at
    warm-up, so Describe says the vLLM problems time against vLLM's kernels (all but
    rotary_embedding, whose baseline is PyTorch's wherever vLLM is)."""
    pkg = tmp_path / "standin" / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_custom_ops.py").write_text('"""A stand-in: vLLM imports here."""\n')

    async def describe(address: str) -> dict[str, str]:
        async with AgentClient(address) as c:
            return (await c.describe()).system.baselines

    with running_agent(workers=1, env={"PYTHONPATH": str(tmp_path / "standin")}) as address:
        baselines = asyncio.run(describe(address))
    assert baselines == {"aten": "torch", "vllm": "vllm", "vllm::rotary_embedding": "torch",
                         "cublas": "torch"}

def test_queue_depth_counts_every_accepted_evaluation_not_on_a_worker(cpu_agent: str) -> None:
    """Two hangs hold both workers; four honest candidates wait: two admitted to the device's
    pool, two still waiting to be admitted (capacity plus lookahead is four). Describe counts
    all four, so a client routing by load sees the whole queue; the device counts its two."""
    async def go() -> list[Status]:
        async with AgentClient(cpu_agent) as c:
            on_worker = [asyncio.Event(), asyncio.Event()]

            async def hang(i: int) -> None:
                req = EvalRequest(uuid.uuid4().hex, "aten::add", fixture("add_hang_python.py"))
                async for e in c.evaluate_stream(req, timeout=120):
                    if isinstance(e, Progress) and e.stage is Stage.CORRECTNESS:
                        on_worker[i].set()

            hangs = [asyncio.ensure_future(hang(i)) for i in range(2)]
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in on_worker)), timeout=60)
            honest = [asyncio.ensure_future(c.evaluate(_req(ADD.solution), timeout=180))
                      for _ in range(4)]
            d = await c.describe()
            for _ in range(100):  # their static checks and inputs take a moment
                if d.devices[0].queued == 2:
                    break
                await asyncio.sleep(0.1)
                d = await c.describe()
            assert (d.devices[0].busy, d.devices[0].queued, d.queue_depth) == (2, 2, 4), d
            for h in hangs:
                h.cancel()
            await asyncio.gather(*hangs, return_exceptions=True)
            statuses = [v.status for v in await asyncio.gather(*honest)]
            assert (await c.describe()).queue_depth == 0
            return statuses

    assert asyncio.run(go()) == [Status.PASSED] * 4



def test_reference_passes_with_hidden_cases_and_unmeaningful_timings(cpu_agent: str) -> None:
    v = evaluate(cpu_agent, ADD.solution)
    assert v.status is Status.PASSED, v.message
    assert any(c.hidden for c in v.cases) and any(not c.hidden for c in v.cases)
    assert all(c.name.startswith("hidden#") for c in v.cases if c.hidden)  # parameters not leaked
    assert v.timings and not any(t.meaningful for t in v.timings)
    assert v.baseline == ""  # the interpreter's times were measured against no baseline
    assert v.candidate_hash and v.operator_version == ADD.version
    assert v.system.platform == "cpu" and v.device_model.startswith("cpu")


def test_verdicts_are_reproducible(cpu_agent: str) -> None:
    a = evaluate(cpu_agent, ADD.solution)
    b = evaluate(cpu_agent, ADD.solution)
    assert [c.name for c in a.cases] == [c.name for c in b.cases]
    assert a.status == b.status


def test_negative_control_is_wrong_answer_with_summary(cpu_agent: str) -> None:
    v = evaluate(cpu_agent, ADD.negatives[0].source)
    assert v.status is Status.WRONG_ANSWER
    failed = [c for c in v.cases if not c.passed]
    assert failed and "elements differ" in failed[0].mismatch and "expected" in failed[0].mismatch
    assert any(c.passed for c in v.cases)


@pytest.mark.parametrize("name, status, words", [
    ("add_syntax_error.py", Status.COMPILE_ERROR, "syntax error at line 2"),
    ("add_not_utf8.py", Status.COMPILE_ERROR, "not valid UTF-8"),
    ("add_missing_entry.py", Status.COMPILE_ERROR, "add_Scalar"),
    ("add_import_error.py", Status.COMPILE_ERROR, "ModuleNotFoundError"),
    ("add_raises.py", Status.RUNTIME_ERROR, "candidate bug"),
    ("add_wrong_signature.py", Status.COMPILE_ERROR, "wrong signature"),
    ("add_exit0.py", Status.RUNTIME_ERROR, "exited with code 0"),
    ("add_segfault.py", Status.RUNTIME_ERROR, "SIGSEGV"),
    ("add_unwritten.py", Status.WRONG_ANSWER, "not fully written"),
    ("add_mutates_input.py", Status.WRONG_ANSWER, "was modified"),
])
def test_faulty_candidates_get_the_right_verdict(cpu_agent: str, name: str, status: Status,
                                                 words: str) -> None:
    v = evaluate(cpu_agent, fixture(name))
    assert v.status is status, (v.status, v.message)
    assert words in v.message or any(words in c.mismatch for c in v.cases), v.message
    if name == "add_raises.py":
        assert "Traceback" in v.log and "ValueError" in v.log


def test_hang_times_out_before_the_client_deadline_and_agent_survives(cpu_agent: str) -> None:
    v = evaluate(cpu_agent, fixture("add_hang_import.py"), timeout=10)
    assert v.status is Status.TIMEOUT
    assert v.wall_seconds < 10
    assert evaluate(cpu_agent, ADD.solution).status is Status.PASSED


def test_agent_keeps_serving_after_faults(cpu_agent: str) -> None:
    for name in ("add_segfault.py", "add_exit0.py"):
        assert evaluate(cpu_agent, fixture(name)).status is Status.RUNTIME_ERROR
        assert evaluate(cpu_agent, ADD.solution).status is Status.PASSED


def test_request_id_is_idempotent(cpu_agent: str) -> None:
    rid = uuid.uuid4().hex

    async def go() -> tuple[Verdict, Verdict]:
        async with AgentClient(cpu_agent) as c:
            first, second = await asyncio.gather(
                c.evaluate(_req(ADD.solution, rid=rid), timeout=120),
                c.evaluate(_req(ADD.solution, rid=rid), timeout=120))
            third = await c.evaluate(_req(ADD.solution, rid=rid), timeout=120)
            assert third == first
            return first, second

    a, b = asyncio.run(go())
    assert a == b  # one evaluation, the same verdict (same wall time, same request id)


def test_bad_requests_are_invalid_argument(cpu_agent: str) -> None:
    with pytest.raises(BadRequest, match="unknown operator"):
        evaluate(cpu_agent, ADD.solution, op="aten::nope")
    with pytest.raises(BadRequest, match="version"):
        evaluate(cpu_agent, ADD.solution, version=ADD.version + 7)
    with pytest.raises(BadRequest, match="limit"):
        evaluate(cpu_agent, b"#" * (2 << 20))
    with pytest.raises(BadRequest, match="empty"):
        evaluate(cpu_agent, b"   ")


def test_deadline_is_required(cpu_agent: str) -> None:
    async def go() -> None:
        async with grpc.aio.insecure_channel(cpu_agent) as ch:
            stub = agent_pb2_grpc.DeviceAgentStub(ch)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Evaluate(agent_pb2.EvaluateRequest(
                    request_id="x", operator_id="aten::add", source=ADD.solution.encode()))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "deadline" in (err.value.details() or "")

    asyncio.run(go())


def test_stream_reports_stages_then_verdict(cpu_agent: str) -> None:
    async def go() -> list[Progress | Verdict]:
        async with AgentClient(cpu_agent) as c:
            return [e async for e in c.evaluate_stream(_req(ADD.solution), timeout=120)]

    events = asyncio.run(go())
    assert isinstance(events[-1], Verdict) and events[-1].status is Status.PASSED
    stages = [e.stage for e in events if isinstance(e, Progress)]
    assert Stage.LOAD in stages and Stage.CORRECTNESS in stages and Stage.DONE in stages
    assert stages.index(Stage.LOAD) < stages.index(Stage.CORRECTNESS)


def test_reflection_lists_the_services(cpu_agent: str) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    async def go() -> set[str]:
        async with grpc.aio.insecure_channel(cpu_agent) as ch:
            stub = reflection_pb2_grpc.ServerReflectionStub(ch)

            async def reqs():  # type: ignore[no-untyped-def]
                yield reflection_pb2.ServerReflectionRequest(list_services="")

            async for resp in stub.ServerReflectionInfo(reqs(), timeout=10):
                return {s.name for s in resp.list_services_response.service}
        return set()

    names = asyncio.run(go())
    assert {"kgb.agent.v1.DeviceAgent", "grpc.health.v1.Health"} <= names


def test_first_failure_decides_when_a_wrong_case_precedes_a_crash(cpu_agent: str) -> None:
    source = ADD.negatives[0].source + (
        "\n\ndef add_Scalar(self, other, alpha=1):\n    raise ValueError('boom')\n")
    v = evaluate(cpu_agent, source)
    assert v.status is Status.WRONG_ANSWER, v.message
    assert "before a crash" in v.message and "boom" in v.message
