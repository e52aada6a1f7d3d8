"""Starting a device agent on this machine for ``kgb eval`` and ``kgb run``.

The agent is its own process (``python -m device_agent serve``) on a free loopback port; the
coordinator never imports it. Its stderr goes to a log file whose tail is shown when it fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from protos.client import AgentClient, AgentUnreachable
from protos.security import ClientAuth

REPO_ROOT = Path(__file__).resolve().parent.parent


def with_repo_on_path(pythonpath: str | None) -> str:
    """``PYTHONPATH`` with this checkout first, so child processes import the same packages
    whether or not the project is pip-installed (the GPU host runs it from a checkout)."""
    return os.pathsep.join(p for p in (str(REPO_ROOT), pythonpath or "") if p)


class LocalAgent:
    """A child agent process; use as a context manager (stops it with SIGTERM on exit).
    ``auth``: how to reach it when ``extra_args`` give it TLS (tests; ``kgb run`` and ``kgb eval``
    use plain loopback)."""

    def __init__(self, platform: str = "auto", workers: int | None = None,
                 log_path: Path | None = None, extra_args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None, auth: ClientAuth | None = None) -> None:
        self.platform = platform
        self.auth = auth
        self.extra_args = extra_args
        self.extra_env = dict(env or {})
        self.workers = workers
        self._tmp = Path(tempfile.mkdtemp(prefix="kgb-local-agent-"))
        self.log_path = log_path or self._tmp / "agent.log"
        self.port_file = self._tmp / "port"
        self.proc: subprocess.Popen[bytes] | None = None
        self.address = ""

    def start(self, timeout: float = 120.0) -> str:
        """Start the agent and wait for its port (not yet for SERVING). Returns host:port."""
        cmd = [sys.executable, "-m", "device_agent", "serve", "--port", "0",
               "--platform", self.platform, "--port-file", str(self.port_file)]
        if self.workers:
            cmd += ["--workers", str(self.workers)]
        if os.geteuid() != 0 and "--unsafe-sandbox" not in self.extra_args:
            # The sandbox needs root; a local agent of a normal user evaluates the user's own
            # (trusted) candidates, as before it had one.
            cmd.append("--unsafe-sandbox")
        cmd += list(self.extra_args)
        env = dict(os.environ)
        env.update(self.extra_env)
        env["PYTHONPATH"] = with_repo_on_path(env.get("PYTHONPATH"))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as logf:
            self.proc = subprocess.Popen(cmd, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.port_file.exists():
                self.address = f"127.0.0.1:{self.port_file.read_text().strip()}"
                return self.address
            if self.proc.poll() is not None:
                raise AgentUnreachable(f"local agent exited with code {self.proc.returncode}:\n"
                                       f"{self.log_tail()}")
            time.sleep(0.1)
        self.stop()
        raise AgentUnreachable(f"local agent did not open a port within {timeout:.0f}s:\n{self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def wait_serving(self, timeout: float = 300.0) -> None:
        async with AgentClient(self.address, self.auth) as client:
            try:
                await client.wait_serving(timeout, proc_alive=self.alive)
            except AgentUnreachable as exc:
                raise AgentUnreachable(f"{exc}\n{self.log_tail()}") from None

    def log_tail(self, limit: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def stop(self, grace: float = 15.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)

    def __enter__(self) -> LocalAgent:
        self.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
