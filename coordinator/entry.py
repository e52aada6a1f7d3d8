"""The ``kgb`` console script: the click CLI, or a clear message on an agent-only install.

``pip install kernelgenbench`` installs what a device agent needs and nothing of the coordinator's
(no click, rich, aiohttp or Ray); the script exists all the same, so it says what to do instead of
failing with a traceback.
"""

from __future__ import annotations

import sys

AGENT_ONLY = """\
kgb: {missing} is not installed: this looks like an agent-only install (`pip install kernelgenbench`).
  The device agent runs as:    python -m device_agent serve --help
  For the coordinator and CLI: pip install 'kernelgenbench[coordinator]'   (docs/deploy.md)"""


def main() -> None:
    try:
        import aiohttp  # noqa: F401  the coordinator extra (pyproject.toml)
        import click  # noqa: F401
        import rich  # noqa: F401
    except ImportError as exc:
        print(AGENT_ONLY.format(missing=exc.name or "the coordinator extra"), file=sys.stderr)
        sys.exit(2)
    from coordinator.cli import main as cli_main

    cli_main()
