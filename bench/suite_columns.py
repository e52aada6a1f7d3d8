"""Fill the H200 columns of docs/suite.md from a reference-suite run's verdicts.

    python bench/suite_columns.py bench/results/h200-suite.jsonl [--doc docs/suite.md]
    python bench/suite_columns.py RESULTS.jsonl [MORE.jsonl ...] --table vllm   # print a table

Per problem: the reference's status (with "controls rejected k/n" for its negative controls),
the geometric mean over its timed benchmark cases of the speed-up versus PyTorch, and of the
% of speed-of-light. Problems without a verdict keep "not run".
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import Any

import orjson


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def columns(rows: list[dict[str, Any]]) -> dict[str, tuple[str, str, str]]:
    """operator -> (status, speed-up, % SOL) cells."""
    by_op: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:  # the last verdict of a file wins (a resumed run may repeat one)
        by_op.setdefault(r["operator"], {})[Path(r.get("file", "")).stem] = r
    out = {}
    for op, files in by_op.items():
        ref = files.get("reference")
        negs = [v for k, v in files.items() if k.startswith("negative_")]
        rejected = sum(v["status"] != "PASSED" for v in negs)
        if ref is None:
            status = "reference not run"
        else:
            status = ref["status"]
            if ref["status"] != "PASSED":
                status += f" ({ref.get('message', '')[:80].replace('|', '/')})"
        if negs:
            status += f"; controls rejected {rejected}/{len(negs)}"
        timed = [t for t in (ref or {}).get("timings", []) if t.get("meaningful")]
        sp = geomean([t.get("speedup") or 0 for t in timed])
        sol = geomean([t.get("sol_percent") or 0 for t in timed])
        out[op] = (status, f"{sp:.2f}x" if sp else "—", f"{sol:.1f} %" if sol else "—")
    return out


def table(rows: list[dict[str, Any]], source: str) -> str:
    """One Markdown row per problem of ``source`` (registry order): the reference's status and
    controls, its timed cases, speed-up over the baseline the verdict names, and % SOL;
    problems without a verdict of their current version say "not run"."""
    import operators

    current = {spec.id: spec.version for spec in operators.all_specs(source=source)}
    stale = {r["operator"]: r.get("operator_version") for r in rows
             if r.get("operator_version") not in (None, current.get(r["operator"]))}
    # A verdict of an older version of the problem is not today's problem's result.
    rows = [r for r in rows if r.get("operator_version") in (None, current.get(r["operator"]))]
    cells = columns(rows)
    base = {r["operator"]: r.get("baseline") or "?" for r in rows
            if Path(r.get("file", "")).stem == "reference"}
    timed = {r["operator"]: sum(bool(t.get("meaningful")) for t in r.get("timings", []))
             for r in rows if Path(r.get("file", "")).stem == "reference"}
    out = ["| problem | status | timed cases | speed-up | baseline | % SOL |",
           "|---|---|---|---|---|---|"]
    for spec in operators.all_specs(source=source):
        never = f"not run at v{spec.version} (v{stale[spec.id]} ran)" if spec.id in stale else "not run"
        status, sp, sol = cells.get(spec.id, (never, "—", "—"))
        out.append(f"| `{spec.id}` | {status} | {timed.get(spec.id, '—')} | {sp} | "
                   f"{base.get(spec.id, '—')} | {sol} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, nargs="+",
                    help="verdict files; for a problem in several, the later file's verdicts win")
    ap.add_argument("--doc", type=Path, default=Path(__file__).resolve().parent.parent / "docs/suite.md")
    ap.add_argument("--table", metavar="SOURCE", default=None,
                    help="print a table of every problem of SOURCE (aten, vllm, cublas) instead")
    args = ap.parse_args()
    rows = [orjson.loads(x) for f in args.results for x in f.read_bytes().splitlines() if x.strip()]
    if args.table:
        print(table(rows, args.table))
        return
    cells = columns(rows)
    lines = args.doc.read_text().splitlines()
    filled = 0
    for i, line in enumerate(lines):
        m = re.match(r"\| `([^`]+)` \|", line)
        if not m or m.group(1) not in cells:
            continue
        parts = line.split(" | ")
        parts[-3], parts[-2], parts[-1] = *cells[m.group(1)][:2], cells[m.group(1)][2] + " |"
        lines[i] = " | ".join(parts)
        filled += 1
    args.doc.write_text("\n".join(lines) + "\n")
    print(f"filled {filled} rows of {args.doc} from {len(rows)} verdicts")


if __name__ == "__main__":
    main()
