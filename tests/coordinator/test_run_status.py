"""Status truth (coordinator/run_status.py): a stored ``running`` whose coordinator is gone —
its pid dead on this host, or its lease expired anywhere — is ``interrupted``; a live one stays
``running``; ``cancelling`` keeps the lease; a finished run drops it."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from coordinator.cli import kgb
from coordinator.run_status import owner_alive, run_status
from coordinator.store import DB_NAME, Store

RUN = "run-s"


def test_a_running_state_whose_coordinator_is_gone_is_interrupted(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    here, there = socket.gethostname(), "another-host.example"
    store = Store(tmp_path / "kgb.sqlite")
    store.set_run_state(RUN, "running", f"pid {os.getpid()} on {here}", lease_s=15)
    st = run_status(store, RUN)
    assert (st.state, st.why, st.live) == ("running", "", True) and st.started is not None
    assert run_status(store, RUN, now=time.time() + 60).state == "interrupted"  # lease expired
    assert "lease expired" in run_status(store, RUN, now=time.time() + 60).why
    assert store.renew_lease(RUN, 120)[0] == "running"  # type: ignore[index]
    assert run_status(store, RUN, now=time.time() + 60).state == "running"
    store.set_run_state(RUN, "cancelling", f"pid {os.getpid()} on {here}")  # keeps the lease
    assert run_status(store, RUN, now=time.time() + 60).state == "cancelling"

    store.set_run_state(RUN, "running", f"pid {gone.pid} on {here}", lease_s=15)
    st = run_status(store, RUN)  # the lease holds, but the pid on this host is dead
    assert (st.state, st.stored, st.live) == ("interrupted", "running", False)
    assert f"pid {gone.pid}" in st.why

    store.set_run_state(RUN, "running", f"pid 1 on {there}", lease_s=15)  # unknowable pid
    assert run_status(store, RUN).state == "running"
    assert run_status(store, RUN, now=time.time() + 30).state == "interrupted"
    store.set_run_state(RUN, "complete", "done")
    assert run_status(store, RUN).state == "complete" and store.run_lease(RUN) == (None, None)


def test_owner_alive_knows_only_this_hosts_pids() -> None:
    here = socket.gethostname()
    assert owner_alive(f"pid {os.getpid()} on {here}") is True
    assert owner_alive(f"pid {os.getpid()} on another-host.example") is None
    assert owner_alive(f"pid x on {here}") is None and owner_alive("resumed by someone") is None


# -- the resume hint: the form that works from any directory -----------------------------------


def _interrupted_sweep(store_dir: Path, run_id: str) -> None:
    """A sweep run whose coordinator died: ``running`` under a pid that no longer exists."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    store = Store(store_dir / DB_NAME)
    try:
        store.add_run(run_id, {"kind": "sweep", "spec": "not a spec", "spec_source": "x.toml",
                               "spec_dir": str(store_dir), "store": str(store_dir)})
        store.set_run_state(run_id, "running", f"pid {gone.pid} on {socket.gethostname()}",
                            lease_s=15)
    finally:
        store.close()


def _kgb(*args: str) -> str:
    r = CliRunner().invoke(kgb, list(args))
    assert r.exit_code == 0, r.output
    return r.output


@pytest.mark.parametrize("layout", ["named after the run", "a store of its own, two sweeps"])
def test_status_and_cancel_print_a_resume_hint_that_works_from_anywhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """``kgb sweep status`` and ``cancel`` of an interrupted run print the resume command; run
    from another directory (a path with a space in it), its arguments name the same run."""
    if layout == "named after the run":
        store_dir = tmp_path / "my runs" / "sweep-a"
    else:
        store_dir = tmp_path / "my runs" / "shared"
    store_dir.mkdir(parents=True)
    _interrupted_sweep(store_dir, "sweep-a")
    if layout != "named after the run":
        _interrupted_sweep(store_dir, "sweep-b")
        ref = ["--store", str(store_dir / DB_NAME), "sweep-a"]
    else:
        ref = [str(store_dir)]
    monkeypatch.chdir(tmp_path)
    out = _kgb("sweep", "status", *ref)
    assert "sweep-a" in out and "interrupted" in out
    (hint,) = [line.split("continue with: ", 1)[1] for line in out.splitlines()
               if "continue with: " in line]
    cancelled = _kgb("sweep", "cancel", *ref)
    assert f"(resume with `{hint}`)" in cancelled
    words = shlex.split(hint)
    assert words[:3] == ["kgb", "sweep", "resume"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the hint's arguments, given to status, find the same run
    again = _kgb("sweep", "status", "--json", *words[3:])
    assert orjson.loads(again)["run"] == "sweep-a"
    assert orjson.loads(again)["state"] == "interrupted"
