"""The committed generated code matches the .proto, and the stubs import."""

from __future__ import annotations

from pathlib import Path

import pytest

from protos import generate


def test_generated_code_has_not_drifted(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    written = generate.generate(tmp_path)
    assert written, "protoc generated nothing"
    for new in written:
        rel = new.relative_to(tmp_path)
        committed = generate.ROOT / rel
        assert committed.exists(), f"{rel} is generated but not committed: run python -m protos.generate"
        assert committed.read_bytes() == new.read_bytes(), (
            f"{rel} differs from what the .proto generates: run python -m protos.generate")


def test_stubs_import_and_declare_the_service() -> None:
    from protos.kgb.agent.v1 import agent_pb2, agent_pb2_grpc

    svc = agent_pb2.DESCRIPTOR.services_by_name["DeviceAgent"]
    assert svc.full_name == "kgb.agent.v1.DeviceAgent"
    assert {m.name for m in svc.methods} == {"Describe", "Evaluate", "EvaluateStream"}
    assert svc.methods_by_name["EvaluateStream"].server_streaming
    assert hasattr(agent_pb2_grpc, "DeviceAgentStub")


def test_enums_start_unspecified() -> None:
    from protos.kgb.agent.v1 import agent_pb2

    for enum in (agent_pb2.Status, agent_pb2.Stage):
        assert enum.Name(0).endswith("_UNSPECIFIED")


def test_numbers_are_only_ever_appended() -> None:
    """Other issues append to agent.proto too: what exists keeps its number, new values go after
    the last one (a renumbered value would misread every stored or in-flight message)."""
    from protos.kgb.agent.v1 import agent_pb2

    statuses = ["UNSPECIFIED", "REJECTED", "COMPILE_ERROR", "RUNTIME_ERROR", "TIMEOUT",
                "WRONG_ANSWER", "CHEAT_DETECTED", "PASSED", "INFRA_ERROR", "TOOLCHAIN_ERROR"]
    for number, name in enumerate(statuses):
        assert agent_pb2.Status.Value(f"STATUS_{name}") == number
    verdict = agent_pb2.Verdict.DESCRIPTOR.fields_by_name
    assert [verdict[n].number for n in ("wall_seconds", "public_only", "toolchain_fault")] == [
        14, 15, 16]
    request = agent_pb2.EvaluateRequest.DESCRIPTOR.fields_by_name
    assert [request[n].number for n in ("skip_timing", "public_only", "platform")] == [6, 7, 8]
    assert agent_pb2.Finding.DESCRIPTOR.fields_by_name["severity"].number == 4
