"""Worker uids: claimed exclusively, so agents sharing a host never kill each other's workers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from device_agent import worker_uids

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="private uids need root")


@pytest.fixture(autouse=True)
def _claims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGB_UID_CLAIMS_DIR", str(tmp_path / "claims"))


def test_uids_are_unique_and_released() -> None:
    uids = [worker_uids.next_uid() for _ in range(20)]
    assert None not in uids and len(set(uids)) == 20
    for uid in uids:
        worker_uids.release_uid(uid)
    assert not any((Path(os.environ["KGB_UID_CLAIMS_DIR"]) / str(u)).exists() for u in uids)


def test_another_live_agents_claim_is_respected_and_a_dead_ones_taken_over(tmp_path: Path) -> None:
    claims = Path(os.environ["KGB_UID_CLAIMS_DIR"])
    claims.mkdir(mode=0o700)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        for k in range(worker_uids.UID_SPAN):  # another live agent holds every uid but one
            if k != 7:
                (claims / str(worker_uids.UID_BASE + k)).write_text(str(other.pid))
        assert worker_uids.next_uid() == worker_uids.UID_BASE + 7
    finally:
        other.kill()
        other.wait()
    # That agent is gone now: its claims are stale and may be taken over.
    assert worker_uids.next_uid() is not None


def test_a_uid_with_running_processes_is_skipped() -> None:
    Path(os.environ["KGB_UID_CLAIMS_DIR"]).mkdir(mode=0o700)
    uid = worker_uids.UID_BASE + 123
    proc = subprocess.Popen(["sleep", "30"], user=uid)
    try:
        assert not worker_uids._claim(uid)
    finally:
        proc.kill()
        proc.wait()
    assert worker_uids._claim(uid)
    worker_uids.release_uid(uid)
