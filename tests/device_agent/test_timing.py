"""The timing protocol on the CPU (wall-clock timer; never reported as performance there):
ABBA rounds, throttled rounds discarded and counted, and the re-check after timing that catches
a kernel that is right while checked but wrong while timed."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import operators
from device_agent.platforms.cpu import install_interpreter_support
from device_agent.timing import WallTimer, median_ci, time_case
from operators.spec import case
from operators.testing import load_module

ADD = operators.get("aten::add")
CASE = case("add_Tensor", "float32", (64, 96), other=(64, 96), alpha=1.5)

DRIFTING = ADD.solution + '''

_calls = {"n": 0}
_honest = add_Tensor


def add_Tensor(self, other, *, alpha=1):
    _calls["n"] += 1
    out = _honest(self, other, alpha=alpha)
    if _calls["n"] > 4:  # right during checking and warm-up, wrong once timing is under way
        out.zero_()
    return out
'''


class ThrottlingTimer(WallTimer):
    """Reports throttling on every other query."""

    def __init__(self) -> None:
        self.n = 0

    def throttled(self) -> bool:
        self.n += 1
        return self.n % 4 in (1, 2)


@pytest.fixture(autouse=True, scope="module")
def _interpreter() -> None:
    install_interpreter_support()


def _time(source: str, timer: Any = None) -> dict[str, Any]:
    module = load_module(source)
    return time_case(ADD, CASE, module.add_Tensor, seed=99, device="cpu", budget_s=0.3,
                     timer=timer or WallTimer())


def test_honest_candidate_passes_the_recheck() -> None:
    r = _time(ADD.solution)
    assert r["samples"] >= 2 and r["baseline_samples"] >= 2 and r["input_sets"] >= 2
    assert r["median_us"] > 0 and r["ci_low_us"] <= r["median_us"] <= r["ci_high_us"]
    assert r["recheck"] is None


def test_drift_after_warm_up_is_caught_by_the_recheck() -> None:
    msg = _time(DRIFTING)["recheck"]
    assert msg is not None and "after timing" in msg and "differs from the reference" in msg


def test_throttled_rounds_are_discarded_and_counted() -> None:
    r = _time(ADD.solution, ThrottlingTimer())
    assert r["throttled_discarded"] > 0
    assert r["samples"] >= 2


def test_median_ci() -> None:
    med, lo, hi = median_ci([5.0, 1.0, 3.0, 2.0, 4.0])
    assert med == 3.0 and lo <= med <= hi
    med, lo, hi = median_ci(list(map(float, range(1, 101))))
    assert med == 50.5 and 40 <= lo < med < hi <= 61


class ReadingTimer(WallTimer):
    """A platform that can read its clock and temperature."""

    def __init__(self) -> None:
        self.temps = iter(range(40, 10_000))

    def readings(self) -> tuple[float | None, float | None]:
        return 1980.0, float(next(self.temps))


def test_clocks_and_temperature_are_recorded_where_readable() -> None:
    r = _time(ADD.solution, ReadingTimer())
    assert r["sm_clock_mhz"] == 1980.0
    assert r["temperature_c"] is not None and r["temperature_c"] >= 40.0  # the highest seen
    plain = _time(ADD.solution)
    assert plain["sm_clock_mhz"] is None and plain["temperature_c"] is None


def test_stopping_rule_is_robust_to_rare_outliers() -> None:
    from device_agent.timing import _rse, _settled

    steady = [100.0 + 0.01 * (i % 7) for i in range(60)]
    assert _settled(steady)
    spiky = steady[:]
    spiky[10] = spiky[40] = 2000.0  # two host hiccups: the mean's error stays large ...
    assert _rse(spiky) > 0.005 and _settled(spiky)  # ... the median's interval does not
    noisy = [100.0 * (1 + 0.2 * ((i * 37) % 11 - 5) / 5) for i in range(60)]
    assert not _settled(noisy)


def test_input_sets_fall_back_to_the_host_when_the_device_cannot_make_them() -> None:
    from device_agent.timing import build_sets

    host = build_sets(ADD, CASE, seed=5, l2_bytes=1 << 20)
    fallback = build_sets(ADD, CASE, seed=5, l2_bytes=1 << 20, device="meta")  # no generator
    assert len(host) == len(fallback) >= 2
    for a, b in zip(host, fallback, strict=True):
        assert all(x.device.type == "cpu" for _, x in b.tensor_args())
        assert all(torch.equal(x, y) for (_, x), (_, y) in
                   zip(a.tensor_args(), b.tensor_args(), strict=True))
