"""The CLI's process: started in its workspace as the workspace's uid, in a session of its own,
bounded by its own working time, and killed with everything it started.

``time_limit_s`` is the CLI's working time: the time its ``verify`` requests wait for the fleet
(slots, queueing, the evaluation) is paused (:class:`WorkClock`). At the limit, on a stop the
method asks for (a spent budget), or when the coroutine is cancelled (Ctrl-C stops the sweep),
the process group gets SIGTERM, then SIGKILL two seconds later; the workspace's removal then
kills whatever of its uid is left (:func:`~generators.agent_cli.workspace.kill_uid`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from generators.agent_cli.workspace import Workspace

GRACE_S = 2.0


class WorkClock:
    """Working time: wall time less the pauses (verify requests waiting for the fleet)."""

    def __init__(self) -> None:
        self._start = time.monotonic()
        self._paused = 0.0
        self._open = 0
        self._since = 0.0

    def used(self) -> float:
        now = time.monotonic()
        paused = self._paused + (now - self._since if self._open else 0.0)
        return now - self._start - paused

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        if self._open == 0:
            self._since = time.monotonic()
        self._open += 1
        try:
            yield
        finally:
            self._open -= 1
            if self._open == 0:
                self._paused += time.monotonic() - self._since


@dataclass(frozen=True)
class Exit:
    """How the process ended: its exit code (negative: a signal), whether the time limit or a
    stop killed it, and its working time."""

    code: int
    timed_out: bool
    stopped: str
    work_s: float


def spawn(argv: list[str], ws: Workspace, env: dict[str, str], stdout: Path,
          stderr: Path) -> subprocess.Popen[bytes]:
    """Start the CLI (raises FileNotFoundError / PermissionError when it cannot be run)."""
    uid, gid = (ws.uid, ws.gid) if ws.private_uid else (None, None)
    groups: list[int] | None = [] if ws.private_uid else None
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        return subprocess.Popen(argv, cwd=ws.path, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=True, close_fds=True, umask=0o077,
                                user=uid, group=gid, extra_groups=groups)


def kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


async def supervise(proc: subprocess.Popen[bytes], clock: WorkClock, limit_s: float,
                    stop: asyncio.Event, why: list[str]) -> Exit:
    """Wait for the process: until it exits, its working time passes ``limit_s`` or ``stop``
    is set (``why[0]`` says why); the group is then terminated, then killed."""
    timed_out = False
    try:
        while proc.poll() is None:
            if clock.used() >= limit_s:
                timed_out = True
                break
            if stop.is_set():
                break
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), min(0.1, max(limit_s - clock.used(), 0.01)))
        if proc.poll() is None:
            await _end(proc)
    except BaseException:
        kill_group(proc, signal.SIGKILL)
        proc.wait()
        raise
    kill_group(proc, signal.SIGKILL)  # what it left behind in its group
    code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    return Exit(code, timed_out, why[0] if stop.is_set() and why else "", clock.used())


async def _end(proc: subprocess.Popen[bytes]) -> None:
    kill_group(proc, signal.SIGTERM)
    end = time.monotonic() + GRACE_S
    while proc.poll() is None and time.monotonic() < end:
        await asyncio.sleep(0.05)
    kill_group(proc, signal.SIGKILL)
    await asyncio.get_running_loop().run_in_executor(None, proc.wait)


async def version_of(argv0: str, ws: Workspace, env: dict[str, str], timeout_s: float = 15.0) -> str:
    """``argv0 --version``'s first line (run like the CLI); "" when it says nothing."""
    out, err = ws.path / "tmp" / ".version.out", ws.path / "tmp" / ".version.err"
    try:
        proc = spawn([argv0, "--version"], ws, env, out, err)
    except OSError:
        return ""
    stop = asyncio.Event()
    clock = WorkClock()
    await supervise(proc, clock, timeout_s, stop, [])
    text = (out.read_bytes() or err.read_bytes()).decode(errors="replace").strip()
    return text.splitlines()[0][:200] if text else ""
