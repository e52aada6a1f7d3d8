"""``python -m device_agent serve`` — what ``kgb agent serve`` runs; ``python -m device_agent
token add`` — what ``kgb agent token add`` runs; ``python -m device_agent validate`` — what
``kgb operators validate`` runs (``device_agent/problem_check.py``).

Kept free of the coordinator, Ray and LLM SDKs: a GPU host needs only torch, triton, grpcio
(+ health/reflection), protobuf, orjson and numpy. ``coordinator/cli/agent_cmd.py`` mirrors
every option here (click, for ``kgb``) and execs this module.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from device_agent import problem_check
from device_agent.layers import LAYERS
from device_agent.platforms import platform_names

if TYPE_CHECKING:
    from device_agent.server import AgentSettings
    from device_agent.tenancy import AccessSettings
    from protos.security import ClientAuth


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kgb agent", description="KernelGenBench device agent")
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve the DeviceAgent gRPC service")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1); any other address needs "
                        "--tls-cert/--tls-key and --tokens, or --insecure")
    s.add_argument("--port", type=int, default=50151, help="port (0 picks a free one)")
    s.add_argument("--platform", default="auto", choices=["auto", *platform_names()])
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
    _access_arguments(s)
    problem_check.add_parser(sub)
    t = sub.add_parser("token", help="manage bearer tokens").add_subparsers(dest="token_command",
                                                                            required=True)
    a = t.add_parser("add", help="create a token for a tenant, append its SHA-256 digest to a "
                                 "tokens file and print the token (once: it is stored nowhere)")
    a.add_argument("--tenant", required=True, help="who the token is for (letters, digits, _ . @ -)")
    a.add_argument("--tokens", type=Path, required=True, metavar="FILE",
                   help="the tokens file to append to (created 0600 if missing); the agent's "
                        "--tokens and the coordinator's --registry-tokens read it")
    return ap


def _access_arguments(s: argparse.ArgumentParser) -> None:
    """Who may call the agent (docs/auth.md), and how it reaches the coordinator's registry."""
    g = s.add_argument_group("access (docs/auth.md)")
    g.add_argument("--tls-cert", type=Path, metavar="PEM",
                   help="serve TLS with this certificate chain (needs --tls-key)")
    g.add_argument("--tls-key", type=Path, metavar="PEM", help="the private key of --tls-cert")
    g.add_argument("--tls-client-ca", type=Path, metavar="PEM",
                   help="mutual TLS: every client must present a certificate signed by this CA")
    g.add_argument("--tokens", type=Path, metavar="FILE",
                   help="require a bearer token on every call except health checks; FILE holds "
                        "'TENANT sha256:HEX' lines (make them with `kgb agent token add`); "
                        "re-read when it changes")
    g.add_argument("--quota-concurrency", type=int, metavar="N",
                   help="evaluations in flight per tenant; beyond it RESOURCE_EXHAUSTED")
    g.add_argument("--quota-rate", type=int, metavar="N",
                   help="evaluations started per minute per tenant (a minute's worth may come at "
                        "once); beyond it RESOURCE_EXHAUSTED with a retry-after-ms trailer")
    g.add_argument("--audit-log", type=Path, metavar="FILE",
                   help="append one JSON line per call: time, tenant, peer, RPC, request id, "
                        "operator, candidate hash, verdict status or refusal")
    g.add_argument("--insecure", action="store_true",
                   help="allow a non-loopback --host without TLS and tokens (a network you trust)")
    g.add_argument("--register-ca", type=Path, metavar="PEM",
                   help="with --register: reach the registry over TLS, trusting this CA")
    g.add_argument("--register-cert", type=Path, metavar="PEM",
                   help="with --register-ca: client certificate for a registry with mutual TLS")
    g.add_argument("--register-key", type=Path, metavar="PEM", help="the key of --register-cert")
    g.add_argument("--register-token-file", type=Path, metavar="FILE",
                   help="with --register: the bearer token to register with (default: "
                        "$KGB_REGISTER_TOKEN); heartbeats and deregistration use the same one")


def _access(args: argparse.Namespace) -> tuple[AccessSettings, ClientAuth | None]:
    """(AccessSettings, ClientAuth for --register or None); ValueError saying what is wrong."""
    from device_agent.tenancy import AccessSettings, QuotaSettings
    from protos.security import ClientAuthFiles, ServerTLS, TokenStore

    for flag, value in (("--quota-concurrency", args.quota_concurrency),
                        ("--quota-rate", args.quota_rate)):
        if value is not None and not 1 <= value <= 1_000_000:
            raise ValueError(f"{flag} must be between 1 and 1000000")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ValueError("--tls-cert and --tls-key go together")
    if args.tls_client_ca is not None and args.tls_cert is None:
        raise ValueError("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS)")
    register_flags = (args.register_ca, args.register_cert, args.register_key,
                      args.register_token_file)
    if not args.register and any(f is not None for f in register_flags):
        raise ValueError("--register-ca/-cert/-key/-token-file need --register")
    tls = ServerTLS(args.tls_cert, args.tls_key, args.tls_client_ca) if args.tls_cert else None
    if tls is not None:
        tls.credentials()  # unreadable or mismatched files: a usage error now, not at a handshake
    if args.tokens is not None:
        TokenStore(args.tokens)
    access = AccessSettings(tls=tls, tokens=args.tokens, audit_log=args.audit_log,
                            quotas=QuotaSettings(args.quota_concurrency, args.quota_rate),
                            insecure=args.insecure)
    register_auth = None
    if args.register:
        register_auth = ClientAuthFiles(args.register_ca, args.register_cert, args.register_key,
                                        args.register_token_file, "KGB_REGISTER_TOKEN").load()
    return access, register_auth


def _token(args: argparse.Namespace) -> int:
    from protos.security import AuthConfigError, add_token

    try:
        token = add_token(args.tokens, args.tenant)
    except AuthConfigError as exc:
        print(f"kgb agent token add: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"kgb agent token add: cannot write {args.tokens}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(token)
    print(f"kgb agent token add: token for tenant {args.tenant!r} added to {args.tokens} (as its "
          "SHA-256 digest). It is printed above once and stored nowhere: hand it to its holder "
          "now (clients read it with --token-file or KGB_AGENT_TOKEN).", file=sys.stderr)
    return 0


def _flag_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the serve flags that need no file read, checked in order; None if
    nothing."""
    if args.port < 0 or args.port > 65535:
        return f"--port must be 0-65535, got {args.port}"
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        return f"--metrics-port must be 0-65535, got {args.metrics_port}"
    from protos.registration import check_address

    for flag, value in (("--register", args.register), ("--advertise", args.advertise)):
        try:
            if value is not None:
                check_address(value)
        except ValueError as exc:
            return f"{flag}: {exc}"
    if args.advertise and not args.register:
        return "--advertise needs --register"
    if args.workers is not None and not 1 <= args.workers <= 64:
        return "--workers must be between 1 and 64"
    return None


def _limits_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the workers' resource flags; None if nothing."""
    if args.host_threads is not None and not 1 <= args.host_threads <= 256:
        return "--host-threads must be between 1 and 256"
    if not 0.5 <= args.worker_memory_gb <= 4096:
        return "--worker-memory-gb must be between 0.5 and 4096"
    return None


def _checked_access(args: argparse.Namespace) -> tuple[AccessSettings, ClientAuth | None] | None:
    """The agent's access settings, or None (after saying why) when they are unreadable or leave
    a reachable agent open; warns when --insecure leaves it open on purpose."""
    try:
        access, register_auth = _access(args)
    except ValueError as exc:  # includes AuthConfigError: unreadable or malformed files
        print(f"kgb agent: {exc}", file=sys.stderr)
        return None
    problem = access.problem(args.host)
    if problem is not None:
        print(f"kgb agent: {problem}: it runs their code on this host. Give --tls-cert/--tls-key "
              "and --tokens FILE (`kgb agent token add --tenant NAME --tokens FILE` makes one), or "
              "--insecure on a network you trust; docs/auth.md", file=sys.stderr)
        return None
    if args.insecure and replace(access, insecure=False).problem(args.host) is not None:
        print(f"kgb agent: WARNING: --insecure: listening on {args.host} without TLS and tokens; "
              "anyone who can reach this port can run code on this host's workers", file=sys.stderr)
    return access, register_auth


def _settings(args: argparse.Namespace, access: AccessSettings,
              register_auth: ClientAuth | None) -> AgentSettings:
    """The agent's settings from checked flags (warns when the sandbox is off)."""
    from device_agent.sandbox import SandboxSettings
    from device_agent.server import AgentSettings

    limits = SandboxSettings(isolate=not args.unsafe_sandbox,
                             memory_bytes=int(args.worker_memory_gb * (1 << 30)))
    if args.unsafe_sandbox:
        print("kgb agent: WARNING: --unsafe-sandbox: candidates run without a private uid, "
              "namespaces or cgroup; evaluate trusted code only", file=sys.stderr)
    return AgentSettings(host=args.host, port=args.port, platform=args.platform,
                         workers_per_device=args.workers, max_queue=args.max_queue,
                         port_file=args.port_file, work_root=args.work_dir, sandbox=limits,
                         layers=frozenset(LAYERS) - set(args.disable_layer),
                         metrics_port=args.metrics_port, register=args.register,
                         advertise=args.advertise, instant_verdicts=args.instant_verdicts,
                         host_threads=args.host_threads, access=access,
                         register_auth=register_auth)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "token":
        return _token(args)
    if args.command == "validate":
        return problem_check.run(args)
    # gRPC's C core prints its own log lines; keep stderr to our one-line messages unless asked.
    os.environ.setdefault("GRPC_VERBOSITY", "DEBUG" if args.verbose else "NONE")
    from device_agent.server import BindError, serve
    from protos.security import AuthConfigError

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if args.verbose >= 2:
        logging.getLogger("device_agent").setLevel(logging.DEBUG)
    problem = _flag_problem(args)
    if problem is not None:
        print(f"kgb agent: {problem}", file=sys.stderr)
        return 2
    checked = _checked_access(args)
    if checked is None:
        return 2
    problem = _limits_problem(args)
    if problem is not None:
        print(f"kgb agent: {problem}", file=sys.stderr)
        return 2
    settings = _settings(args, *checked)
    try:
        return asyncio.run(serve(settings))
    except BindError as exc:
        print(f"kgb agent: {exc}; choose another --port (or 0 for a free one)", file=sys.stderr)
        return 1
    except (RuntimeError, AuthConfigError) as exc:
        print(f"kgb agent: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
