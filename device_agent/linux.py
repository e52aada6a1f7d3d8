"""The few Linux system calls the sandbox needs that Python 3.10/3.11 does not wrap.

``os.unshare`` arrived in Python 3.12 and ``mount``/``mount_setattr``/``prctl`` are not in the
standard library at all, so they go through libc with ctypes. Each wrapper raises ``OSError``
with the call's name, so a host that lacks a feature fails a worker's start loudly.
"""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWCGROUP = 0x02000000
NAMESPACE_FLAGS = (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
                   | CLONE_NEWNET | CLONE_NEWCGROUP)

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39

_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_MOUNT_ATTR_RDONLY = 0x1
_SYS_MOUNT_SETATTR = 442  # the same number on x86_64 and aarch64

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                        ctypes.c_void_p)
_libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                        ctypes.c_ulong)


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    _check(_libc.mount(source.encode() if source else None, target.encode(),
                       fstype.encode() if fstype else None, flags,
                       ctypes.c_char_p(data.encode()) if data else None),
           f"mount {target}")


def make_tree_read_only(path: str = "/") -> None:
    """Every mount at and below ``path`` read-only, in this mount namespace only
    (``mount_setattr`` with ``AT_RECURSIVE``, Linux 5.12+)."""
    attr = _MountAttr(_MOUNT_ATTR_RDONLY, 0, 0, 0)
    _check(_libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, path.encode(), _AT_RECURSIVE,
                         ctypes.byref(attr), ctypes.sizeof(attr)),
           f"mount_setattr({path}, read-only, recursive)")


def prctl(option: int, arg: int = 0) -> int:
    result = int(_libc.prctl(option, arg, 0, 0, 0))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")
    return result


def set_no_new_privs() -> None:
    """execve can no longer grant privileges: setuid/setgid bits and file capabilities are
    ignored for this thread and everything it starts afterwards."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def die_with_parent(sig: int) -> None:
    """``sig`` when the parent exits. Cleared by a change of credentials: set again after
    dropping privileges."""
    prctl(PR_SET_PDEATHSIG, sig)


def thread_states(pid: int | str = "self") -> list[tuple[int, int, int]]:
    """(tid, NoNewPrivs, Seccomp mode) of every thread of ``pid``, from /proc. Read as bytes:
    after a worker drops privileges it may not import another codec."""
    states = []
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        fields: dict[bytes, bytes] = {}
        try:
            with open(f"{base}/{tid}/status", "rb") as f:
                for line in f:
                    key, _, value = line.partition(b":")
                    fields[key] = value.strip()
        except OSError:
            continue  # the thread ended meanwhile
        states.append((int(tid), int(fields.get(b"NoNewPrivs", b"0")),
                       int(fields.get(b"Seccomp", b"0"))))
    return states
