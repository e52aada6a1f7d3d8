"""Platforms are discovered like problems and methods (issue #20): one module under
``device_agent/platforms/`` that registers its class adds a platform; nothing else changes."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import device_agent.platforms as package
from device_agent.platforms import PlatformUnavailableError, platform_names, registry, resolve
from device_agent.platforms.cpu import CpuPlatform
from device_agent.platforms.cuda import CudaPlatform
from device_agent.platforms.registry import platform_class


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry as if no plugin had been discovered yet (restored afterwards)."""
    monkeypatch.setattr(registry, "_platforms", {})
    monkeypatch.setattr(registry, "_discovered", False)
    yield


def test_the_shipped_platforms_are_discovered_in_autos_order() -> None:
    # (a test's stand-in vendor, registered from outside the package, may be there too)
    shipped = [n for n in platform_names()
               if platform_class(n).__module__.startswith("device_agent.platforms.")]
    assert shipped == ["cuda", "rocm", "cpu"]
    assert isinstance(resolve("cpu"), CpuPlatform)
    auto = resolve("auto")
    assert isinstance(auto, CudaPlatform if CudaPlatform().available() else CpuPlatform)


def test_unknown_and_unavailable_platforms_are_refused() -> None:
    with pytest.raises(PlatformUnavailableError, match="unknown platform 'tpu'; choose one of "
                                                       "auto, cpu, cuda, rocm"):
        resolve("tpu")
    if not CudaPlatform().available():
        with pytest.raises(PlatformUnavailableError, match="'cuda' is not available"):
            resolve("cuda")


def test_one_file_adds_a_platform(fresh_registry: None, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A module dropped into the package (here through a second directory of its path) is a
    plugin: it is found, ranked for auto, and resolved by name, with no other edit."""
    (tmp_path / "toy_vendor.py").write_text(textwrap.dedent('''
        from device_agent.platforms.cpu import CpuPlatform
        from device_agent.platforms.registry import register_platform


        @register_platform("toy", auto_rank=50)
        class ToyPlatform(CpuPlatform):
            name = "toy"
    '''))
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    for plugin in ("cpu", "cuda"):  # imported again, into the fresh registry
        monkeypatch.delitem(sys.modules, f"device_agent.platforms.{plugin}")
        monkeypatch.delattr(package, plugin)
    assert platform_names() == ["cuda", "toy", "cpu"]
    assert resolve("toy").name == "toy"
    if not CudaPlatform().available():
        assert resolve("auto").name == "toy"  # before cpu in auto's order


def test_a_platform_is_registered_once_under_its_own_name(fresh_registry: None) -> None:
    registry.register_platform("cpu", auto_rank=100)(CpuPlatform)
    with pytest.raises(ValueError, match="duplicate platform 'cpu'"):
        registry.register_platform("cpu", auto_rank=1)(CpuPlatform)
    with pytest.raises(ValueError, match="must be 'other'"):
        registry.register_platform("other", auto_rank=1)(CpuPlatform)
