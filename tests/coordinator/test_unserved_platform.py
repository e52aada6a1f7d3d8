"""Bad input (issue #28): a sweep naming a platform that no agent of its fleet serves fails
before any trajectory runs, with the list of platforms the fleet has."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from coordinator.engine.router import FleetRouter, UnservedPlatformError, unserved
from tests.coordinator.test_fleet_integrity import FAST


def test_unserved_names_the_missing_platforms_and_what_the_fleet_has() -> None:
    assert unserved(["cpu"], ["cpu", "cuda"]) is None
    why = unserved(["cuda", "rocm", "cpu"], ["cpu", "cuda", "cpu"])
    assert why is not None and "serves platform(s) rocm;" in why and "serve: cpu, cuda." in why
    assert "none (no agent is known)" in (unserved(["cpu"], []) or "")


def test_a_sweep_on_a_platform_no_agent_serves_fails_at_the_start(tmp_path: Path) -> None:
    spec = (f'operators = ["aten::add"]\nplatforms = ["cpu", "rocm"]\n\n[sweep]\n'
            f'name = "unserved"\nstore = "{tmp_path}"\n\n[[methods]]\nname = "reference"\n'
            '\n[[agents]]\naddress = "127.0.0.1:9"\nplatform = "cpu"\n')

    async def go() -> None:
        router = FleetRouter(spec, "unserved.toml", str(tmp_path), str(tmp_path / "kgb.sqlite"),
                             FAST, 120.0, None)
        await router.start()
        try:
            with pytest.raises(UnservedPlatformError, match=r"platform\(s\) rocm; .*serve: cpu\."):
                await router.wait_ready(["cpu", "rocm"], 0.5)
        finally:
            await router.close()

    asyncio.run(go())
