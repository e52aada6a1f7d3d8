"""Measuring a device's speed-of-light ceilings once, and caching them.

The first worker of an agent whose device model and driver have no cached entry measures, before
its sandbox is applied: the copy bandwidth of the vendor library's device-to-device copy
(bytes read plus bytes written) and the dense matrix rate per dtype on random data. The agent
stores the result under ``~/.cache/kgb/peaks/`` and every verdict's % of speed-of-light uses
it. A measured bandwidth above the datasheet's (with a 5 % margin) is not believed; the
datasheet value is kept and the disagreement logged.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

COPY_BYTES = 1 << 30
MATMUL_SIZES = {"bfloat16": 8192, "float16": 8192, "float32": 4096}


def _median_ms(fn: Any, reps: int) -> float:
    import torch

    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return float(times[len(times) // 2])


def measure(device: str = "cuda") -> dict[str, Any]:
    """Copy bandwidth (GB/s) and matrix rates (TFLOP/s) of the current device."""
    import torch

    n = COPY_BYTES // 4
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    ms = _median_ms(lambda s=src, d=dst: d.copy_(s), reps=20)
    bandwidth = 2 * COPY_BYTES / (ms * 1e-3) / 1e9
    del src, dst
    tflops: dict[str, float] = {}
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for name, size in MATMUL_SIZES.items():
            dt = getattr(torch, name)
            a = torch.randn(size, size, device=device, dtype=dt)
            b = torch.randn(size, size, device=device, dtype=dt)
            ms = _median_ms(lambda a=a, b=b: torch.mm(a, b), reps=10)
            tflops[name] = 2 * size**3 / (ms * 1e-3) / 1e12
            del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    torch.cuda.empty_cache()
    return {"bandwidth_gbps": bandwidth, "tflops": tflops}


def cache_root() -> Path:
    """Where the agent keeps its caches (``KGB_CACHE_DIR``, default ``~/.cache/kgb``)."""
    return Path(os.environ.get("KGB_CACHE_DIR", Path.home() / ".cache" / "kgb"))


def cache_path(model: str, driver: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{model}__{driver}")
    return cache_root() / "peaks" / f"{safe}.json"


def load(model: str, driver: str) -> dict[str, Any] | None:
    try:
        data = json.loads(cache_path(model, driver).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "bandwidth_gbps" in data else None


def save(model: str, driver: str, peaks: dict[str, Any]) -> None:
    path = cache_path(model, driver)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(peaks, indent=1, sort_keys=True))
    tmp.replace(path)


def believable(measured: dict[str, Any], datasheet_gbps: float | None) -> bool:
    """A measured bandwidth above the datasheet peak (5 % margin) is a measurement error."""
    bw = float(measured.get("bandwidth_gbps", 0.0))
    if bw <= 0:
        return False
    return datasheet_gbps is None or bw <= 1.05 * datasheet_gbps
