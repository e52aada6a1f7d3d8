"""The red-team corpus on a real device, one agent per layer selection, verdicts streamed.

    python bench/corpus_gpu.py --out DIR [--layer timing] [--all-layers] FILE...

Each FILE is a corpus candidate (header names its operator). With ``--layer L`` the agent runs
only that anti-cheat layer (correctness and process are always on); with ``--all-layers`` every
layer is on. Each verdict is printed and appended to ``DIR/corpus-gpu.jsonl`` as it arrives, so
a run cut short still leaves every verdict it reached.
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--layer", action="append", default=[])
    ap.add_argument("--all-layers", action="store_true")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    extra = () if args.all_layers else only_layer(*args.layer)
    label = "all" if args.all_layers else "+".join(args.layer) or "none"
    with LocalAgent(platform="cuda", workers=args.workers, extra_args=extra,
                    log_path=args.out / f"corpus-agent-{label}.log") as agent:
        asyncio.run(agent.wait_serving(timeout=300))
        asyncio.run(_run(agent.address, [p.resolve() for p in args.files], args.out, label,
                         args.workers))


if __name__ == "__main__":
    main()
