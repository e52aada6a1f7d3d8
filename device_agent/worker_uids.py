"""Private uids for sandbox workers (agent side, root only).

Each worker runs as a uid of its own (610000 + k) that owns nothing on the host, so it cannot
read another candidate's files, signal another worker or the agent, or share a per-uid limit with
anyone. Agents sharing a host claim uids exclusively through files in a root-only directory, so
no two workers ever hold the same uid; a dead agent's claims are taken over.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from pathlib import Path

UID_BASE = 610_000
UID_SPAN = 50_000
_uids = itertools.count()


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


def owned_pids(uid: int) -> list[int]:
    """Processes whose /proc entry belongs to ``uid`` (their effective uid)."""
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
        if owned_pids(uid):  # something still runs as this uid: leave it alone
            release_uid(uid)
            return False
        return True
    return False


def next_uid() -> int:
    """A fresh uid for the next worker, claimed until :func:`release_uid`."""
    claims = _claims_dir()
    claims.mkdir(mode=0o700, exist_ok=True)
    if claims.stat().st_uid != os.geteuid() or claims.stat().st_mode & 0o022:
        raise RuntimeError(f"{claims} must belong to this user and be writable by no one else")
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
