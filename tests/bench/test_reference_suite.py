"""bench/reference_suite.py: a GPU call's time limit cuts the suite short; the verdicts that
arrived by then are kept (once, whole lines only), so the next call resumes after them."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson

import operators
from bench.reference_suite import REPO, Suite, _done, _jobs


def _verdict(op: str, file: str, status: str = "PASSED") -> bytes:
    return orjson.dumps({"operator": op, "file": f"/x/{file}", "status": status,
                         "cases": [], "timings": []}) + b"\n"


def test_a_cut_short_run_keeps_whole_verdicts_once(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "verdicts.jsonl").write_bytes(_verdict("x::a", "reference.py")
                                       + _verdict("x::a", "negative_n.py", "WRONG_ANSWER")
                                       + b'{"operator": "x::a", "file": "/x/neg')  # cut mid-line
    out = tmp_path / "out.jsonl"
    suite = Suite(out, [("x::a", a), ("x::b", b)], [])
    assert suite.keep_arrived() == 2
    assert suite.keep_arrived() == 0  # nothing written twice
    assert _done(out) == {("x::a", "reference.py"), ("x::a", "negative_n.py")}


def test_a_resumed_run_writes_only_what_is_left(tmp_path: Path) -> None:
    spec = operators.get("cublas::cublasSaxpy_v2")
    done = {(spec.id, "reference.py")}
    (job,) = _jobs([spec], done, tmp_path, negatives=True)
    assert job[0] == spec.id
    left = sorted(p.name for p in job[1].iterdir())
    assert left == sorted(f"negative_{n.name}.py" for n in spec.negatives)
    every = done | {(spec.id, name) for name in left}
    assert _jobs([spec], every, tmp_path / "again", negatives=True) == []


class _Fake(Suite):
    """``kgb eval`` replaced by a script that writes one verdict and some progress."""

    def command(self, op: str, d: Path) -> list[str]:
        line = _verdict(op, "reference.py").decode()
        return [sys.executable, "-c", f"import sys; open({str(d / 'verdicts.jsonl')!r}, 'w')"
                f".write({line!r}); print('progress of {op}', file=sys.stderr)"]


def test_a_finished_problem_lands_in_the_results_with_its_wall_time(tmp_path: Path) -> None:
    d = tmp_path / "p"
    d.mkdir()
    out = tmp_path / "out.jsonl"
    suite = _Fake(out, [("x::p", d)], [])
    suite.run(("x::p", d))
    assert _done(out) == {("x::p", "reference.py")}
    log = out.with_suffix(".eval.log").read_text()
    assert log.startswith("== x::p ") and " s, exit 0\n" in log and "progress of x::p" in log
    assert suite.keep_arrived() == 0  # already moved


def test_sigterm_keeps_the_arrived_verdicts_and_exits_124(tmp_path: Path) -> None:
    """The real signal path: a problem still running when ``timeout`` sends SIGTERM."""
    d, out = tmp_path / "p", tmp_path / "out.jsonl"
    d.mkdir()
    line = _verdict("x::p", "reference.py").decode()
    child = [sys.executable, "-c", f"import time; open({str(d / 'verdicts.jsonl')!r}, 'w')"
             f".write({line!r}); time.sleep(20)"]
    script = textwrap.dedent(f"""
        import signal, sys
        sys.path.insert(0, {str(REPO)!r})
        from pathlib import Path
        from bench.reference_suite import Suite
        class Slow(Suite):
            def command(self, op, d):
                return {child!r}
        suite = Slow(Path({str(out)!r}), [("x::p", Path({str(d)!r}))], [])
        signal.signal(signal.SIGTERM, suite.stop)
        suite.run(("x::p", Path({str(d)!r})))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while (not (d / "verdicts.jsonl").exists() and proc.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 124, stderr.decode()
    assert _done(out) == {("x::p", "reference.py")}
    assert b"[cut short] x::p: 1 verdict(s) kept" in stderr
    assert b"| x::p | reference | PASSED |" in stdout
