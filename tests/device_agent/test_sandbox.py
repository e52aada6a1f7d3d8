"""The sandbox against a hostile candidate, with the static policy off (issue #19).

Each test attacks one guarantee through a real agent, as a candidate would, and failed on the
code before the sandbox had it: writable import paths and scratch places, inherited descriptors
of root processes, a setuid exec outliving the job, system calls and ABIs a kernel has no use
for, memory beyond the job's limit, and dead warm workers charged to candidates. After every
attack the agent keeps serving and the next honest candidate passes.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from protos.client import AgentClient
from protos.records import Status, Verdict
from tests.device_agent.test_agent import ADD, evaluate, fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs a root agent")
REPO = Path(__file__).resolve().parents[2]
# The platform the attacks run on: cpu here and in CI; `cuda` on a GPU host (bench/h200.sh
# sandbox), where the sandbox must also leave CUDA, Triton's compiler and the profiler working.
PLATFORM = os.environ.get("KGB_TEST_PLATFORM", "cpu")
JOB_MEMORY_GB = 1 if PLATFORM == "cpu" else 4  # a CUDA context alone takes about 1 GiB of host memory


def _attack(name: str, **subs: str) -> bytes:
    """A fixture candidate with its ``__KEY__`` placeholders filled in."""
    text = fixture(name).decode()
    for key, value in subs.items():
        text = text.replace(f"__{key}__", value)
    return text.encode()


def _then_honest(address: str) -> None:
    assert evaluate(address, ADD.solution).status is Status.PASSED


def _processes_with(marker: str) -> list[int]:
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if marker.encode() in (p / "cmdline").read_bytes():
                    found.append(int(p.name))
            except OSError:
                pass
    return found


def _children(pid: int) -> list[int]:
    kids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_bytes().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(stat[1]) == pid:
                kids.append(int(p.name))
    return kids


def _forkserver(agent_pid: int) -> int:
    for pid in _children(agent_pid):
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"forkserver" in f.read():
                return pid
    raise AssertionError("the agent has no forkserver")


class _Agent:
    """A dedicated agent process (static layer off) started in ``cwd``."""

    def __init__(self, cwd: Path, *args: str, workers: int = 1, repo: Path = REPO) -> None:
        self.platform = PLATFORM
        self.dir = Path(tempfile.mkdtemp(prefix="kgb-sandbox-agent-"))
        port_file = self.dir / "port"
        env = dict(os.environ, PYTHONPATH=str(repo))
        self.log = open(self.dir / "agent.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "device_agent", "serve", "--port", "0", "--platform", PLATFORM,
             "--workers", str(workers), "--port-file", str(port_file),
             "--disable-layer", "static", *args],
            cwd=cwd, env=env, stdout=self.log, stderr=self.log, start_new_session=True)
        for _ in range(600):
            if port_file.exists() and port_file.read_text().strip():
                break
            assert self.proc.poll() is None, (self.dir / "agent.log").read_text()
            time.sleep(0.1)
        self.address = f"127.0.0.1:{port_file.read_text().strip()}"

        async def serving() -> None:
            async with AgentClient(self.address) as c:
                await c.wait_serving(180)

        asyncio.run(serving())

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def attacked(agent_secret_env: None) -> Iterator[str]:
    """The agent most attacks go to (two workers); its address."""
    agent = _Agent(REPO, workers=2)
    try:
        yield agent.address
    finally:
        agent.stop()


@pytest.fixture(scope="module")
def exposed_agent(agent_secret_env: None) -> Iterator[tuple[_Agent, Path]]:
    """An agent started from a world-writable directory, with a small memory limit per job."""
    launch = Path(tempfile.mkdtemp(prefix="kgb-launch-"))
    os.chmod(launch, 0o1777)
    agent = _Agent(launch, "--worker-memory-gb", str(JOB_MEMORY_GB))
    try:
        yield agent, launch
    finally:
        agent.stop()
        shutil.rmtree(launch, ignore_errors=True)


# ---- files ----------------------------------------------------------------------------------

def test_import_path_and_working_directory_hold_nothing_writable(attacked: str) -> None:
    v = evaluate(attacked, _attack("sandbox_write_probe.py", MARKER=uuid.uuid4().hex,
                                    EARLIER="none"))
    assert "probe path_writable=[] cwd_writable=False" in v.message, v.message
    _then_honest(attacked)


def test_scratch_places_are_private_and_gone_after_the_job(attacked: str) -> None:
    first = uuid.uuid4().hex
    v = evaluate(attacked, _attack("sandbox_write_probe.py", MARKER=first, EARLIER="none"))
    assert "planted=['/tmp', '/var/tmp', '/dev/shm', '/tmp/ray', '/run/lock']" in v.message, \
        v.message
    assert "run_entries=[]" in v.message, v.message  # no host daemon's socket in sight
    for d in ("/tmp", "/var/tmp", "/dev/shm", "/tmp/ray", "/run/lock"):
        assert not Path(d, f"kgb-leak-{first}").exists(), f"{d} is shared with the host"
    v = evaluate(attacked, _attack("sandbox_write_probe.py", MARKER=uuid.uuid4().hex,
                                    EARLIER=first))
    assert "seen_earlier=[]" in v.message, v.message
    _then_honest(attacked)


def test_a_module_planted_in_the_launch_directory_is_never_imported(
        exposed_agent: tuple[_Agent, Path]) -> None:
    agent, launch = exposed_agent
    forkserver = _forkserver(agent.proc.pid)
    v = evaluate(agent.address, _attack("sandbox_plant_module.py", LAUNCH_DIR=str(launch)))
    assert "planted=False" in v.message, v.message
    _then_honest(agent.address)  # a fresh worker: the forkserver would restart and import here
    assert not list(launch.glob("pwned-uid-*")), "the planted module ran"
    assert _forkserver(agent.proc.pid) == forkserver, "a candidate crashed the forkserver"


_WHERE_FROM = """
import sys


def add_Tensor(self, other, *, alpha=1):
    files = {m.__file__ for n, m in list(sys.modules.items())
             if n.split(".")[0] in ("device_agent", "operators", "protos")
             and getattr(m, "__file__", None)}
    elsewhere = sorted(f for f in files if not f.startswith("__CHECKOUT__/"))
    raise RuntimeError(f"{len(files)} modules, from elsewhere: {elsewhere[:5]!r}")


add_Scalar = add_out = add_Tensor
"""


def test_a_checkout_under_tmp_still_serves(agent_secret_env: None) -> None:
    """The private /tmp must not hide the code the workers import (CI may clone under /tmp)."""
    checkout = Path(tempfile.mkdtemp(prefix="kgb-checkout-"))
    os.chmod(checkout, 0o755)
    try:
        for package in ("device_agent", "operators", "protos", "coordinator", "generators"):
            shutil.copytree(REPO / package, checkout / package,
                            ignore=shutil.ignore_patterns("__pycache__"))
        agent = _Agent(checkout, repo=checkout)
        try:
            v = evaluate(agent.address, _WHERE_FROM.replace("__CHECKOUT__", str(checkout)))
            assert "modules, from elsewhere: []" in v.message, v.message
            _then_honest(agent.address)
        finally:
            agent.stop()
    finally:
        shutil.rmtree(checkout, ignore_errors=True)


# ---- descriptors ----------------------------------------------------------------------------

def test_only_the_result_channel_is_inherited(exposed_agent: tuple[_Agent, Path]) -> None:
    agent, _ = exposed_agent
    forkserver = _forkserver(agent.proc.pid)
    v = evaluate(agent.address, _attack("sandbox_descriptors.py", VICTIM="kgb-never"))
    held = eval(v.message.split("descriptors ", 1)[1].split(" wrote=")[0])  # noqa: S307
    others = {fd: what for fd, what in held.items()
              if fd > 2 and not what.startswith("/proc/")}  # its own listdir of /proc/self/fd
    assert len(others) == 1 and next(iter(others.values())).startswith("socket:"), held
    _then_honest(agent.address)
    assert _forkserver(agent.proc.pid) == forkserver


def test_the_root_resource_tracker_is_out_of_reach(agent_secret_env: None) -> None:
    victim = f"kgb-victim-{uuid.uuid4().hex[:12]}"
    path = Path("/dev/shm") / victim
    path.write_text("root's")
    agent = _Agent(REPO)
    try:
        evaluate(agent.address, _attack("sandbox_descriptors.py", VICTIM=victim))
        _then_honest(agent.address)
    finally:
        agent.stop()  # the tracker cleans up what it was told to when the agent exits
    try:
        assert path.exists(), "the root resource tracker unlinked a file a candidate named"
    finally:
        path.unlink(missing_ok=True)


# ---- processes ------------------------------------------------------------------------------

@pytest.fixture()
def setuid_sleep() -> Iterator[Path]:
    """A setuid-root copy of sleep in a root-owned directory the worker can see (not /tmp)."""
    base = Path("/var/lib") if Path("/var/lib").is_dir() else REPO
    d = Path(tempfile.mkdtemp(prefix="kgb-setuid-", dir=base))
    os.chmod(d, 0o755)
    binary = d / "sleep"
    shutil.copy2(shutil.which("sleep") or "/bin/sleep", binary)
    os.chown(binary, 0, 0)
    os.chmod(binary, 0o4755)
    try:
        yield binary
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_setuid_exec_gains_nothing_and_dies_with_the_job(attacked: str,
                                                            setuid_sleep: Path) -> None:
    marker = f"kgb-escapee-{uuid.uuid4().hex[:12]}"
    v = evaluate(attacked, _attack("sandbox_setuid_escape.py", BINARY=str(setuid_sleep),
                                    MARKER=marker))
    try:
        assert "escaped child euid=" in v.message, v.message
        euid = v.message.split("escaped child euid=")[1].split()[0]
        assert euid.isdigit() and int(euid) != 0, v.message
        deadline = time.monotonic() + 15
        while _processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _processes_with(marker), "a process of the job outlived it"
    finally:
        for pid in _processes_with(marker):
            os.kill(pid, signal.SIGKILL)
    _then_honest(attacked)


def test_dead_idle_workers_are_replaced_not_charged(agent_secret_env: None) -> None:
    agent = _Agent(REPO, workers=2)
    try:
        workers = _children(_forkserver(agent.proc.pid))
        assert len(workers) == 2
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        for _ in range(2):
            v = evaluate(agent.address, ADD.solution)
            assert v.status is Status.PASSED, v.message
    finally:
        agent.stop()


# ---- system calls ---------------------------------------------------------------------------

def test_denied_system_calls_fail_on_every_thread(attacked: str) -> None:
    v = evaluate(attacked, fixture("sandbox_syscalls.py"))
    assert "syscalls " in v.message, v.message
    results = eval(v.message.split("syscalls ", 1)[1].split(" threads ")[0])  # noqa: S307
    threads = eval(v.message.split(" threads ", 1)[1])  # noqa: S307
    expected = {name: "EPERM" for name in results} | {"clone3": "ENOSYS"}
    assert results == expected, results
    assert threads and all(state == ("1", "2") for state in threads.values()), threads
    _then_honest(attacked)


@pytest.mark.parametrize("abi", ["i386", "x32"])
def test_other_system_call_abis_kill_the_worker(attacked: str, abi: str) -> None:
    if os.uname().machine != "x86_64":
        pytest.skip("x86_64 only")
    v: Verdict = evaluate(attacked, _attack("sandbox_other_abi.py", ABI=abi))
    assert v.status is Status.RUNTIME_ERROR and "SIGSYS" in v.message, v.message
    _then_honest(attacked)


# ---- limits ---------------------------------------------------------------------------------

def test_memory_beyond_the_job_limit_ends_the_job(exposed_agent: tuple[_Agent, Path]) -> None:
    agent, _ = exposed_agent
    v = evaluate(agent.address, _attack("sandbox_memory_hog.py", MIB=str(2 * 1024 * JOB_MEMORY_GB)))
    assert v.status is Status.RUNTIME_ERROR, v.message
    assert f"memory limit ({JOB_MEMORY_GB:.1f} GiB)" in v.message, v.message
    _then_honest(agent.address)


def test_a_worker_lost_before_taking_its_job_is_retried_on_another() -> None:
    """The candidate's verdict comes from a live worker; the dead one is the agent's problem."""
    from device_agent.evaluation import Evaluator
    from device_agent.platforms.cpu import CpuPlatform
    from device_agent.worker_pool import WorkerPool
    from protos.records import EvalRequest

    async def go() -> tuple[Verdict, int]:
        with tempfile.TemporaryDirectory() as root:
            os.chmod(root, 0o711)
            pool = WorkerPool(CpuPlatform(), 0, 1, Path(root))  # the pool is what is tested
            await pool.start()
            handed = 0
            acquire = pool.acquire

            async def acquire_then_kill_the_first() -> object:
                nonlocal handed
                w = await acquire()
                handed += 1
                if handed == 1:
                    w.kill()  # dies after the pool's liveness check, before its job
                    await w.proc.wait()
                return w

            pool.acquire = acquire_then_kill_the_first  # type: ignore[method-assign]
            try:
                ev = Evaluator(CpuPlatform(), [pool], b"k")
                v = await ev.evaluate(EvalRequest(uuid.uuid4().hex, "aten::add",
                                                  ADD.solution.encode()), time.monotonic() + 300)
                return v, handed
            finally:
                await pool.close()

    verdict, handed = asyncio.run(go())
    assert verdict.status is Status.PASSED, verdict.message
    assert handed == 2


def test_the_import_path_keeps_only_what_nobody_else_can_write(tmp_path: Path) -> None:
    from device_agent.sandbox import trusted_sys_path

    safe = tmp_path / "safe"
    safe.mkdir(mode=0o755)
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    group_dir = tmp_path / "group"
    group_dir.mkdir()
    os.chown(group_dir, 0, 4242)
    os.chmod(group_dir, 0o775)
    sticky_parent = tmp_path / "sticky"
    sticky_parent.mkdir()
    os.chmod(sticky_parent, 0o1777)
    under_sticky = sticky_parent / "lib"
    under_sticky.mkdir(mode=0o755)
    other_owner = tmp_path / "other"
    other_owner.mkdir(mode=0o755)
    os.chown(other_owner, 4242, 4242)
    kept = trusted_sys_path(["", ".", "relative", str(safe), str(open_dir), str(group_dir),
                             str(under_sticky), str(sticky_parent), str(other_owner),
                             str(tmp_path / "missing"), str(safe)])
    assert kept == (str(safe), str(under_sticky))


def test_what_a_private_tmpfs_would_hide_is_bound_back() -> None:
    from device_agent.sandbox import _hidden_by_private_dirs

    assert _hidden_by_private_dirs(["/tmp/a/b", "/tmp/a", "/usr/lib", "/var/tmp/x",
                                    "/tmpx/y", "/run/lock/z"]) == ["/run/lock/z", "/tmp/a",
                                                                   "/var/tmp/x"]


def test_untrusted_work_needs_root_or_the_unsafe_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    from device_agent import server
    from device_agent.sandbox import SandboxSettings

    monkeypatch.setattr(server, "is_root", lambda: False)
    with pytest.raises(RuntimeError, match="--unsafe-sandbox"):
        server._sandbox_host(SandboxSettings())
    assert server._sandbox_host(SandboxSettings(isolate=False)) is None
