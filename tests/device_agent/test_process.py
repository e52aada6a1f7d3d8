"""The agent as a program: no Ray or LLM SDK needed, clear errors, loopback by default."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import operators
from protos.client import AgentClient
from protos.records import EvalRequest, Status
from tests.helpers import running_agent

REPO = Path(__file__).resolve().parents[2]


def _blocked_site(tmp: Path) -> Path:
    """A directory that shadows Ray and LLM SDKs with modules that refuse to import."""
    site = tmp / "blocked"
    for name in ("ray", "openai", "anthropic"):
        pkg = site / name
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(f"raise ImportError('{name} is blocked in this test')\n")
    return site


def test_agent_serves_without_ray_or_llm_sdks(tmp_path: Path, agent_secret_env: None) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(_blocked_site(tmp_path)), str(REPO)])
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "agent", "serve", "--port", "0", "--platform", "cpu",
         "--workers", "1", "--port-file", str(port_file)],
        env=env, stderr=subprocess.PIPE, start_new_session=True)
    try:
        for _ in range(600):
            if port_file.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        address = f"127.0.0.1:{port_file.read_text()}"
        spec = operators.get("aten::add")

        async def go() -> Status:
            async with AgentClient(address) as c:
                await c.wait_serving(180)
                v = await c.evaluate(EvalRequest(uuid.uuid4().hex, spec.id, spec.solution.encode()),
                                     timeout=120)
                return v.status

        assert asyncio.run(go()) is Status.PASSED
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()
    assert b"stopped" in err
    assert b"ray is blocked" not in err


def test_port_in_use_is_a_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "device_agent", "serve", "--port", str(port),
                            "--platform", "cpu"], capture_output=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 1
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "choose another --port" in lines[0]


def test_non_loopback_host_warns(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "device_agent", "serve", "--host", "0.0.0.0",
                        "--port", "70000"], capture_output=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 2 and b"--port" in r.stderr
    r = subprocess.run([sys.executable, "-m", "device_agent", "serve", "--host", "0.0.0.0",
                        "--port", "0", "--platform", "nonsense"], capture_output=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 2  # argparse: invalid choice


def test_unknown_layer_is_a_usage_error_listing_the_layers() -> None:
    from device_agent.layers import LAYERS

    r = subprocess.run([sys.executable, "-m", "device_agent", "serve", "--disable-layer", "ghostt"],
                       capture_output=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 2
    assert all(layer in r.stderr.decode() for layer in LAYERS), r.stderr.decode()
    help_text = subprocess.run([sys.executable, "-m", "device_agent", "serve", "--help"],
                               capture_output=True, timeout=60, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    assert all(layer in help_text for layer in LAYERS)


def test_health_is_not_serving_until_workers_are_warm(agent_secret_env: None) -> None:
    async def go(address: str) -> tuple[str, str]:
        async with AgentClient(address) as c:
            first = await c.health(timeout=5)  # the port is bound before workers start
            await c.wait_serving(180)
            return first, await c.health()

    with running_agent(wait=False) as address:
        first, later = asyncio.run(go(address))
    assert first == "NOT_SERVING" and later == "SERVING"


def test_a_failure_inside_tritons_compiler_is_a_compile_error() -> None:
    """MLIR's ``PassManager::run failed`` reaches the worker as a plain RuntimeError raised in
    the backend's compile stages (an honest cumsum on the H200 with Triton 3.6); it is the
    kernel failing to compile. The same error raised by the candidate's own code is not."""
    from device_agent.sandboxed_job import _is_compile_error

    def raised_in(filename: str) -> BaseException:
        ns: dict[str, object] = {}
        exec(compile("def make_ttgir():\n    raise RuntimeError('PassManager::run failed')\n",
                     filename, "exec"), ns)
        try:
            ns["make_ttgir"]()  # type: ignore[operator]
        except RuntimeError as exc:
            return exc
        raise AssertionError("not raised")

    backend = "/venv/lib/python3.12/site-packages/triton/backends/nvidia/compiler.py"
    assert _is_compile_error(raised_in(backend))
    assert _is_compile_error(raised_in("/venv/site-packages/triton/compiler/compiler.py"))
    assert not _is_compile_error(raised_in("/tmp/w-1/kgb_candidate_abc.py"))
    assert not _is_compile_error(raised_in("/venv/site-packages/triton/runtime/jit.py"))
