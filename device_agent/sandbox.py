"""The sandbox a worker runs in, built before any candidate code exists and holding without the
static policy (docs/security.md).

Two phases, both inside the worker process:

1. :func:`isolate`, first thing after the forkserver's fork — while the process is still
   single-threaded (namespaces and ``no_new_privs`` act per thread) and still root:

   - every inherited descriptor is closed but the result channel (the forkserver's "alive" pipe
     and the resource tracker's pipe lead to trusted root processes); stdin is /dev/null,
     stdout/stderr the log; a new session;
   - ``sys.path`` is what the agent vetted (:func:`trusted_sys_path`), the working directory ``/``;
   - the process joins its job cgroup (task and memory limits, freeze, kill);
   - ``no_new_privs``: setuid bits and file capabilities are void from here on;
   - new mount, PID, network, IPC and UTS namespaces. Every mount is read-only; /tmp, /var/tmp,
     /dev/shm and /run are fresh private tmpfs (they vanish with the namespace); the agent's
     directory is bound back read-only, and the root-owned caches a worker's start writes
     (Triton's driver helpers) read-write — candidates cannot write them, being another uid;
   - a fork: the parent stays behind as a shim (it is what the agent's handle waits on, and it
     dies with the forkserver, i.e. with the agent); the child is PID 1 of the new PID namespace,
     mounts its own /proc and goes on as the worker. When PID 1 exits, the kernel kills every
     process left in the namespace, whatever uid it has or claims.

2. :func:`lock_down`, after the worker has initialised its device and warmed up (CUDA and torch
   have started threads by then): the file-size limit, on ``cpu`` an address-space limit, the
   private uid, a per-uid process limit, the seccomp filter on every thread at once
   (``device_agent.seccomp_policy``), and a check that every thread carries ``no_new_privs``
   and the filter.

``--unsafe-sandbox`` (the only way a non-root agent runs candidates) keeps what needs no
privilege — descriptors, ``sys.path``, ``no_new_privs``, limits, seccomp — and drops the uid,
the namespaces and the cgroup: for trusted code only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import select
import signal
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from device_agent import linux

log = logging.getLogger(__name__)

# Fresh, empty and private in every worker: the world-writable scratch places, and /run, where
# host daemons keep their Unix sockets (path-based sockets ignore network namespaces).
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run")
PRIVATE_HOME = "/tmp/home"  # HOME and the Triton cache of an isolated worker (private tmpfs)
ADDRESS_SPACE_HEADROOM = 8 << 30  # RLIMIT_AS above the memory limit: reservations, not use


@dataclass(frozen=True)
class SandboxSettings:
    """What the operator chose (``kgb agent serve`` flags)."""

    isolate: bool = True            # False: --unsafe-sandbox (trusted code only)
    memory_bytes: int = 8 << 30     # the job cgroup's memory limit (and RLIMIT_AS base on cpu)
    file_bytes: int = 64 << 20      # RLIMIT_FSIZE: biggest file (log included) a worker may write
    extra_processes: int = 32       # tasks above the warm worker's own (compilers, Triton threads)
    tmp_bytes: int = 1 << 30        # size of each private tmpfs (PRIVATE_DIRS)


@dataclass(frozen=True)
class SandboxPlan:
    """Everything one worker needs to build its sandbox, decided by the agent."""

    isolate: bool
    uid: int | None                 # the worker's private uid (None: the agent's own)
    sys_path: tuple[str, ...]       # vetted by the agent: nothing on it is candidate-writable
    cgroup_procs: tuple[str, ...]   # cgroup.procs files the worker joins
    agent_root: str                 # the agent's directory (candidate file, launchers, caches)
    writable: tuple[str, ...]       # root-owned caches the worker's start writes before lock_down
    home: str                       # HOME; the private Triton cache lives in it
    address_space_bytes: int        # RLIMIT_AS (0: none; CUDA reserves huge ranges)
    file_bytes: int
    extra_processes: int
    tmp_bytes: int


@dataclass(frozen=True)
class Applied:
    """What the worker actually got (reported in its ready message, logged by the agent)."""

    uid: int
    namespaces: bool
    no_new_privs: bool
    seccomp: bool
    cgroup: bool
    address_space_bytes: int
    file_bytes: int
    max_processes: int


def is_root() -> bool:
    return os.geteuid() == 0


# ---- agent side ---------------------------------------------------------------------------

def _writable_by_others(path: str, *, entry: bool) -> bool:
    """Whether someone other than root or this user may change what ``path`` holds. A sticky
    ancestor (/tmp) is fine: others cannot rename or remove what they do not own there."""
    st = os.stat(path)
    if st.st_uid not in (0, os.geteuid()):
        return True
    if not entry and st.st_mode & stat.S_ISVTX:
        return False
    if st.st_mode & stat.S_IWOTH:
        return True
    return bool(st.st_mode & stat.S_IWGRP) and st.st_gid not in (0, os.getegid())


def path_is_trusted(path: str) -> bool:
    """``path`` and every directory above it are writable by no one but root and this user."""
    p = os.path.realpath(path)
    first = True
    while True:
        if _writable_by_others(p, entry=first):
            return False
        if p == "/":
            return True
        first = False
        p = os.path.dirname(p)


def trusted_sys_path(entries: list[str] | None = None) -> tuple[str, ...]:
    """The import path for the forkserver and its workers: ``entries`` (default ``sys.path``)
    without relative entries (``''`` is the working directory), missing ones (someone could
    create them later) and any directory that a user other than root or this one can write
    (the agent's working directory, when started from /tmp) — the forkserver runs as root, and
    importing from such a place would run another user's code as root. Dropped entries are
    logged: a module that only lived there fails to import, loudly."""
    kept: list[str] = []
    for entry in sys.path if entries is None else entries:
        if entry in kept or not os.path.isabs(entry) or not os.path.exists(entry):
            continue
        if path_is_trusted(entry):
            kept.append(entry)
        else:
            log.warning("not importing from %s: users other than root or uid %d can write it",
                        entry, os.geteuid())
    return tuple(kept)


def namespace_members(pid: int) -> list[int]:
    """Every process in the PID namespace of ``pid`` (a worker's PID 1), found through /proc:
    a process cannot leave its namespace, whatever uid it has or claims."""
    try:
        target = os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return []
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/ns/pid") == target:
                    members.append(int(entry))
    return members


def child_of(pid: int) -> int | None:
    """The one child of ``pid`` (a worker's shim -> the worker itself), or None."""
    with contextlib.suppress(OSError, ValueError):
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children:
            return int(children[0])
    return None


# ---- worker side: phase 1 -----------------------------------------------------------------

def _close_inherited(keep_fd: int) -> None:
    """Close every descriptor but stdio and ``keep_fd``, and forget the ones multiprocessing
    remembers (so nothing later writes to a number that now means something else)."""
    os.closerange(3, keep_fd)
    os.closerange(keep_fd + 1, 1 << 20)
    from multiprocessing import forkserver, resource_tracker

    with contextlib.suppress(AttributeError):
        resource_tracker._resource_tracker._fd = None  # type: ignore[attr-defined]
    with contextlib.suppress(AttributeError):
        forkserver._forkserver._forkserver_alive_fd = None  # type: ignore[attr-defined]


def _redirect_stdio(log_path: str) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _join_cgroups(procs_files: tuple[str, ...]) -> None:
    for path in procs_files:
        with open(path, "w", encoding="ascii") as f:
            f.write(str(os.getpid()))


def _hidden_by_private_dirs(paths: list[str]) -> list[str]:
    """Those of ``paths`` that a private tmpfs would hide (an agent or a checkout under /tmp),
    outermost only."""
    spellings = {q for p in paths for q in (os.path.normpath(p), os.path.realpath(p))}
    hidden = sorted(q for q in spellings if any(q.startswith(d + "/") for d in PRIVATE_DIRS))
    return [p for i, p in enumerate(hidden)
            if not any(p.startswith(q + "/") for q in hidden[:i])]


def _private_mounts(plan: SandboxPlan) -> None:
    """Read-only everything, private writable scratch, and what the worker reads from under the
    scratch places (the agent's directory, an install or checkout under /tmp) bound back
    read-only."""
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)  # nothing leaks to the host
    rebind = _hidden_by_private_dirs([plan.agent_root, *plan.sys_path])
    # Opened in this namespace before the private tmpfs hides them, to bind them back below.
    kept = [os.open(p, os.O_PATH | os.O_DIRECTORY) for p in rebind]
    try:
        linux.make_tree_read_only("/")
        for d in PRIVATE_DIRS:
            if os.path.isdir(d) and not os.path.islink(d):
                linux.mount("tmpfs", d, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV,
                            f"mode=1777,size={plan.tmp_bytes}")
        for path, fd in zip(rebind, kept, strict=True):
            os.makedirs(path, mode=0o755, exist_ok=True)
            linux.mount(f"/proc/self/fd/{fd}", path, None,
                        linux.MS_BIND | linux.MS_REC)  # read-only, like its source
    finally:
        for fd in kept:
            os.close(fd)
    for path in plan.writable:
        linux.mount(path, path, None, linux.MS_BIND)
        linux.mount(None, path, None, linux.MS_BIND | linux.MS_REMOUNT)  # read-write again


def _make_home(plan: SandboxPlan) -> None:
    for d in (plan.home, os.path.join(plan.home, ".triton")):
        os.makedirs(d, mode=0o700, exist_ok=True)
        if plan.uid is not None:
            os.chown(d, plan.uid, plan.uid)


def _shim(child: int) -> NoReturn:
    """The worker's stand-in outside its PID namespace: wait, then leave as the worker left."""
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _become_pid_one(keep_fd: int) -> None:
    """Fork into the new PID namespace; returns in the child (PID 1) only."""
    alive_r, alive_w = os.pipe()
    child = os.fork()
    if child:
        os.close(keep_fd)  # only the worker holds the channel: its death is the agent's EOF
        os.close(alive_r)
        _shim(child)
    os.close(alive_w)
    linux.die_with_parent(signal.SIGKILL)
    if select.select([alive_r], [], [], 0)[0]:  # the shim died before the line above
        os._exit(1)
    os.close(alive_r)
    linux.mount("proc", "/proc", "proc", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)


def isolate(plan: SandboxPlan, keep_fd: int, log_path: str) -> None:
    """Phase 1 (see the module docstring). Returns in the process that serves the candidate."""
    linux.die_with_parent(signal.SIGKILL)  # the forkserver goes when the agent goes
    os.setsid()
    _close_inherited(keep_fd)
    _redirect_stdio(log_path)
    sys.path[:] = plan.sys_path
    os.chdir("/")
    tasks = len(os.listdir("/proc/self/task"))
    if tasks != 1:
        raise RuntimeError(f"the sandbox needs a single-threaded process, found {tasks} threads")
    _join_cgroups(plan.cgroup_procs)
    linux.set_no_new_privs()
    if not plan.isolate:
        _make_home(plan)
        return
    linux.unshare(linux.CLONE_NEWNS | linux.CLONE_NEWPID | linux.CLONE_NEWNET
                  | linux.CLONE_NEWIPC | linux.CLONE_NEWUTS)
    _private_mounts(plan)
    _make_home(plan)
    _become_pid_one(keep_fd)


# ---- worker side: phase 2 -----------------------------------------------------------------

def lock_down(plan: SandboxPlan) -> Applied:
    """Phase 2: limits, the private uid and the seccomp filter, then a check of every thread."""
    from device_agent import seccomp_policy

    if plan.file_bytes > 0:
        resource.setrlimit(resource.RLIMIT_FSIZE, (plan.file_bytes, plan.file_bytes))
    if plan.address_space_bytes > 0:
        limit = plan.address_space_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    nproc = 0
    if plan.uid is not None:
        os.setgroups([])
        os.setgid(plan.uid)
        os.setuid(plan.uid)  # every thread (glibc), capabilities gone
        if plan.isolate:
            linux.die_with_parent(signal.SIGKILL)  # a change of uid cleared it
        # Counted per uid, and the uid is this worker's alone: its own tasks plus headroom.
        nproc = len(os.listdir("/proc/self/task")) + plan.extra_processes
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    seccomp_policy.load()
    bare = [tid for tid, nnp, mode in linux.thread_states() if nnp != 1 or mode != 2]
    if bare:
        raise RuntimeError(f"threads {bare} lack no_new_privs or the seccomp filter")
    return Applied(uid=os.getuid(), namespaces=plan.isolate, no_new_privs=True, seccomp=True,
                   cgroup=bool(plan.cgroup_procs), address_space_bytes=plan.address_space_bytes,
                   file_bytes=plan.file_bytes, max_processes=nproc)
