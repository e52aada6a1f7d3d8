"""Limits on a sandbox worker, applied after warm-up and before any candidate code exists.

Agent side (:func:`prepare_workdir`, :func:`kill_uid`): each worker gets a fresh uid (when the
agent runs as root) that owns its private directory, so every process the candidate starts can
be found and killed afterwards, even one that left the process group.

Worker side (:func:`apply`), in this order:

1. a private network namespace (root only): the candidate has no network at all;
2. ``RLIMIT_FSIZE``: a stdout flood or a runaway file write fails (EFBIG; CPython ignores
   SIGXFSZ) instead of filling the disk;
3. ``RLIMIT_AS`` on platforms without a GPU driver (CUDA reserves huge address ranges): an
   allocation beyond the budget fails instead of invoking the OOM killer;
4. drop to the worker's uid (root only), then ``RLIMIT_NPROC`` — which root would ignore — so a
   fork bomb fails after a few processes. Without root there is no private uid, and a process
   limit would count the agent user's own processes too, so none is set (use a cgroup).

Settings travel in ``KGB_SANDBOX_*`` environment variables (they are not secrets).
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import resource
import signal
from dataclasses import dataclass
from pathlib import Path

CLONE_NEWNET = 0x40000000
UID_BASE = 610_000
UID_SPAN = 50_000
_uids = itertools.count()


@dataclass(frozen=True)
class SandboxSettings:
    drop_user: bool = True          # when the agent is root: run each worker as its own uid
    private_network: bool = True    # when root: a new, empty network namespace
    memory_bytes: int = 8 << 30     # RLIMIT_AS where the platform allows it (cpu)
    file_bytes: int = 64 << 20      # RLIMIT_FSIZE: biggest file (log included) a worker may write
    extra_processes: int = 32       # RLIMIT_NPROC headroom above the worker's own threads
    #                                (the compiler's processes and Triton's threads)

    def env(self, uid: int | None, limit_memory: bool) -> dict[str, str]:
        return {
            "KGB_SANDBOX_UID": "" if uid is None else str(uid),
            "KGB_SANDBOX_NET": "1" if self.private_network else "0",
            "KGB_SANDBOX_AS": str(self.memory_bytes) if limit_memory else "0",
            "KGB_SANDBOX_FSIZE": str(self.file_bytes),
            "KGB_SANDBOX_NPROC": str(self.extra_processes),
        }


def is_root() -> bool:
    return os.geteuid() == 0


def _claims_dir() -> Path:
    return Path(os.environ.get("KGB_UID_CLAIMS_DIR", "/tmp/kgb-uid-claims"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _claim(uid: int) -> bool:
    """Take ``uid`` for one worker of this agent: a claim file created exclusively, so agents
    sharing a host never hand out (and later kill) each other's uids. A dead agent's claims
    are taken over."""
    path = _claims_dir() / str(uid)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            try:
                owner = int(path.read_text().strip() or 0)
            except (OSError, ValueError):
                return False
            if owner and _alive(owner):
                return False
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # stale: the agent that claimed it is gone
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        if _owned_pids(uid):  # something still runs as this uid: leave it alone
            release_uid(uid)
            return False
        return True
    return False


def next_uid(settings: SandboxSettings) -> int | None:
    """A fresh uid for the next worker (None when not root or dropping is off), claimed until
    :func:`release_uid`."""
    if not (settings.drop_user and is_root()):
        return None
    _claims_dir().mkdir(mode=0o700, exist_ok=True)
    start = (os.getpid() * 7919 + next(_uids)) % UID_SPAN
    for k in range(UID_SPAN):
        uid = UID_BASE + (start + k) % UID_SPAN
        if _claim(uid):
            return uid
    raise RuntimeError(f"no free worker uid in {UID_BASE}..{UID_BASE + UID_SPAN - 1}")


def release_uid(uid: int | None) -> None:
    if uid is not None:
        with contextlib.suppress(FileNotFoundError):
            (_claims_dir() / str(uid)).unlink()


def prepare_workdir(path: Path, uid: int | None) -> None:
    """Make the worker's private directory, and the Triton cache inside it, its own."""
    cache = path / ".triton"
    cache.mkdir(exist_ok=True)
    if uid is not None:
        os.chown(path, uid, uid)
        os.chown(cache, uid, uid)
    os.chmod(path, 0o700)


def _owned_pids(uid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def signal_uid(uid: int | None, sig: int) -> int:
    """Send ``sig`` to every process owned by ``uid``; returns how many were signalled."""
    if uid is None:
        return 0
    sent = 0
    for pid in _owned_pids(uid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            sent += 1
    return sent


def kill_uid(uid: int | None) -> int:
    """SIGKILL every process owned by ``uid``; returns how many were signalled."""
    return signal_uid(uid, signal.SIGKILL)


# ---- worker side ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Applied:
    """What the worker actually got (reported to the agent in the ready message)."""

    uid: int
    private_network: bool
    memory_bytes: int
    file_bytes: int
    max_processes: int


def _env_int(name: str) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip().lstrip("-").isdigit() else 0


def _own_tasks() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def apply() -> Applied:
    """Apply the limits named in the environment to this (worker) process."""
    uid_s = os.environ.get("KGB_SANDBOX_UID", "")
    root = is_root()
    private_net = False
    if root and os.environ.get("KGB_SANDBOX_NET") == "1":
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWNET) == 0:
            private_net = True
    fsize = _env_int("KGB_SANDBOX_FSIZE")
    if fsize > 0:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    mem = _env_int("KGB_SANDBOX_AS")
    if mem > 0:
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    dropped = False
    if root and uid_s.isdigit():
        uid = int(uid_s)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        dropped = True
    nproc = 0
    extra = _env_int("KGB_SANDBOX_NPROC")
    if dropped and extra > 0:
        # The count is per uid; the uid is this worker's alone, so it counts only its own tasks.
        nproc = _own_tasks() + extra
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    return Applied(uid=os.getuid(), private_network=private_net, memory_bytes=mem,
                   file_bytes=fsize, max_processes=nproc)
