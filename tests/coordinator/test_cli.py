"""The CLI contract that external tools rely on: output shapes and exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import operators
from coordinator.cli import kgb

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "candidates"


def invoke(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(kgb, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_operators_list_json() -> None:
    code, out, _ = invoke("operators", "list", "--json")
    assert code == 0
    rows = orjson.loads(out)
    assert {r["id"] for r in rows} == set(operators.ids())
    for r in rows:
        assert {"id", "source", "kind", "version"} <= set(r)
    code, out, _ = invoke("operators", "list", "--source", "vllm", "--json")
    assert {r["source"] for r in orjson.loads(out)} == {"vllm"}


def test_operators_show_prints_signatures_and_raw_sources() -> None:
    spec = operators.get("vllm::rms_norm")
    code, out, _ = invoke("operators", "show", spec.id)
    assert code == 0 and spec.entry_points[0].signature in out and "Tolerances" in out
    code, out, _ = invoke("operators", "show", spec.id, "--solution")
    assert code == 0 and out == spec.solution.lstrip("\n")
    code, out, _ = invoke("operators", "show", spec.id, "--negative")
    assert out == spec.negatives[0].source.lstrip("\n")
    code, out, _ = invoke("operators", "show", spec.id, "--negative", spec.negatives[0].name)
    assert out == spec.negatives[0].source.lstrip("\n")
    code, out, _ = invoke("operators", "show", spec.id, "--prompt")
    assert spec.description in out


def test_unknown_operator_is_a_usage_error() -> None:
    for args in (("operators", "show", "aten::nope"), ("eval", "x.py", "--op", "aten::nope")):
        code, _, err = invoke(*args)
        assert code == 2 and "unknown operator" in err


def test_eval_usage_errors() -> None:
    code, _, err = invoke("eval", "/nonexistent.py", "--op", "aten::add")
    assert code == 2 and "cannot read" in err
    code, _, err = invoke("eval", str(FIXTURES / "add_raises.py"), "--op", "aten::add", "--resume")
    assert code == 2 and "--resume needs --out" in err


def test_eval_unreachable_agent_exits_3() -> None:
    code, _, err = invoke("eval", str(FIXTURES / "add_raises.py"), "--op", "aten::add",
                          "--agent", "127.0.0.1:1")
    assert code == 3 and "cannot reach the agent" in err


def test_eval_json_out_and_resume(cpu_agent: str, tmp_path: Path) -> None:
    spec = operators.get("aten::add")
    cands = tmp_path / "cands"
    cands.mkdir()
    (cands / "ref.py").write_text(spec.solution)
    (cands / "neg.py").write_text(spec.negatives[0].source)
    (cands / "syntax.py").write_bytes((FIXTURES / "add_syntax_error.py").read_bytes())
    out = tmp_path / "results.jsonl"
    code, stdout, _ = invoke("eval", str(cands), "--op", spec.id, "--agent", cpu_agent, "--json",
                             "--out", str(out))
    assert code == 0
    lines = [orjson.loads(x) for x in stdout.splitlines()]
    assert len(lines) == 3
    by_file = {Path(r["file"]).name: r for r in lines}
    assert by_file["ref.py"]["status"] == "PASSED"
    assert by_file["neg.py"]["status"] == "WRONG_ANSWER"
    assert by_file["syntax.py"]["status"] == "COMPILE_ERROR"
    for r in lines:
        assert {"status", "operator", "candidate_hash", "cases", "findings"} <= set(r)
    assert len(out.read_bytes().splitlines()) == 3
    # A torn last line (killed run) is tolerated; resume evaluates only what is missing.
    with open(out, "ab") as f:
        f.write(b'{"status": "PASS')
    (cands / "raises.py").write_bytes((FIXTURES / "add_raises.py").read_bytes())
    code, stdout, err = invoke("eval", str(cands), "--op", spec.id, "--agent", cpu_agent, "--json",
                               "--out", str(out), "--resume")
    assert code == 0 and "3 candidate(s) already" in err
    assert [orjson.loads(x)["status"] for x in stdout.splitlines()] == ["RUNTIME_ERROR"]


@pytest.mark.slow
def test_eval_starts_a_local_agent(tmp_path: Path) -> None:
    spec = operators.get("cublas::cublasSaxpy_v2")
    f = tmp_path / "saxpy.py"
    f.write_text(spec.solution)
    r = subprocess.run([sys.executable, "-m", "coordinator", "eval", str(f), "--op", spec.id,
                        "--platform", "cpu", "--json"], capture_output=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr.decode()
    assert orjson.loads(r.stdout.splitlines()[0])["status"] == "PASSED"


def test_help_teaches() -> None:
    code, out, _ = invoke("--help")
    assert code == 0 and "kgb eval" in out
    for cmd in (("eval",), ("run",), ("agent", "serve"), ("operators", "show"), ("report",)):
        code, out, _ = invoke(*cmd, "--help")
        assert code == 0 and "Usage" in out


def test_report_unknown_run(tmp_path: Path) -> None:
    code, _, err = invoke("report", "nope", "--runs-dir", str(tmp_path))
    assert code == 2 and "no run" in err
