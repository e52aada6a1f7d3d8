"""The complete example in docs/generators.md runs as written: against the scripted LLM server
(standing in for a local vLLM) and a real cpu agent, it refines aten::add from a wrong kernel to
a passing one and logs every call before use."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from coordinator.local_agent import with_repo_on_path
from operators.aten.add import NEGATIVE_NO_ALPHA
from tests.generators.fake_llm_server import fake_server
from tests.generators.test_methods_llm import ADD, _fenced, _ok

DOC = Path(__file__).resolve().parents[2] / "docs" / "generators.md"


def test_docs_example_runs(cpu_agent: str, tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1, "docs/generators.md should hold one complete python example"
    script = tmp_path / "example.py"
    script.write_text(blocks[0])
    replies = {"endpoints": {"ep": {"replies": [_ok("openai", _fenced(NEGATIVE_NO_ALPHA)),
                                                _ok("openai", _fenced(ADD.solution))]}}}
    log = tmp_path / "calls.jsonl"
    with fake_server(replies, tmp_path) as server:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": with_repo_on_path(None),
               "KGB_EXAMPLE_BASE_URL": server.url("ep", "openai"),
               "KGB_EXAMPLE_AGENT": cpu_agent, "KGB_EXAMPLE_LOG": str(log)}
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                              text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("SOLVED"), done.stdout
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["status"] for c in calls] == ["OK", "OK"]
    assert all(c["usage"]["prompt_tokens"] == 1000 for c in calls)
