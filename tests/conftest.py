"""Test configuration: opt-in markers and shared fixtures.

``gpu`` tests run only where CUDA is available (skipped cleanly otherwise); ``slow`` tests run
with ``--run-slow``. The in-process problem tests use Triton's interpreter, so
``TRITON_INTERPRET`` is set before anything imports triton.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import pytest  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="run tests marked slow")


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_cuda = _cuda()
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "slow" in item.keywords and not config.getoption("--run-slow"):
            item.add_marker(pytest.mark.skip(reason="slow: use --run-slow"))


@pytest.fixture(scope="session")
def agent_secret_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Agents started by tests keep their secret in a temp dir, not in ~/.cache."""
    path = tmp_path_factory.mktemp("secret") / "agent-secret"
    old = os.environ.get("KGB_AGENT_SECRET_FILE")
    os.environ["KGB_AGENT_SECRET_FILE"] = str(path)
    yield
    if old is None:
        os.environ.pop("KGB_AGENT_SECRET_FILE", None)
    else:
        os.environ["KGB_AGENT_SECRET_FILE"] = old


@pytest.fixture(scope="session", autouse=True)
def coordinator_secret_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Coordinators in tests keep their request-id secret in a temp dir, not in ~/.cache."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KGB_COORDINATOR_SECRET_FILE",
                   str(tmp_path_factory.mktemp("coordinator") / "coordinator-secret"))
        yield


@pytest.fixture(scope="session")
def cpu_agent(agent_secret_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real agent process on loopback (cpu platform) shared by the session: its address.

    Its static policy layer is off, so fault tests reach the runtime they exercise; the static
    layer is proven on its own in tests/device_agent/test_static_policy.py."""
    from coordinator.local_agent import LocalAgent

    agent = LocalAgent(platform="cpu", workers=2,
                       log_path=tmp_path_factory.mktemp("agent") / "agent.log",
                       extra_args=("--disable-layer", "static"))
    address = agent.start()
    try:
        asyncio.run(agent.wait_serving(timeout=180))
        yield address
    finally:
        agent.stop()


def run_async(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)
