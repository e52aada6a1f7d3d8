"""Per-job control groups: every process of a sandbox worker in one group, with limits on its
tasks and memory, frozen and killed as a group whatever uid a process claims.

The agent makes one parent group per hierarchy it uses (``kgb-<pid>-<hex>`` below its own group)
and one child per worker. The worker joins its child itself, as its first act after the fork and
before any untrusted code exists; its descendants inherit the membership and cannot leave it
(moving a process needs write access to another group's ``cgroup.procs``, which only root has,
and the worker's mount namespace sees /sys read-only).

Three roles, each served by whichever hierarchy has it:

- ``pids``: ``pids.max`` (a fork bomb fails with EAGAIN) — cgroup v2, or the v1 ``pids`` mount;
- ``memory``: ``memory.max`` / ``memory.limit_in_bytes`` (resident memory, which works on GPU
  hosts where CUDA's address-space reservations make ``RLIMIT_AS`` useless) and the OOM-kill count;
- ``control``: freeze and kill — v2's ``cgroup.freeze``/``cgroup.kill`` (core files, present even
  in a v2 hierarchy without controllers), else the v1 ``freezer`` plus a kill of every member.

On the H200 host all three are cgroup v2; on the development machine pids and memory are v1 and
control is v2's unified hierarchy. A host with no writable hierarchy for a role cannot sandbox
untrusted code: :meth:`CgroupHost.create` raises :class:`CgroupUnavailable`, saying what is missing.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

ROLES = ("pids", "memory", "control")
_PREFIX = "kgb-"


class CgroupUnavailable(RuntimeError):
    """No writable cgroup hierarchy serves a role the sandbox needs."""


@dataclass(frozen=True)
class _Hierarchy:
    mount: Path
    version: int                   # 1 or 2
    controllers: frozenset[str]    # v1: the mount's own; v2: those available at our group
    own: Path                      # this process's group, as a directory of the mount


def _mounts() -> list[tuple[Path, int, frozenset[str]]]:
    """(mount point, version, v1 controllers) of every cgroup file system mounted here."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            fields, post_fields = pre.split(), post.split()
            if len(post_fields) < 3 or post_fields[0] not in ("cgroup", "cgroup2"):
                continue
            options = set(post_fields[2].split(","))
            found.append((Path(fields[4]), 1 if post_fields[0] == "cgroup" else 2,
                          frozenset(options & {"pids", "memory", "freezer"})))
    return found


def _own_groups() -> tuple[dict[str, str], str | None]:
    """This process's group per v1 controller, and its v2 group (None without v2)."""
    v1: dict[str, str] = {}
    v2: str | None = None
    with open("/proc/self/cgroup", encoding="utf-8") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controllers == "":
                v2 = path
            for c in controllers.split(","):
                v1[c] = path
    return v1, v2


def _hierarchies() -> list[_Hierarchy]:
    v1_own, v2_own = _own_groups()
    found = []
    for mount, version, controllers in _mounts():
        if version == 2:
            if v2_own is None:
                continue
            own = mount / v2_own.lstrip("/")
            with contextlib.suppress(OSError):
                controllers = frozenset((own / "cgroup.controllers").read_text().split())
        else:
            names = [c for c in controllers if c in v1_own]
            if not names:
                continue
            own = mount / v1_own[names[0]].lstrip("/")
        if own.is_dir() and os.access(own, os.W_OK):
            found.append(_Hierarchy(mount, version, controllers, own))
    return found


def _write(path: Path, value: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(value)


def _enable_v2(h: _Hierarchy, wanted: set[str]) -> bool:
    """Make ``wanted`` controllers available to groups made below ``h.own``. A v2 group with
    processes cannot hand controllers down (except the root), so this process first moves into
    a leaf of its own when it must (systemd: ``Delegate=yes``)."""
    control = h.own / "cgroup.subtree_control"
    try:
        if wanted <= set(control.read_text().split()):
            return True
        _write(control, " ".join(f"+{c}" for c in sorted(wanted)))
        return True
    except OSError as exc:
        if exc.errno != errno.EBUSY or h.own == h.mount:
            return False
    leaf = h.own / f"{_PREFIX}agent-{os.getpid()}"
    try:
        leaf.mkdir(exist_ok=True)
        _write(leaf / "cgroup.procs", str(os.getpid()))
        _write(control, " ".join(f"+{c}" for c in sorted(wanted)))
    except OSError:
        return False  # other processes share our group: use v1 or fail
    log.info("moved the agent into %s to delegate %s to its workers", leaf, sorted(wanted))
    return True


def _pick_roles(hierarchies: list[_Hierarchy]) -> dict[str, _Hierarchy]:
    roles: dict[str, _Hierarchy] = {}
    v2 = next((h for h in hierarchies if h.version == 2), None)
    if v2 is not None:
        wanted = {"pids", "memory"} & v2.controllers
        if wanted and _enable_v2(v2, wanted):
            for c in wanted:
                roles[c] = v2
        roles["control"] = v2
    for h in hierarchies:
        if h.version == 1:
            for c in ("pids", "memory"):
                if c in h.controllers:
                    roles.setdefault(c, h)
            if "freezer" in h.controllers:
                roles.setdefault("control", h)
    return roles


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_tree(path: Path) -> bool:
    """rmdir a group and its children (groups only disappear once empty)."""
    for child in sorted((p for p in path.iterdir() if p.is_dir()), reverse=True):
        _remove_tree(child)
    try:
        path.rmdir()
    except OSError:
        return False
    return True


def _remove_stale(h: _Hierarchy) -> None:
    """Parent groups of agents that died without cleaning up (best effort)."""
    with contextlib.suppress(OSError):
        for d in h.own.iterdir():
            parts = d.name.split("-")
            if (d.is_dir() and d.name.startswith(_PREFIX) and len(parts) == 3
                    and parts[1].isdigit() and not _alive(int(parts[1]))):
                _remove_tree(d)


class CgroupHost:
    """The agent's parent groups, one per hierarchy in use; :meth:`job` makes a worker's."""

    def __init__(self, parents: dict[str, tuple[Path, int]]) -> None:
        self.parents = parents  # role -> (parent group directory, cgroup version)

    @classmethod
    def create(cls) -> CgroupHost:
        hierarchies = _hierarchies()
        roles = _pick_roles(hierarchies)
        missing = [r for r in ROLES if r not in roles]
        if missing:
            raise CgroupUnavailable(
                f"no writable cgroup hierarchy for {', '.join(missing)} (found: "
                + (", ".join(f"{h.mount} v{h.version} {sorted(h.controllers)}"
                             for h in hierarchies) or "none")
                + "); run the agent as root with cgroups it may write (systemd: Delegate=yes; "
                  "containers: a writable cgroup namespace), or pass --unsafe-sandbox for "
                  "trusted code only")
        name = f"{_PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
        parents: dict[str, tuple[Path, int]] = {}
        made: dict[Path, Path] = {}
        for role, h in roles.items():
            if h.own not in made:
                _remove_stale(h)
                parent = h.own / name
                parent.mkdir()
                if h.version == 2 and {"pids", "memory"} & {r for r, x in roles.items() if x is h}:
                    wanted = sorted(r for r, x in roles.items() if x is h and r in ("pids", "memory"))
                    _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
                made[h.own] = parent
            parents[role] = (made[h.own], h.version)
        return cls(parents)

    def job(self, name: str, memory_bytes: int, max_tasks: int) -> JobCgroup:
        """A worker's group, limits set, empty until the worker joins it."""
        dirs: dict[str, tuple[Path, int]] = {}
        for role, (parent, version) in self.parents.items():
            d = parent / name
            d.mkdir(exist_ok=True)
            dirs[role] = (d, version)
        job = JobCgroup(dirs)
        job.limit_tasks(max_tasks)
        job.limit_memory(memory_bytes)
        return job

    def close(self) -> None:
        for parent in {p for p, _ in self.parents.values()}:
            if not _remove_tree(parent):
                log.warning("cgroup %s still has processes; left in place", parent)


class JobCgroup:
    """One worker's groups (one directory per hierarchy in use)."""

    def __init__(self, dirs: dict[str, tuple[Path, int]]) -> None:
        self.dirs = dirs

    @property
    def procs_files(self) -> tuple[str, ...]:
        """What the worker writes its pid into to join (one per distinct directory)."""
        return tuple(sorted({str(d / "cgroup.procs") for d, _ in self.dirs.values()}))

    def _file(self, role: str, v2: str, v1: str) -> Path:
        d, version = self.dirs[role]
        return d / (v2 if version == 2 else v1)

    def limit_tasks(self, n: int) -> None:
        _write(self._file("pids", "pids.max", "pids.max"), str(n))

    def tasks(self) -> int:
        return int(self._file("pids", "pids.current", "pids.current").read_text())

    def limit_memory(self, nbytes: int) -> None:
        d, version = self.dirs["memory"]
        if version == 2:
            _write(d / "memory.max", str(nbytes))
            if (d / "memory.swap.max").exists():
                _write(d / "memory.swap.max", "0")  # the limit is the limit, not limit + swap
        else:
            _write(d / "memory.limit_in_bytes", str(nbytes))
            if (d / "memory.memsw.limit_in_bytes").exists():
                _write(d / "memory.memsw.limit_in_bytes", str(nbytes))

    def oom_kills(self) -> int:
        """How many of the group's processes the kernel killed for memory."""
        with contextlib.suppress(OSError, ValueError):
            text = self._file("memory", "memory.events", "memory.oom_control").read_text()
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def members(self) -> list[int]:
        d, _ = self.dirs["control"]
        with contextlib.suppress(OSError):
            return [int(p) for p in (d / "cgroup.procs").read_text().split()]
        return []

    def freeze(self, frozen: bool = True) -> None:
        """Stop (or resume) every process of the job at once."""
        d, version = self.dirs["control"]
        with contextlib.suppress(OSError):
            if version == 2:
                _write(d / "cgroup.freeze", "1" if frozen else "0")
            else:
                _write(d / "freezer.state", "FROZEN" if frozen else "THAWED")

    def kill(self, timeout: float = 5.0) -> bool:
        """SIGKILL every process of the job; True once the group is empty."""
        d, version = self.dirs["control"]
        kill_file = d / "cgroup.kill"
        end = time.monotonic() + timeout
        while True:
            members = self.members()
            if not members:
                return True
            if version == 2 and kill_file.exists():
                with contextlib.suppress(OSError):
                    _write(kill_file, "1")
            else:  # v1: no atomic kill; frozen members cannot fork while being killed
                self.freeze(True)
                for pid in members:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                self.freeze(False)  # v1 freezer: killed tasks die only once thawed
            if time.monotonic() >= end:
                return not self.members()
            time.sleep(0.01)

    def remove(self) -> bool:
        """Delete the job's groups (after :meth:`kill`); False if a process is still there."""
        ok = True
        for d, _ in self.dirs.values():
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
            else:
                ok = False
        return ok
