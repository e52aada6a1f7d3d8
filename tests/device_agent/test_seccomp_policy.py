"""The seccomp filter on its own: it covers threads that existed before it was loaded (TSYNC),
denies what it lists with EPERM, and leaves what CUDA, Triton and torch need alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from device_agent import seccomp_policy

pytest.importorskip("pyseccomp")
REPO = Path(__file__).resolve().parents[2]

# Runs in a child: a thread starts first and waits; the main thread sets no_new_privs and loads
# the filter; then the old thread tries what the filter denies.
_PRE_EXISTING_THREAD = textwrap.dedent("""
    import ctypes, errno, os, threading
    from device_agent import linux, seccomp_policy

    libc = ctypes.CDLL(None, use_errno=True)
    go, done = threading.Event(), threading.Event()
    seen = {}

    def old_thread():
        go.wait()
        # Harmless if they succeed (a private UTS namespace for this thread, a keyring id).
        for name, nr, args in (("unshare", 272, (0x04000000,)), ("keyctl", 250, (0, -3, 0))):
            ctypes.set_errno(0)
            r = libc.syscall(nr, *args)
            seen[name] = "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
        seen["state"] = linux.thread_states()
        done.set()

    threading.Thread(target=old_thread).start()
    linux.set_no_new_privs()
    seccomp_policy.load()
    go.set()
    done.wait()
    print(seen)
""")


def test_a_thread_started_before_the_filter_is_covered() -> None:
    out = subprocess.run([sys.executable, "-c", _PRE_EXISTING_THREAD], capture_output=True,
                         text=True, timeout=60, check=True, cwd=REPO).stdout
    seen = eval(out)  # noqa: S307 - our own child's repr
    assert {k: seen[k] for k in ("unshare", "keyctl")} == {"unshare": "EPERM",
                                                          "keyctl": "EPERM"}, seen
    assert len(seen["state"]) >= 2 and all(nnp == 1 and mode == 2
                                           for _, nnp, mode in seen["state"]), seen


def test_what_the_compilers_and_torch_need_still_works() -> None:
    """Threads (clone without namespace flags, clone3 falling back), fork/exec of a compiler-like
    child, executable memory and a socket: the filter must not break a worker's start."""
    code = textwrap.dedent("""
        import mmap, socket, subprocess, threading
        from device_agent import linux, seccomp_policy
        linux.set_no_new_privs()
        seccomp_policy.load()
        t = threading.Thread(target=lambda: None); t.start(); t.join()
        assert subprocess.run(["true"]).returncode == 0
        m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        a, b = socket.socketpair(); a.sendall(b"x"); assert b.recv(1) == b"x"
        print("fine")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=REPO)
    assert out.stdout.strip() == "fine", out.stderr


def test_every_listed_call_is_in_the_filter() -> None:
    """The table and the loaded program agree (a name that silently failed to resolve would
    leave that call allowed)."""
    import tempfile

    with tempfile.TemporaryFile("w+") as f:
        seccomp_policy.build().export_pfc(f)
        f.seek(0)
        program = f.read()
    for name, _ in seccomp_policy.DENIED:
        assert f'filter for syscall "{name}"' in program, name
    assert "action KILL_PROCESS" in program  # any other architecture


def test_only_unix_ip_and_netlink_sockets_open() -> None:
    """vsock reaches a VM's hypervisor whatever the network namespace; AF_ALG and the other
    rare families are kernel attack surface."""
    code = textwrap.dedent("""
        import errno, socket
        from device_agent import linux, seccomp_policy
        linux.set_no_new_privs()
        seccomp_policy.load()
        got = {}
        for name, family, kind in (("unix", 1, socket.SOCK_STREAM), ("inet", 2, socket.SOCK_DGRAM),
                                   ("inet6", 10, socket.SOCK_DGRAM), ("netlink", 16, socket.SOCK_RAW),
                                   ("vsock", 40, socket.SOCK_STREAM), ("alg", 38, socket.SOCK_SEQPACKET),
                                   ("packet", 17, socket.SOCK_RAW), ("bluetooth", 31, socket.SOCK_STREAM),
                                   ("beyond", 200, socket.SOCK_STREAM)):
            try:
                socket.socket(family, kind).close()
                got[name] = "ok"
            except OSError as exc:
                got[name] = errno.errorcode.get(exc.errno, str(exc.errno))
        print(got)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=REPO)
    got = eval(out.stdout)  # noqa: S307 - our own child's repr
    assert {k: got[k] for k in ("unix", "inet", "netlink")} == {
        "unix": "ok", "inet": "ok", "netlink": "ok"}, got
    assert got["inet6"] in ("ok", "EAFNOSUPPORT"), got  # a host may lack IPv6 itself
    assert all(got[k] == "EAFNOSUPPORT" for k in ("vsock", "alg", "packet", "bluetooth",
                                                    "beyond")), got
