"""What one process is asked to run (:class:`SweepOptions`) and how it is told to stop
(:class:`SweepStop`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from coordinator.fleet import FleetConfig
from coordinator.fleet.registration import RegistryAccess
from protos.security import ClientAuthFiles


@dataclass(frozen=True)
class SweepOptions:
    """How one process runs a spec (what is not the spec's business)."""

    run_id: str
    store_dir: Path
    spec_text: str
    spec_source: str
    spec_dir: str = "."                     # relative paths in the spec are relative to this
    ray_address: str | None = None          # join this cluster; None: start a local one
    ray_num_cpus: int | None = None
    fleet: FleetConfig = FleetConfig()
    registry_port: int | None = None        # serve agent registration here (0: a free port)
    registry_host: str = "127.0.0.1"
    registry_access: RegistryAccess = RegistryAccess()  # TLS and tokens of that server
    agent_auth: ClientAuthFiles | None = None  # TLS and token for agents without their own
    eval_timeout_s: float = 900.0
    wait_for_agents_s: float = 60.0
    resume: bool = False
    kind: str = "sweep"                     # what made the run: "sweep", or "run" (kgb run)


class SweepStop:
    """Why the driver stops early: set by a signal handler or by a cancel seen in the store."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.reason = ""
        self.hard = False

    def request(self, reason: str) -> None:
        if self.event.is_set():
            self.hard = True  # a second request: stop at once
        self.reason = self.reason or reason
        self.event.set()
