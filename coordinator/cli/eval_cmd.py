"""``kgb eval``: evaluate candidate files on an agent (a local one when none is given)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson

import operators
from coordinator.integrity import Guard
from coordinator.local_agent import LocalAgent
from operators.spec import PLATFORMS
from protos import request_ids
from protos.client import AgentClient, AgentError, AgentUnreachable, BadRequest, NotAuthorized
from protos.integrity import Expected
from protos.records import EvalRequest, Verdict, candidate_id
from protos.security import AuthConfigError, ClientAuth, ClientAuthFiles

if TYPE_CHECKING:
    from rich.console import Console

    from protos.records import AgentDescription

EXIT_AGENT_UNREACHABLE = 3


def _collect_files(paths: tuple[str, ...]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(x for x in path.glob("*.py") if x.is_file())
            if not found:
                raise click.UsageError(f"{path} holds no .py files")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise click.UsageError(f"cannot read {path}: no such file or directory")
    return files


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise click.UsageError(f"cannot read {path}: {exc.strerror}") from None


def _done_keys(out: Path) -> set[tuple[str, str]]:
    """(operator, candidate_hash) pairs already in a results file (torn last line tolerated)."""
    keys: set[tuple[str, str]] = set()
    if not out.exists():
        return keys
    for line in out.read_bytes().splitlines():
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a line cut short by a killed run; that candidate is evaluated again
        if isinstance(rec, dict) and rec.get("status") != "INFRA_ERROR":
            keys.add((str(rec.get("operator")), str(rec.get("candidate_hash"))))
    return keys


def _append(out: Path, record: dict[str, Any]) -> None:
    with open(out, "ab") as f:
        f.write(orjson.dumps(record) + b"\n")
        f.flush()
        os.fsync(f.fileno())


def _auth(address: str | None, ca: Path | None, cert: Path | None, key: Path | None,
          token_file: Path | None) -> ClientAuth | None:
    """The credentials for ``--agent`` (the local agent needs none)."""
    if address is None:
        if any(x is not None for x in (ca, cert, key, token_file)):
            raise click.UsageError("--ca, --cert, --key and --token-file are for --agent")
        return None
    try:
        return ClientAuthFiles(ca, cert, key, token_file, "KGB_AGENT_TOKEN").load()
    except AuthConfigError as exc:
        raise click.UsageError(str(exc)) from None


@click.command("eval")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--op", "op_id", required=True, metavar="ID", help="the problem, e.g. aten::add")
@click.option("--agent", "address", default=None, metavar="HOST:PORT",
              help="a running agent; without it a local agent is started (GPU if present, else cpu)")
@click.option("--platform", type=click.Choice(["auto", *sorted(PLATFORMS)]), default="auto",
              show_default=True, help="platform of the local agent")
@click.option("--json", "as_json", is_flag=True,
              help="print one JSON object per verdict on stdout (logs stay on stderr)")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="append verdicts to this JSONL file as they arrive")
@click.option("--resume", is_flag=True, help="with --out: skip candidates already in the file")
@click.option("--timeout", type=click.FloatRange(5, 86400), default=900.0, show_default=True,
              help="deadline per candidate, seconds")
@click.option("--no-timing", is_flag=True, help="check correctness only")
@click.option("--concurrency", type=click.IntRange(1, 1024), default=None,
              help="candidates in flight (default: the agent's capacity)")
@click.option("--ca", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="PEM",
              help="with --agent: speak TLS and trust this CA for the agent's certificate")
@click.option("--cert", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="PEM",
              help="with --ca: a client certificate, for an agent with mutual TLS (and --key)")
@click.option("--key", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="PEM",
              help="the private key of --cert")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="with --agent: the bearer token (`kgb agent token add` printed "
                                   "it); default: $KGB_AGENT_TOKEN. Never printed")
def eval_cmd(files: tuple[str, ...], op_id: str, address: str | None, platform: str, as_json: bool,
             out: Path | None, resume: bool, timeout: float, no_timing: bool,
             concurrency: int | None, ca: Path | None, cert: Path | None, key: Path | None,
             token_file: Path | None) -> None:
    """Evaluate candidate FILEs (or directories of .py files) against problem ID.

    Exit status is 0 whenever verdicts were produced, whatever they say; 2 for usage errors;
    3 when the agent cannot be reached.
    """
    if resume and out is None:
        raise click.UsageError("--resume needs --out")
    auth = _auth(address, ca, cert, key, token_file)
    try:
        spec = operators.get(op_id)
    except operators.UnknownOperatorError as exc:
        raise click.UsageError(str(exc)) from None
    paths = _collect_files(files)
    sources = [(p, _read(p)) for p in paths]
    if out is not None and resume:
        done = _done_keys(out)
        before = len(sources)
        sources = [(p, s) for p, s in sources
                   if (spec.id, candidate_id(s)) not in done]
        if before != len(sources):
            click.echo(f"resume: {before - len(sources)} candidate(s) already in {out}", err=True)
    if not sources:
        click.echo("nothing to evaluate", err=True)
        return
    local: LocalAgent | None = None
    try:
        if address is None:
            local = LocalAgent(platform=platform)
            click.echo("starting a local agent ...", err=True)
            try:
                address = local.start()
                asyncio.run(local.wait_serving())
            except AgentUnreachable as exc:
                click.echo(f"kgb eval: cannot start a local agent: {exc}", err=True)
                sys.exit(EXIT_AGENT_UNREACHABLE)
        code = asyncio.run(_evaluate_all(address, spec, sources, as_json, out, timeout, no_timing,
                                         concurrency, auth if local is None else None))
    finally:
        if local is not None:
            local.stop()
    sys.exit(code)


async def _connect(client: AgentClient, address: str, auth: ClientAuth | None,
                   err: Console) -> AgentDescription | None:
    """The agent's description once it serves; None (after saying why) when it cannot be used."""
    try:
        await client.wait_serving(timeout=15.0)
        return await client.describe()
    except NotAuthorized as exc:
        err.print(f"kgb eval: the agent at {address} refused us: {exc}. Give its token with "
                  "--token-file or KGB_AGENT_TOKEN (docs/auth.md).", markup=False)
        return None
    except AgentError as exc:
        tls = "" if auth is not None and auth.tls else " If it serves TLS, give --ca."
        err.print(f"kgb eval: cannot reach the agent at {address}: {exc}. "
                  f"Start one with `kgb agent serve` or leave out --agent.{tls}", markup=False)
        return None


def _show(path: Path, verdict: Verdict, out: Path | None, as_json: bool, err: Console) -> None:
    """One verdict: appended to ``out``, and as a JSON line on stdout or a line on stderr."""
    record = verdict.to_json()
    record["file"] = str(path)
    if out is not None:
        _append(out, record)
    if as_json:
        sys.stdout.write(orjson.dumps(record).decode() + "\n")
        sys.stdout.flush()
    else:
        speed = f" speedup {verdict.speedup:.2f}x" if verdict.speedup else ""
        err.print(f"{path}: {verdict.status.value}{speed} - {verdict.message}", markup=False)


async def _evaluate_all(address: str, spec: operators.OperatorSpec,
                        sources: list[tuple[Path, bytes]], as_json: bool, out: Path | None,
                        timeout: float, no_timing: bool, concurrency: int | None,
                        auth: ClientAuth | None) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    async with AgentClient(address, auth) as client:
        desc = await _connect(client, address, auth, err)
        if desc is None:
            return EXIT_AGENT_UNREACHABLE
        sem = asyncio.Semaphore(concurrency or max(1, desc.capacity))
        unreachable = False
        guard = Guard()  # a verdict for another request is no verdict; its agent gets no more

        async def one(path: Path, source: bytes) -> tuple[Path, Verdict | None, str]:
            async with sem:
                why = guard.quarantined(address)
                if why is not None:
                    return path, None, f"agent {address} is quarantined ({why})"
                req = EvalRequest(request_id=request_ids.fresh("eval"), operator_id=spec.id,
                                  operator_version=spec.version, source=source,
                                  candidate_name=path.name, skip_timing=no_timing,
                                  platform=desc.system.platform)
                try:
                    got = await client.evaluate(req, timeout=timeout)
                except BadRequest as exc:
                    return path, None, f"rejected request: {exc}"
                except AgentError as exc:
                    return path, None, str(exc)
                vetted = guard.vet(address, Expected.of(req, desc.system.device_model), got)
                return (path, got, "") if vetted is got else (path, None, vetted.message)

        tasks = [asyncio.ensure_future(one(p, s)) for p, s in sources]
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=err, transient=False) as bar:
            task_id = bar.add_task(f"evaluating {spec.id}", total=len(tasks))
            for fut in asyncio.as_completed(tasks):
                path, verdict, error = await fut
                bar.advance(task_id)
                if verdict is None:
                    err.print(f"{path}: no verdict: {error}", markup=False)
                    unreachable = unreachable or "UNAVAILABLE" in error or "DEADLINE" in error
                    continue
                _show(path, verdict, out, as_json, err)
        return EXIT_AGENT_UNREACHABLE if unreachable else 0
