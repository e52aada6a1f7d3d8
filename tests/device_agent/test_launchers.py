"""Shared Triton launchers (device_agent.launchers): the agent builds what workers report, workers
load it only from a directory they cannot write, and nothing but Triton's type names is built.

Triton 3.7 (this machine) launches through one generic module, so the tests drive the module
with a stand-in for Triton 3.6's driver whose generator emits a real C extension: gcc, the
directory layout, the key and the loading are the real ones."""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import types
from pathlib import Path
from typing import Any

import pytest

from device_agent import launchers

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler")


def _extension(signature: dict[int, Any]) -> str:
    """A tiny Python extension named like Triton's launcher, carrying its signature."""
    text = repr(list(signature.values())).replace('"', "'")
    return f"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{launchers.NAME}", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit_{launchers.NAME}(void) {{
  PyObject *m = PyModule_Create(&def);
  if (m) PyModule_AddStringConstant(m, "signature", "{text}");
  return m;
}}
"""


class _FakeDriver(types.SimpleNamespace):
    """Triton 3.6's driver module as launchers.py uses it."""

    def __init__(self) -> None:
        super().__init__(include_dirs=[], libraries=[], builds=[])

    def library_dirs(self) -> list[str]:
        return []

    def make_launcher(self, constants: Any, signature: dict[int, Any], meta: Any) -> str:
        return _extension(signature)

    def compile_module_from_src(self, src: str, name: str, **kwargs: Any) -> Any:
        self.builds.append(name)  # a worker's own gcc run
        return types.SimpleNamespace(own=True)


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> _FakeDriver:
    fake = _FakeDriver()
    monkeypatch.setattr(launchers, "_driver", lambda: fake)
    monkeypatch.setattr(launchers, "supported", lambda: True)
    monkeypatch.setattr(launchers, "_sources", {})
    monkeypatch.setattr(launchers, "_misses", [])
    return fake


def test_only_tritons_type_names_are_accepted() -> None:
    ok = launchers.valid_signature(["*fp32", "*kbf16", "i32", "i64", "fp32", "constexpr",
                                    ["*fp16", ["i1", "u64"]], "nvTmaDesc"])
    assert ok == ("*fp32", "*kbf16", "i32", "i64", "fp32", "constexpr",
                  ("*fp16", ("i1", "u64")), "nvTmaDesc")
    for bad in ([], "i32", ["i32", 'fp32"); system("id'], ["int"], ["*fp32 "], [3],
                ["tensordesc<fp16[64,64]>"], [[[["i32"]]]], ["i32"] * 257, None):
        assert launchers.valid_signature(bad) is None, bad


def test_a_worker_reports_each_launcher_it_built_itself(driver: _FakeDriver,
                                                        tmp_path: Path) -> None:
    assert launchers.use_shared(str(tmp_path / "none"))
    for sig in ({0: "*fp32", 1: "i32"}, {0: "*fp16", 1: "i32"}):
        src = driver.make_launcher({}, sig, None)
        driver.compile_module_from_src(src=src, name=launchers.NAME)
    driver.compile_module_from_src(src="x", name="cuda_utils")  # not a launcher: passed through
    assert driver.builds == [launchers.NAME, launchers.NAME, "cuda_utils"]
    assert launchers.take_misses() == [["*fp32", "i32"], ["*fp16", "i32"]]
    assert launchers.take_misses() == []


@needs_gcc
def test_the_agent_builds_reported_launchers_once_and_read_only(driver: _FakeDriver,
                                                                tmp_path: Path) -> None:
    builder = launchers.LauncherBuilder(launchers.shared_dir(tmp_path))
    try:
        report = [["*fp32", "*fp32", "i32", "constexpr"], ["nope"], "junk",
                  ["*fp32", "*fp32", "i32", "constexpr"]]
        assert builder.request(report) == 1  # one valid, new signature
        assert builder.request(report) == 0  # already asked for
        builder._pool.shutdown(wait=True)
        assert (builder.built, builder.failed) == (1, 0)
        (entry,) = builder.directory.iterdir()
        src = driver.make_launcher({}, dict(enumerate(report[0])), None)
        assert entry.name == launchers.key(src)  # Triton's own key: the source's hash
        (so,) = entry.iterdir()
        assert so.name.startswith(launchers.NAME) and oct(so.stat().st_mode & 0o777) == "0o644"
        assert oct(builder.directory.stat().st_mode & 0o777) == "0o755"
        assert builder.build(("*fp32", "*fp32", "i32", "constexpr")) == so  # kept, not rebuilt
    finally:
        builder.close()


@needs_gcc
def test_a_later_worker_loads_the_shared_launcher_only_if_it_cannot_write_it(
        driver: _FakeDriver, tmp_path: Path) -> None:
    # The agent's root is traversable (0711) by workers, as the agent makes it; pytest's own
    # temporary directories are not, so this one lives directly under the system's.
    root = Path(tempfile.mkdtemp(prefix="kgb-test-launchers-"))
    try:
        _later_worker(driver, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _later_worker(driver: _FakeDriver, root: Path) -> None:
    shared = launchers.shared_dir(root)
    builder = launchers.LauncherBuilder(shared)
    sig = ("*bf16", "i64")
    builder.build(sig)
    builder.close()
    src = driver.make_launcher({}, dict(enumerate(sig)), None)

    def worker() -> tuple[bool, list[str]]:
        """A fresh worker's first launcher build of ``sig``: from the directory or its own."""
        assert launchers.use_shared(str(shared))
        module = driver.compile_module_from_src(src=src, name=launchers.NAME)
        return not getattr(module, "own", False), list(driver.builds)

    if os.geteuid() == 0:
        # The agent (root) can write the directory; a worker runs as its own uid and cannot.
        assert worker() == (False, [launchers.NAME])  # writable to this process: not trusted
        os.chmod(root, 0o711)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child drops to another uid, as a sandboxed worker does
            try:
                os.setgid(65534)
                os.setuid(65534)
                driver.builds.clear()
                result: Any = worker()
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                result = repr(exc)
            finally:
                os.write(write, pickle.dumps(result))
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as f:
            result = pickle.loads(f.read())
        os.waitpid(pid, 0)
        assert result == (True, [])
    else:
        assert worker() == (False, [launchers.NAME])  # our own directory: not trusted
        os.chmod(shared, 0o555)  # now this process cannot write it
        try:
            driver.builds.clear()
            assert worker() == (True, [])
        finally:
            os.chmod(shared, 0o755)
