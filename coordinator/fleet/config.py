"""How a fleet checks, trusts and retries: :class:`FleetConfig`."""

from __future__ import annotations

import math
from dataclasses import dataclass

from protos.registration import Lease


@dataclass(frozen=True)
class FleetConfig:
    """Health checking, leases and the retry budget. Defaults suit a real fleet; tests shrink
    the intervals."""

    probe_interval_s: float = 2.0     # health check of every agent
    probe_timeout_s: float = 3.0      # deadline of each health/Describe call
    down_after: int = 2               # failed checks in a row before an agent's calls move
    lease_s: float = 10.0             # registered agents: no heartbeat this long -> DOWN
    forget_after_s: float = 60.0      # registered agents DOWN this long are forgotten
    attempts: int = 4                 # failed attempts (not busy answers) per evaluation
    backoff_base_s: float = 0.2
    backoff_max_s: float = 5.0
    wait_for_agent_s: float = 30.0    # how long an evaluation waits when no agent can take it
    slots_per_worker: float = 2.0
    attempt_timeout_s: float | None = None  # per-attempt deadline (None: what is left)
    spot_check: float = 0.0           # fraction of PASSED verdicts judged again by a second agent

    def __post_init__(self) -> None:
        for name in ("probe_interval_s", "probe_timeout_s", "lease_s", "forget_after_s",
                     "backoff_base_s", "backoff_max_s", "slots_per_worker"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"FleetConfig.{name} must be a number > 0, got {value!r}")
        if not (math.isfinite(self.wait_for_agent_s) and self.wait_for_agent_s >= 0):
            raise ValueError(f"FleetConfig.wait_for_agent_s must be >= 0, got {self.wait_for_agent_s!r}")
        if self.attempts < 1 or self.down_after < 1:
            raise ValueError("FleetConfig.attempts and down_after must be >= 1")
        if self.attempt_timeout_s is not None and not self.attempt_timeout_s > 0:
            raise ValueError(f"FleetConfig.attempt_timeout_s must be > 0, got {self.attempt_timeout_s!r}")
        if not 0.0 <= self.spot_check <= 1.0:
            raise ValueError(f"FleetConfig.spot_check must be within [0, 1], got {self.spot_check!r}")

    @property
    def lease(self) -> Lease:
        return Lease(lease_s=self.lease_s, heartbeat_interval_s=self.lease_s / 3)

