"""The ``agent-cli`` method in a real sweep: ``kgb sweep run`` as its own process, Ray, the
scripted CLI (tests/generators/fake_cli.py) behind the workspace's metering proxy, the scripted
LLM server (Anthropic, streamed), a real ``cpu`` agent.

The model's kernel overfits the public cases; the CLI writes it and runs ``verify`` (public cases
only: PASSED). The sweep scores the final kernel by the normal path, hidden cases included, so
each trajectory is WRONG_ANSWER and public-pass / hidden-fail; its books equal the server's
billing, its verify call is counted and kept under the public mode, and its artifacts (the CLI's
version, transcript, the kernel verify saw) are in the store.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from coordinator.store import DB_NAME, Store
from coordinator.sweep_spec import load_spec
from protos.records import Status, Verdict, candidate_id
from tests.coordinator.sweeping import kgb, process_group
from tests.coordinator.test_agent_sweep import overfit_kernel
from tests.generators.fake_llm_server import fake_server

pytestmark = pytest.mark.usefixtures("agent_secret_env")
FAKE_CLI = Path(__file__).resolve().parents[1] / "generators" / "fake_cli.py"
KEY_ENV = "KGB_TEST_AGENT_CLI_SWEEP_KEY"
KEY = "sk-sweep-endpoint-key-77c1"
USAGE = {"input_tokens": 1200, "output_tokens": 300, "cache_read_input_tokens": 40,
         "cache_creation_input_tokens": 60}


@pytest.fixture
def workspaces() -> Iterator[Path]:
    """A workspace root other uids can pass through (pytest's tmp_path is its owner's alone)."""
    d = Path(tempfile.mkdtemp(prefix="kgb-agent-cli-sweep-", dir="/tmp"))
    d.chmod(0o711)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _spec(path: Path, base_url: str, agent: str, workspaces: Path) -> Path:
    path.write_text(f'''platforms = ["cpu"]
operators = ["aten::add"]
samples = 2

[sweep]
name = "cli-track"
seed = 7

[[endpoints]]
name = "ep"
kind = "anthropic"
base_url = "{base_url}"
api_key_env = "{KEY_ENV}"
stream = true
max_retries = 0

[[models]]
name = "fake-model"
endpoint = "ep"
model = "fake-cli-model"
prices = {{ prompt = 1.0, completion = 4.0 }}

[[methods]]
name = "agent-cli"
command = ["{FAKE_CLI}", "good", "{{model}}"]
log_format = "claude-stream-json"
time_limit_s = 120
max_verify_calls = 2
workspace_root = "{workspaces}"

[[agents]]
address = "{agent}"
platform = "cpu"
''')
    return path


def _sweep(spec_path: Path) -> str:
    with process_group(kgb("sweep", "run", str(spec_path), "--metrics-port", "0", "--no-progress")) as p:
        out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, out
    return out


@pytest.mark.slow  # ~2 min here: Ray's start in the coordinator's process, hidden cases on cpu
def test_an_agent_cli_sweep_scores_the_final_kernel_on_hidden_cases(
        cpu_agent: str, tmp_path: Path, workspaces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = overfit_kernel()
    monkeypatch.setenv(KEY_ENV, KEY)
    script = {"endpoints": {"ep": {"default": {"kind": "ok", "text": kernel, "usage": USAGE}}}}
    with fake_server(script, tmp_path) as server:
        spec_path = _spec(tmp_path / "s.toml", server.url("ep", "anthropic"), cpu_agent, workspaces)
        _sweep(spec_path)
        billed = server.wait_billing(2)
        seen = server.requests()
    assert len(billed) == len(seen) == 2 and all(r["x_api_key"] == KEY for r in seen)
    assert not list(workspaces.glob("aten*"))  # every workspace removed
    store = Store(load_spec(spec_path).store / DB_NAME)
    try:
        rows = store.trajectory_results("cli-track")
        assert sorted(r.key.sample for r in rows) == [0, 1]
        for row in rows:
            assert (row.key.method, row.end_reason) == ("agent-cli", "CANDIDATE")
            assert row.status is Status.WRONG_ANSWER and row.public_pass_hidden_fail
            assert row.best_candidate_hash == candidate_id(kernel)
            assert row.verify_calls == 1 and row.wall_s > 0
            # input + cache read + cache write, as billed; one call each
            assert (row.prompt_tokens, row.completion_tokens) == (1300, 300)
            art = {a.name: a.text for a in store.trajectory_artifacts("cli-track", row.key)}
            assert art["cli_version"] == "fake-cli 1.2.3 (scripted)"
            assert art["verify/1"] == kernel and art["usage_check"] == "agrees"
            assert '"type": "result"' in art["transcript"] and KEY not in art["transcript"]
        (final_raw,) = store.db.execute("SELECT verdict FROM verdicts").fetchone()
        final = Verdict.from_json(orjson.loads(final_raw))
        assert not final.public_only and any(c.hidden and not c.passed for c in final.cases)
        (mode, raw) = store.db.execute("SELECT mode, verdict FROM mode_verdicts").fetchone()
        check = Verdict.from_json(orjson.loads(raw))
        assert mode == "public" and check.public_only and check.status is Status.PASSED
    finally:
        store.close()
