"""``kgb sweep run|resume|status|cancel``: a sweep spec on Ray over an agent fleet.

The run id is the spec's ``sweep.name``; its store is the spec's ``sweep.store`` (default
``runs/<name>`` next to the spec). ``resume`` re-reads the spec text the run was started with
from the store, so an edited spec file cannot change a run half-way.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from coordinator.cli.report_cmd import check_store_options, open_runs, store_options
from coordinator.run_status import run_status
from coordinator.store import DB_NAME, Store

if TYPE_CHECKING:
    from rich.console import Console

    from coordinator.metrics import SweepMetrics

EXIT_INCOMPLETE = 1
EXIT_INTERRUPTED = 130


@click.group("sweep")
def sweep() -> None:
    """Run LLM sweeps: a TOML spec (docs/sweep-spec.md) on Ray, judged by device agents.

    \b
      kgb sweep run sweep.toml        start (progress bar; Ctrl-C leaves it resumable)
      kgb sweep resume NAME           continue a stopped run: no token is paid twice
      kgb sweep status NAME           where a run stands
      kgb sweep cancel NAME           ask a running sweep to stop (resumable)
      kgb report NAME                 accuracy, pass@k, funnel, cost
    """


def _engine_options(f: Any) -> Any:
    options = [
        click.option("--ray-address", default=None, metavar="ADDR",
                     help="join this Ray cluster (e.g. 10.0.0.5:6379 or auto); default: start "
                          "Ray on this machine, bound to loopback"),
        click.option("--metrics-port", type=click.IntRange(0, 65535), default=9464,
                     show_default=True,
                     help="serve Prometheus /metrics here (0 picks a free port; docs/metrics.md)"),
        click.option("--metrics-host", default="127.0.0.1", show_default=True,
                     help="address /metrics listens on"),
        click.option("--registry-port", type=click.IntRange(0, 65535), default=None,
                     help="let agents register themselves here (kgb agent serve --register); "
                          "default: only the spec's [[agents]]"),
        click.option("--registry-host", default="127.0.0.1", show_default=True,
                     help="address the registry listens on; any other than loopback needs "
                          "--registry-tls-cert/--registry-tls-key and --registry-tokens, or "
                          "--registry-insecure"),
        *_access_options(),
        click.option("--eval-timeout", type=click.FloatRange(1, 86400), default=900.0,
                     show_default=True, help="seconds one evaluation may take, retries included"),
        click.option("--wait-for-agents", type=click.FloatRange(0, 3600), default=60.0,
                     show_default=True, help="seconds to wait at start for an agent per platform"),
        click.option("--no-progress", is_flag=True, help="no progress bar (a line per minute)"),
        click.option("--metrics-linger", type=click.FloatRange(0, 86400), default=0.0,
                     show_default=True,
                     help="keep /metrics up this many seconds after the sweep ends, so "
                          "Prometheus scrapes the final counts (Ctrl-C ends it early)"),
    ]
    for o in reversed(options):
        f = o(f)
    return f


def _access_options() -> list[Any]:
    """TLS and tokens: of the registry this coordinator serves, and for the agents it dials
    (docs/auth.md)."""
    path = click.Path(dir_okay=False, path_type=Path)
    return [
        click.option("--registry-tls-cert", type=path, default=None, metavar="PEM",
                     help="serve the registry over TLS with this certificate (and --registry-tls-key)"),
        click.option("--registry-tls-key", type=path, default=None, metavar="PEM",
                     help="the private key of --registry-tls-cert"),
        click.option("--registry-client-ca", type=path, default=None, metavar="PEM",
                     help="mutual TLS: agents must present a certificate signed by this CA"),
        click.option("--registry-tokens", type=path, default=None, metavar="FILE",
                     help="agents must register with a token of this file (`kgb agent token add`); "
                          "an agent's heartbeats and deregistration must carry the same tenant's token"),
        click.option("--registry-insecure", is_flag=True,
                     help="allow a non-loopback --registry-host without TLS and tokens"),
        click.option("--agent-ca", type=path, default=None, metavar="PEM",
                     help="dial agents over TLS, trusting this CA (agents whose [[agents]] entry has "
                          "its own ca/cert/key/token_file use those instead)"),
        click.option("--agent-cert", type=path, default=None, metavar="PEM",
                     help="client certificate for agents with mutual TLS (with --agent-key)"),
        click.option("--agent-key", type=path, default=None, metavar="PEM",
                     help="the key of --agent-cert"),
        click.option("--agent-token-file", type=path, default=None, metavar="FILE",
                     help="bearer token for the agents (default: $KGB_AGENT_TOKEN); never printed"),
    ]


def _take_access(kw: dict[str, Any]) -> dict[str, Any]:
    """Replace the access options in ``kw`` by ``registry_access`` and ``agent_auth``, checked
    now (unreadable files, a key that does not match, an exposed registry): usage errors here,
    not in the fleet's actor once Ray is up."""
    from coordinator.fleet.registration import RegistryAccess
    from protos.security import AuthConfigError, ClientAuthFiles, ServerTLS, TokenStore, exposure_problem

    get = kw.pop
    cert, key, client_ca = get("registry_tls_cert"), get("registry_tls_key"), get("registry_client_ca")
    tokens, insecure = get("registry_tokens"), get("registry_insecure")
    agent = (get("agent_ca"), get("agent_cert"), get("agent_key"), get("agent_token_file"))
    try:
        if (cert is None) != (key is None) or (client_ca is not None and cert is None):
            raise AuthConfigError("--registry-tls-cert and --registry-tls-key go together "
                                  "(and --registry-client-ca needs both)")
        tls = ServerTLS(cert, key, client_ca) if cert is not None else None
        if tls is not None:
            tls.credentials()
        if tokens is not None:
            TokenStore(tokens)
        files = ClientAuthFiles(*agent, token_env="KGB_AGENT_TOKEN")
        files.load()
    except AuthConfigError as exc:
        raise click.UsageError(str(exc)) from None
    if kw.get("registry_port") is not None:
        problem = exposure_problem(kw["registry_host"], tls=tls is not None,
                                   tokens=tokens is not None, insecure=insecure)
        if problem is not None:
            raise click.UsageError(f"agent registry: {problem}; give --registry-tls-cert/"
                                   "--registry-tls-key and --registry-tokens, or --registry-insecure")
    kw["registry_access"] = RegistryAccess(tls=tls, tokens=tokens, insecure=insecure)
    kw["agent_auth"] = files
    return kw


@sweep.command("run")
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False, path_type=Path))
@_engine_options
def run_cmd(spec_path: Path, **kw: Any) -> None:
    """Start the sweep SPEC describes (a TOML file; docs/sweep-spec.md).

    Work is handed out in the spec's seeded order with at most
    concurrency.generation_per_endpoint trajectories per endpoint in flight; every model call
    is stored before it is used and every verdict before it counts. Ctrl-C stops cleanly: calls
    already sent are awaited and stored, and `kgb sweep resume` continues without paying for
    any token twice (a second Ctrl-C stops at once).
    """
    from coordinator.sweep_spec import SweepSpecError, parse_spec

    try:
        text = spec_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise click.UsageError(f"cannot read {spec_path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise click.UsageError(f"{spec_path} is not UTF-8 text") from None
    try:
        spec = parse_spec(text, str(spec_path), base_dir=spec_path.parent)
    except SweepSpecError as exc:
        raise click.UsageError(str(exc)) from None
    for w in spec.warnings:
        click.echo(f"warning: {w}", err=True)
    db = spec.store / DB_NAME
    if db.is_file():
        store = Store(db)
        try:
            if store.run_config(spec.name) is not None:
                st = store.run_state(spec.name)
                what = st[0] if st else "unknown"
                raise click.UsageError(
                    f"run {spec.name!r} already exists in {spec.store} (state: {what}); continue it "
                    f"with `{resume_hint(spec.store, spec.name)}`, or give the spec a new sweep.name")
        finally:
            store.close()
    sys.exit(_execute(spec, text, str(spec_path), str(spec_path.parent.resolve()), spec.store,
                      resume=False, **_take_access(kw)))


@sweep.command("resume")
@click.argument("run_ref", metavar="RUN")
@store_options
@_engine_options
@click.pass_context
def resume_cmd(ctx: click.Context, /, run_ref: str, store_path: Path | None, runs_dir: Path,
               **kw: Any) -> None:
    """Continue RUN (a sweep name under --runs-dir, or its store directory) from its store.

    Finished trajectories are skipped; unfinished ones replay their stored model calls without
    sending them (zero tokens) and take stored verdicts instead of re-evaluating; trajectories
    that ended INFRA_ERROR run again. The sweep budget counts what the run already spent.
    """
    from coordinator.sweep_spec import SweepSpecError, parse_spec

    check_store_options(ctx, store_path)
    store, run_id, config = _sweep_run(run_ref, store_path, runs_dir)
    store_dir = store.path.parent
    store.close()
    try:
        spec = parse_spec(config["spec"], config.get("spec_source", "<stored spec>"),
                          base_dir=config.get("spec_dir", "."))
    except SweepSpecError as exc:
        raise click.UsageError(f"the stored spec of {run_id!r} no longer validates: {exc}") from None
    sys.exit(_execute(spec, config["spec"], config.get("spec_source", "<stored spec>"),
                      config.get("spec_dir", "."), store_dir, resume=True, **_take_access(kw)))


@sweep.command("status")
@click.argument("run_ref", metavar="RUN")
@store_options
@click.option("--json", "as_json", is_flag=True, help="one JSON object")
@click.pass_context
def status_cmd(ctx: click.Context, run_ref: str, store_path: Path | None, runs_dir: Path,
               as_json: bool) -> None:
    """Where RUN stands: its state (a coordinator that is gone is `interrupted`, whatever the
    store last heard), trajectories finished of planned, tokens and cost so far, and the calls
    sent without a stored reply (unconfirmed: possibly billed)."""
    import orjson

    check_store_options(ctx, store_path)
    store, run_id, config = _sweep_run(run_ref, store_path, runs_dir)
    try:
        out = _status(store, run_id, config)
    finally:
        store.close()
    if as_json:
        click.echo(orjson.dumps(out).decode())
        return
    _print_status(out)


def _status(store: Store, run_id: str, config: dict[str, Any]) -> dict[str, Any]:
    from coordinator.sweep_spec import SweepSpecError, parse_spec

    try:
        plan = parse_spec(config["spec"], config.get("spec_source", ""),
                          base_dir=config.get("spec_dir", ".")).plan()
        # results to store: a shared-generation trajectory stores one per platform
        planned: int | None = sum(len(p.platforms) for p in plan)
    except SweepSpecError:
        planned = None
    results = store.trajectory_results(run_id)
    by_end: dict[str, int] = {}
    for r in results:
        by_end[r.end_reason] = by_end.get(r.end_reason, 0) + 1
    tokens, cost = store.run_spend(run_id)
    st = run_status(store, run_id)
    lost = store.unconfirmed_calls(run_id, before=st.started if st.live else None)
    return {
        "run": run_id, "store": str(store.path.parent.resolve()), "state": st.state,
        "stored_state": st.stored, "why": st.why, "detail": st.detail, "updated": st.updated,
        "planned": planned, "finished": len(results),
        "solved": sum(1 for r in results if r.solved), "by_end_reason": by_end,
        "llm_calls": store.llm_call_count(run_id), "tokens": tokens, "cost_usd": cost,
        "unconfirmed_calls": sum(u.calls for u in lost),
        "unconfirmed_resent": sum(u.resent for u in lost),
        "unconfirmed_tokens_estimate": sum(u.est_tokens for u in lost),
        "unconfirmed_cost_usd_estimate": sum(u.est_cost_usd for u in lost)}


def _print_status(out: dict[str, Any]) -> None:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(out["updated"])) if out["updated"] else "-"
    click.echo(f"run {out['run']} ({out['store']}): {out['state']} since {when}"
               + (f" — {out['detail']}" if out["detail"] and not out["why"] else "")
               + (f" — {out['why']} (the store says {out['stored_state']})" if out["why"] else ""))
    planned = out["planned"]
    click.echo(f"  trajectories: {out['finished']} of {planned if planned is not None else '?'} "
               f"finished, {out['solved']} solved")
    if out["by_end_reason"]:
        click.echo("  end reasons:  " + ", ".join(f"{k} {v}" for k, v in
                                                  sorted(out["by_end_reason"].items())))
    click.echo(f"  model calls:  {out['llm_calls']}, {out['tokens']:,} tokens billed, "
               f"${out['cost_usd']:,.4f}")
    if out["unconfirmed_calls"]:
        click.echo(f"  unconfirmed:  {out['unconfirmed_calls']} calls sent without a stored reply "
                   f"(possibly billed; about {out['unconfirmed_tokens_estimate']:,} tokens, "
                   f"${out['unconfirmed_cost_usd_estimate']:,.4f}); "
                   f"{out['unconfirmed_resent']} re-sent by a resume")
    if out["state"] in ("interrupted", "cancelled", "incomplete"):
        click.echo(f"  continue with: {resume_hint(Path(out['store']), out['run'])}")


@sweep.command("cancel")
@click.argument("run_ref", metavar="RUN")
@store_options
@click.pass_context
def cancel_cmd(ctx: click.Context, run_ref: str, store_path: Path | None, runs_dir: Path) -> None:
    """Ask the coordinator running RUN to stop (it notices within seconds). Calls already sent
    are stored; the run stays resumable with `kgb sweep resume`."""
    check_store_options(ctx, store_path)
    store, run_id, _ = _sweep_run(run_ref, store_path, runs_dir)
    try:
        st = run_status(store, run_id)
        if st.stored not in ("running", "cancelling"):
            click.echo(f"run {run_id} is not running (state: {st.stored}); nothing to cancel")
            return
        if not st.live:
            store.set_run_state(run_id, "interrupted", "its coordinator is gone")
            click.echo(f"run {run_id}: {st.why}; marked interrupted "
                       f"(resume with `{resume_hint(store.path.parent, run_id)}`)")
            return
        store.set_run_state(run_id, "cancelling", st.detail)
    finally:
        store.close()
    click.echo(f"run {run_id}: cancel requested; the coordinator stops within a few seconds")


# -- helpers ---------------------------------------------------------------------------------


def _sweep_run(run_ref: str, store_path: Path | None, runs_dir: Path) -> tuple[Store, str, dict[str, Any]]:
    store, ids = open_runs(run_ref, store_path, runs_dir)
    sweeps = [(i, c) for i in ids if (c := store.run_config(i)) is not None and c.get("kind") == "sweep"]
    if len(sweeps) != 1:
        store.close()
        if not sweeps:
            raise click.UsageError(f"{run_ref!r} holds no sweep run (runs: {', '.join(ids)})")
        raise click.UsageError(f"{run_ref!r} holds several sweeps ({', '.join(i for i, _ in sweeps)}); "
                               "name one with --store FILE RUN")
    return store, sweeps[0][0], sweeps[0][1]


def _owner() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()}"


def resume_hint(store_dir: Path, run_id: str) -> str:
    """The resume command that works from any directory: the store directory, absolute (shell
    quoted) — or, when the directory is not named after the run (a ``sweep.store`` of its own,
    perhaps shared by several sweeps), the store file and the run id."""
    store_dir = Path(store_dir).resolve()
    if store_dir.name == run_id:
        return f"kgb sweep resume {shlex.quote(str(store_dir))}"
    return f"kgb sweep resume --store {shlex.quote(str(store_dir / DB_NAME))} {shlex.quote(run_id)}"


def _run_elsewhere(run_id: str, store_dir: Path, console: Console) -> bool:
    """True (after saying so) when a live coordinator already runs ``run_id`` from this store."""
    db = Path(store_dir) / DB_NAME
    if not db.is_file():
        return False
    store = Store(db)
    st = run_status(store, run_id)
    store.close()
    if not st.live:
        return False
    console.print(f"kgb sweep: run {run_id!r} is being run by {st.detail}; not starting "
                  "a second coordinator (`kgb sweep cancel` it first)", markup=False)
    return True


def _serve_metrics(metrics: SweepMetrics, port: int, host: str, console: Console) -> int | None:
    """The port the sweep's metrics are served on; None (after saying why) when they cannot be."""
    try:
        return metrics.serve(port, host)
    except OSError as exc:
        console.print(f"kgb sweep: cannot serve metrics on {host}:{port} "
                      f"({exc.strerror or exc}); choose another --metrics-port (0 picks a free one)",
                      markup=False)
        return None


def _execute(spec: Any, text: str, source: str, spec_dir: str, store_dir: Path, *, resume: bool,
             ray_address: str | None, metrics_port: int, metrics_host: str,
             registry_port: int | None, registry_host: str, registry_access: Any,
             agent_auth: Any, eval_timeout: float,
             wait_for_agents: float, no_progress: bool, metrics_linger: float) -> int:
    from rich.console import Console

    from coordinator.cli.views import SweepProgressView, drive
    from coordinator.engine import SweepOptions, init_ray, quiet_gc
    from coordinator.metrics import SweepMetrics

    console = Console(stderr=True)
    if resume and _run_elsewhere(spec.name, store_dir, console):
        return EXIT_INCOMPLETE
    metrics = SweepMetrics()
    port = _serve_metrics(metrics, metrics_port, metrics_host, console)
    if port is None:
        return EXIT_INCOMPLETE
    metrics.declare(models=[m.name for m in spec.models] or [""],
                    methods=[m.label for m in spec.methods], platforms=spec.platforms,
                    sources=sorted({o.split("::")[0] for o in spec.operators}))
    options = SweepOptions(run_id=spec.name, store_dir=Path(store_dir), spec_text=text,
                           spec_source=source, spec_dir=spec_dir, ray_address=ray_address,
                           registry_port=registry_port, registry_host=registry_host,
                           registry_access=registry_access, agent_auth=agent_auth,
                           eval_timeout_s=eval_timeout, wait_for_agents_s=wait_for_agents,
                           resume=resume)
    console.print(f"sweep {spec.name}: store {store_dir}, metrics on "
                  f"http://{metrics_host}:{port}/metrics", markup=False)
    view = SweepProgressView(console, metrics, enabled=not no_progress)
    try:
        with console.status("starting Ray ...") if not no_progress else _null():
            init_ray(ray_address)
        quiet_gc()
        state, progress = asyncio.run(drive(spec, options, view, _owner()))
        view.close()
        _summary(console, spec, state, progress, store_dir)
        if metrics_linger > 0:
            console.print(f"metrics stay up for {metrics_linger:.0f} s (Ctrl-C ends it)", markup=False)
            try:
                time.sleep(metrics_linger)
            except KeyboardInterrupt:
                pass
    finally:
        view.close()
        metrics.close()
        import ray

        if ray.is_initialized():
            ray.shutdown()
    return {"complete": 0, "cancelled": 0, "interrupted": EXIT_INTERRUPTED}.get(state, EXIT_INCOMPLETE)


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: object) -> None:
        return None


def _summary(console: Any, spec: Any, state: str, p: Any, store_dir: Path) -> None:
    elapsed = time.monotonic() - p.started
    console.print(f"sweep {spec.name}: {state} — {p.skipped + p.done} of {p.planned} trajectories "
                  f"finished ({p.skipped} before this run), {p.solved} solved now; "
                  f"{p.calls_sent} calls sent, {p.tokens:,} tokens, ${p.cost_usd:,.4f}; "
                  f"{p.evaluations} verdicts ({p.verdicts_reused} from the store) in {elapsed:.0f} s"
                  f" on {len(p.nodes)} Ray node{'' if len(p.nodes) == 1 else 's'}", markup=False)
    if p.by_end:
        console.print("  end reasons: " + ", ".join(f"{k} {v}" for k, v in sorted(p.by_end.items())),
                      markup=False)
    for e in p.errors[:5]:
        console.print(f"  failed: {e}", markup=False)
    if state != "complete":
        console.print(f"  continue with: {resume_hint(store_dir, spec.name)}", markup=False)
    console.print(f"  report: kgb report {shlex.quote(str(Path(store_dir).resolve()))}",
                  markup=False)
