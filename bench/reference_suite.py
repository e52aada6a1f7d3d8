"""Evaluate every problem's reference solution and negative controls through ``kgb eval``.

Writes raw verdicts as JSONL (resumable: re-running skips what is already there) and prints a
Markdown table for docs/BENCHMARKS.md. Used on the H200 for the foundation table:

    python bench/reference_suite.py --out bench/results/h200-reference.jsonl [--agent HOST:PORT]
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import operators  # noqa: E402


def _kgb(*args: str) -> list[str]:
    return [sys.executable, "-m", "coordinator", *args]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="JSONL of verdicts (appended)")
    ap.add_argument("--agent", default=None, help="a running agent; default: a local one per op")
    ap.add_argument("--platform", default="auto")
    ap.add_argument("--op", action="append", default=None, help="limit to these problems")
    ap.add_argument("--no-negatives", action="store_true")
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
    for spec in specs:
        d = tmp / spec.id.replace("::", "__")
        d.mkdir()
        (d / "reference.py").write_text(spec.solution)
        if not args.no_negatives:
            for n in spec.negatives:
                (d / f"negative_{n.name}.py").write_text(n.source)
        cmd = _kgb("eval", str(d), "--op", spec.id, "--json", "--out", str(args.out), "--resume")
        cmd += ["--agent", args.agent] if args.agent else ["--platform", args.platform]
        print(f"== {spec.id}", file=sys.stderr, flush=True)
        r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            print(f"kgb eval exited {r.returncode} for {spec.id}", file=sys.stderr)
    print(table(args.out))
    return 0


def table(path: Path) -> str:
    rows = [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]
    lines = ["| operator | candidate | status | cases | timed cases | speedup (geomean) | "
             "% SOL (geomean) | median µs per case |",
             "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["operator"], Path(r.get("file", "")).name)):
        timings = [t for t in r.get("timings", []) if t.get("meaningful")]
        sp = [t["speedup"] for t in timings if t.get("speedup")]
        sol = [t["sol_percent"] for t in timings if t.get("sol_percent")]
        gm = (lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None)
        g_sp, g_sol = gm(sp), gm(sol)
        meds = ", ".join(f"{t['median_us']:.1f}±{(t['ci_high_us'] - t['ci_low_us']) / 2:.1f}"
                         f" (base {t['baseline_median_us']:.1f})" for t in timings)
        lines.append(f"| {r['operator']} | {Path(r.get('file', '')).stem} | {r['status']} | "
                     f"{sum(c['passed'] for c in r['cases'])}/{len(r['cases'])} | {len(timings)} | "
                     f"{f'{g_sp:.2f}x' if g_sp else '-'} | {f'{g_sol:.1f}%' if g_sol else '-'} | "
                     f"{meds or '-'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
