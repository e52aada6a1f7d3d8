"""Request ids (issue 19 point 4, coordinator half): deterministic ids need the coordinator's
secret, every id is bounded and printable, and the secret stays out of ids, logs and verdicts."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import stat
import string
from pathlib import Path

import grpc
import pytest

import operators
from coordinator.fleet import AgentEvaluator
from protos import request_ids
from protos.records import EvalRequest, Status, Verdict, candidate_id
from protos.request_ids import RequestIds, SecretError, is_valid, load_coordinator_secret
from tests.coordinator.fake_agents import fake, honest_verdict

ADD = operators.get("aten::add")
SECRET = bytes(range(32))
KEY = dict(operator_id="aten::add", operator_version=1, candidate_hash="ab" * 32, mode="timed",
           run="run-1")


def test_same_inputs_and_secret_give_the_same_id_and_anything_else_another() -> None:
    ids = RequestIds(SECRET)
    first = ids.derive(**KEY)  # type: ignore[arg-type]
    assert ids.derive(**KEY) == RequestIds(bytes(SECRET)).derive(**KEY) == first  # type: ignore[arg-type]
    assert RequestIds(SECRET[:-1] + b"\xff").derive(**KEY) != first  # type: ignore[arg-type]
    for field, other in (("operator_id", "aten::mul"), ("operator_version", 2),
                         ("candidate_hash", "cd" * 32), ("mode", "notime"), ("run", "run-2")):
        assert ids.derive(**{**KEY, field: other}) != first, field  # type: ignore[arg-type]
    # Length-prefixed fields: moving a character from one field to the next is another id.
    assert ids.derive(**{**KEY, "mode": "timedr", "run": "un-1"}) != first  # type: ignore[arg-type]


def test_ids_are_bounded_printable_and_not_the_old_predictable_hash() -> None:
    ids = RequestIds(SECRET)
    long_key = {**KEY, "operator_id": "x" * 10_000, "run": "r\n" * 5_000}
    for rid in (ids.derive(**KEY), ids.derive(**long_key), request_ids.fresh("fleet"),  # type: ignore[arg-type]
                ids.derive(**KEY, prefix="a" + "b" * 31)):  # type: ignore[arg-type]
        assert is_valid(rid) and len(rid) < 128, rid
        assert set(rid) <= set(string.ascii_lowercase + string.digits + "-")
    old = "gen-" + hashlib.sha256(f"aten::add\0timed\0{'ab' * 32}".encode()).hexdigest()[:32]
    assert ids.derive(**KEY, prefix="gen") != old  # type: ignore[arg-type]
    assert request_ids.fresh("eval") != request_ids.fresh("eval")
    assert not is_valid("") and not is_valid("x" * 128) and is_valid("x" * 127)
    assert not is_valid("has space") and not is_valid("caf\u00e9") and not is_valid("a\nb")
    for bad in ("", "Upper", "-x", "x" * 33, "a/b"):
        with pytest.raises(ValueError):
            request_ids.fresh(bad)
    with pytest.raises(SecretError):
        RequestIds(b"short")


def test_secret_file_is_created_once_private_and_reused(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kgb" / "coordinator-secret"
    monkeypatch.delenv(request_ids.SECRET_ENV, raising=False)
    monkeypatch.setenv(request_ids.SECRET_FILE_ENV, str(path))
    first = load_coordinator_secret()
    assert len(first) == 32 and path.read_bytes() == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_coordinator_secret() == first
    assert [p.name for p in path.parent.iterdir()] == ["coordinator-secret"]  # no temp left over
    path.chmod(0o644)
    with pytest.raises(SecretError, match="readable or writable by others") as err:
        load_coordinator_secret()
    assert first.hex() not in str(err.value)
    path.chmod(0o600)
    link = tmp_path / "link"
    link.symlink_to(path)
    monkeypatch.setenv(request_ids.SECRET_FILE_ENV, str(link))
    with pytest.raises(SecretError):
        load_coordinator_secret()


def test_secret_from_the_environment_is_hex_and_never_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(request_ids.SECRET_ENV, SECRET.hex())
    assert load_coordinator_secret() == SECRET
    monkeypatch.setenv(request_ids.SECRET_ENV, "not-hex-but-a-long-secret-value")
    with pytest.raises(SecretError) as err:
        load_coordinator_secret()
    assert "not-hex-but" not in str(err.value)
    monkeypatch.setenv(request_ids.SECRET_ENV, "00ff")
    with pytest.raises(SecretError, match="at least"):
        load_coordinator_secret()


def test_the_secret_stays_out_of_ids_logs_and_verdicts(caplog: pytest.LogCaptureFixture) -> None:
    """An evaluator derives its ids from the secret; nothing it sends, logs or returns shows it,
    and its ids are what RequestIds gives for the same key (so a resumed run sends the same)."""
    ids = RequestIds(SECRET)
    assert SECRET.hex() not in repr(ids) and str(SECRET) not in repr(ids)
    seen: list[EvalRequest] = []

    async def records(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
        seen.append(req)
        return honest_verdict(req, Status.PASSED)

    async def go() -> list[Verdict]:
        async with fake(records) as (address, _), \
                AgentEvaluator(address, timeout_s=10, request_ids=ids, run="r1") as ev:
            return [await ev.evaluate(ADD.id, ADD.solution), await ev.evaluate(ADD.id, ADD.solution)]

    with caplog.at_level(logging.DEBUG):
        verdicts = asyncio.run(go())
    assert [v.status for v in verdicts] == [Status.PASSED] * 2
    expected = ids.derive(operator_id=ADD.id, operator_version=ADD.version,
                          candidate_hash=candidate_id(ADD.solution), mode="timed", run="r1",
                          prefix="gen")
    assert [r.request_id for r in seen] == [expected] * 2
    assert all(r.operator_version == ADD.version for r in seen)
    shown = caplog.text + "".join(repr(v.to_json()) for v in verdicts) + repr(seen)
    for form in (SECRET.hex(), SECRET.decode("latin-1"), repr(SECRET)):
        assert form not in shown


def test_evaluator_loads_the_secret_from_its_file(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret"
    monkeypatch.delenv(request_ids.SECRET_ENV, raising=False)
    monkeypatch.setenv(request_ids.SECRET_FILE_ENV, str(path))
    got: list[str] = []

    async def records(req: EvalRequest, context: grpc.aio.ServicerContext) -> Verdict:
        got.append(req.request_id)
        return honest_verdict(req, Status.PASSED)

    async def go() -> None:
        async with fake(records) as (address, _), AgentEvaluator(address, timeout_s=10) as ev:
            await ev.evaluate(ADD.id, ADD.solution)

    asyncio.run(go())
    assert path.exists() and os.stat(path).st_mode & 0o077 == 0
    assert got == [RequestIds(path.read_bytes()).derive(
        operator_id=ADD.id, operator_version=ADD.version,
        candidate_hash=candidate_id(ADD.solution), mode="timed", run="", prefix="gen")]
