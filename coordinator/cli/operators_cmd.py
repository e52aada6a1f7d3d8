"""``kgb operators list|show|validate``."""

from __future__ import annotations

import os
import sys

import click
import orjson

import operators
from coordinator.local_agent import with_repo_on_path
from operators.spec import Source


def _spec_or_exit(op_id: str) -> operators.OperatorSpec:
    try:
        return operators.get(op_id)
    except operators.UnknownOperatorError as exc:
        raise click.UsageError(str(exc)) from None


@click.group("operators")
def operators_group() -> None:
    """The problem suite: list, inspect and validate problems."""


@operators_group.command("list")
@click.option("--source", type=click.Choice([s.value for s in Source]), default=None,
              help="only problems from this source")
@click.option("--json", "as_json", is_flag=True, help="print a JSON array instead of a table")
def list_cmd(source: str | None, as_json: bool) -> None:
    """List the registered problems (id, source, kind, version)."""
    specs = operators.all_specs(source)
    if as_json:
        rows = [{"id": s.id, "source": s.source.value, "kind": s.kind.value, "version": s.version,
                 "entry_points": [e.name for e in s.entry_points],
                 "platforms": sorted(s.platforms)} for s in specs]
        sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(specs)} problems")
    for col in ("id", "source", "kind", "version", "entry points"):
        table.add_column(col)
    for s in specs:
        table.add_row(s.id, s.source.value, s.kind.value, str(s.version),
                      ", ".join(e.name for e in s.entry_points))
    Console().print(table)


@operators_group.command("show")
@click.argument("op_id", metavar="ID")
@click.option("--solution", is_flag=True, help="print the Triton reference solution (raw source)")
@click.option("--negative", default=None, is_flag=False, flag_value="1", metavar="[N]",
              help="print negative control N (1-based index or name; default 1) as raw source")
@click.option("--prompt", is_flag=True, help="print the problem description given to models")
def show_cmd(op_id: str, solution: bool, negative: str | None, prompt: bool) -> None:
    """Show a problem: entry-point signatures, cases, tolerances."""
    spec = _spec_or_exit(op_id)
    if sum([solution, negative is not None, prompt]) > 1:
        raise click.UsageError("choose one of --solution, --negative, --prompt")
    if solution:
        sys.stdout.write(spec.solution.lstrip("\n"))
        return
    if negative is not None:
        negs = spec.negatives
        chosen = None
        if negative.isdigit() and 1 <= int(negative) <= len(negs):
            chosen = negs[int(negative) - 1]
        else:
            chosen = next((n for n in negs if n.name == negative), None)
        if chosen is None:
            names = ", ".join(f"{i + 1}={n.name}" for i, n in enumerate(negs))
            raise click.UsageError(f"{spec.id} has no negative control {negative!r} (has {names})")
        sys.stdout.write(chosen.source.lstrip("\n"))
        return
    if prompt:
        click.echo(spec.description)
        return
    click.echo(f"{spec.id}  version {spec.version}  kind {spec.kind.value}  "
               f"platforms {', '.join(sorted(spec.platforms))}")
    click.echo("\nEntry points (define each in the candidate file):")
    for e in spec.entry_points:
        click.echo(f"  {e.signature}")
        if e.doc:
            click.echo(f"      {e.doc}")
    click.echo(f"\n{spec.description}")
    cases = list(spec.cases())
    cpu = [c for c in cases if c.cpu]
    click.echo(f"\nPublic correctness cases: {len(cases)} ({len(cpu)} in the cpu tier, marked *); "
               "hidden cases are drawn per candidate by each agent.")
    for c in cases:
        click.echo(f"  {'*' if c.cpu else ' '} {c.name}")
    click.echo("\nBenchmark cases:")
    for c in spec.benchmark_cases():
        cost = spec.cost(c)
        click.echo(f"    {c.name}  ({cost.flops:.3g} FLOP, {cost.bytes:.3g} B)")
    click.echo("\nTolerances (|out - ref| <= atol + rtol * scale; integers exact):")
    for name, tol in spec.tolerances.items():
        click.echo(f"    {name}: rtol={tol.rtol:.3g} atol={tol.atol:.3g}")
    click.echo(f"\nControls: 1 reference solution, {len(spec.negatives)} negative control(s): "
               + ", ".join(n.name for n in spec.negatives))


@operators_group.command("validate")
@click.argument("op_ids", nargs=-1, metavar="[ID...]")
@click.option("--tier", type=click.Choice(["cpu", "full"]), default="cpu", show_default=True,
              help="which correctness cases to check")
@click.option("--controls/--no-controls", default=True, show_default=True,
              help="also run each reference solution and negative control (on the GPU if "
                   "there is one, else under Triton's interpreter)")
@click.option("--budget", "budget_s", type=click.FloatRange(min=0.0), default=60.0,
              show_default=True, help="seconds a problem may take; slower ones fail")
@click.option("--compile-for", "compile_for", metavar="ARCH", default=None,
              help="also compile, for this NVIDIA GPU (e.g. sm_90, Hopper), every Triton kernel "
                   "launch the reference solution and each negative control make on the tier's "
                   "public cases, with Triton's real compiler and no GPU: catches code the "
                   "interpreter runs but the compiler refuses. Compiles only, runs nothing")
def validate_cmd(op_ids: tuple[str, ...], tier: str, controls: bool, budget_s: float,
                 compile_for: str | None) -> None:
    """Check problems themselves: deterministic reference, tolerances that accept PyTorch in
    the case's own precision, memory budget, informative outputs; with --controls (default)
    the reference solution passes and every negative control is caught.

    Running solutions and controls is the agent host's work: this execs
    ``python -m device_agent validate`` with the same options."""
    for op_id in op_ids:
        _spec_or_exit(op_id)
    argv = ["validate", *op_ids, "--tier", tier, "--budget", repr(budget_s),
            "--controls" if controls else "--no-controls"]
    if compile_for is not None:
        argv += ["--compile-for", compile_for]
    env = dict(os.environ)
    env["PYTHONPATH"] = with_repo_on_path(env.get("PYTHONPATH"))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "device_agent", *argv], env)
