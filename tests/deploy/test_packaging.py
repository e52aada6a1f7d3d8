"""What an agent host installs: the layering of our packages and the split of the requirements.

DESIGN.md: the device agent never imports Ray or LLM clients and must install on a GPU host with
only what it needs. So pyproject.toml's base requirements are exactly the distributions that
``device_agent``, ``operators`` and ``protos`` import; the ``coordinator`` extra adds what the
coordinator and the generators import beyond them; constraints.txt pins each of them.

Two views: the source (every import statement, read with ``ast``, mapped to the distribution
that provides it in this environment) and a fresh interpreter in which ``ray``, ``click``,
``rich``, ``aiohttp``, ``coordinator`` and ``generators`` cannot be imported, which still loads every agent
module and runs ``python -m device_agent serve --help``. (tests/device_agent/test_process.py
serves real evaluations through ``kgb agent serve`` with Ray and the LLM SDKs shadowed;
tests/deploy/test_install.py installs the base package into an empty environment.)
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
import sys
import tomllib
from collections import defaultdict
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
OURS = ("protos", "operators", "device_agent", "generators", "coordinator")
AGENT = ("protos", "operators", "device_agent")
# DESIGN.md's layout table: which of our packages each package may import.
MAY_IMPORT = {
    "protos": set(),
    "operators": set(),
    "device_agent": {"protos", "operators"},
    "generators": {"operators", "protos"},
    "coordinator": {"protos", "operators", "generators"},
}
# Known departures (docs/architecture.md, "Installs and imports").
DEPARTURES = {
    # `make protos` regenerates the stubs: a development step (grpcio-tools is in `dev`).
    ("protos/generate.py", "grpc_tools"),
}
# Never needed by an agent: the coordinator's, the generators' and the tests' own.
BLOCKED = ("ray", "click", "rich", "aiohttp", "coordinator", "generators", "pyarrow", "yaml",
           "pytest")
# Candidate files under tests/ are data, not project code (ruff skips them too).
DATA = tuple(d + "/" for d in PYPROJECT["tool"]["ruff"]["extend-exclude"] if d.startswith("tests/"))


@functools.cache
def _sources(package: str) -> tuple[tuple[str, ast.Module], ...]:
    """(path from the repository root, syntax tree) of every Python file of ``package``."""
    out = []
    for path in sorted((REPO / package).rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if not rel.startswith(DATA):
            out.append((rel, ast.parse(path.read_text(), rel)))
    return tuple(out)


def _imports(package: str) -> dict[str, set[str]]:
    """Top-level module -> the files of ``package`` that import it (anywhere in the file)."""
    found: dict[str, set[str]] = defaultdict(set)
    for rel, tree in _sources(package):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{rel}: relative import"
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if (rel, top) not in DEPARTURES:
                    found[top].add(rel)
    return found


def _optional(package: str) -> set[str]:
    """Top-level modules that ``package`` imports somewhere under ``try: … except ImportError``."""
    found = set()
    for _rel, tree in _sources(package):
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any(
                    isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                    for h in node.handlers):
                for stmt in node.body:
                    if isinstance(stmt, ast.Import):
                        found |= {a.name.split(".")[0] for a in stmt.names}
                    elif isinstance(stmt, ast.ImportFrom) and stmt.module:
                        found.add(stmt.module.split(".")[0])
    return found


def _third_party(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Distribution (normalised name) -> files that import it, over ``packages``. A module that
    is not installed here but imported under ``except ImportError`` somewhere is left out."""
    provided = packages_distributions()
    out: dict[str, set[str]] = defaultdict(set)
    for package in packages:
        optional = _optional(package)
        for module, files in _imports(package).items():
            # bench/: the repository's own scripts (tests/bench checks their logic), not a dependency
            if module in sys.stdlib_module_names or module in (*OURS, "tests", "bench", "__future__"):
                continue
            if module not in provided and module in optional:
                continue
            dists = provided.get(module)
            assert dists, f"{sorted(files)} import {module!r}, which no installed distribution provides"
            for dist in dists:
                out[_norm(dist)] |= files
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(requirements: list[str]) -> set[str]:
    out = set()
    for req in requirements:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        assert m, req
        out.add(_norm(m.group(1)))
    return out


def _extra(name: str) -> set[str]:
    return _names(PYPROJECT["project"]["optional-dependencies"][name])


BASE = _names(PYPROJECT["project"]["dependencies"])


def test_packages_import_only_what_the_layout_allows() -> None:
    for package, allowed in MAY_IMPORT.items():
        ours = {m: f for m, f in _imports(package).items() if m in OURS and m != package}
        wrong = {m: sorted(f) for m, f in ours.items() if m not in allowed}
        assert not wrong, f"{package} may import only {sorted(allowed)} of ours: {wrong}"


def test_base_requirements_are_exactly_what_the_agent_imports() -> None:
    used = _third_party(AGENT)
    assert set(used) == BASE, (
        f"imported by the agent's packages but not a base requirement: "
        f"{ {d: sorted(f)[:3] for d, f in used.items() if d not in BASE} }; "
        f"a base requirement they never import: {sorted(BASE - set(used))}")


def test_the_coordinator_extra_is_what_coordinator_and_generators_add() -> None:
    used = set(_third_party(("coordinator", "generators")))
    coordinator, export = _extra("coordinator"), _extra("export")
    assert export == {"pyarrow"} and export <= used  # imported only by `kgb export --format parquet`
    assert used - BASE - export == coordinator, (used - BASE - export, coordinator)
    assert not coordinator & BASE


def test_all_is_every_extra_but_dev() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    [self_ref] = extras["all"]
    m = re.fullmatch(r"kernelgenbench\[([a-z,]+)\]", self_ref.replace(" ", ""))
    assert m, self_ref
    assert set(m.group(1).split(",")) == set(extras) - {"all", "dev"}


def test_tests_need_nothing_beyond_the_declared_sets() -> None:
    """The tests' own imports (PyYAML, pytest …) are declared in ``dev``, not carried in by
    another package's dependencies (PyYAML used to come only with Ray)."""
    used = set(_third_party(("tests",)))
    declared = BASE | _extra("coordinator") | _extra("export") | _extra("dev")
    assert used <= declared, sorted(used - declared)


def test_constraints_pin_every_declared_requirement() -> None:
    pins: dict[str, str] = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version and re.fullmatch(r"[0-9][0-9a-z.+]*", version.strip()), line
            assert _norm(name) not in pins, f"pinned twice: {name}"
            pins[_norm(name)] = version.strip()
    declared = BASE | _extra("coordinator") | _extra("export") | _extra("dev")
    assert set(pins) == declared, (sorted(declared - set(pins)), sorted(set(pins) - declared))
    assert pins["torch"] == "2.13.0"  # the CPU wheel on this machine's disk: anything else downloads GBs


def _lower_bound(spec: str) -> tuple[int, int]:
    m = re.fullmatch(r">=\s*3\.(\d+)", spec.strip())
    assert m, f"requires-python should be a plain lower bound, got {spec!r}"
    return 3, int(m.group(1))


def test_requires_python_covers_what_the_code_imports() -> None:
    oldest = _lower_bound(PYPROJECT["project"]["requires-python"])
    # Standard-library modules newer than some Python we might claim, by the version that added them.
    newer = {"tomllib": (3, 11)}
    for package in (*OURS, "tests"):
        for module, files in _imports(package).items():
            if module in newer:
                assert oldest >= newer[module], f"{sorted(files)} import {module}: needs {newer[module]}"
    assert PYPROJECT["tool"]["mypy"]["python_version"] == f"{oldest[0]}.{oldest[1]}"
    assert f"Python {oldest[0]}.{oldest[1]}+" in (REPO / "README.md").read_text()


_WITHOUT_COORDINATOR = """
import importlib, importlib.abc, json, pkgutil, runpy, sys

BLOCKED = set(sys.argv[1].split(","))
attempts = []

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            attempts.append(name)
            raise ModuleNotFoundError(f"{name} is blocked: an agent host does not have it", name=name)
        return None

sys.meta_path.insert(0, Block())
assert not [m for m in sys.modules if m.split(".")[0] in BLOCKED]

loaded = 0
for top in ("protos", "operators", "device_agent"):
    package = importlib.import_module(top)
    for info in pkgutil.walk_packages(package.__path__, top + "."):
        if info.name != "protos.generate":  # `make protos`: grpcio-tools, a dev tool
            importlib.import_module(info.name)
            loaded += 1
import operators
problems = len(operators.all_specs())
sys.argv = ["device_agent", "serve", "--help"]
try:
    runpy.run_module("device_agent", run_name="__main__", alter_sys=True)
    code = None
except SystemExit as exc:
    code = exc.code
print(json.dumps({"loaded": loaded, "problems": problems, "help_exit": code, "attempts": attempts}))
"""


def test_agent_loads_and_starts_without_coordinator_code() -> None:
    r = subprocess.run([sys.executable, "-c", _WITHOUT_COORDINATOR, ",".join(BLOCKED)],
                       capture_output=True, text=True, timeout=300, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-4000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["attempts"] == [], f"the agent tried to import {result['attempts']}"
    assert result["help_exit"] == 0 and "--metrics-port" in r.stdout
    assert result["loaded"] >= 100 and result["problems"] >= 100, result


@pytest.mark.parametrize("blocked", ["click", "rich", "aiohttp"])
def test_kgb_without_the_coordinator_extra_says_what_to_install(blocked: str) -> None:
    script = _WITHOUT_COORDINATOR.split("loaded = 0")[0] + "from coordinator.entry import main\nmain()\n"
    r = subprocess.run([sys.executable, "-c", script, blocked], capture_output=True, text=True,
                       timeout=60, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 2, r.stderr
    assert f"kgb: {blocked} is not installed" in r.stderr
    assert "pip install 'kernelgenbench[coordinator]'" in r.stderr
    assert "python -m device_agent serve" in r.stderr
    assert "Traceback" not in r.stderr
