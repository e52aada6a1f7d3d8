"""The real Claude Code CLI from npm, installed once into a cache directory the tests control.

Only the slow test asks for it (``--run-slow``), so a default run downloads nothing. The
version is pinned (``KGB_CLAUDE_CODE_VERSION`` overrides it) so the requests it sends, which the
scripted server's replies are written for, do not change under the test; the cache directory
(``KGB_CLAUDE_CODE_CACHE``, default ``/tmp/kgb-claude-code``) is world-readable because, when the
tests run as root, the CLI runs as a workspace's private uid.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

VERSION = "2.1.197"
PACKAGE = "@anthropic-ai/claude-code"
STUB_BYTES = 1_000_000  # bin/claude.exe before the postinstall copies the native binary over it


class Unavailable(Exception):
    """Claude Code cannot be installed here (no npm, or the install failed): why."""


def cache_dir() -> Path:
    return Path(os.environ.get("KGB_CLAUDE_CODE_CACHE", "/tmp/kgb-claude-code"))


def _npm(args: list[str], cwd: Path) -> None:
    proc = subprocess.run(["npm", *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise Unavailable(f"npm {' '.join(args)} failed ({proc.returncode}): "
                          f"{(proc.stderr or proc.stdout)[-2000:]}")


def install() -> Path:
    """The ``claude`` executable of the pinned version, installed with npm unless cached."""
    version = os.environ.get("KGB_CLAUDE_CODE_VERSION", VERSION)
    if shutil.which("npm") is None or shutil.which("node") is None:
        raise Unavailable("npm and node are not on PATH (Claude Code is an npm package)")
    prefix = cache_dir() / version
    package = prefix / "node_modules" / PACKAGE
    exe = package / "bin" / "claude.exe"
    if not _usable(exe, version):
        prefix.mkdir(parents=True, exist_ok=True)
        _npm(["install", "--no-audit", "--no-fund", "--prefix", str(prefix),
              f"{PACKAGE}@{version}"], prefix)
        if exe.is_file() and exe.stat().st_size < STUB_BYTES:
            # npm was told not to run install scripts: copy the native binary in ourselves
            subprocess.run(["node", "install.cjs"], cwd=package, check=True, capture_output=True,
                           timeout=300)
        if not _usable(exe, version):
            raise Unavailable(f"{exe} does not report version {version} after npm install")
    for d in (cache_dir(), *[p for p in exe.parents if p.is_relative_to(cache_dir())]):
        d.chmod(d.stat().st_mode | 0o755)  # a workspace's private uid runs it
    return exe


def _usable(exe: Path, version: str) -> bool:
    if not exe.is_file() or exe.stat().st_size < STUB_BYTES:
        return False
    try:
        out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60,
                             env={"PATH": os.environ.get("PATH", ""), "HOME": "/tmp"})
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.stdout.startswith(version)
