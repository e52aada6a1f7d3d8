"""``init_ray``: a local Ray whose raylet misses Ray's fixed 30 s to register (a loaded machine)
is started again instead of failing the run; any other failure is raised at once."""

from __future__ import annotations

from typing import Any

import pytest
import ray

from coordinator.engine import process

TIMED_OUT = Exception("The current node timed out during startup. This could happen because "
                      "some of the raylet failed to startup or the GCS has become overloaded.")


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
