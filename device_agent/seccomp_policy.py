"""The system-call filter every sandbox worker runs under (libseccomp, through ``pyseccomp``).

A deny-list: a kernel candidate needs what CUDA, Triton's compiler (ptxas, gcc for launchers),
torch and the profiler need — files, memory, threads, ioctls on the device, fork/exec of the
compilers — and nothing that reaches other processes, the kernel's namespaces and mounts, its
keyrings, BPF or io_uring. Denied calls fail with ``EPERM`` (``ENOSYS`` for ``clone3``, so libc
falls back to ``clone``, whose flags a filter can read), which keeps a candidate's error readable
instead of killing it mid-case.

Any other ABI kills the whole process: 32-bit ``int 0x80`` calls (``AUDIT_ARCH_I386``) and x32
calls (numbers with ``__X32_SYSCALL_BIT``) would otherwise reach syscalls the x86_64 rules never
see. The filter is loaded with ``SECCOMP_FILTER_FLAG_TSYNC`` so the threads CUDA and torch started
before it are covered too, and after ``no_new_privs``, which TSYNC then also sets on them.

What stays allowed, and why (docs/security.md lists it): ``ioctl`` (the CUDA driver talks to
/dev/nvidia* through it), ``mmap``/``mprotect`` with ``PROT_EXEC`` (Triton and CUDA load code),
``clone`` without namespace flags, ``fork``/``vfork``/``execve`` (ptxas and gcc), ``socket`` for
Unix, IP and netlink only (the network namespace has no interfaces; the result channel is a Unix
socket; vsock and the rare families fail with ``EAFNOSUPPORT``), ``perf_event_open``
(limited by ``perf_event_paranoid``; profilers may use it) and ``prctl``/``seccomp`` (they can
only narrow what the process may do).
"""

from __future__ import annotations

import errno
from typing import Any

from device_agent import linux

# (syscall, why a kernel candidate has no business with it)
DENIED: tuple[tuple[str, str], ...] = (
    ("ptrace", "reading or steering other processes"),
    ("process_vm_readv", "reading another process's memory"),
    ("process_vm_writev", "writing another process's memory"),
    ("pidfd_getfd", "stealing another process's descriptors"),
    ("kcmp", "probing other processes' resources"),
    ("mount", "changing the file system view"),
    ("umount2", "changing the file system view"),
    ("pivot_root", "changing the file system view"),
    ("chroot", "changing the file system view"),
    ("open_tree", "changing the file system view"),
    ("move_mount", "changing the file system view"),
    ("fsopen", "changing the file system view"),
    ("fsconfig", "changing the file system view"),
    ("fsmount", "changing the file system view"),
    ("fspick", "changing the file system view"),
    ("mount_setattr", "changing the file system view"),
    ("unshare", "new namespaces (user namespaces reopen the kernel's attack surface)"),
    ("setns", "joining other namespaces"),
    ("keyctl", "the kernel's keyrings"),
    ("add_key", "the kernel's keyrings"),
    ("request_key", "the kernel's keyrings"),
    ("bpf", "loading BPF programs"),
    ("io_uring_setup", "io_uring (bypasses seccomp for the operations it queues)"),
    ("io_uring_enter", "io_uring"),
    ("io_uring_register", "io_uring"),
    ("userfaultfd", "a common kernel-exploit primitive"),
    ("open_by_handle_at", "opening files by handle, past the mount view"),
    ("name_to_handle_at", "file handles"),
    ("kexec_load", "administering the machine"),
    ("kexec_file_load", "administering the machine"),
    ("init_module", "administering the machine"),
    ("finit_module", "administering the machine"),
    ("delete_module", "administering the machine"),
    ("reboot", "administering the machine"),
    ("swapon", "administering the machine"),
    ("swapoff", "administering the machine"),
    ("acct", "administering the machine"),
    ("quotactl", "administering the machine"),
    ("settimeofday", "administering the machine"),
    ("clock_settime", "administering the machine"),
    ("clock_adjtime", "administering the machine"),
    ("adjtimex", "administering the machine"),
    ("sethostname", "administering the machine"),
    ("setdomainname", "administering the machine"),
    ("syslog", "the kernel's log"),
    ("iopl", "port I/O"),
    ("ioperm", "port I/O"),
    ("modify_ldt", "16-bit segments, a common exploit primitive"),
    ("uselib", "obsolete loader call"),
    ("lookup_dcookie", "kernel profiling internals"),
    ("fanotify_init", "watching the whole file system"),
)
# Socket families a worker may open: Unix (the result channel, Triton's and torch's own), IP
# (nothing to reach: the network namespace has no interfaces) and netlink (libc asks it for
# interfaces). Every other family is refused: vsock reaches the hypervisor on a VM host whatever
# the namespace, and the rare families are kernel attack surface (AF_ALG, AF_RDS, AF_TIPC ...).
SOCKET_FAMILIES = {1: "AF_UNIX", 2: "AF_INET", 10: "AF_INET6", 16: "AF_NETLINK"}
_MAX_FAMILY = 64  # above AF_MAX (46 in Linux 6.x), with room for families yet to come
# clone() with any of these flags would make a namespace (clone's flags are its first argument).
CLONE_NAMESPACE_FLAGS = (linux.CLONE_NEWNS, linux.CLONE_NEWUTS, linux.CLONE_NEWIPC,
                         linux.CLONE_NEWUSER, linux.CLONE_NEWPID, linux.CLONE_NEWNET,
                         linux.CLONE_NEWCGROUP)


class SeccompUnavailable(RuntimeError):
    """libseccomp (or the kernel's seccomp) is missing: the sandbox cannot be applied."""


def _library() -> Any:
    try:
        import pyseccomp
    except (ImportError, RuntimeError) as exc:  # RuntimeError: libseccomp.so not found
        raise SeccompUnavailable(f"seccomp filter unavailable ({exc}); install libseccomp2 "
                                 "(Debian/Ubuntu) or libseccomp (RHEL)") from None
    return pyseccomp


def build() -> Any:
    """The filter, not yet loaded (``export_pfc`` shows it as text)."""
    sc = _library()
    f = sc.SyscallFilter(sc.ALLOW)
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    f.set_attr(sc.Attr.CTL_TSYNC, 1)
    for name, _ in DENIED:
        try:
            f.add_rule(sc.ERRNO(errno.EPERM), name)
        except (ValueError, OSError):  # not a syscall on this architecture
            continue
    for flag in CLONE_NAMESPACE_FLAGS:
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for family in range(_MAX_FAMILY):
        if family not in SOCKET_FAMILIES:
            for call in ("socket", "socketpair"):
                f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), call, sc.Arg(0, sc.EQ, family))
    f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socket", sc.Arg(0, sc.GE, _MAX_FAMILY))
    return f


def load() -> None:
    """Load the filter on every thread of this process (TSYNC). Needs ``no_new_privs`` first
    (or CAP_SYS_ADMIN); raises :class:`SeccompUnavailable` when it cannot be loaded."""
    try:
        build().load()
    except OSError as exc:
        raise SeccompUnavailable(f"seccomp filter could not be loaded: {exc}") from None
