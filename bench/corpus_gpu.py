"""The red-team corpus on a real device, one agent per layer selection, verdicts streamed.

    python bench/corpus_gpu.py --out DIR [--layer timing] [--all-layers] FILE...
    python bench/corpus_gpu.py --out DIR --whole [--only GROUP ...]

Each FILE is a corpus candidate (header names its operator). With ``--layer L`` the agent runs
only that anti-cheat layer (correctness and process are always on); with ``--all-layers`` every
layer is on. ``--whole`` runs the whole corpus as CI does on the CPU: every cheat with its own
layer alone (one agent per layer, the GPU-only layers first), every honest file with every
layer on. Each verdict is printed and appended to ``DIR/corpus-gpu.jsonl`` as it arrives, so a
run cut short still leaves every verdict it reached, and ``--whole`` skips files already there
(resume). ``--whole`` ends with a summary: expected against got, per file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from coordinator.local_agent import LocalAgent  # noqa: E402
from protos.client import AgentClient  # noqa: E402
from protos.records import EvalRequest  # noqa: E402
from tests.adversarial.catalogue import headers  # noqa: E402
from tests.helpers import only_layer  # noqa: E402


def _operator(path: Path) -> str:
    m = re.search(r"^#\s*operator:\s*(\S+)", path.read_text(), re.M)
    assert m, f"{path}: no operator header"
    return m.group(1)


async def _run(address: str, files: list[Path], out: Path, label: str, workers: int) -> None:
    sem = asyncio.Semaphore(workers)
    async with AgentClient(address) as client:
        async def one(path: Path) -> None:
            async with sem:
                t0 = time.monotonic()
                v = await client.evaluate(EvalRequest(uuid.uuid4().hex, _operator(path),
                                                      path.read_bytes()), timeout=600)
            row = {"agent": label, "file": str(path.relative_to(REPO)), "status": v.status.name,
                   "findings": [f"{f.layer}/{f.rule}" for f in v.findings],
                   "message": v.message[:300], "wall_s": round(time.monotonic() - t0, 1),
                   "timings": [(t.name, t.median_us, t.baseline_median_us) for t in v.timings]}
            print(json.dumps(row), flush=True)
            with (out / "corpus-gpu.jsonl").open("a") as f:
                f.write(json.dumps(row) + "\n")

        await asyncio.gather(*(one(p) for p in files))


GPU_FIRST = ("timing", "profile")
ALWAYS_ON = ("correctness", "process")  # layers only a device can prove: run before the rest


def _groups() -> list[tuple[str, list[Path]]]:
    """(label, files): each cheat layer alone (GPU-only layers first), then honest files with
    every layer on ("all")."""
    corpus = REPO / "tests" / "adversarial"
    by_layer: dict[str, list[Path]] = {}
    for folder in ("cheats_gpu", "cheats"):
        for path in sorted((corpus / folder).glob("*.py")):
            layer = headers(path)["layer"]
            # correctness and process are always on: their cheats share an agent with no layer
            by_layer.setdefault("none" if layer in ALWAYS_ON else layer, []).append(path)
    order = [g for g in GPU_FIRST if g in by_layer] + ["all"] + sorted(
        g for g in by_layer if g not in GPU_FIRST)
    honest = sorted((corpus / "honest").glob("*.py"))
    return [(g, honest if g == "all" else by_layer[g]) for g in order]


def _agent_args(label: str) -> tuple[str, ...]:
    if label == "all":
        return ()
    from device_agent.evaluation import LAYERS

    return only_layer(label) if label in LAYERS else only_layer()  # "none"


def _done(out: Path) -> set[tuple[str, str]]:
    path = out / "corpus-gpu.jsonl"
    if not path.exists():
        return set()
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["agent"], r["file"]) for r in rows}


def _summary(out: Path) -> int:
    """Expected against got for every verdict in ``out``; the number of mismatches."""
    bad = 0
    rows = [json.loads(line) for line in (out / "corpus-gpu.jsonl").read_text().splitlines()
            if line.strip()]
    for r in rows:
        h = headers(REPO / r["file"])
        expect = h.get("expect", "PASSED")
        layers = {f.split("/")[0] for f in r["findings"]}
        if expect == "PASSED":  # an honest file: passed, and no layer found anything
            ok = r["status"] == expect and not layers
        else:  # a cheat: its verdict, from its own layer (as tests/adversarial/test_corpus.py)
            ok = r["status"] == expect and (h["layer"] == "correctness"
                                            or expect == "RUNTIME_ERROR" or h["layer"] in layers)
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {r['agent']:12s} {r['status']:15s} "
              f"(expected {expect}) {r['file']} {' '.join(r['findings'])}")
    print(f"{len(rows)} verdicts, {bad} not as expected")
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--layer", action="append", default=[])
    ap.add_argument("--all-layers", action="store_true")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--platform", default="cuda")
    ap.add_argument("--whole", action="store_true", help="the whole corpus, as CI runs it")
    ap.add_argument("--only", action="append", default=[],
                    help="with --whole: only these groups (layer names, or 'all' for honest)")
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.whole:
        for label, files in _groups():
            if args.only and label not in args.only:
                continue
            done = _done(args.out)
            todo = [p for p in files if (label, str(p.relative_to(REPO))) not in done]
            print(f"== {label}: {len(todo)} of {len(files)} files to run", flush=True)
            if not todo:
                continue
            with LocalAgent(platform=args.platform, workers=args.workers,
                            extra_args=_agent_args(label),
                            log_path=args.out / f"corpus-agent-{label}.log") as agent:
                asyncio.run(agent.wait_serving(timeout=300))
                asyncio.run(_run(agent.address, todo, args.out, label, args.workers))
        sys.exit(1 if _summary(args.out) else 0)
    if not args.files:
        ap.error("name corpus FILEs, or run --whole")
    extra = () if args.all_layers else only_layer(*args.layer)
    label = "all" if args.all_layers else "+".join(args.layer) or "none"
    with LocalAgent(platform=args.platform, workers=args.workers, extra_args=extra,
                    log_path=args.out / f"corpus-agent-{label}.log") as agent:
        asyncio.run(agent.wait_serving(timeout=300))
        asyncio.run(_run(agent.address, [p.resolve() for p in args.files], args.out, label,
                         args.workers))


if __name__ == "__main__":
    main()
