"""An ``agent-cli`` trajectory's artifacts (CLI version, transcript, the kernels ``verify`` saw)
go from the Trajectory through the driver's Outcome and ResultSink into the store's
``trajectory_artifacts`` and out through ``kgb export``; each text is bounded."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import orjson

from coordinator.engine.outcomes import Outcome, trajectory_result
from coordinator.engine.storage import ResultSink
from coordinator.export import export_run
from coordinator.store import Store, TrajectoryKey
from coordinator.sweep_spec import PlannedTrajectory
from coordinator.trajectory_artifacts import MAX_TEXT_BYTES, artifacts_of, bounded
from generators import EndReason, Trajectory
from tests.generators.test_agent_cli import ADD, BAD, GOOD, MODEL, _play, _reply
from tests.generators.test_agent_cli import tmp_path as tmp_path  # other uids pass through

RUN = "run-art"
KEY = TrajectoryKey(ADD.id, ADD.version, "agent-cli", MODEL, 0, "cpu")
PLANNED = PlannedTrajectory("cpu", ADD.id, "agent-cli", MODEL, 0)


def _outcome(traj: Trajectory, end: EndReason | None = None) -> Outcome:
    """The Outcome the runner builds for a finished agent-cli trajectory."""
    result = trajectory_result(RUN, "cpu", KEY, ADD.source.value, [], end or traj.end,
                               turns=len(traj.steps), calls=traj.calls)
    return Outcome(PLANNED, result, artifacts=artifacts_of(RUN, "cpu", KEY, traj.artifacts))


def _sink(path: Path, *outcomes: Outcome) -> None:
    async def go() -> None:
        async with ResultSink(path) as sink:
            for o in outcomes:
                await sink.put(o)
    asyncio.run(go())


def test_an_agent_cli_trajectorys_artifacts_are_stored_and_exported(tmp_path: Path) -> None:
    traj, _books, _server = _play(tmp_path, "good", [_reply(BAD), _reply(GOOD, 300)])
    assert traj.end is EndReason.CANDIDATE, traj.detail
    path = tmp_path / "runs" / RUN / "kgb.sqlite"
    Store(path).close()
    _sink(path, _outcome(traj))
    store = Store(path)
    stored = {a.name: a.text for a in store.trajectory_artifacts(RUN, KEY)}
    assert stored["cli_version"] == "fake-cli 1.2.3 (scripted)"
    assert '"type": "result"' in stored["transcript"]
    assert stored["transcript"] == dict(traj.artifacts)["transcript"]
    assert stored["verify/1"] == BAD and stored["verify/2"] == GOOD
    assert stored["usage_check"] == "agrees"
    done = {t.table: t.path for t in export_run(store, RUN, tmp_path / "out", "jsonl")}
    rows = [orjson.loads(x) for x in done["trajectory_artifacts"].read_bytes().splitlines()]
    exported = {r["name"]: r["text"] for r in rows if r["trajectory"] == str(KEY)}
    assert exported == stored and all(r["run_id"] == RUN and r["platform"] == "cpu" for r in rows)


def test_a_stored_result_keeps_its_artifacts_and_a_replaced_infra_error_loses_them(
        tmp_path: Path) -> None:
    base = Trajectory(ADD.id, "agent-cli", 0, MODEL, (), EndReason.AGENT_ERROR)
    path = tmp_path / "kgb.sqlite"
    Store(path).close()
    first = dataclasses.replace(base, artifacts=(("cli_version", "v1"), ("transcript", "one")))
    again = dataclasses.replace(base, artifacts=(("cli_version", "v2"),))
    _sink(path, _outcome(first, EndReason.INFRA_ERROR))
    _sink(path, _outcome(again))      # replaces the INFRA_ERROR result: its artifacts with it
    assert [(a.name, a.text) for a in Store(path).trajectory_artifacts(RUN)] == [("cli_version", "v2")]
    _sink(path, _outcome(first))      # a finished result stands, and so do its artifacts
    assert [(a.name, a.text) for a in Store(path).trajectory_artifacts(RUN)] == [("cli_version", "v2")]


def test_each_text_is_bounded_keeping_its_start_and_end() -> None:
    assert bounded("short") == "short"
    text = "START" + "é" * MAX_TEXT_BYTES + "END"
    kept = bounded(text)
    assert len(kept.encode()) <= MAX_TEXT_BYTES + 100
    assert kept.startswith("START") and kept.endswith("END") and "bytes cut by kgb" in kept
    assert artifacts_of(RUN, "cpu", KEY, [("transcript", text)])[0].text == kept
