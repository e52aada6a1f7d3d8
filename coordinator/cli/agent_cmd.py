"""``kgb agent serve`` and ``kgb agent token add``: exec the device agent's own program
(``python -m device_agent``, argparse: the agent host has no click), which the coordinator never
imports. Every option here mirrors one there; keep the two in step."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from coordinator.local_agent import with_repo_on_path
from operators.spec import PLATFORMS

_PEM = click.Path(dir_okay=False)

# (option, help) of the agent's access flags, each taking a value; argparse's twins are in
# device_agent/__main__.py (_access_arguments). docs/auth.md explains them.
_ACCESS_VALUES = (
    ("--tls-cert", "serve TLS with this certificate chain (needs --tls-key)"),
    ("--tls-key", "the private key of --tls-cert"),
    ("--tls-client-ca", "mutual TLS: every client must present a certificate signed by this CA"),
    ("--tokens", "require a bearer token on every call except health checks; FILE holds "
                 "'TENANT sha256:HEX' lines (`kgb agent token add` makes them); re-read when it "
                 "changes"),
    ("--quota-concurrency", "evaluations in flight per tenant; beyond it RESOURCE_EXHAUSTED"),
    ("--quota-rate", "evaluations started per minute per tenant (a minute's worth may come at "
                     "once); beyond it RESOURCE_EXHAUSTED with a retry-after-ms trailer"),
    ("--audit-log", "append one JSON line per call: time, tenant, peer, RPC, request id, operator, "
                    "candidate hash, verdict status or refusal"),
    ("--register-ca", "with --register: reach the registry over TLS, trusting this CA"),
    ("--register-cert", "with --register-ca: client certificate for a registry with mutual TLS"),
    ("--register-key", "the key of --register-cert"),
    ("--register-token-file", "with --register: the bearer token to register with (default: "
                              "$KGB_REGISTER_TOKEN); heartbeats and deregistration use it too"),
)


def _access_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for flag, text in reversed(_ACCESS_VALUES):
        numeric = flag.startswith("--quota-")
        metavar = "N" if numeric else "FILE" if flag.endswith(("tokens", "log", "file")) else "PEM"
        f = click.option(flag, type=click.IntRange(1, 1_000_000) if numeric else _PEM, default=None,
                         metavar=metavar, help=text)(f)
    return click.option("--insecure", is_flag=True,
                        help="allow a non-loopback --host without TLS and tokens (a network you "
                             "trust)")(f)


def _access_argv(values: dict[str, Any]) -> list[str]:
    argv: list[str] = []
    for flag, _ in _ACCESS_VALUES:
        value = values[flag[2:].replace("-", "_")]
        if value is not None:
            argv += [flag, str(value)]
    return argv + (["--insecure"] if values["insecure"] else [])


def _exec_agent(argv: list[str]) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = with_repo_on_path(env.get("PYTHONPATH"))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "device_agent", *argv], env)


@click.group("agent")
def agent() -> None:
    """The device agent that compiles and measures candidates on this host.

    \b
      kgb agent serve                             loopback, no TLS: the embedded default
      kgb agent token add --tenant T --tokens F   make a bearer token for tenant T
      kgb agent serve --host 0.0.0.0 --tls-cert C --tls-key K --tokens F
                                                  a shared host (docs/auth.md)
    """


@agent.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="listen address; any other than loopback needs --tls-cert/--tls-key and "
                   "--tokens, or --insecure")
@click.option("--port", type=click.IntRange(0, 65535), default=50151, show_default=True,
              help="port to listen on (0 picks a free one)")
@click.option("--platform", type=click.Choice(["auto", *sorted(PLATFORMS)]), default="auto",
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
@_access_options
def serve(host: str, port: int, platform: str, workers: int | None, max_queue: int,
          port_file: str | None, disabled: tuple[str, ...], metrics_port: int | None,
          register: str | None, advertise: str | None, instant_verdicts: bool,
          host_threads: int | None, unsafe_sandbox: bool, worker_memory_gb: float,
          verbose: int, **access: Any) -> None:
    """Serve the DeviceAgent gRPC API (health SERVING once workers are warm; SIGTERM stops).

    On loopback it needs nothing else. On any other address it wants TLS (--tls-cert,
    --tls-key; --tls-client-ca for mutual TLS) and bearer tokens (--tokens FILE, made with
    `kgb agent token add`), and refuses to start without them unless --insecure is given."""
    argv = ["serve", "--host", host, "--port", str(port),
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
    _exec_agent(argv + _access_argv(access))


@agent.group("token")
def token() -> None:
    """Bearer tokens for agents and the coordinator's registry (docs/auth.md)."""


@token.command("add")
@click.option("--tenant", required=True, help="who the token is for (letters, digits, _ . @ -)")
@click.option("--tokens", "tokens_file", required=True, type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="the tokens file to append to (created 0600 if missing); "
                                   "`kgb agent serve --tokens` and `kgb sweep --registry-tokens` read it")
def token_add(tenant: str, tokens_file: Path) -> None:
    """Create a token for TENANT, append its SHA-256 digest to FILE, print the token once.

    The token is stored nowhere: hand it to its holder, who passes it with --token-file or
    KGB_AGENT_TOKEN. Revoke it by deleting its line; servers re-read the file when it changes."""
    _exec_agent(["token", "add", "--tenant", tenant, "--tokens", str(tokens_file)])
