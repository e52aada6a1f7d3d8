"""``init_ray``: a local Ray whose start-up waits run out on a loaded machine (the raylet's
registration, the GCS server's port) is started again instead of failing the run; any other
failure is raised at once."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import ray

from coordinator.engine import process

TIMED_OUT = Exception("The current node timed out during startup. This could happen because "
                      "some of the raylet failed to startup or the GCS has become overloaded.")
GCS_PORT_TIMED_OUT = RuntimeError("Timed out waiting for file /tmp/ray/session_x/gcs_server_port_9e22")


class _FakeRay:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.inits = 0
        self.shutdowns = 0

    def is_initialized(self) -> bool:
        return False

    def init(self, **kwargs: Any) -> None:
        self.inits += 1
        if self.failures:
            raise self.failures.pop(0)

    def shutdown(self) -> None:
        self.shutdowns += 1


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> _FakeRay:
    for var in ("RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"):
        monkeypatch.setenv(var, "0")  # restored after the test (init_ray sets them)
    monkeypatch.delenv(process.GCS_PORT_WAIT_ENV, raising=False)
    fake = _FakeRay([])
    for name in ("is_initialized", "init", "shutdown"):
        monkeypatch.setattr(ray, name, getattr(fake, name))
    return fake


def test_a_start_that_timed_out_is_torn_down_and_tried_again(fake_ray: _FakeRay) -> None:
    fake_ray.failures = [TIMED_OUT, TIMED_OUT]
    process.init_ray(num_cpus=1)
    assert (fake_ray.inits, fake_ray.shutdowns) == (3, 2)


def test_it_gives_up_after_the_last_attempt(fake_ray: _FakeRay) -> None:
    fake_ray.failures = [TIMED_OUT] * process.LOCAL_START_ATTEMPTS
    with pytest.raises(Exception, match="timed out during startup"):
        process.init_ray(num_cpus=1)
    assert fake_ray.inits == process.LOCAL_START_ATTEMPTS


def test_other_failures_are_not_retried(fake_ray: _FakeRay) -> None:
    fake_ray.failures = [RuntimeError("port 6379 in use")]
    with pytest.raises(RuntimeError, match="port 6379"):
        process.init_ray(num_cpus=1)
    assert (fake_ray.inits, fake_ray.shutdowns) == (1, 0)


def test_a_gcs_port_that_never_came_is_tried_again(fake_ray: _FakeRay) -> None:
    fake_ray.failures = [GCS_PORT_TIMED_OUT]
    process.init_ray(num_cpus=1)
    assert (fake_ray.inits, fake_ray.shutdowns) == (2, 1)


def test_ray_waits_longer_for_the_gcs_port_unless_the_operator_said(
        fake_ray: _FakeRay, monkeypatch: pytest.MonkeyPatch) -> None:
    process.init_ray(num_cpus=1)
    assert os.environ[process.GCS_PORT_WAIT_ENV] == process.GCS_PORT_WAIT_S
    monkeypatch.setenv(process.GCS_PORT_WAIT_ENV, "7")
    process.init_ray(num_cpus=1)
    assert os.environ[process.GCS_PORT_WAIT_ENV] == "7"


def test_a_stray_gcs_server_child_is_ended_and_nothing_else(tmp_path: Path) -> None:
    """The GCS server a failed start left behind is our child named ``gcs_server``."""
    sleep = shutil.which("sleep")
    assert sleep
    gcs = tmp_path / "gcs_server"
    shutil.copy(sleep, gcs)
    stray = subprocess.Popen([str(gcs), "60"])
    bystander = subprocess.Popen([sleep, "60"])
    try:
        process._end_stray_gcs_servers()
        assert stray.wait(timeout=10) != 0
        assert bystander.poll() is None
    finally:
        for p in (stray, bystander):
            p.kill()
            p.wait()
