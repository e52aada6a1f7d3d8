"""A stand-in vendor platform for tests: what a vendor's plugin file looks like, registered
through ``KGB_PLATFORM_MODULES`` so the agent's workers find it too (docs/platforms.md).

It runs kernels the way the ``cpu`` platform does (Triton's interpreter) but "compiles" each
kernel first with :mod:`tests.device_agent.standin_compiler`, whose one pass crashes, hangs or
fails on kernels that carry a marker: the toolchain faults a real backend has on valid code.
"""

from __future__ import annotations

from device_agent.platforms.cpu import CpuPlatform
from device_agent.platforms.registry import register_platform
from device_agent.platforms.toolchain import ToolchainFrames

NAME = "standin"
PROMPT_SECTION = ("Platform `standin`: a stand-in vendor for tests. Tensors live on `cpu`; "
                  "allocate on the inputs' device.")


@register_platform(NAME, auto_rank=1000)  # never auto's choice
class StandinPlatform(CpuPlatform):
    name: str = NAME
    baseline_library: str = "PyTorch's CPU kernels (ATen)"
    compiler_limits: tuple[str, ...] = (
        "its compiler crashes on STANDIN_CRASH, hangs on STANDIN_HANG, fails on STANDIN_FAIL",)
    toolchain: ToolchainFrames = ToolchainFrames(files=("/tests/device_agent/standin_compiler.py",))

    def init_worker(self) -> None:
        super().init_worker()
        from tests.device_agent import standin_compiler

        standin_compiler.install()
