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
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    specs = [operators.get(i) for i in args.op] if args.op else operators.all_specs()
    if args.agent:
        import asyncio

        from protos.client import AgentClient

        async def wait() -> None:
            async with AgentClient(args.agent) as c:
                await c.wait_serving(timeout=600)

        asyncio.run(wait())
    tmp = Path(tempfile.mkdtemp(prefix="kgb-bench-"))
    done = _done(args.out)
    jobs: list[tuple[str, Path]] = []
    for spec in specs:
        files = {"reference.py": spec.solution}
        if not args.no_negatives:
            files.update({f"negative_{n.name}.py": n.source for n in spec.negatives})
        todo = {name: src for name, src in files.items() if (spec.id, name) not in done}
        if not todo:
            continue
        d = tmp / spec.id.replace("::", "__")
        d.mkdir()
        for name, src in todo.items():
            (d / name).write_text(src)
        jobs.append((spec.id, d))
    print(f"{len(jobs)} problem(s) to evaluate, {args.jobs} at a time "
          f"({len(specs) - len(jobs)} already in {args.out})", file=sys.stderr, flush=True)
    lock = threading.Lock()
    finished = 0
    pending = {op: d for op, d in jobs}
    log = args.out.with_suffix(".eval.log")

    def flush(op: str, d: Path) -> list[dict[str, object]]:
        """Move one problem's verdicts so far into the shared file (caller holds the lock)."""
        if pending.pop(op, None) is None:
            return []
        part = d / "verdicts.jsonl"
        lines = [x for x in (part.read_bytes() if part.exists() else b"").splitlines(True)
                 if x.endswith(b"\n") and x.strip()]  # a line cut short is left out
        with args.out.open("ab") as f:
            f.write(b"".join(lines))
        return [orjson.loads(x) for x in lines]

    def run(job: tuple[str, Path]) -> None:
        nonlocal finished
        op, d = job
        cmd = _kgb("eval", str(d), "--op", op, "--json", "--out", str(d / "verdicts.jsonl"))
        cmd += ["--agent", args.agent] if args.agent else ["--platform", args.platform]
        t0 = time.monotonic()
        r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        with lock:  # one writer appends whole verdict lines to the shared file
            rows = flush(op, d)
            finished += 1
            with log.open("ab") as f:  # each problem's own progress, for a slow or failed one
                f.write(f"== {op} {time.monotonic() - t0:.0f} s, exit {r.returncode}\n".encode()
                        + r.stderr[-20000:])
            print(f"[{finished}/{len(jobs)}] {op} ({time.monotonic() - t0:.0f} s): "
                  + (", ".join(f"{Path(str(x.get('file', ''))).stem} {x['status']}" for x in rows)
                     or f"no verdicts (kgb eval exited {r.returncode}: "
                        f"{r.stderr.decode(errors='replace')[-300:]})"),
                  file=sys.stderr, flush=True)

    def stop(signum: int, frame: object) -> None:
        """Cut short (``timeout`` sends SIGTERM): keep every verdict that arrived, so a re-run
        resumes from it, and still print the table."""
        with lock:
            for op, d in list(pending.items()):
                rows = flush(op, d)
                print(f"[cut short] {op}: {len(rows)} verdict(s) kept", file=sys.stderr, flush=True)
            print(table(args.out), flush=True)
        os._exit(124)

    signal.signal(signal.SIGTERM, stop)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(run, jobs))
    print(table(args.out))
    return 0


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
