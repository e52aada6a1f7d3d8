"""The agent track's rows of ``kgb report``: tokens, wall time and verify calls per trajectory
and the public-pass / hidden-fail rate, per (model, method), for ``agent`` and ``agent-cli``
beside ``sample``; and the cost rows' cache-write tokens."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from coordinator.cli import kgb
from coordinator.store import Store, TrajectoryKey, TrajectoryResult
from coordinator.track_report import track_rows
from generators.llm import CallStatus, Usage
from protos.records import Status
from tests.coordinator.test_report import call

RUN = "track"


def _res(method: str, sample: int, status: Status | None, *, tokens: int, wall_s: float = 0.0,
         verify: int = 0, phf: bool = False, end: str = "CANDIDATE") -> TrajectoryResult:
    key = TrajectoryKey("aten::add", 1, method, "m", sample)
    return TrajectoryResult(RUN, "cuda", key, "aten", end, status, "h" if status else "", None, None,
                            3, 1 if status else 0, tokens - tokens // 4, tokens // 4, 0.0, 1.0,
                            wall_s=wall_s, verify_calls=verify, public_pass_hidden_fail=phf)


RESULTS = [
    _res("agent", 0, Status.PASSED, tokens=40_000, wall_s=300.0, verify=4),
    _res("agent", 1, Status.WRONG_ANSWER, tokens=60_000, wall_s=500.0, verify=6, phf=True),
    _res("agent", 2, None, tokens=8_000, wall_s=40.0, end="EXTRACTION_FAILED"),
    _res("sample", 0, Status.WRONG_ANSWER, tokens=2_000, wall_s=20.0),
    _res("sample", 1, Status.PASSED, tokens=2_000, wall_s=22.0),
]


def test_track_rows() -> None:
    agent, sample = track_rows(RESULTS)
    assert (agent.method, agent.trajectories, agent.tokens, agent.verify_calls) == \
        ("agent", 3, 108_000, 10)
    assert agent.tokens_per_trajectory == 36_000 and agent.wall_s_per_trajectory == 280.0
    assert agent.judged == 2 and agent.public_pass_hidden_fail == 1  # the unjudged one is left out
    assert agent.public_pass_hidden_fail_rate == 0.5
    assert (sample.verify_calls, sample.public_pass_hidden_fail_rate) == (0, 0.0)


def test_kgb_report_shows_the_agent_track(tmp_path: Path) -> None:
    db = tmp_path / "kgb.sqlite"
    store = Store(db)
    store.add_run(RUN, {"spec": "t"})
    for r in RESULTS:
        store.add_trajectory_result(r)
    store.close()
    out = CliRunner().invoke(kgb, ["report", RUN, "--store", str(db), "--json"])
    assert out.exit_code == 0, out.stderr
    track = {t["method"]: t for t in orjson.loads(out.stdout)["track"]}
    assert track["agent"]["verify_calls_per_trajectory"] == pytest.approx(10 / 3)
    assert track["agent"]["public_pass_hidden_fail"] == 1
    assert track["sample"]["wall_s"] == 42.0
    table = CliRunner().invoke(kgb, ["report", RUN, "--store", str(db)], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.stderr
    text = table.stdout
    assert "agent track" in text
    row = next(line for line in text[text.index("agent track"):].splitlines() if "│ agent" in line)
    assert "36,000" in row and "280.0" in row and "3.3" in row and "1 (50.0%)" in row


def test_agent_cli_rows_sit_beside_agent_and_carry_cache_writes(tmp_path: Path) -> None:
    """``agent-cli`` gets its track row like ``agent``; its cost and token rows carry the
    cache-write tokens its calls recorded, and a method whose calls recorded none shows null/-."""
    cli = [_res("agent-cli", 0, Status.PASSED, tokens=30_000, wall_s=600.0, verify=2),
           _res("agent-cli", 1, Status.WRONG_ANSWER, tokens=50_000, wall_s=900.0, verify=5, phf=True)]
    db = tmp_path / "kgb.sqlite"
    store = Store(db)
    store.add_run(RUN, {"spec": "t"})
    for r in RESULTS + cli:
        store.add_trajectory_result(r)
    for r, write in zip(cli, (1_200, 800), strict=True):
        store.add_llm_call(RUN, r.key, 1, call("claude", CallStatus.OK,
                                                Usage(20_000, 2_000, 5_000, 0, write), 0.1))
    store.add_llm_call(RUN, RESULTS[3].key, 1, call("m", CallStatus.OK, Usage(1_500, 500), 0.01))
    store.close()
    out = CliRunner().invoke(kgb, ["report", RUN, "--store", str(db), "--json"])
    assert out.exit_code == 0, out.stderr
    doc = orjson.loads(out.stdout)
    track = {t["method"]: t for t in doc["track"]}
    assert list(track) == ["agent", "agent-cli", "sample"]
    assert (track["agent-cli"]["trajectories"], track["agent-cli"]["verify_calls"]) == (2, 7)
    assert track["agent-cli"]["public_pass_hidden_fail_rate"] == 0.5
    assert track["agent-cli"]["wall_s_per_trajectory"] == 750.0
    costs = {c["method"]: c for c in doc["costs"]}
    assert costs["agent-cli"]["cache_write_tokens"] == 2_000
    assert costs["agent-cli"]["cache_write_tokens_per_solved"] == 2_000
    assert costs["sample"]["cache_write_tokens"] is None
    assert costs["sample"]["cache_write_tokens_per_solved"] is None
    assert doc["cost_total"]["cache_write_tokens"] == 2_000
    table = CliRunner().invoke(kgb, ["report", RUN, "--store", str(db)], env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.stderr
    text = table.stdout
    tokens = text[text.index("tokens: fresh"):]
    assert "cache write" in tokens
    cli_row = next(line for line in tokens.splitlines() if "│ agent-cli" in line)
    assert cli_row.split("│")[7].strip() == "2,000"  # after model, method, calls, tokens, in: fresh, cached
    sample_row = next(line for line in tokens.splitlines() if "│ sample" in line)
    assert sample_row.split("│")[7].strip() == "-"
    track_text = text[text.index("agent track"):]
    row = next(line for line in track_text.splitlines() if "│ agent-cli" in line)
    assert "40,000" in row and "750.0" in row and "3.5" in row and "1 (50.0%)" in row
