"""Stand-in platforms for tests whose workers carry a broken harness: each is the ``cpu``
platform claiming meaningful timings, and breaks one part of ``aten::sum``'s problem code
inside its workers only (the agent's copy stays whole, so the candidate passes its correctness
cases and meets the fault while timing). Registered through ``KGB_PLATFORM_MODULES``, as a
vendor's plugin is, so the agent's workers find them.
"""

from __future__ import annotations

from typing import Any

from device_agent.platforms.cpu import CpuPlatform
from device_agent.platforms.registry import register_platform

OPERATOR = "aten::sum"
MESSAGE = "broken on purpose by the test platform"


class _BrokenHarness(CpuPlatform):
    timings_meaningful: bool = True
    broken: str = ""  # the problem's method that raises in this platform's workers

    def init_worker(self) -> None:
        super().init_worker()
        import operators

        method = self.broken

        def raising(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"{method} {MESSAGE}")

        setattr(type(operators.get(OPERATOR)), method, raising)


@register_platform("standin-broken-inputs", auto_rank=1001)
class BrokenInputs(_BrokenHarness):
    name: str = "standin-broken-inputs"
    broken: str = "make_call"


@register_platform("standin-broken-reference", auto_rank=1002)
class BrokenReference(_BrokenHarness):
    name: str = "standin-broken-reference"
    broken: str = "reference"


@register_platform("standin-broken-baseline", auto_rank=1003)
class BrokenBaseline(_BrokenHarness):
    name: str = "standin-broken-baseline"
    broken: str = "baseline"


@register_platform("standin-broken-checker", auto_rank=1004)
class BrokenChecker(_BrokenHarness):
    name: str = "standin-broken-checker"
    broken: str = "tolerance"  # what the checker asks of the problem
