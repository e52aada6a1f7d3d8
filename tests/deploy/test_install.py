"""The agent's install step and its container image, as far as this machine can check them.

No container runtime here, so the Dockerfile is checked by reading it, and its install step,
deploy/agent/install.sh, runs as a plain script: into an empty virtual environment, from a copy
of exactly the files the Dockerfile copies, with torch and triton given the way the image gives
them (this machine's CPU build instead of the GPU's). The installed agent must load without Ray
or the CLI toolkit, serve from the environment alone (the copied sources deleted, as the image
deletes them) and pass an honest candidate; the systemd unit must verify against that layout.
The script's choices (overridden pins, a torch index, extras, bad settings) are checked with a
stand-in interpreter that records what it is asked to run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import operators
from protos.client import AgentClient
from protos.records import EvalRequest, Status
from tests.deploy.helpers import REPO, assert_serve_flags, debian_tool

AGENT_DIR = REPO / "deploy" / "agent"
DOCKERFILE = AGENT_DIR / "Dockerfile"
DOCKERIGNORE = AGENT_DIR / "Dockerfile.dockerignore"
SCRIPT = AGENT_DIR / "install.sh"
UNIT = AGENT_DIR / "kgb-agent.service"
CONSTRAINTS = REPO / "constraints.txt"


# -- reading the Dockerfile ---------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    name: str  # upper case: FROM, RUN, COPY …
    args: str


def instructions() -> list[Instruction]:
    """The Dockerfile's instructions, continuation lines joined and comments dropped."""
    out: list[Instruction] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if pending and line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        name, _, args = full.partition(" ")
        out.append(Instruction(name.upper(), args.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return out


def one(name: str) -> Instruction:
    found = [i for i in instructions() if i.name == name]
    assert len(found) == 1, f"{name}: {found}"
    return found[0]


def copies() -> list[tuple[list[str], str]]:
    """(sources, destination) of every COPY."""
    out = []
    for i in instructions():
        if i.name == "COPY":
            words = i.args.split()
            assert not any(w.startswith("--") for w in words), i  # no --from/--chown stages
            out.append((words[:-1], words[-1]))
    return out


def copied_paths() -> dict[str, str]:
    """Each copied repository path -> where it lands in the image."""
    out = {}
    for sources, dest in copies():
        for src in sources:
            out[src] = dest + Path(src).name if dest.endswith("/") else dest
    return out


def build_args() -> dict[str, str]:
    """``ARG NAME=default`` declared after FROM (those reach RUN as environment variables)."""
    names = [i.name for i in instructions()]
    after_from = instructions()[names.index("FROM") + 1:]
    return dict(i.args.split("=", 1) for i in after_from if i.name == "ARG")


def install_run() -> Instruction:
    runs = [i for i in instructions() if i.name == "RUN" and "install.sh" in i.args]
    assert len(runs) == 1, runs
    return runs[0]


def install_env() -> dict[str, str]:
    """The ``NAME=value`` words before the command in the install RUN."""
    env = {}
    for word in shlex.split(install_run().args):
        if "=" not in word or word.startswith("/"):
            break
        k, v = word.split("=", 1)
        env[k] = v
    return env


def pins() -> dict[str, str]:
    out = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[name.strip().lower()] = version.strip()
    return out


# -- the Dockerfile, read -----------------------------------------------------------------------


def test_the_image_is_cuda_runtime_based_and_runs_the_agent_as_root() -> None:
    first = instructions()[0]
    assert first.name == "ARG", first
    arg, _, default = first.args.partition("=")
    assert one("FROM").args == "${" + arg + "}"
    assert re.fullmatch(r"nvidia/cuda:\d+\.\d+\.\d+-runtime-ubuntu\d\d\.\d\d", default), default
    # root on purpose: the sandbox needs it (docs/deploy.md, "Why root")
    assert "USER" not in {i.name for i in instructions()}
    # Triton compiles launchers with the C compiler against Python.h at run time; the sandbox's
    # seccomp filter loads libseccomp.
    apt = next(i.args for i in instructions() if i.name == "RUN" and "apt-get install" in i.args)
    assert {"gcc", "libc6-dev", "python3-dev", "python3-venv", "libseccomp2"} <= set(apt.split())


def test_the_image_copies_what_the_distribution_needs_and_the_context_sends_just_that() -> None:
    copied = copied_paths()
    for src in copied:
        assert (REPO / src).exists(), f"COPY {src}: no such path"
    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = [p.rstrip("*") for p in find["include"]]
    needed = {"pyproject.toml", "README.md", "constraints.txt", "deploy/agent/install.sh", *packages}
    assert set(copied) == needed, (sorted(needed - set(copied)), sorted(set(copied) - needed))
    # Everything lands under one source directory, in the repository's layout.
    roots = {dest[: -len(src)] for src, dest in copied.items()}
    assert len(roots) == 1, roots
    # The build context is the repository root: the ignore file lets exactly these through.
    lines = [ln.strip() for ln in DOCKERIGNORE.read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines[0] == "*"
    assert {ln[1:] for ln in lines if ln.startswith("!")} == set(copied)


def test_the_install_step_is_the_script_with_the_gpu_torch() -> None:
    copied = copied_paths()
    source = copied["pyproject.toml"].rsplit("/", 1)[0]
    words = shlex.split(install_run().args)
    assert words[words.index("sh") + 1:words.index("sh") + 3] == [copied["deploy/agent/install.sh"], source]
    # The build args are the script's settings; each is documented in the script.
    args = build_args()
    assert {"KGB_TORCH", "KGB_TRITON", "KGB_TORCH_INDEX_URL"} <= set(args)
    documented = set(re.findall(r"^#\s+(KGB_[A-Z_]+)\s", SCRIPT.read_text(), re.M))
    assert (set(args) | set(install_env())) - {"PIP_NO_CACHE_DIR"} <= documented
    # torch and triton are the pair measured on the H200, from the index of the CUDA they were built for.
    benchmarks = (REPO / "docs" / "BENCHMARKS.md").read_text()
    cuda = args["KGB_TORCH_INDEX_URL"].rstrip("/").rsplit("/", 1)[1]
    assert f"torch {args['KGB_TORCH']}+{cuda}, triton {args['KGB_TRITON']}" in benchmarks
    assert args["KGB_TORCH_INDEX_URL"].startswith("https://")


def test_the_image_starts_the_agent_from_the_environment_in_its_empty_directory() -> None:
    entry = json.loads(one("ENTRYPOINT").args)
    venv = install_env()["KGB_VENV"]
    assert entry == [f"{venv}/bin/python", "-m", "device_agent"]
    assert one("WORKDIR").args == f"{venv}/run"  # made by install.sh, empty, root's
    assert_serve_flags(json.loads(one("CMD").args), "CMD")
    env = dict(re.findall(r"(\w+)=(\S+)", one("ENV").args))
    volume = one("VOLUME").args
    assert env["KGB_AGENT_SECRET_FILE"].startswith(volume + "/")
    assert env["KGB_CACHE_DIR"].startswith(volume + "/")


def test_the_docs_give_the_dockerfiles_build_and_run_commands() -> None:
    header = [ln[1:].strip() for ln in DOCKERFILE.read_text().splitlines() if ln.startswith("#")]
    text = " ".join(header).replace("\\ ", "")
    commands = re.findall(r"(docker (?:build|run) .+? kernelgenbench-agent(?: \.)?)(?= docker|  | #|$)", text)
    assert len(commands) == 2, text
    docs = re.sub(r"\\\n\s*", "", (REPO / "docs" / "deploy.md").read_text())
    for command in commands:
        assert " ".join(command.split()) in docs, command


# -- the script's choices, with a stand-in interpreter ------------------------------------------

_FAKE_PYTHON = """#!/bin/sh
# Stands in for python3: `-m venv DIR` makes DIR/bin/python, a copy of this script; every call
# is logged; nothing is installed.
echo "$*" >> "$FAKE_LOG"
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; fi
if [ "$1" = "-" ]; then cat > /dev/null; fi
exit 0
"""


@contextlib.contextmanager
def outside_tmp() -> Iterator[Path]:
    """A new directory beside the sources, readable by the workers' uids (the agent's tests
    already need the sources to be that)."""
    top = Path(tempfile.mkdtemp(prefix=".kgb-install-", dir=REPO))
    try:
        top.chmod(0o755)
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def fake_python(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    py = tmp_path / "python3"
    py.write_text(_FAKE_PYTHON)
    py.chmod(0o755)
    with outside_tmp() as top:
        yield py, tmp_path / "calls.log", top / "venv"


def _script(fake: tuple[Path, Path, Path], tmp_path: Path,
            **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    py, log, venv = fake
    log.unlink(missing_ok=True)
    full = {"PATH": os.environ["PATH"], "FAKE_LOG": str(log), "KGB_PYTHON": str(py),
            "KGB_VENV": str(venv), **env}
    r = subprocess.run(["sh", str(SCRIPT), str(REPO)], capture_output=True, text=True, timeout=60,
                       env=full, cwd=tmp_path)
    return r, log.read_text().splitlines() if log.exists() else []


def test_script_installs_the_base_package_with_the_constraints(
        fake_python: tuple[Path, Path, Path], tmp_path: Path) -> None:
    r, calls = _script(fake_python, tmp_path)
    assert r.returncode == 0, r.stderr
    venv = fake_python[2]
    used = venv / "kgb-constraints.txt"
    assert calls == [f"-m venv {venv}", f"-m pip install --no-input -c {used} {REPO}",
                     "-m device_agent serve --help", "-"]
    assert used.read_text() == CONSTRAINTS.read_text()
    run = venv / "run"
    assert run.is_dir() and not any(run.iterdir()) and stat.S_IMODE(run.stat().st_mode) == 0o755


def test_script_replaces_torch_and_triton_and_takes_torch_from_an_index(
        fake_python: tuple[Path, Path, Path], tmp_path: Path) -> None:
    index = "https://download.pytorch.org/whl/cu130"
    r, calls = _script(fake_python, tmp_path, KGB_TORCH="2.11.0", KGB_TRITON="3.6.0",
                       KGB_TORCH_INDEX_URL=index, KGB_EXTRAS="coordinator")
    assert r.returncode == 0, r.stderr
    used = fake_python[2] / "kgb-constraints.txt"
    assert calls[1:3] == [f"-m pip install --no-input -c {used} --index-url {index} torch",
                          f"-m pip install --no-input -c {used} {REPO}[coordinator]"]
    got = dict(pins())
    got.update(torch="2.11.0", triton="3.6.0")
    written = [ln for ln in used.read_text().splitlines() if ln and not ln.startswith("#")]
    assert dict(ln.lower().split("==") for ln in written) == got
    assert len(written) == len(got)  # torch and triton once each


@pytest.mark.parametrize(("env", "message"), [
    ({"KGB_TORCH": "2.11.0"}, "set KGB_TORCH and KGB_TRITON together"),
    ({"KGB_TRITON": "3.6.0"}, "set KGB_TORCH and KGB_TRITON together"),
    ({"KGB_CONSTRAINTS": "/nonexistent/constraints.txt"}, "no constraints file"),
])
def test_script_refuses_bad_settings_before_touching_anything(
        fake_python: tuple[Path, Path, Path], tmp_path: Path, env: dict[str, str], message: str) -> None:
    r, calls = _script(fake_python, tmp_path, **env)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert calls == [] and not fake_python[2].exists()
    assert not Path(env.get("KGB_VENV", fake_python[2])).exists()


def test_script_needs_a_source_tree(tmp_path: Path) -> None:
    r = subprocess.run(["sh", str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "has no pyproject.toml" in r.stderr
    r = subprocess.run(["sh", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "KGB_TORCH_INDEX_URL" in r.stderr and "set -eu" not in r.stderr


# -- the real install ---------------------------------------------------------------------------


def _stage(root: Path) -> Path:
    """The image's source directory: what the Dockerfile copies, where it copies it."""
    copied = copied_paths()
    base = copied["pyproject.toml"].rsplit("/", 1)[0]
    for src, dest in copied.items():
        target = root / dest.removeprefix(base + "/")
        if (REPO / src).is_dir():
            shutil.copytree(REPO / src, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / src, target)
    return root


def _clean_env() -> dict[str, str]:
    """This process's environment without what points into the development environment, and
    without the interpreter mode the test session sets (an image build has no such variable)."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "TRITON_INTERPRET")
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A virtual environment made by install.sh the way the image makes it (this machine's torch)."""
    with outside_tmp() as top:
        source = _stage(tmp_path_factory.mktemp("image") / "src")
        venv = top / "kgb"
        # PIP_NO_COMPILE: no byte-code for torch's thousands of modules, to save CI half a minute.
        env = {**_clean_env(), "KGB_VENV": str(venv), "KGB_TORCH": pins()["torch"],
               "KGB_TRITON": pins()["triton"], "PIP_NO_COMPILE": "1"}
        r = subprocess.run(["sh", str(source / "deploy" / "agent" / "install.sh"), str(source)],
                           capture_output=True, text=True, timeout=540, env=env, cwd=top)
        assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
        assert "install.sh: ok: torch" in r.stdout, r.stdout[-3000:]
        shutil.rmtree(source)  # as the image does: the environment must stand alone
        yield venv


_PROBE = """
import importlib.util, json, sys
import device_agent, torch, triton, pynvml
print(json.dumps({"absent": [m for m in ("ray", "click", "rich", "pyarrow", "yaml", "pytest")
                             if importlib.util.find_spec(m) is None],
                  "agent": device_agent.__file__, "prefix": sys.prefix,
                  "torch": torch.__version__, "triton": triton.__version__}))
"""


def test_installed_agent_has_no_coordinator_dependencies(installed: Path) -> None:
    r = subprocess.run([str(installed / "bin" / "python"), "-c", _PROBE], capture_output=True, text=True,
                       timeout=120, env=_clean_env(), cwd=installed / "run")
    assert r.returncode == 0, r.stderr
    probe = json.loads(r.stdout)
    assert set(probe["absent"]) == {"ray", "click", "rich", "pyarrow", "yaml", "pytest"}
    assert probe["agent"].startswith(probe["prefix"] + "/lib/")
    assert probe["torch"].split("+")[0] == pins()["torch"] and probe["triton"] == pins()["triton"]
    kgb = subprocess.run([str(installed / "bin" / "kgb"), "agent", "serve"], capture_output=True,
                         text=True, timeout=60, env=_clean_env())
    assert kgb.returncode == 2 and "python -m device_agent serve" in kgb.stderr, kgb.stderr
    assert "kernelgenbench[coordinator]" in kgb.stderr


def test_installed_agent_serves_and_passes_an_honest_candidate(
        installed: Path, tmp_path: Path, agent_secret_env: None) -> None:
    port_file = tmp_path / "port"
    log = tmp_path / "agent.log"
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            [str(installed / "bin" / "python"), "-m", "device_agent", "serve", "--port", "0",
             "--platform", "cpu", "--workers", "1", "--port-file", str(port_file)],
            cwd=installed / "run", env=_clean_env(), stdout=logf, stderr=logf,
            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        end = time.monotonic() + 120
        while not port_file.exists():
            assert proc.poll() is None and time.monotonic() < end, log.read_text()[-3000:]
            time.sleep(0.1)
        spec = operators.get("aten::add")

        async def go(address: str) -> Status:
            async with AgentClient(address) as c:
                await c.wait_serving(180)
                v = await c.evaluate(EvalRequest(uuid.uuid4().hex, spec.id, spec.solution.encode()),
                                     timeout=180)
                return v.status

        try:
            status = asyncio.run(go(f"127.0.0.1:{port_file.read_text().strip()}"))
        except Exception as exc:  # noqa: BLE001 - the agent's log says why
            pytest.fail(f"{exc!r}\n{log.read_text()[-3000:]}")
        assert status is Status.PASSED, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, log.read_text()[-3000:]


def test_systemd_unit_verifies_against_the_installed_layout(installed: Path, tmp_path: Path) -> None:
    analyze = debian_tool("systemd-analyze", "systemd")
    text = UNIT.read_text()
    exec_start = re.search(r"^ExecStart=(.+)$", text, re.M)
    assert exec_start
    argv = shlex.split(exec_start.group(1))
    venv = install_env()["KGB_VENV"]  # the unit and the image share the layout
    assert argv[:3] == [f"{venv}/bin/python", "-m", "device_agent"]
    assert_serve_flags(argv[3:], "ExecStart")
    assert re.search(rf"^WorkingDirectory={re.escape(venv)}/run$", text, re.M)
    assert "User=" not in text  # root: the sandbox needs it
    unit = tmp_path / UNIT.name
    unit.write_text(text.replace(venv + "/", f"{installed}/"))
    r = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
