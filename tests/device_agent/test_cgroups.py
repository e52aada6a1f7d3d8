"""Job cgroups on their own (root): the task limit stops a fork bomb at the group's bound, the
memory limit ends a process that exceeds it (and is counted), and a kill empties the group —
including processes that left their session."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from device_agent.cgroups import CgroupHost, CgroupUnavailable

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")


@pytest.fixture()
def host() -> Iterator[CgroupHost]:
    try:
        h = CgroupHost.create()
    except CgroupUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield h
    finally:
        h.close()


def _in_group(procs: tuple[str, ...], body: str) -> subprocess.Popen[str]:
    """A Python child that joins the group first, then runs ``body``."""
    code = (f"import os\nfor p in {list(procs)!r}:\n    open(p, 'w').write(str(os.getpid()))\n"
            + textwrap.dedent(body))
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_the_task_limit_stops_forks(host: CgroupHost) -> None:
    job = host.job("w-tasks", 1 << 30, max_tasks=8)
    proc = _in_group(job.procs_files, """
        import time
        n = 0
        try:
            for _ in range(64):
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                n += 1
        except OSError:
            pass
        print(n, flush=True)
        time.sleep(30)
    """)
    assert proc.stdout is not None
    forked = int(proc.stdout.readline())
    assert forked < 8, forked
    assert job.kill() and not job.members()
    proc.wait(timeout=10)
    assert job.remove()


def test_the_memory_limit_ends_the_process_and_is_counted(host: CgroupHost) -> None:
    job = host.job("w-memory", 128 << 20, max_tasks=64)
    proc = _in_group(job.procs_files, """
        hoard = [bytearray(16 << 20) for _ in range(32)]
        print("survived", flush=True)
    """)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -9 and "survived" not in out, (proc.returncode, out)
    assert job.oom_kills() >= 1
    assert job.remove()


def test_kill_reaches_processes_that_left_the_session(host: CgroupHost) -> None:
    job = host.job("w-kill", 1 << 30, max_tasks=64)
    proc = _in_group(job.procs_files, """
        import time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(60)
            os._exit(0)
        print("ready", flush=True)
        time.sleep(60)
    """)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    assert len(job.members()) >= 2
    job.freeze()
    assert job.kill()
    proc.wait(timeout=10)
    assert job.members() == [] and job.remove()
