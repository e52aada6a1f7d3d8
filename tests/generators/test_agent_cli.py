"""The ``agent-cli`` method with a scripted CLI (tests/generators/fake_cli.py) against the
scripted LLM server, its calls metered into a real store's books.

The CLI reads PROMPT.md, calls its model through the workspace's proxy, writes kernel.py, runs
``verify``, rewrites on failure and prints stream-json; the trajectory's final kernel, checks,
artifacts and books are checked, and every way a CLI can go wrong ends with a named reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import generators
import operators
from coordinator.recorded_provider import RecordedProvider
from coordinator.store import Store, TrajectoryKey
from generators import EndReason, MethodError, Trajectory, TrajectoryContext
from generators.agent_cli.workspace import UID_RANGE, Workspace, _pids_of
from generators.llm import Usage
from generators.providers import EndpointConfig, ModelPrice, PriceTable, create
from protos.records import CaseResult, Status, Verdict, candidate_id
from tests.generators.fake_llm_server import FakeServer, fake_server

ADD = operators.get("aten::add")
MODEL = "fake-cli-model"
PRICES = PriceTable({MODEL: ModelPrice(prompt=1.0, completion=4.0)})
GOOD = ADD.solution
BAD = GOOD + "\n# BUG\n"
FAKE = str(Path(__file__).with_name("fake_cli.py"))
PY = "/usr/bin/python3"
KEY_ENV = "KGB_TEST_AGENT_CLI_KEY"
KEY = "sk-real-endpoint-key-5d1e9a"
ROOT_ONLY = os.geteuid() == 0


@pytest.fixture
def tmp_path(tmp_path: Path) -> Iterator[Path]:
    """A directory other uids can pass through (pytest's own is its owner's alone)."""
    d = Path(tempfile.mkdtemp(prefix="kgb-agent-cli-test-", dir="/tmp"))
    d.chmod(0o711)
    yield d
    shutil.rmtree(d, ignore_errors=True)


class Verifier:
    """Public cases: WRONG_ANSWER for a kernel marked BUG, else PASSED."""

    def __init__(self) -> None:
        self.sources: list[str] = []

    async def evaluate(self, operator_id: str, source: str) -> Verdict:
        assert operator_id == ADD.id
        self.sources.append(source)
        status = Status.WRONG_ANSWER if "BUG" in source else Status.PASSED
        cases = (CaseResult("small", False, status is Status.PASSED, "3 of 64 differ"),)
        return Verdict(status=status, operator_id=operator_id, operator_version=ADD.version,
                       candidate_hash=candidate_id(source), message="scripted", cases=cases,
                       public_only=True)


def _reply(text: str, tokens: int = 100) -> dict[str, Any]:
    return {"kind": "ok", "text": text,
            "usage": {"input_tokens": tokens, "output_tokens": tokens // 10,
                      "cache_read_input_tokens": 7, "cache_creation_input_tokens": 5}}


async def _run(server: FakeServer, store: Store, mode: str, verifier: Verifier, root: Path,
               sample: int = 0, extra: tuple[str, ...] = (), command: list[str] | None = None,
               **options: Any) -> Trajectory:
    method = generators.create_trajectory(
        "agent-cli", command=command or [FAKE, mode, "{model}", *extra], workspace_root=str(root),
        **options)
    config = EndpointConfig(name="ep-anthropic", kind="anthropic", base_url=server.url("ep", "anthropic"),
                            api_key_env=KEY_ENV, timeout_s=10, max_retries=0, stream=True)
    async with create(config, PRICES) as provider:
        key = TrajectoryKey(ADD.id, ADD.version, "agent-cli", MODEL, sample, "cpu")
        rp = RecordedProvider(provider, store, "run1", key)
        ctx = TrajectoryContext(provider=rp, model=MODEL, record=rp.record, platform="cpu",
                                verifier=verifier)
        return await method.run(ADD, sample, ctx)


def _play(tmp_path: Path, mode: str, replies: list[dict[str, Any]], default: Any = None,
          verifier: Verifier | None = None, **options: Any) -> tuple[Trajectory, Store, FakeServer]:
    os.environ[KEY_ENV] = KEY
    script: dict[str, Any] = {"endpoints": {"ep": {"replies": replies}}}
    if default is not None:
        script["endpoints"]["ep"]["default"] = default
    store = Store(tmp_path / "books" / "store.db")
    with fake_server(script, tmp_path) as server:
        traj = asyncio.run(_run(server, store, mode, verifier or Verifier(), tmp_path / "ws",
                                **options))
        server.wait_billing(len(traj.calls))
    return traj, store, server


def _server_total(server: FakeServer) -> Usage:
    total = Usage()
    for row in server.billing():
        u = row["usage"]
        if row["sent"] and u:
            read, write = u["cache_read_input_tokens"], u["cache_creation_input_tokens"]
            total = total + Usage(u["input_tokens"] + read + write, u["output_tokens"], read, 0, write)
    return total


def test_fake_cli_writes_verifies_rewrites(tmp_path: Path) -> None:
    verifier = Verifier()
    traj, store, server = _play(tmp_path, "good", [_reply(BAD), _reply(GOOD, 300)],
                                verifier=verifier)
    assert traj.end is EndReason.CANDIDATE, traj.detail
    assert traj.final == GOOD and verifier.sources == [BAD, GOOD]
    assert [t.verdict.status for t in traj.verifications if t.verdict] == \
        [Status.WRONG_ANSWER, Status.PASSED]
    art = dict(traj.artifacts)
    assert art["cli_version"] == "fake-cli 1.2.3 (scripted)"
    assert art["verify/1"] == BAD and art["verify/2"] == GOOD
    assert art["usage_check"] == "agrees"
    assert '"type": "result"' in art["transcript"]
    # the books: every call an intent completed by its call, tokens equal to the server's billing
    assert traj.usage == _server_total(server) and traj.usage.cache_write_tokens == 10
    rows = store.db.execute("SELECT turn, attempt, completed FROM llm_intents").fetchall()
    assert [(t, a) for t, a, _ in rows] == [(1, 1), (2, 1)] and all(c for *_, c in rows)
    assert store.db.execute("SELECT SUM(cache_write_tokens) FROM llm_calls").fetchone() == (10,)
    # the endpoint got the real key; the CLI never had it
    seen = server.requests()
    assert [r["x_api_key"] for r in seen] == [KEY, KEY]
    assert all(r["idempotency_key"] for r in seen)  # the turn's key, as for every recorded call
    assert all(r["body"]["model"] == MODEL and r["body"]["stream"] for r in seen)
    assert KEY not in art["transcript"]


@pytest.mark.parametrize(("mode", "end", "says"), [
    ("exit", EndReason.AGENT_ERROR, "exited with code 3"),
    ("malformed", EndReason.AGENT_ERROR, "not claude-stream-json JSON"),
    ("nokernel", EndReason.EXTRACTION_FAILED, "without writing kernel.py"),
])
def test_a_misbehaving_cli_ends_with_a_named_reason(tmp_path: Path, mode: str, end: EndReason,
                                                    says: str) -> None:
    traj, _, _ = _play(tmp_path, mode, [])
    assert traj.end is end and says in traj.detail
    assert traj.end is not EndReason.INFRA_ERROR


def test_a_cli_that_is_not_installed_is_refused_naming_the_key() -> None:
    with pytest.raises(MethodError, match=r"command\[0\] 'no-such-agent-cli'"):
        generators.create_trajectory("agent-cli", command=["no-such-agent-cli", "-p", "{prompt}"])
    with pytest.raises(MethodError, match="log_format"):
        generators.create_trajectory("agent-cli", command=[PY], log_format="xml")
    with pytest.raises(MethodError, match="ANTHROPIC_API_KEY"):
        generators.create_trajectory("agent-cli", command=[PY], env=["ANTHROPIC_API_KEY"])


def test_a_hanging_cli_is_killed_at_its_limit_with_all_it_started(tmp_path: Path) -> None:
    traj, _, _ = _play(tmp_path, "hang", [], time_limit_s=1.5)
    assert traj.end is EndReason.TIME_LIMIT
    if ROOT_ONLY:  # the child in a session of its own ran as the workspace's uid: gone too
        assert not [p for uid in UID_RANGE[:8] for p in _pids_of(uid)]
    assert not list((tmp_path / "ws").glob("aten*"))  # the workspace is removed


def test_the_token_budget_stops_the_cli(tmp_path: Path) -> None:
    traj, store, _ = _play(tmp_path, "spin", [], default=_reply(GOOD, 400), max_tokens=1000)
    assert traj.end is EndReason.BUDGET_SPENT and "token budget" in traj.detail
    statuses = [s for (s,) in store.db.execute("SELECT status FROM llm_calls ORDER BY turn")]
    assert statuses[-1] == "BUDGET" and statuses.count("OK") == 3


@pytest.mark.skipif(not ROOT_ONLY, reason="private uids need root")
def test_a_workspace_reaches_no_store_secret_or_other_workspace(tmp_path: Path) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o755)
    Store(open_dir / "store.db").close()
    secret = open_dir / "agent-secret"
    secret.write_text("s3cret")
    secret.chmod(0o600)
    other = Workspace.create(tmp_path / "ws", "other", "other problem")
    os.environ["KGB_AGENT_SECRET"] = "abcd"
    try:
        targets = (str(open_dir / "store.db"), str(secret), str(other.path / "PROMPT.md"))
        traj, _, _ = _play(tmp_path, "probe", [], extra=targets)
    finally:
        other.remove()
        del os.environ["KGB_AGENT_SECRET"]
    line = next(json.loads(x) for x in dict(traj.artifacts)["transcript"].splitlines()
                if '"probe"' in x)
    results = line["results"]
    assert all(results[t].startswith("denied") for t in targets), results
    assert "KGB_AGENT_SECRET" not in results["env"] and KEY_ENV not in results["env"]


def test_many_workspaces_at_once(tmp_path: Path) -> None:
    os.environ[KEY_ENV] = KEY
    store = Store(tmp_path / "store.db")
    verifier = Verifier()
    script = {"endpoints": {"ep": {"replies": [], "default": _reply(GOOD)}}}

    async def all_of(server: FakeServer) -> list[Trajectory]:
        return list(await asyncio.gather(*(
            _run(server, store, "good", verifier, tmp_path / "ws", sample=i) for i in range(4))))

    with fake_server(script, tmp_path) as server:
        trajs = asyncio.run(all_of(server))
    assert [t.end for t in trajs] == [EndReason.CANDIDATE] * 4
    assert all(t.final == GOOD for t in trajs) and len(verifier.sources) == 4


def test_the_sweep_spec_names_the_key_of_a_bad_agent_cli_entry(tmp_path: Path) -> None:
    from coordinator.sweep_spec import SweepSpecError, parse_spec

    def spec(method: str) -> str:
        return (f'platforms = ["cpu"]\noperators = ["aten::add"]\n[sweep]\nname = "t"\n'
                f'[[endpoints]]\nname = "e"\nkind = "anthropic"\nbase_url = "http://127.0.0.1:9"\n'
                f'api_key_env = ""\n[[models]]\nname = "m"\nendpoint = "e"\nmodel = "x"\n'
                f'[[methods]]\n{method}\n[[agents]]\naddress = "127.0.0.1:1"\nplatform = "cpu"\n')

    good = parse_spec(spec(f'name = "agent-cli"\ncommand = ["{FAKE}", "good", "{{model}}"]\n'
                           'log_format = "claude-stream-json"\ntime_limit_s = 60\n'
                           'max_verify_calls = 3\nenv = ["LANG"]'), "t.toml")
    assert good.methods[0].name == "agent-cli"
    with pytest.raises(SweepSpecError, match=r"methods\[0\]\.command"):
        parse_spec(spec('name = "agent-cli"\ncommand = ["no-such-agent-cli"]'), "t.toml")
    with pytest.raises(SweepSpecError, match=r"methods\[0\]\.log_format"):
        parse_spec(spec(f'name = "agent-cli"\ncommand = ["{FAKE}"]\nlog_format = "xml"'), "t.toml")


# -- the real Claude Code CLI (npm), pointed through the proxy at the scripted server ------------

CLAUDE_ENV = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
              "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1"}


@pytest.fixture(scope="session")
def claude_exe() -> str:
    """Claude Code installed from npm once per session (tests/generators/claude_code.py)."""
    from tests.generators.claude_code import Unavailable, install

    try:
        return str(install())
    except Unavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"Claude Code could not be installed in CI: {exc}")
        pytest.skip(f"Claude Code could not be installed: {exc}")


def _tool(tokens: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {**_reply(f"Next: {name}.", tokens),
            "tool_calls": [{"id": f"toolu_{tokens}", "name": name, "arguments": arguments}]}


def _tool_result(body: dict[str, Any], tool_use_id: str) -> str:
    """The text of the request's result for that tool call (Claude Code adds reminders around)."""
    blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
              if b.get("type") == "tool_result" and b.get("tool_use_id") == tool_use_id]
    assert len(blocks) == 1, body["messages"]
    return json.dumps(blocks[0]["content"])


@pytest.mark.slow
def test_claude_code_writes_and_verifies_through_the_proxy(
        tmp_path: Path, claude_exe: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude Code's own Read, Write and Bash tools, asked for by the scripted server: it writes a
    wrong kernel, ``verify`` says so, it rewrites and verifies again, then answers in text."""
    for name, value in CLAUDE_ENV.items():
        monkeypatch.setenv(name, value)
    replies = [_tool(100, "Read", {"file_path": "kernel.py"}),
               _tool(200, "Write", {"file_path": "kernel.py", "content": BAD}),
               _tool(300, "Bash", {"command": "verify", "description": "Check the kernel"}),
               _tool(400, "Write", {"file_path": "kernel.py", "content": GOOD}),
               _tool(500, "Bash", {"command": "verify kernel.py", "description": "Check again"}),
               _reply("kernel.py passes the public cases.", 600)]
    verifier = Verifier()
    command = [claude_exe, "-p", "{prompt}", "--output-format", "stream-json", "--verbose",
               "--model", "{model}", "--dangerously-skip-permissions"]
    traj, store, server = _play(tmp_path, "", replies, verifier=verifier, command=command,
                                env=sorted(CLAUDE_ENV), time_limit_s=120)
    art = dict(traj.artifacts)
    assert traj.end is EndReason.CANDIDATE, (traj.detail, art.get("stderr"))
    assert traj.final == GOOD and verifier.sources == [BAD, GOOD]
    assert [t.verdict.status for t in traj.verifications if t.verdict] == \
        [Status.WRONG_ANSWER, Status.PASSED]
    assert art["cli_version"].startswith("2.") and "Claude Code" in art["cli_version"]
    assert art["verify/1"] == BAD and art["verify/2"] == GOOD
    events = [json.loads(line) for line in art["transcript"].splitlines()]
    assert events[0]["type"] == "system" and events[-1]["type"] == "result"
    assert not events[-1]["is_error"] and events[-1]["num_turns"] == 6
    # the ledger: one call per scripted reply, tokens equal to the server's billing and the CLI's
    seen = server.requests()
    assert len(seen) == len(traj.calls) == 6 and art["usage_check"] == "agrees"
    assert traj.usage == _server_total(server) and traj.usage.completion_tokens == 210
    rows = store.db.execute("SELECT turn, attempt, completed IS NOT NULL FROM llm_intents "
                            "ORDER BY turn").fetchall()
    assert rows == [(t, 1, 1) for t in range(1, 7)]
    assert store.db.execute("SELECT COUNT(*), SUM(completion_tokens) FROM llm_calls").fetchone() \
        == (6, 210)
    assert all(r["x_api_key"] == KEY and r["body"]["model"] == MODEL for r in seen)
    # what verify printed went back to the model as the Bash tool's results
    assert "WRONG_ANSWER" in _tool_result(seen[3]["body"], "toolu_300")
    assert "PASSED" in _tool_result(seen[5]["body"], "toolu_500")
    assert KEY not in art["transcript"]
