"""Peak cache and plausibility (the measurement itself needs a GPU: see test_gpu.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_agent import judging, peaks
from device_agent.evaluation import Evaluator
from device_agent.platforms.cpu import CpuPlatform
from operators.spec import case
from protos.records import SystemInfo


def test_cache_round_trip_keyed_by_model_and_driver(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGB_CACHE_DIR", str(tmp_path))
    assert peaks.load("NVIDIA H200", "580.1") is None
    peaks.save("NVIDIA H200", "580.1", {"bandwidth_gbps": 4200.0, "tflops": {"bfloat16": 780.0}})
    assert peaks.load("NVIDIA H200", "580.1") == {"bandwidth_gbps": 4200.0,
                                                   "tflops": {"bfloat16": 780.0}}
    assert peaks.load("NVIDIA H200", "581.0") is None
    assert peaks.cache_path("NVIDIA H200", "580.1").parent == tmp_path / "peaks"


def test_bandwidth_above_datasheet_is_not_believed() -> None:
    assert peaks.believable({"bandwidth_gbps": 4200.0}, 4800.0)
    assert not peaks.believable({"bandwidth_gbps": 5600.0}, 4800.0)
    assert not peaks.believable({"bandwidth_gbps": 0.0}, None)


def test_measured_peaks_drive_speed_of_light() -> None:
    import operators

    ev = Evaluator(CpuPlatform(), [], b"k")
    ev.learn_device(SystemInfo(platform="cuda", device_model="NVIDIA H200",
                               peak_bandwidth_gbps=4800.0, peak_tflops={"float32": 67.0},
                               peak_source="datasheet"))
    spec = operators.get("aten::add")
    c = case("add_Tensor", "float32", (8192, 8192), other=(8192, 8192), alpha=1.0)
    datasheet = judging.sol_percent(ev.system, spec, c, 200.0)
    ev.use_peaks({"bandwidth_gbps": 4000.0, "tflops": {"float32": 50.0}})
    assert ev.system.peak_source == "measured" and ev.system.peak_tflops["float32"] == 50.0
    measured = judging.sol_percent(ev.system, spec, c, 200.0)
    assert datasheet and measured and measured == pytest.approx(datasheet * 4800 / 4000)


def test_physical_floor_uses_datasheet_peaks_with_margin() -> None:
    import operators
    from protos.records import CaseTiming

    ev = Evaluator(CpuPlatform(), [], b"k")
    ev.learn_device(SystemInfo(platform="cuda", device_model="NVIDIA H200",
                               peak_bandwidth_gbps=4800.0, peak_tflops={"float32": 67.0}))
    ev.use_peaks({"bandwidth_gbps": 4000.0, "tflops": {"float32": 50.0}})  # measured: lower
    spec = operators.get("aten::add")
    bench = spec.benchmark_cases()[0]  # float32 8192x8192 + 8192x8192: 805 MB unique
    floor = judging.floor_us(ev.datasheet, spec, bench)
    assert floor == pytest.approx(spec.cost(bench).bytes / (4800e9 * 1.10) * 1e6)

    def timing(us: float) -> CaseTiming:
        return CaseTiming(bench.name, True, median_us=us)

    assert judging.below_floor(ev.datasheet, spec, (timing(240.0),)) == ()
    # Faster than the measured-peak floor but not the datasheet's: not flagged.
    assert judging.below_floor(ev.datasheet, spec, (timing(floor * 1.05),)) == ()
    found = judging.below_floor(ev.datasheet, spec, (timing(floor * 0.5),))
    assert found and found[0].layer == "timing" and found[0].rule == "below-physical-floor"
    unmeaningful = CaseTiming(bench.name, False, median_us=1.0)
    assert judging.below_floor(ev.datasheet, spec, (unmeaningful,)) == ()
