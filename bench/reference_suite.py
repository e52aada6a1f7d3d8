"""Evaluate every problem's reference solution and negative controls through ``kgb eval``.

Writes raw verdicts as JSONL (resumable: re-running skips what is already there) and prints a
Markdown table for docs/BENCHMARKS.md. Several problems are evaluated at once (``--jobs``), so
their correctness overlaps on the agent while each timed case still has the device alone.
Used on the H200 for the foundation and ATen tables:

    python bench/reference_suite.py --out bench/results/h200-reference.jsonl [--agent HOST:PORT]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import operators  # noqa: E402
from bench.suite_columns import geomean  # noqa: E402


def _kgb(*args: str) -> list[str]:
    return [sys.executable, "-m", "coordinator", *args]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="JSONL of verdicts (appended)")
    ap.add_argument("--agent", default=None, help="a running agent; default: a local one per op")
    ap.add_argument("--platform", default="auto")
    ap.add_argument("--op", action="append", default=None, help="limit to these problems")
    ap.add_argument("--no-negatives", action="store_true")
    ap.add_argument("--jobs", type=int, default=8,
                    help="problems evaluated at once (timing stays exclusive on the agent)")
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    specs = [operators.get(i) for i in args.op] if args.op else operators.all_specs()
    if args.agent:
        _wait_serving(args.agent)
    jobs = _jobs(specs, _done(args.out), Path(tempfile.mkdtemp(prefix="kgb-bench-")),
                 negatives=not args.no_negatives)
    print(f"{len(jobs)} problem(s) to evaluate, {args.jobs} at a time "
          f"({len(specs) - len(jobs)} already in {args.out})", file=sys.stderr, flush=True)
    suite = Suite(args.out, jobs, ["--agent", args.agent] if args.agent
                  else ["--platform", args.platform])
    signal.signal(signal.SIGTERM, suite.stop)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(suite.run, jobs))
    print(table(args.out))
    return 0


def _wait_serving(agent: str) -> None:
    import asyncio

    from protos.client import AgentClient

    async def wait() -> None:
        async with AgentClient(agent) as c:
            await c.wait_serving(timeout=600)

    asyncio.run(wait())


def _jobs(specs: list[operators.OperatorSpec], done: set[tuple[str, str]], tmp: Path,
          negatives: bool) -> list[tuple[str, Path]]:
    """A folder per problem holding the files still to evaluate (its reference, its controls)."""
    jobs: list[tuple[str, Path]] = []
    for spec in specs:
        files = {"reference.py": spec.solution}
        if negatives:
            files.update({f"negative_{n.name}.py": n.source for n in spec.negatives})
        todo = {name: src for name, src in files.items() if (spec.id, name) not in done}
        if not todo:
            continue
        d = tmp / spec.id.replace("::", "__")
        d.mkdir()
        for name, src in todo.items():
            (d / name).write_text(src)
        jobs.append((spec.id, d))
    return jobs


class Suite:
    """The problems of one run, each evaluated by its own ``kgb eval``; their verdicts go into
    one shared file as each problem finishes, or when the run is cut short."""

    def __init__(self, out: Path, jobs: list[tuple[str, Path]], agent_args: list[str]) -> None:
        self.out = out
        self.total = len(jobs)
        self.agent_args = agent_args
        self.pending = dict(jobs)  # problems whose verdicts are not in ``out`` yet
        self.finished = 0
        self.lock = threading.Lock()  # one writer appends whole verdict lines to ``out``
        self.log = out.with_suffix(".eval.log")  # each problem's wall time and its kgb's stderr
        self.env = {**os.environ,
                    "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}

    def command(self, op: str, d: Path) -> list[str]:
        return [*_kgb("eval", str(d), "--op", op, "--json", "--out", str(d / "verdicts.jsonl")),
                *self.agent_args]

    def run(self, job: tuple[str, Path]) -> None:
        op, d = job
        t0 = time.monotonic()
        r = subprocess.run(self.command(op, d), env=self.env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
        wall = time.monotonic() - t0
        with self.lock:
            rows = self.flush(op, d)
            self.finished += 1
            with self.log.open("ab") as f:
                f.write(f"== {op} {wall:.0f} s, exit {r.returncode}\n".encode() + r.stderr[-20000:])
            print(f"[{self.finished}/{self.total}] {op} ({wall:.0f} s): "
                  + (", ".join(f"{Path(str(x.get('file', ''))).stem} {x['status']}" for x in rows)
                     or f"no verdicts (kgb eval exited {r.returncode}: "
                        f"{r.stderr.decode(errors='replace')[-300:]})"),
                  file=sys.stderr, flush=True)

    def flush(self, op: str, d: Path) -> list[dict[str, object]]:
        """Move one problem's verdicts so far into ``out``, once (the caller holds the lock); a
        line its writer had not finished is left out."""
        if self.pending.pop(op, None) is None:
            return []
        part = d / "verdicts.jsonl"
        lines = [x for x in (part.read_bytes() if part.exists() else b"").splitlines(True)
                 if x.endswith(b"\n") and x.strip()]
        with self.out.open("ab") as f:
            f.write(b"".join(lines))
        return [orjson.loads(x) for x in lines]

    def keep_arrived(self) -> int:
        """Every verdict that has arrived of the problems still running goes into ``out``, so
        a re-run resumes after them; returns how many."""
        kept = 0
        with self.lock:
            for op, d in list(self.pending.items()):
                rows = self.flush(op, d)
                kept += len(rows)
                print(f"[cut short] {op}: {len(rows)} verdict(s) kept", file=sys.stderr, flush=True)
        return kept

    def stop(self, signum: int, frame: object) -> None:
        """Cut short (``timeout`` sends SIGTERM): keep what arrived, print the table, exit 124."""
        self.keep_arrived()
        print(table(self.out), flush=True)
        os._exit(124)


def _done(path: Path) -> set[tuple[str, str]]:
    """(operator, file name) pairs already in ``path``: a re-run skips them (resume)."""
    if not path.exists():
        return set()
    rows = [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]
    return {(r["operator"], Path(r.get("file", "")).name) for r in rows}


def table(path: Path) -> str:
    rows = [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]
    lines = ["| operator | candidate | status | cases | timed cases | speedup (geomean) | "
             "% SOL (geomean) | median µs per case |",
             "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["operator"], Path(r.get("file", "")).name)):
        timings = [t for t in r.get("timings", []) if t.get("meaningful")]
        sp = [t["speedup"] for t in timings if t.get("speedup")]
        sol = [t["sol_percent"] for t in timings if t.get("sol_percent")]
        g_sp, g_sol = geomean(sp), geomean(sol)
        meds = ", ".join(f"{t['median_us']:.1f}±{(t['ci_high_us'] - t['ci_low_us']) / 2:.1f}"
                         f" (base {t['baseline_median_us']:.1f})" for t in timings)
        lines.append(f"| {r['operator']} | {Path(r.get('file', '')).stem} | {r['status']} | "
                     f"{sum(c['passed'] for c in r['cases'])}/{len(r['cases'])} | {len(timings)} | "
                     f"{f'{g_sp:.2f}x' if g_sp else '-'} | {f'{g_sol:.1f}%' if g_sol else '-'} | "
                     f"{meds or '-'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
