"""``kgb``: the one command-line entry point.

Exit codes: 0 success (verdicts were produced, whatever their status); 1 an operation failed;
2 usage errors (unknown operator, unreadable file, bad option); 3 the agent cannot be reached;
130 interrupted. Every flag can also be set as ``KGB_<COMMAND>_<FLAG>``.
"""

from __future__ import annotations

import sys

import click

from coordinator.cli.agent_cmd import agent
from coordinator.cli.eval_cmd import eval_cmd
from coordinator.cli.export_cmd import export
from coordinator.cli.operators_cmd import operators_group
from coordinator.cli.report_cmd import report
from coordinator.cli.run_cmd import run
from coordinator.cli.sweep_cmd import sweep


@click.group(context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "KGB"})
@click.version_option(package_name="kernelgenbench", message="kgb %(version)s")
def kgb() -> None:
    """KernelGenBench: benchmark and evaluate LLM-written Triton kernels.

    \b
    Start here:
      kgb operators list            the problem suite
      kgb operators show aten::add  entry points, cases, tolerances
      kgb eval my_add.py --op aten::add      evaluate a candidate file
      kgb run                       the default job: reference solutions on a local agent
      kgb sweep run sweep.toml      an LLM sweep on Ray over an agent fleet (resumable)
      kgb report RUN                accuracy, pass@k, status funnel, cost of a stored run
    """


kgb.add_command(operators_group)
kgb.add_command(agent)
kgb.add_command(eval_cmd)
kgb.add_command(run)
kgb.add_command(report)
kgb.add_command(export)
kgb.add_command(sweep)


def main(argv: list[str] | None = None) -> None:
    try:
        kgb.main(args=argv, prog_name="kgb")
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
