"""Sweep engine at scale: throughput, a billion accounted tokens, and fault injection.

Everything runs on this machine: the loopback fake LLM (``bench/fake_llm.py``) in its own
process, four ``cpu`` agents in the instant-verdict test mode (static checks only, so the
coordinator is what is measured), and ``kgb sweep run`` as its own process (Ray and all). ::

    python bench/sweep_scale.py throughput   # 20 s latency, >= 1000 in flight: traj/min, CPU
    python bench/sweep_scale.py tokens --tokens 1e9   # books equal the fake LLM's own log
    python bench/sweep_scale.py faults       # kill an agent, kill -9 the coordinator, resume

Each writes ``bench/results/sweep/<mode>-<date>.json`` (or ``--out``) and prints a summary.
"Coordinator CPU" is the CPU time of the ``kgb sweep run`` process and every process it started
(Ray's GCS, raylet, workers and actors), read from /proc over the measured window, divided by
the window's wall time: cores in use.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from coordinator.local_agent import LocalAgent, with_repo_on_path  # noqa: E402

OPS = ("aten::add", "aten::softmax", "aten::mm", "aten::cumsum", "vllm::rms_norm",
       "vllm::rotary_embedding", "cublas::cublasSaxpy_v2", "cublas::cublasSgemm_v2")
CLK = os.sysconf("SC_CLK_TCK")


# -- processes ---------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": with_repo_on_path(os.environ.get("PYTHONPATH")),
            "RAY_AUTH_MODE": "disabled"}


class FakeLLM:
    def __init__(self, work: Path, *args: str) -> None:
        self.log = work / "billing.jsonl"
        self.proc = subprocess.Popen([sys.executable, str(REPO / "bench" / "fake_llm.py"),
                                      "--log", str(self.log), *args], stdout=subprocess.PIPE,
                                     text=True, env=_env())
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), line
        self.port = int(line.split()[1])

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=30) as r:
            data: dict[str, Any] = json.loads(r.read())
        return data

    def billed(self) -> tuple[int, int]:
        time.sleep(1.0)
        calls = tokens = 0
        with self.log.open() as f:
            for line in f:
                row = json.loads(line)
                calls += 1
                tokens += row["prompt_tokens"] + row["completion_tokens"]
        return calls, tokens

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


def agents(n: int, work: Path) -> list[LocalAgent]:
    out = [LocalAgent(platform="cpu", workers=4, extra_args=("--instant-verdicts", "--max-queue",
                                                             "100000"),
                      log_path=work / f"agent{i}.log",
                      env={"KGB_AGENT_SECRET_FILE": str(work / "secret")}) for i in range(n)]
    for a in out:
        a.start()
    for a in out:
        asyncio.run(a.wait_serving(180))
    return out


def spec(work: Path, name: str, llm: FakeLLM, addresses: list[str], samples: int,
         in_flight: int, ops: tuple[str, ...] = OPS) -> Path:
    text = "\n".join([
        f'operators = {json.dumps(list(ops))}', 'platforms = ["cpu"]', f"samples = {samples}", "",
        "[sweep]", f'name = "{name}"', f'store = "{work / "runs" / name}"', "",
        "[[endpoints]]", 'name = "fake"', 'kind = "openai"',
        f'base_url = "http://127.0.0.1:{llm.port}/v1"', 'api_key_env = ""', "timeout_s = 600",
        f"max_concurrency = {in_flight}", "max_retries = 5", "backoff_base_s = 0.2", "",
        "[[models]]", 'name = "fake-model"', 'endpoint = "fake"', 'model = "fake"',
        "prices = { prompt = 1.0, completion = 4.0 }", "",
        "[[methods]]", 'name = "sample"', "",
        *[line for a in addresses for line in ("[[agents]]", f'address = "{a}"', 'platform = "cpu"', "")],
        "[concurrency]", f"generation_per_endpoint = {in_flight}", ""])
    path = work / f"{name}.toml"
    path.write_text(text)
    return path


def coordinator(spec_path: Path, *extra: str, resume_dir: Path | None = None) -> subprocess.Popen[str]:
    args = (["sweep", "resume", str(resume_dir)] if resume_dir is not None
            else ["sweep", "run", str(spec_path)])
    return subprocess.Popen([sys.executable, "-m", "coordinator", *args, "--metrics-port", "0",
                             "--no-progress", *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=_env(), cwd=REPO,
                            start_new_session=True)


def tree_cpu(root: int) -> dict[str, float]:
    """CPU seconds (user + system) of ``root`` and all its descendants now alive, by process
    title (Ray names its actors' processes ``ray::TrajectoryRunner`` and so on)."""
    parent: dict[int, int] = {}
    times: dict[int, float] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        parent[int(d.name)] = int(fields[1])
        times[int(d.name)] = (int(fields[11]) + int(fields[12])) / CLK
    keep = {root}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parent.items():
            if ppid in keep and pid not in keep:
                keep.add(pid)
                changed = True
    out: dict[str, float] = {}
    for pid in keep:
        name = "driver" if pid == root else _title(pid)
        out[name] = out.get(name, 0.0) + times.get(pid, 0.0)
    return out


def _title(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    first = argv[0].decode(errors="replace").split()[0] if argv and argv[0] else "?"
    if first.startswith("ray::"):
        return first.split(".")[0]
    if "python" in Path(first).name and len(argv) > 1:  # a Python helper: name its script
        script = next((a.decode(errors="replace") for a in argv[1:] if a.endswith(b".py")), "")
        return Path(script).name or Path(first).name
    return Path(first).name


def tree_cpu_seconds(root: int) -> float:
    return sum(tree_cpu(root).values())


def books(store_dir: Path, run: str) -> dict[str, int]:
    empty = {"calls": 0, "tokens": 0, "results": 0, "distinct_results": 0, "candidates": 0,
             "infra": 0, "verdicts": 0, "open_intents": 0, "resent": 0}
    if not (store_dir / "kgb.sqlite").is_file():
        return empty
    db = sqlite3.connect(store_dir / "kgb.sqlite", timeout=30)
    try:
        q = lambda sql: db.execute(sql, (run,)).fetchone()[0]  # noqa: E731
        return {
            "calls": q("SELECT COUNT(*) FROM llm_calls WHERE run_id=?"),
            "tokens": q("SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) FROM llm_calls "
                        "WHERE run_id=? AND billed=1"),
            "results": q("SELECT COUNT(*) FROM trajectory_results WHERE run_id=?"),
            "distinct_results": q("SELECT COUNT(DISTINCT trajectory) FROM trajectory_results "
                                  "WHERE run_id=?"),
            "candidates": q("SELECT COUNT(DISTINCT best_candidate_hash) FROM trajectory_results "
                            "WHERE run_id=? AND best_candidate_hash != ''"),
            "infra": q("SELECT COUNT(*) FROM trajectory_results WHERE run_id=? "
                       "AND end_reason='INFRA_ERROR'"),
            "verdicts": db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0],
            # intents without a stored reply (unconfirmed calls, or calls on the wire), and calls
            # that re-sent such an intent (a resume)
            "open_intents": q("SELECT COUNT(*) FROM llm_intents WHERE run_id=? "
                              "AND completed IS NULL"),
            "resent": q("SELECT COUNT(*) FROM llm_calls WHERE run_id=? AND intent > 1"),
        }
    except sqlite3.OperationalError:  # tables not created yet
        return empty
    finally:
        db.close()


def wait_exit(proc: subprocess.Popen[str], timeout: float) -> str:
    out, _ = proc.communicate(timeout=timeout)
    return out


# -- modes -------------------------------------------------------------------------------------


def throughput(a: argparse.Namespace, work: Path) -> dict[str, Any]:
    llm = FakeLLM(work, "--latency-s", str(a.latency), "--jitter", "0.1",
                  "--prompt-tokens", "2000", "--completion-tokens", "800")
    fleet = agents(4, work)
    try:
        per_op = a.trajectories // len(OPS)
        path = spec(work, "throughput", llm, [x.address for x in fleet], per_op, a.in_flight)
        store_dir = work / "runs" / "throughput"
        proc = coordinator(path)
        t_start = time.monotonic()
        while books(store_dir, "throughput")["results"] < a.in_flight // 4:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            time.sleep(1)
        warm = time.monotonic() - t_start
        # steady state: measure over a window
        helpers = [llm.proc.pid] + [x.proc.pid for x in fleet if x.proc is not None]
        r0, c0, t0 = books(store_dir, "throughput")["results"], tree_cpu(proc.pid), time.monotonic()
        h0 = sum(tree_cpu_seconds(p) for p in helpers)
        max_in_flight = 0
        while time.monotonic() - t0 < a.window:
            time.sleep(2)
            max_in_flight = max(max_in_flight, llm.stats()["in_flight"])
        r1, c1, t1 = books(store_dir, "throughput")["results"], tree_cpu(proc.pid), time.monotonic()
        h1 = sum(tree_cpu_seconds(p) for p in helpers)
        window = t1 - t0
        by_process = {k: round((c1.get(k, 0.0) - c0.get(k, 0.0)) / window, 3)
                      for k in sorted(c1, key=lambda k: -c1[k] + c0.get(k, 0.0))}
        coordinator_s = sum(c1.values()) - sum(c0.values())
        out = wait_exit(proc, 3600)
        b = books(store_dir, "throughput")
        s = llm.stats()
        billed = llm.billed()
        return {
            "latency_s": a.latency, "in_flight_limit": a.in_flight, "planned": per_op * len(OPS),
            "warmup_s": round(warm, 1), "window_s": round(t1 - t0, 1),
            "trajectories_per_min": round((r1 - r0) / (t1 - t0) * 60, 1),
            "coordinator_cores": round(coordinator_s / window, 3),
            "coordinator_cpu_ms_per_trajectory": round(coordinator_s / max(1, r1 - r0) * 1000, 2),
            "coordinator_cores_by_process": by_process,
            "fake_llm_and_agents_cores": round((h1 - h0) / window, 3),
            "llm_max_in_flight": s["max_in_flight"], "llm_in_flight_sampled_max": max_in_flight,
            "results": b["results"], "store_tokens": b["tokens"], "llm_billed_tokens": billed[1],
            "exit": proc.returncode, "tail": out[-600:],
        }
    finally:
        for x in fleet:
            x.stop()
        llm.stop()


def tokens(a: argparse.Namespace, work: Path) -> dict[str, Any]:
    per_call = a.prompt_tokens + a.completion_tokens
    n = int(round(float(a.tokens) / per_call))
    llm = FakeLLM(work, "--latency-s", str(a.latency), "--prompt-tokens", str(a.prompt_tokens),
                  "--completion-tokens", str(a.completion_tokens))
    fleet = agents(4, work)
    try:
        ops = OPS
        per_op = -(-n // len(ops))
        path = spec(work, "tokens", llm, [x.address for x in fleet], per_op, a.in_flight, ops)
        t0, proc = time.monotonic(), coordinator(path)
        out = wait_exit(proc, 7200)
        wall = time.monotonic() - t0
        b = books(work / "runs" / "tokens", "tokens")
        billed_calls, billed_tokens = llm.billed()
        return {
            "trajectories": per_op * len(ops), "tokens_per_call": per_call,
            "store_calls": b["calls"], "store_tokens": b["tokens"],
            "llm_billed_calls": billed_calls, "llm_billed_tokens": billed_tokens,
            "books_equal": (b["calls"], b["tokens"]) == (billed_calls, billed_tokens),
            "results": b["results"], "wall_s": round(wall, 1), "exit": proc.returncode,
            "tail": out[-600:],
        }
    finally:
        for x in fleet:
            x.stop()
        llm.stop()


def faults(a: argparse.Namespace, work: Path) -> dict[str, Any]:
    llm = FakeLLM(work, "--latency-s", str(a.latency), "--prompt-tokens", "2000",
                  "--completion-tokens", "800")
    fleet = agents(4, work)
    try:
        per_op = a.trajectories // len(OPS)
        planned = per_op * len(OPS)
        path = spec(work, "faults", llm, [x.address for x in fleet], per_op, a.in_flight)
        store_dir = work / "runs" / "faults"
        proc = coordinator(path)
        while books(store_dir, "faults")["results"] < planned // 4:
            time.sleep(0.5)
        fleet[0].proc.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
        at_agent_kill = books(store_dir, "faults")["results"]
        while books(store_dir, "faults")["results"] < planned // 2:
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(60)
        # Ray's workers are not in the group: their lifelines end them within a second
        time.sleep(1.0)
        requests_1s = llm.stats()["requests"]
        time.sleep(4.0)
        at_kill = books(store_dir, "faults")
        requests_before = llm.stats()["requests"]
        resumed = coordinator(path, resume_dir=store_dir)
        out = wait_exit(resumed, 3600)
        b = books(store_dir, "faults")
        billed_calls, billed_tokens = llm.billed()
        return {
            "planned": planned, "results_at_agent_kill": at_agent_kill,
            "results_at_coordinator_kill": at_kill["results"],
            "calls_stored_at_coordinator_kill": at_kill["calls"],
            # calls on the wire when the coordinator died: shown as unconfirmed, re-sent by the
            # resume as their intents' second attempts
            "unconfirmed_calls_at_kill": at_kill["open_intents"],
            "unconfirmed_calls_resent": b["resent"],
            "requests_1_to_5_s_after_kill": requests_before - requests_1s,
            "calls_sent_by_resume": llm.stats()["requests"] - requests_before,
            "lost_evaluations": planned - b["distinct_results"],
            "duplicated_results": b["results"] - b["distinct_results"],
            "verdict_rows": b["verdicts"], "distinct_candidates": b["candidates"],
            "duplicated_evaluations": b["verdicts"] - b["candidates"],
            "infra_error_results": b["infra"],
            "store_tokens": b["tokens"], "llm_billed_tokens": billed_tokens,
            "tokens_spent_twice": billed_tokens - b["tokens"],
            "store_calls": b["calls"], "llm_billed_calls": billed_calls,
            "llm_abandoned_replies": llm.stats()["abandoned"],
            # repeats of a key whose reply was billed before the kill: answered, not billed again
            "llm_repeats_answered_by_key": llm.stats()["replayed"], "exit": resumed.returncode,
            "tail": out[-600:],
        }
    finally:
        for x in fleet:
            x.stop()
        llm.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["throughput", "tokens", "faults"])
    ap.add_argument("--latency", type=float, default=None, help="fake LLM seconds per reply")
    ap.add_argument("--in-flight", type=int, default=None, help="generations in flight")
    ap.add_argument("--trajectories", type=int, default=None)
    ap.add_argument("--window", type=float, default=120.0, help="throughput: measured seconds")
    ap.add_argument("--tokens", type=float, default=1e9, help="tokens: accounted tokens to reach")
    ap.add_argument("--prompt-tokens", type=int, default=45000)
    ap.add_argument("--completion-tokens", type=int, default=5000)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    defaults = {"throughput": (20.0, 1200, 12000), "tokens": (0.5, 400, 0), "faults": (1.0, 200, 4000)}
    lat, inf, traj = defaults[a.mode]
    a.latency = lat if a.latency is None else a.latency
    a.in_flight = inf if a.in_flight is None else a.in_flight
    a.trajectories = traj if a.trajectories is None else a.trajectories
    work = Path(tempfile.mkdtemp(prefix=f"kgb-bench-{a.mode}-"))
    t0 = time.time()
    result = {"throughput": throughput, "tokens": tokens, "faults": faults}[a.mode](a, work)
    result.update({"mode": a.mode, "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime(t0)),
                   "machine": f"{os.cpu_count()} cores", "command": " ".join(sys.argv),
                   "bench_wall_s": round(time.time() - t0, 1)})
    out = a.out or REPO / "bench" / "results" / "sweep" / f"{a.mode}-{time.strftime('%Y%m%d-%H%M')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "tail"}, indent=2))
    print(f"written to {out}")
    if not a.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
