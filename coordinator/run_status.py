"""Where a stored run really stands: a ``running`` state whose coordinator is gone is
``interrupted``.

A coordinator records ``running`` with its owner (``pid N on HOST``) and a lease it renews every
few seconds (:mod:`coordinator.engine.cluster`); a killed one records nothing more. So the
stored state alone lies after a ``kill -9``. :func:`run_status` checks both: on the
coordinator's own host, whether its pid still runs; anywhere, whether its lease has expired
(a pid that was reused by another process is caught by the lease). ``kgb sweep status``,
``cancel``, ``resume`` and ``kgb report`` read the state through it.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

from coordinator.store import Store

LIVE_STATES = ("running", "cancelling")


@dataclass(frozen=True)
class RunStatus:
    """``state``: the effective state; ``stored``: what the store says; ``why``: why they
    differ ("" when they do not); ``started``: when the live coordinator started (None when
    none is live)."""

    state: str
    stored: str
    detail: str
    updated: float | None
    why: str = ""
    started: float | None = None

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES


def owner_alive(detail: str) -> bool | None:
    """Whether the coordinator named ``pid N on HOST`` still runs: None when unknowable here
    (another host, or a detail of another form)."""
    parts = detail.split()
    if len(parts) != 4 or parts[0] != "pid" or parts[2] != "on" or parts[3] != socket.gethostname():
        return None
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return None
    return True


def run_status(store: Store, run_id: str, now: float | None = None) -> RunStatus:
    """The run's effective state (see the module doc); ``unknown`` when none was recorded."""
    st = store.run_state(run_id)
    if st is None:
        return RunStatus("unknown", "unknown", "", None)
    state, detail, updated = st
    if state not in LIVE_STATES:
        return RunStatus(state, state, detail, updated)
    started, lease = store.run_lease(run_id)
    now = time.time() if now is None else now
    if owner_alive(detail) is False:
        return RunStatus("interrupted", state, detail, updated,
                         f"its coordinator ({detail}) is not running")
    if lease is not None and lease < now:
        return RunStatus("interrupted", state, detail, updated,
                         f"its coordinator's lease expired {now - lease:.0f} s ago ({detail})")
    return RunStatus(state, state, detail, updated, started=started)
