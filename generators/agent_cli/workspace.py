"""A throw-away workspace for one agent-CLI trajectory: its directory, its files, its uid.

Layout (``root/<name>/``, mode 0700, owned by the workspace's uid)::

    PROMPT.md     the problem, and how to work here
    kernel.py     the candidate: whatever it holds when the CLI ends is scored
    bin/verify    ``verify [FILE]``: FILE (default kernel.py) judged on the public cases
    home/ tmp/    the CLI's HOME and TMPDIR (its config and caches stay inside)

**Isolation.** Where the coordinator runs as root, each live workspace gets a **private uid**
(:class:`UidLease`: one of ``UID_RANGE``, held with an exclusive lock on a file under
``lock_dir`` so concurrent coordinators on one host never share one); the CLI runs as that uid
with no supplementary groups, so it can read neither the store (created 0600), the agent's
secret (0600 under root's home), nor another workspace (0700, another uid). The root directory
is 0711: a uid can reach its own workspace but not list the others. Its environment is built
from nothing (:func:`cli_environment`): the names the spec passes, and the proxy's addresses
and per-trajectory tokens. When the CLI is done every process of its uid is killed
(:func:`kill_uid`), whatever process group it moved to, then the directory is removed. Not
root: the CLI runs as the coordinator's own uid (the directory and the environment still apply;
the uid isolation does not, and :attr:`Workspace.private_uid` says so).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path

UID_RANGE = range(61000, 61512)
PLACEHOLDER = "# kernel.py: replace this file with your complete Triton kernel module.\n"

VERIFY_SCRIPT = '''#!/usr/bin/env python3
"""verify [FILE]: judge FILE (default kernel.py) on the public cases; exit 0 only on PASSED."""
import os, sys, urllib.error, urllib.request
path = sys.argv[1] if len(sys.argv) > 1 else "kernel.py"
if len(sys.argv) > 2 or path in ("-h", "--help"):
    print(__doc__.strip()); sys.exit(2)
try:
    with open(path, "rb") as f:
        source = f.read()
except OSError as exc:
    print(f"verify: cannot read {path}: {exc.strerror}"); sys.exit(2)
req = urllib.request.Request(os.environ["KGB_VERIFY_URL"], data=source, method="POST",
                             headers={"authorization": "Bearer " + os.environ["KGB_VERIFY_TOKEN"],
                                      "x-kgb-file": os.path.basename(path)})
try:
    with urllib.request.urlopen(req, timeout=None) as reply:
        status, text = reply.headers.get("x-kgb-status", ""), reply.read().decode()
except urllib.error.HTTPError as exc:
    status, text = exc.headers.get("x-kgb-status", "") or "ERROR", exc.read().decode()
print(text)
sys.exit(0 if status == "PASSED" else 1)
'''


class UidLease:
    """One uid of ``UID_RANGE`` held by this process (a lock file per uid) until released."""

    def __init__(self, lock_dir: Path) -> None:
        lock_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for uid in UID_RANGE:
            fd = os.open(lock_dir / f"uid-{uid}.lock", os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.uid, self._fd = uid, fd
            return
        raise RuntimeError(f"no free uid in {UID_RANGE.start}..{UID_RANGE.stop - 1} for an agent "
                           "workspace: too many CLIs on this host")

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@dataclass
class Workspace:
    """A workspace directory and the uid its CLI runs as (see the module doc)."""

    path: Path
    uid: int
    gid: int
    lease: UidLease | None

    @property
    def private_uid(self) -> bool:
        return self.lease is not None

    @property
    def kernel(self) -> Path:
        return self.path / "kernel.py"

    @classmethod
    def create(cls, root: Path, name: str, prompt: str) -> Workspace:
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o711)
        if os.geteuid() == 0:
            _check_reachable(root)
        lease = UidLease(root / ".uids") if os.geteuid() == 0 else None
        uid = lease.uid if lease is not None else os.getuid()
        gid = uid if lease is not None else os.getgid()
        path = root / name
        shutil.rmtree(path, ignore_errors=True)
        for d in (path, path / "bin", path / "home", path / "tmp"):
            d.mkdir(mode=0o700)
        (path / "PROMPT.md").write_text(prompt)
        (path / "kernel.py").write_text(PLACEHOLDER)
        verify = path / "bin" / "verify"
        verify.write_text(VERIFY_SCRIPT)
        verify.chmod(0o755)
        if lease is not None:
            for p in (path, *path.rglob("*")):
                os.lchown(p, uid, gid)
        return cls(path, uid, gid, lease)

    def read_kernel(self, limit: int) -> str | None:
        """kernel.py as the CLI left it; None when it is missing, unchanged, empty, not a
        regular file, too big or not text."""
        try:
            st = os.lstat(self.kernel)
            if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
                return None
            text = self.kernel.read_bytes().decode()
        except (OSError, UnicodeDecodeError):
            return None
        return None if not text.strip() or text == PLACEHOLDER else text

    def remove(self) -> None:
        """Kill whatever the uid still runs, remove the directory, give the uid back."""
        if self.lease is not None:
            kill_uid(self.uid)
        shutil.rmtree(self.path, ignore_errors=True)
        if self.lease is not None:
            self.lease.release()


def _check_reachable(root: Path) -> None:
    """Every directory above the workspaces must let other uids pass (o+x)."""
    for d in (root.resolve(), *root.resolve().parents):
        if not os.stat(d).st_mode & stat.S_IXOTH:
            raise RuntimeError(f"agent-cli workspaces under {root}: {d} is closed to other users "
                               "(no o+x), so a workspace's private uid could not reach its own "
                               "directory; choose another workspace_root")


def cli_environment(ws: Workspace, passed: dict[str, str], proxy_url: str, model_token: str,
                    verify_token: str) -> dict[str, str]:
    """The CLI's whole environment: nothing of the coordinator's but the ``passed`` names."""
    env = {"PATH": f"{ws.path / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(ws.path / "home"),
           "TMPDIR": str(ws.path / "tmp"), "LANG": "C.UTF-8", "TERM": "dumb", **passed}
    env.update({
        "ANTHROPIC_BASE_URL": proxy_url, "ANTHROPIC_API_KEY": model_token,
        "OPENAI_BASE_URL": f"{proxy_url}/v1", "OPENAI_API_BASE": f"{proxy_url}/v1",
        "OPENAI_API_KEY": model_token,
        "KGB_VERIFY_URL": f"{proxy_url}/kgb/verify", "KGB_VERIFY_TOKEN": verify_token,
        "KGB_WORKSPACE": str(ws.path)})
    return env


RESERVED_ENV = ("PATH", "HOME", "TMPDIR", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY",
                "OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_API_KEY", "KGB_VERIFY_URL",
                "KGB_VERIFY_TOKEN", "KGB_WORKSPACE")


def kill_uid(uid: int, rounds: int = 20) -> int:
    """SIGKILL every process whose real uid is ``uid`` until none is left; how many were seen."""
    seen: set[int] = set()
    for _ in range(rounds):
        pids = _pids_of(uid)
        if not pids:
            break
        for pid in pids:
            seen.add(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    return len(seen)


def _pids_of(uid: int) -> list[int]:
    """Live processes of ``uid`` (a zombie has ended: it waits for a parent to reap it)."""
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.stat(entry.path).st_uid != uid:
                    continue
                with open(f"{entry.path}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in (b"Z", b"X"):
                out.append(int(entry.name))
    return out


def default_root() -> Path:
    """Where workspaces go unless the method says: ``$KGB_AGENT_WORKSPACES`` or a directory
    under the system's temp directory."""
    env = os.environ.get("KGB_AGENT_WORKSPACES")
    if env:
        return Path(env)
    return Path("/tmp" if sys.platform != "win32" else os.environ.get("TEMP", ".")) / "kgb-agent-cli"
