"""``kgb agent serve``: runs the device agent (its own program; the coordinator never imports it)."""

from __future__ import annotations

import os
import sys

import click

from coordinator.local_agent import with_repo_on_path


@click.group("agent")
def agent() -> None:
    """The device agent that compiles and measures candidates on this host."""


@agent.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="listen address; anything but loopback warns: there is no authentication yet")
@click.option("--port", type=click.IntRange(0, 65535), default=50151, show_default=True,
              help="port to listen on (0 picks a free one)")
@click.option("--platform", type=click.Choice(["auto", "cuda", "cpu"]), default="auto",
              show_default=True, help="auto: the GPU if one is visible, else cpu (interpreter)")
@click.option("--workers", type=click.IntRange(1, 64), default=None,
              help="warm sandbox workers per device (default 2 on cpu, 4 per GPU)")
@click.option("--max-queue", type=click.IntRange(1, 100000), default=256, show_default=True,
              help="evaluations admitted at once; beyond it RESOURCE_EXHAUSTED")
@click.option("--port-file", type=click.Path(dir_okay=False), default=None,
              help="write the bound port to this file once listening")
@click.option("--disable-layer", "disabled", multiple=True, metavar="LAYER",
              help="switch an anti-cheat layer off, repeatable (to test the others on their own): "
                   "static, runtime, launches, ghost, determinism, replay, integrity, timing, "
                   "profile "
                   "(docs/anticheat.md)")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="serve Prometheus /metrics on --host at this port (0 picks a free one; "
                   "default: none; docs/metrics.md)")
@click.option("--register", metavar="HOST:PORT", default=None,
              help="register with the coordinator's agent registry at HOST:PORT and send it "
                   "heartbeats; an unreachable coordinator is retried, never fatal (docs/fleet.md)")
@click.option("--advertise", metavar="HOST:PORT", default=None,
              help="the address the coordinator should dial (default: --host and the bound port; "
                   "this host's name when --host is 0.0.0.0 or ::)")
@click.option("--instant-verdicts", is_flag=True,
              help="TEST MODE for coordinator benchmarks: static checks only, candidates are not "
                   "run (PASSED unless rejected; harness version '<version>+instant')")
@click.option("--host-threads", type=click.IntRange(1, 256), default=None, metavar="N",
              help="torch CPU threads for the agent's own work (inputs, references, checks); "
                   "default: the cores left once every worker has one (1-4)")
@click.option("--unsafe-sandbox", is_flag=True,
              help="TRUSTED CODE ONLY: workers without the sandbox's private uid, namespaces and "
                   "cgroup; the only way a non-root agent runs candidates (docs/security.md)")
@click.option("--worker-memory-gb", type=click.FloatRange(0.5, 4096), default=8.0,
              show_default=True, help="memory limit of each worker's cgroup")
@click.option("-v", "--verbose", count=True, help="-v: a log line per evaluation; -vv: per timed case too")
def serve(host: str, port: int, platform: str, workers: int | None, max_queue: int,
          port_file: str | None, disabled: tuple[str, ...], metrics_port: int | None,
          register: str | None, advertise: str | None, instant_verdicts: bool,
          host_threads: int | None, unsafe_sandbox: bool, worker_memory_gb: float,
          verbose: int) -> None:
    """Serve the DeviceAgent gRPC API (health SERVING once workers are warm; SIGTERM stops)."""
    argv = [sys.executable, "-m", "device_agent", "serve", "--host", host, "--port", str(port),
            "--platform", platform, "--max-queue", str(max_queue)]
    if workers:
        argv += ["--workers", str(workers)]
    if port_file:
        argv += ["--port-file", port_file]
    for layer in disabled:
        argv += ["--disable-layer", layer]
    if metrics_port is not None:
        argv += ["--metrics-port", str(metrics_port)]
    if register:
        argv += ["--register", register]
    if advertise:
        argv += ["--advertise", advertise]
    if instant_verdicts:
        argv.append("--instant-verdicts")
    if host_threads is not None:
        argv += ["--host-threads", str(host_threads)]
    if unsafe_sandbox:
        argv.append("--unsafe-sandbox")
    argv += ["--worker-memory-gb", str(worker_memory_gb)]
    argv += ["--verbose"] * verbose
    env = dict(os.environ)
    env["PYTHONPATH"] = with_repo_on_path(env.get("PYTHONPATH"))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)
