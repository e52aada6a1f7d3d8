"""Engine benchmarks (issue #3): throughput, repeatability and timer accuracy on a real device.

    python bench/engine.py throughput --out DIR [--n 60] [--workers 12] [--fresh 6]
    python bench/engine.py rate --out DIR      # the throughput table from a cut-short run
    python bench/engine.py repeatability --out DIR [--repeats 10]
    python bench/engine.py copy --out DIR

``throughput`` evaluates N distinct candidates for ``aten::add`` (each a variant of the reference
with its own kernel name and block size, so no two share source or a Triton cache entry) through
one warm agent, all submitted at once, and compares with the same harness started as a fresh
agent process per candidate (``--fresh`` of them, one worker each). Both use the full protocol:
every public and hidden case, then timing. Verdicts of the candidates run both ways must agree.

``repeatability`` evaluates the reference solutions of ``aten::add`` (memory-bound) and
``aten::mm`` (its 4096^3 bf16 case) ``--repeats`` times each, all submitted at once (so other
evaluations' checking runs around every timed case) or, with ``--sequential``, one at a time,
and reports the coefficient of variation of each benchmark case's reported median.

``copy`` measures the device's peak bandwidth the way the agent does (``device_agent.peaks``)
and times a plain Triton copy kernel with the agent's timer protocol (rotating buffers, L2 flush,
device-wide synchronisation); the copy should reach at least 85 % of the measured peak.

Every command writes raw JSON/JSONL under ``--out`` (verdict rows stream to JSONL as they arrive,
so a run cut short by a time limit keeps them) and prints a Markdown summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import operators  # noqa: E402
from coordinator.local_agent import LocalAgent  # noqa: E402
from protos.client import AgentClient  # noqa: E402
from protos.records import EvalRequest, Verdict  # noqa: E402

BLOCKS = (256, 512, 1024, 2048, 4096)


def add_variant(i: int) -> str:
    """The ``aten::add`` reference with a unique kernel name and one of five block sizes."""
    src = operators.get("aten::add").solution
    src = src.replace("_add_kernel", f"_add_kernel_v{i}")
    src = src.replace("BLOCK = 1024", f"BLOCK = {BLOCKS[i % len(BLOCKS)]}")
    return f"# throughput variant {i}\n{src}"


def _row(v: Verdict) -> dict[str, Any]:
    return {"status": v.status.name, "message": v.message, "wall_s": v.wall_seconds,
            "cases": len(v.cases), "candidate_hash": v.candidate_hash,
            "timings": [{"name": t.name, "median_us": t.median_us, "ci": [t.ci_low_us, t.ci_high_us],
                         "samples": t.samples, "baseline_us": t.baseline_median_us,
                         "sol_percent": t.sol_percent, "sm_clock_mhz": t.sm_clock_mhz,
                         "temperature_c": t.temperature_c,
                         "throttled_discarded": t.throttled_discarded} for t in v.timings]}


async def _evaluate_all(address: str, sources: list[str], op: str, concurrency: int,
                        stream: Path | None = None) -> list[Verdict]:
    """Verdicts in submission order; each row is also appended to ``stream`` (JSONL) as it
    arrives, so a step cut short by its time limit still leaves what it measured."""
    sem = asyncio.Semaphore(concurrency)
    done = 0
    t0 = time.monotonic()

    async with AgentClient(address) as client:
        async def one(src: str) -> Verdict:
            nonlocal done
            async with sem:
                v = await client.evaluate(EvalRequest(uuid.uuid4().hex, op, src.encode()),
                                          timeout=900)
            done += 1
            print(f"  {done}/{len(sources)} {v.status.name} {v.wall_seconds:.1f}s",
                  file=sys.stderr, flush=True)
            if stream is not None:
                with stream.open("a") as f:
                    f.write(json.dumps({"operator": op, "at_s": time.monotonic() - t0,
                                        **_row(v)}) + "\n")
            return v

        return list(await asyncio.gather(*(one(s) for s in sources)))


def _busy_core_seconds() -> float:
    """CPU seconds the whole host has spent busy since boot (all cores, from /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` itself (utime + stime)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_WORKER_CPU = re.compile(r"worker CPU: start ([\d.]+)s \(\+([\d.]+)s compilers\), "
                         r"job ([\d.]+)s \(\+([\d.]+)s compilers\)")
_OWN_LAUNCHERS = re.compile(r"launchers built by the worker (\d+)")


def cpu_from_log(log: Path) -> dict[str, Any]:
    """Per-candidate worker CPU (the agent's /proc readings) and launcher builds from an agent
    log at -vv: sums, and the launchers the first and the last ten candidates built."""
    text = log.read_text(errors="replace") if log.exists() else ""
    cpu = [tuple(float(x) for x in m.groups()) for m in _WORKER_CPU.finditer(text)]
    built = [int(m.group(1)) for m in _OWN_LAUNCHERS.finditer(text)]
    parts = ("start_own", "start_compilers", "job_own", "job_compilers")
    return {"candidates": len(cpu),
            "worker_cpu_s": {k: sum(c[i] for c in cpu) for i, k in enumerate(parts)},
            "launchers_built_by_workers": {"first_10": built[:10], "last_10": built[-10:],
                                           "total": sum(built)}}


def throughput(args: argparse.Namespace) -> None:
    sources = [add_variant(i) for i in range(args.n)]
    assert len(set(sources)) == len(sources)
    # The fresh-process runs first: their cost is fixed, so a step cut short by its time limit
    # still has them, and the warm agent's verdicts stream to JSONL as they arrive
    # (``engine.py rate`` summarises whatever is there).
    fresh: list[dict[str, Any]] = []
    for i in range(args.fresh):
        t0 = time.monotonic()
        with LocalAgent(platform=args.platform, workers=1, extra_args=("-vv",),
                        log_path=args.out / f"fresh-agent-{i}.log") as agent:
            asyncio.run(agent.wait_serving(timeout=600))
            (v,) = asyncio.run(_evaluate_all(agent.address, [sources[i]], "aten::add", 1,
                                             args.out / "throughput-fresh.jsonl"))
        fresh.append({"wall_s": time.monotonic() - t0, **_row(v)})
        (args.out / "throughput-fresh.json").write_text(json.dumps(fresh, indent=1))
    (args.out / "throughput-setup.json").write_text(json.dumps(
        {"n": args.n, "workers": args.workers}))
    extra = ("-vv", *(("--host-threads", str(args.host_threads)) if args.host_threads else ()))
    log_path = args.out / "throughput-agent.log"
    with LocalAgent(platform=args.platform, workers=args.workers, extra_args=extra,
                    log_path=log_path) as agent:
        asyncio.run(agent.wait_serving(timeout=600))
        t0 = time.monotonic()
        busy0, agent0 = _busy_core_seconds(), _own_cpu(agent.proc.pid)
        verdicts = asyncio.run(_evaluate_all(agent.address, sources, "aten::add", args.n,
                                             args.out / "throughput-warm.jsonl"))
        warm_wall = time.monotonic() - t0
        host = {"wall_s": warm_wall, "host_busy_core_s": _busy_core_seconds() - busy0,
                "agent_own_cpu_s": _own_cpu(agent.proc.pid) - agent0,
                "cores": os.cpu_count(), **cpu_from_log(log_path)}
    (args.out / "throughput-cpu.json").write_text(json.dumps(host, indent=1))
    rows = {"n": args.n, "workers": args.workers, "warm_wall_s": warm_wall,
            "warm": [_row(v) for v in verdicts], "fresh": fresh, "cpu": host}
    (args.out / "throughput.json").write_text(json.dumps(rows, indent=1))
    rate(args)


def rate(args: argparse.Namespace) -> None:
    """The throughput table from what a (possibly cut short) run streamed to ``--out``: the
    rate from submission (verdicts over the time of the last one) and, once the pipeline is
    full, between the first and the last verdict."""
    path = args.out / "throughput-warm.jsonl"
    warm = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] \
        if path.exists() else []
    setup_path = args.out / "throughput-setup.json"
    setup = json.loads(setup_path.read_text()) if setup_path.exists() else {}
    fresh_path = args.out / "throughput-fresh.json"
    fresh = json.loads(fresh_path.read_text()) if fresh_path.exists() else []
    print("| mode | candidates | verdicts | last verdict s | per GPU-min from submission "
          "| per GPU-min first to last | verdicts |")
    print("|---|---|---|---|---|---|---|")
    per_min = float("nan")
    if warm:
        at = sorted(r["at_s"] for r in warm)
        per_min = len(at) / at[-1] * 60
        steady = (len(at) - 1) / (at[-1] - at[0]) * 60 if at[-1] > at[0] else float("nan")
        statuses = ", ".join(sorted({r["status"] for r in warm}))
        print(f"| warm agent, {setup.get('workers', '?')} workers | {setup.get('n', '?')} | "
              f"{len(at)} | {at[-1]:.1f} | {per_min:.1f} | {steady:.1f} | {statuses} |")
    if fresh:
        fresh_s = statistics.mean(f["wall_s"] for f in fresh)
        by_hash = {r["candidate_hash"]: r["status"] for r in warm}
        same = all(by_hash.get(f["candidate_hash"], f["status"]) == f["status"] for f in fresh)
        print(f"| fresh agent per candidate | {len(fresh)} | {len(fresh)} | "
              f"{sum(f['wall_s'] for f in fresh):.1f} | {60 / fresh_s:.1f} | — | "
              f"{'identical' if same else 'DIFFERENT'} |")
        print(f"\nspeed-up of the warm agent from submission: {per_min / (60 / fresh_s):.1f}x")
    cpu_path = args.out / "throughput-cpu.json"
    if cpu_path.exists():
        c = json.loads(cpu_path.read_text())
        n = max(1, c["candidates"])
        w = c["worker_cpu_s"]
        print(f"\nhost CPU per candidate ({c['cores']} cores, {c['candidates']} candidates, "
              f"{c['wall_s']:.0f} s): all processes {c['host_busy_core_s'] / n:.1f} core-s "
              f"({c['host_busy_core_s'] / c['wall_s']:.1f} cores busy); workers starting "
              f"{w['start_own'] / n:.2f} + {w['start_compilers'] / n:.2f} compilers, running "
              f"{w['job_own'] / n:.2f} + {w['job_compilers'] / n:.2f} compilers; agent "
              f"{c['agent_own_cpu_s'] / n:.2f}")
        b = c["launchers_built_by_workers"]
        print(f"launchers the workers built themselves: first 10 candidates {b['first_10']}, "
              f"last 10 {b['last_10']}")


def repeatability(args: argparse.Namespace) -> None:
    out: dict[str, list[dict[str, Any]]] = {}
    stream = args.out / f"repeatability{'-sequential' if args.sequential else ''}.jsonl"
    with LocalAgent(platform=args.platform, workers=args.workers, extra_args=("-vv",),
                    log_path=args.out / f"repeat{'seq' if args.sequential else ''}-agent.log",
                    ) as agent:
        asyncio.run(agent.wait_serving(timeout=600))

        async def both() -> None:
            ops = ("aten::add", "aten::mm")
            if args.sequential:  # one evaluation at a time: a quiet device
                for op in ops:
                    out[op] = [_row(v) for v in await _evaluate_all(
                        agent.address, [operators.get(op).solution] * args.repeats, op, 1,
                        stream)]
                return
            # All at once: each timed case holds the device alone while the other evaluations'
            # correctness work goes on around it, as in a real sweep.
            results = await asyncio.gather(*(
                _evaluate_all(agent.address, [operators.get(op).solution] * args.repeats, op,
                              args.repeats, stream) for op in ops))
            for op, verdicts in zip(ops, results, strict=True):
                out[op] = [_row(v) for v in verdicts]

        asyncio.run(both())
    tag = "-sequential" if args.sequential else ""
    (args.out / f"repeatability{tag}.json").write_text(json.dumps(out, indent=1))
    print(f"{'sequential' if args.sequential else 'all 2x' + str(args.repeats) + ' at once'}, "
          f"{args.workers} workers\n")
    print("| problem | case | median of medians µs | CV of medians | min–max µs | samples "
          "| SM MHz | max °C |")
    print("|---|---|---|---|---|---|---|---|")
    for op, rows in out.items():
        names = [t["name"] for t in rows[0]["timings"]]
        for name in names:
            ts = [t for r in rows for t in r["timings"] if t["name"] == name]
            meds = [t["median_us"] for t in ts]
            cv = statistics.pstdev(meds) / statistics.mean(meds)
            clocks = [t["sm_clock_mhz"] for t in ts if t["sm_clock_mhz"]]
            temps = [t["temperature_c"] for t in ts if t["temperature_c"]]
            print(f"| {op} | {name} | {statistics.median(meds):.1f} | {100 * cv:.2f} % | "
                  f"{min(meds):.1f}–{max(meds):.1f} | {statistics.median(t['samples'] for t in ts):.0f} | "
                  f"{statistics.mean(clocks) if clocks else float('nan'):.0f} | "
                  f"{max(temps) if temps else float('nan'):.0f} |")


COPY_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)
'''


def copy(args: argparse.Namespace) -> None:
    import importlib.util

    import torch
    import triton

    from device_agent import peaks
    from device_agent.platforms.cuda import CudaPlatform
    from device_agent.timing import median_ci

    path = args.out / "copy_kernel.py"
    path.write_text(COPY_KERNEL)
    spec = importlib.util.spec_from_file_location("copy_kernel", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    measured = peaks.measure("cuda")
    timer = CudaPlatform().timer("cuda")
    l2 = timer.l2_bytes()
    rows = []
    for mib in (64, 256, 1024):
        n = (mib << 20) // 4
        sets = max(2, -(-2 * l2 // (2 * n * 4)))
        bufs = [(torch.randn(n, device="cuda"), torch.empty(n, device="cuda")) for _ in range(sets)]
        flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
        for block in (1024, 2048, 4096):
            grid = (triton.cdiv(n, block),)
            mod.copy_kernel[grid](bufs[0][0], bufs[0][1], n, BLOCK=block)
            samples = []
            for k in range(200):
                s, d = bufs[k % sets]
                timer.clear_l2(flush)
                timer.sync()
                samples.append(timer.time_us(
                    lambda s=s, d=d, g=grid, b=block, n=n: mod.copy_kernel[g](s, d, n, BLOCK=b)))
            med, lo, hi = median_ci(samples)
            assert torch.equal(bufs[0][0], bufs[0][1])
            gbps = 2 * n * 4 / (med * 1e-6) / 1e9
            rows.append({"mib": mib, "block": block, "median_us": med, "ci": [lo, hi],
                         "gbps": gbps, "fraction_of_peak": gbps / measured["bandwidth_gbps"]})
        del bufs
    (args.out / "copy.json").write_text(json.dumps({"peaks": measured, "rows": rows}, indent=1))
    print(f"measured peak (torch copy_, read+write): {measured['bandwidth_gbps']:.0f} GB/s; "
          f"matmul TFLOP/s: " + ", ".join(f"{k} {v:.0f}" for k, v in measured["tflops"].items()))
    print("| buffer MiB | BLOCK | median µs | GB/s | % of measured peak |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mib']} | {r['block']} | {r['median_us']:.1f} | {r['gbps']:.0f} | "
              f"{100 * r['fraction_of_peak']:.1f} % |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, fn in (("throughput", throughput), ("rate", rate), ("repeatability", repeatability),
                     ("copy", copy)):
        p = sub.add_parser(name)
        p.set_defaults(fn=fn)
        p.add_argument("--out", type=Path, required=True)
        p.add_argument("--platform", default="cuda")
        if name == "throughput":
            p.add_argument("--n", type=int, default=60)
            p.add_argument("--workers", type=int, default=12)
            p.add_argument("--fresh", type=int, default=4)
            p.add_argument("--host-threads", type=int, default=None,
                           help="the agent's --host-threads (default: its own)")
        if name == "repeatability":
            p.add_argument("--repeats", type=int, default=10)
            p.add_argument("--workers", type=int, default=8)
            p.add_argument("--sequential", action="store_true",
                           help="one evaluation at a time instead of all at once")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    args.fn(args)


if __name__ == "__main__":
    main()
