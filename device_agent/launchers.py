"""Triton's kernel launchers, built once per agent instead of once per candidate.

Triton 3.6 (the GPU host's version) launches a kernel through a small C module it generates for
the kernel's *signature* — the argument types, nothing of the kernel's code — and builds with
gcc the first time a process launches that signature: about 0.2 s of CPU each, a dozen or more
per candidate. Every worker's Triton cache is private and fresh (compiled kernels must not pass
between candidates), so every candidate rebuilt the same launchers on a host whose cores bound
the agent's throughput. Later Triton versions launch through one generic module; there this
module does nothing (:func:`supported` is false).

Trust: a worker runs untrusted code, so it never writes what later workers load. It reports the
signatures it had to build itself (:func:`take_misses`); the agent checks each against a closed
grammar of Triton's type names, regenerates the source with Triton's own generator, compiles it
in its own process into a directory workers can read but not write, and later workers load it
from there (:func:`use_shared`). The file name is Triton's own key, the hash of the generated
source, so what a worker loads is what Triton would have built for that source. A worker that
finds the directory writable by itself (no private uid) does not use it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import importlib.util
import inspect
import logging
import os
import re
import sysconfig
import tempfile
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

NAME = "__triton_launcher"
# Leaf type names Triton puts in a launcher signature: (const) pointers to, and scalars of, its
# element types; constexpr arguments; TMA descriptors. Anything else is not built.
_TYPE = re.compile(r"(\*k?)?(i1|i8|i16|i32|i64|u1|u8|u16|u32|u64|fp8e4nv|fp8e5|fp8e4b15|"
                   r"fp8e4b8|fp8e5b16|fp16|bf16|fp32|f32|fp64)|constexpr|nvTmaDesc")
MAX_LEAVES = 256
MAX_DEPTH = 3
MAX_REPORTED = 32   # signatures one worker may report (the rest are dropped)
MAX_ENTRIES = 4096  # launchers one agent builds at most

_lock = threading.Lock()
_sources: dict[str, tuple[Any, ...]] = {}  # worker: generated source -> its signature
_misses: list[list[Any]] = []              # worker: signatures built here, not yet reported


def _driver() -> Any:
    """Triton's CUDA driver module, or None (typed loosely: its names differ by version)."""
    try:
        from triton.backends.nvidia import driver
    except Exception:  # noqa: BLE001 - no CUDA backend: nothing to do
        return None
    return driver


def supported() -> bool:
    """Whether this Triton builds a launcher per signature the way this module expects."""
    driver = _driver()
    if driver is None or not callable(getattr(driver, "make_launcher", None)) \
            or not callable(getattr(driver, "compile_module_from_src", None)):
        return False
    try:
        from triton.runtime import build
        params = list(inspect.signature(build._build).parameters)
    except (ImportError, AttributeError, TypeError, ValueError):
        return False
    return params[:7] == ["name", "src", "srcdir", "library_dirs", "include_dirs", "libraries",
                          "ccflags"] and callable(getattr(build, "platform_key", None))


def key(source: str) -> str:
    """Triton's cache key of a generated launcher source."""
    from triton.runtime.build import platform_key

    return hashlib.sha256((source + platform_key()).encode("utf-8")).hexdigest()


def _path(directory: Path, source_key: str) -> Path:
    return directory / source_key / f"{NAME}{sysconfig.get_config_var('EXT_SUFFIX')}"


def valid_signature(value: Any) -> tuple[Any, ...] | None:
    """``value`` as a launcher signature (a tuple of type names and nested tuples of them), or
    None when it is not one of Triton's."""
    leaves = 0

    def walk(v: Any, depth: int) -> Any:
        nonlocal leaves
        if isinstance(v, str):
            leaves += 1
            return v if _TYPE.fullmatch(v) and leaves <= MAX_LEAVES else None
        if isinstance(v, list | tuple) and depth < MAX_DEPTH:
            items = [walk(x, depth + 1) for x in v]
            return None if any(x is None for x in items) else tuple(items)
        return None

    if not isinstance(value, list | tuple) or not value:
        return None
    out = walk(value, 0)
    return out if isinstance(out, tuple) else None


def shared_dir(agent_root: Path) -> Path:
    """Where an agent keeps the launchers it built (workers get the path in their env)."""
    return agent_root / "triton-launchers"


# ---- worker side -------------------------------------------------------------------------------

def use_shared(directory: str) -> bool:
    """In a worker, before any candidate exists: load launchers from ``directory`` when the agent
    has built them, and remember the signatures built here. Returns whether it applies."""
    if not directory or not supported():
        return False
    driver = _driver()
    assert driver is not None
    shared = Path(directory)
    make, compile_src = driver.make_launcher, driver.compile_module_from_src
    trusted: list[bool] = []  # decided once, after the sandbox dropped privileges

    def make_launcher(constants: Any, signature: Any, tensordesc_meta: Any) -> str:
        source: str = make(constants, signature, tensordesc_meta)
        if not tensordesc_meta:
            with _lock:
                if len(_sources) < 4 * MAX_REPORTED:
                    _sources[source] = tuple(signature.values())
        return source

    def compile_module_from_src(src: str, name: str, *args: Any, **kwargs: Any) -> ModuleType:
        if name != NAME:
            passed: ModuleType = compile_src(src, name, *args, **kwargs)
            return passed
        if not trusted:
            trusted.append(shared.is_dir() and not os.access(shared, os.W_OK))
        path = _path(shared, key(src))
        if trusted[0] and path.is_file():
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is not None and spec.loader is not None:
                shared_module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(shared_module)
                return shared_module
        module: ModuleType = compile_src(src, name, *args, **kwargs)
        with _lock:
            signature = _sources.get(src)
            if signature is not None and len(_misses) < MAX_REPORTED:
                _misses.append(_wire(signature))
        return module

    driver.make_launcher = make_launcher
    driver.compile_module_from_src = compile_module_from_src
    return True


def _wire(signature: tuple[Any, ...]) -> list[Any]:
    return [_wire(x) if isinstance(x, tuple) else x for x in signature]


def take_misses() -> list[list[Any]]:
    """Signatures this worker built itself since the last call (for the agent to build)."""
    with _lock:
        out = list(_misses)
        _misses.clear()
    return out


# ---- agent side --------------------------------------------------------------------------------

class LauncherBuilder:
    """Builds reported launchers, one at a time in a background thread, into ``directory``."""

    def __init__(self, directory: Path, max_entries: int = MAX_ENTRIES) -> None:
        self.directory = directory
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.chmod(directory, 0o755)
        self.max_entries = max_entries
        self._seen: set[tuple[Any, ...]] = set()
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kgb-launchers")
        self.built = 0
        self.failed = 0

    def request(self, reported: Any) -> int:
        """Queue the valid, new signatures of a worker's report; returns how many were queued."""
        if not isinstance(reported, list):
            return 0
        queued = 0
        for item in reported[:MAX_REPORTED]:
            signature = valid_signature(item)
            if signature is None or signature in self._seen or len(self._seen) >= self.max_entries:
                continue
            self._seen.add(signature)
            self._pool.submit(self._build_logged, signature)
            queued += 1
        return queued

    def _build_logged(self, signature: tuple[Any, ...]) -> None:
        try:
            self.build(signature)
            self.built += 1
        except Exception as exc:  # noqa: BLE001 - workers keep building their own
            self.failed += 1
            log.warning("could not build a shared Triton launcher for %s: %s", signature, exc)

    def build(self, signature: tuple[Any, ...]) -> Path:
        """Generate the launcher for ``signature`` with Triton's generator and compile it into
        ``directory`` (atomically; an existing one is kept). Returns its path."""
        driver = _driver()
        if driver is None:
            raise RuntimeError("Triton has no CUDA backend")
        from triton.runtime import build

        source = driver.make_launcher({}, dict(enumerate(signature)), None)
        final = _path(self.directory, key(source))
        if final.is_file():
            return final
        with tempfile.TemporaryDirectory(dir=self.directory) as tmp:
            src_path = os.path.join(tmp, f"{NAME}.c")
            with open(src_path, "w") as f:
                f.write(source)
            so = build._build(NAME, src_path, tmp, driver.library_dirs(), driver.include_dirs,
                              driver.libraries, [])
            os.chmod(so, 0o644)
            final.parent.mkdir(mode=0o755, exist_ok=True)
            os.chmod(final.parent, 0o755)
            os.replace(so, final)
        return final

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._pool.shutdown(wait=False, cancel_futures=True)
