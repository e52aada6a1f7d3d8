"""``python -m device_agent serve`` — what ``kgb agent serve`` runs.

Kept free of the coordinator, Ray and LLM SDKs: a GPU host needs only torch, triton, grpcio
(+ health/reflection), protobuf, orjson and numpy.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from device_agent.layers import LAYERS


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kgb agent", description="KernelGenBench device agent")
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve the DeviceAgent gRPC service")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; others have no authentication)")
    s.add_argument("--port", type=int, default=50151, help="port (0 picks a free one)")
    s.add_argument("--platform", default="auto", choices=["auto", "cuda", "cpu"])
    s.add_argument("--workers", type=int, default=None,
                   help="candidates evaluated at once per device, each in its own pre-started "
                        "worker (default 2 on cpu, 4 per GPU)")
    s.add_argument("--max-queue", type=int, default=256, help="evaluations admitted at once")
    s.add_argument("--port-file", type=Path, default=None, help="write the bound port here")
    s.add_argument("--metrics-port", type=int, default=None,
                   help="serve Prometheus /metrics on --host at this port (0 picks a free one; "
                        "default: no metrics endpoint)")
    s.add_argument("--work-dir", type=Path, default=None, help="where worker directories live")
    s.add_argument("--register", default=None, metavar="HOST:PORT",
                   help="register with the coordinator's agent registry at HOST:PORT and send it "
                        "heartbeats; an unreachable coordinator is retried, never fatal (docs/fleet.md)")
    s.add_argument("--advertise", default=None, metavar="HOST:PORT",
                   help="the address the coordinator should dial (default: --host and the bound "
                        "port; this host's name when --host is 0.0.0.0 or ::)")
    s.add_argument("--worker-memory-gb", type=float, default=8.0,
                   help="memory limit of each worker's cgroup (its resident memory, compilers "
                        "and private /tmp included; default 8)")
    s.add_argument("--unsafe-sandbox", action="store_true",
                   help="TRUSTED CODE ONLY: run workers without the sandbox's private uid, "
                        "namespaces and cgroup (descriptors, no_new_privs, limits and the seccomp "
                        "filter stay). The only way a non-root agent runs candidates "
                        "(docs/security.md)")
    s.add_argument("--disable-layer", action="append", default=[], metavar="LAYER",
                   choices=sorted(LAYERS),
                   help="switch an anti-cheat layer off, repeatable (to test the others on their "
                        "own): " + "; ".join(f"{k}: {v}" for k, v in LAYERS.items()))
    s.add_argument("--instant-verdicts", action="store_true",
                   help="TEST MODE for coordinator benchmarks: answer every request after the "
                        "static checks without running it (PASSED unless rejected), with harness "
                        "version '<version>+instant' so no store mixes these with real verdicts")
    s.add_argument("--host-threads", type=int, default=None, metavar="N",
                   help="torch CPU threads for the agent's own work (inputs, fp64 references, "
                        "checks), which runs for many candidates at once beside their kernel "
                        "compiles (default: the cores left over once every worker has one, 1-4)")
    s.add_argument("-v", "--verbose", action="count", default=0,
                   help="-v: one log line per evaluation with its stage times; -vv: also each "
                        "timed case's input, wait, hold and recheck times")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # gRPC's C core prints its own log lines; keep stderr to our one-line messages unless asked.
    os.environ.setdefault("GRPC_VERBOSITY", "DEBUG" if args.verbose else "NONE")
    from device_agent.server import AgentSettings, BindError, serve

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if args.verbose >= 2:
        logging.getLogger("device_agent").setLevel(logging.DEBUG)
    if args.port < 0 or args.port > 65535:
        print(f"kgb agent: --port must be 0-65535, got {args.port}", file=sys.stderr)
        return 2
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        print(f"kgb agent: --metrics-port must be 0-65535, got {args.metrics_port}", file=sys.stderr)
        return 2
    from protos.registry import check_address

    for flag, value in (("--register", args.register), ("--advertise", args.advertise)):
        try:
            if value is not None:
                check_address(value)
        except ValueError as exc:
            print(f"kgb agent: {flag}: {exc}", file=sys.stderr)
            return 2
    if args.advertise and not args.register:
        print("kgb agent: --advertise needs --register", file=sys.stderr)
        return 2
    if args.workers is not None and not 1 <= args.workers <= 64:
        print("kgb agent: --workers must be between 1 and 64", file=sys.stderr)
        return 2
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"kgb agent: WARNING: listening on {args.host}: the agent has no authentication yet; "
              "anyone who can reach this port can run code on this host's workers",
              file=sys.stderr)
    if args.host_threads is not None and not 1 <= args.host_threads <= 256:
        print("kgb agent: --host-threads must be between 1 and 256", file=sys.stderr)
        return 2
    if not 0.5 <= args.worker_memory_gb <= 4096:
        print("kgb agent: --worker-memory-gb must be between 0.5 and 4096", file=sys.stderr)
        return 2
    from device_agent.sandbox import SandboxSettings

    limits = SandboxSettings(isolate=not args.unsafe_sandbox,
                             memory_bytes=int(args.worker_memory_gb * (1 << 30)))
    if args.unsafe_sandbox:
        print("kgb agent: WARNING: --unsafe-sandbox: candidates run without a private uid, "
              "namespaces or cgroup; evaluate trusted code only", file=sys.stderr)
    settings = AgentSettings(host=args.host, port=args.port, platform=args.platform,
                             workers_per_device=args.workers, max_queue=args.max_queue,
                             port_file=args.port_file, work_root=args.work_dir, sandbox=limits,
                             layers=frozenset(LAYERS) - set(args.disable_layer),
                             metrics_port=args.metrics_port, register=args.register,
                             advertise=args.advertise, instant_verdicts=args.instant_verdicts,
                             host_threads=args.host_threads)
    try:
        return asyncio.run(serve(settings))
    except BindError as exc:
        print(f"kgb agent: {exc}; choose another --port (or 0 for a free one)", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        print(f"kgb agent: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
