"""The ``cpu`` platform: Triton's interpreter on CPU tensors, for correctness only.

Timings measured here are never reported as performance (``timings_meaningful`` is False).
The worker sets ``TRITON_INTERPRET=1`` itself before Triton is imported, so every candidate
kernel is decorated in interpreter mode.
"""

from __future__ import annotations

from device_agent.platforms.base import base_system_info, cpu_model_name
from protos.records import SystemInfo


class CpuPlatform:
    name: str = "cpu"
    torch_device: str = "cpu"
    visibility_env: str | None = None
    timings_meaningful: bool = False

    def available(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def worker_env(self, device_index: int) -> dict[str, str]:
        return {"TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

    def init_worker(self) -> None:
        import torch

        torch.set_num_threads(1)
        torch.zeros(16).add_(1)

    def device_model(self) -> str:
        return f"cpu ({cpu_model_name()})"

    def system_info(self) -> SystemInfo:
        return SystemInfo(device_model=self.device_model(), driver="triton-interpreter",
                          **base_system_info(self.name))  # type: ignore[arg-type]
