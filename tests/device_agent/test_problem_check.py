"""``python -m device_agent validate`` (what ``kgb operators validate`` execs): exit codes,
per-problem lines, and that ``kgb`` hands its options over unchanged."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from device_agent import problem_check

REPO = Path(__file__).resolve().parents[2]
CHEAP = "aten::_softmax"


def _args(*ids: str, controls: bool = False, budget_s: float = 60.0) -> argparse.Namespace:
    return argparse.Namespace(op_ids=list(ids), tier="cpu", controls=controls, budget_s=budget_s,
                              compile_for=None)


def test_a_valid_problem_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert problem_check.run(_args(CHEAP)) == 0
    assert capsys.readouterr().out.startswith("ok   " + CHEAP)


def test_over_budget_fails_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert problem_check.run(_args(CHEAP, budget_s=1e-6)) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("FAIL " + CHEAP)
    assert "over the 1e-06s budget" in captured.out
    assert "1 of 1 problems failed validation" in captured.err


def test_bad_input_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert problem_check.run(_args("aten::no_such_op")) == 2
    assert "unknown operator 'aten::no_such_op'" in capsys.readouterr().err
    assert problem_check.run(_args(CHEAP, budget_s=-1)) == 2


def test_kgb_execs_the_agent_program_with_controls() -> None:
    """Through the real ``kgb`` entry point: the controls run (more checks than the problem's
    own) and the exit code comes back."""
    import operators
    from operators.spec import Tier
    from operators.validate import validate

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    kgb = [sys.executable, "-m", "coordinator", "operators", "validate", CHEAP, "--budget", "1e-6"]
    r = subprocess.run(kgb, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1, r.stderr
    assert "over the 1e-06s budget" in r.stdout
    own_checks = validate(operators.get(CHEAP), Tier.CPU).checks
    assert int(r.stdout.split()[2]) > own_checks, r.stdout
