"""Registering this agent with a coordinator (``kgb agent serve --register HOST:PORT``).

Once the workers are warm, :class:`Registrar` registers the agent (its advertised address,
platform, device model, harness version and load) with the coordinator's registry, then sends a
heartbeat (load and draining flag) at the interval the coordinator asks for. When the
coordinator answers that it does not know the agent (it restarted, or forgot an agent that was
down too long) the agent registers again. On shutdown the agent reports draining at once and
deregisters after its in-flight work. A coordinator that cannot be reached never takes the agent
down: the registrar logs it and retries with jittered exponential back-off (at most
``backoff_max_s`` apart), while the agent keeps serving whoever calls it directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

from protos.records import AgentDescription
from protos.registration import (
    AgentLoad,
    Heartbeat,
    Lease,
    Registration,
    RegistrationRefused,
    RegistryClient,
    RegistryError,
    UnknownAgent,
    check_address,
)
from protos.security import ClientAuth

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 3.0


@dataclass(frozen=True)
class RegistrationSettings:
    coordinator: str              # host:port of the coordinator's registry
    advertise: str                # host:port the coordinator uses to reach this agent
    timeout_s: float = 3.0        # deadline of each registry call
    backoff_base_s: float = 0.5
    backoff_max_s: float = 5.0
    auth: ClientAuth | None = field(default=None, repr=False)  # TLS and token for the registry

    def __post_init__(self) -> None:
        check_address(self.coordinator)
        check_address(self.advertise)
        if not (self.timeout_s > 0 and 0 < self.backoff_base_s <= self.backoff_max_s):
            raise ValueError("registration timeouts and back-off must be > 0 (base <= max)")


def advertise_address(host: str, port: int) -> str:
    """What to tell the coordinator: the listen address, or this host's name when listening on
    every interface (``0.0.0.0`` cannot be dialled)."""
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = socket.getfqdn()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


class Registrar:
    """The registration and heartbeat loop of one agent. ``describe`` and ``draining`` read the
    agent's live state each time; nothing here can stop the agent."""

    def __init__(self, settings: RegistrationSettings, describe: Callable[[], AgentDescription],
                 draining: Callable[[], bool], *, rng: random.Random | None = None) -> None:
        self.settings = settings
        self._describe = describe
        self._draining = draining
        self._rng = rng or random.Random()
        self._client = RegistryClient(settings.coordinator, settings.auth)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._agent_id = ""
        self.registered = False

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="kgb-registrar")

    def wake(self) -> None:
        """Send the next heartbeat now (e.g. draining just began)."""
        self._wake.set()

    async def close(self) -> None:
        """Stop heartbeats and deregister (bounded by the call deadlines; failures are logged).

        The loop is asked to stop rather than only cancelled: on Python 3.11 a cancel that meets
        a wake-up inside ``asyncio.wait_for`` is swallowed, and the loop would run on."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            _, pending = await asyncio.wait({self._task}, timeout=self.settings.timeout_s + 1.0)
            for task in pending:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self._task = None
        if self.registered:
            try:
                await self._client.deregister(self._agent_id, self.settings.advertise,
                                              timeout=self.settings.timeout_s)
                log.info("deregistered from the coordinator at %s", self.settings.coordinator)
            except RegistryError as exc:
                log.warning("could not deregister from %s: %s", self.settings.coordinator, exc)
            self.registered = False
        await self._client.close()

    def _load(self, d: AgentDescription) -> AgentLoad:
        return AgentLoad(capacity=d.capacity, busy=sum(x.busy for x in d.devices),
                         queue_depth=d.queue_depth, draining=self._draining())

    async def _send(self) -> Lease:
        d = self._describe()
        self._agent_id = d.agent_id
        t = self.settings.timeout_s
        if self.registered:
            return await self._client.heartbeat(
                Heartbeat(d.agent_id, self.settings.advertise, self._load(d)), timeout=t)
        model = d.system.device_model or (d.devices[0].model if d.devices else "")
        lease = await self._client.register(
            Registration(agent_id=d.agent_id, address=self.settings.advertise,
                         platform=d.system.platform, device_model=model,
                         harness_version=d.harness_version, load=self._load(d)), timeout=t)
        self.registered = True
        log.info("registered with the coordinator at %s as %s (lease %gs)",
                 self.settings.coordinator, self.settings.advertise, lease.lease_s)
        return lease

    async def _run(self) -> None:
        failures = 0
        last_error = ""
        while not self._closing:
            try:
                lease = await self._send()
            except UnknownAgent:
                log.info("the coordinator at %s does not know this agent; registering again",
                         self.settings.coordinator)
                self.registered = False
                continue
            except Exception as exc:  # noqa: BLE001 - the agent outlives any registry trouble
                failures += 1
                error = f"{type(exc).__name__}: {exc}"
                if error != last_error:  # once per distinct problem, not once per retry
                    level = logging.ERROR if isinstance(exc, RegistrationRefused) else logging.WARNING
                    log.log(level, "cannot reach the coordinator's registry at %s (retrying): %s",
                            self.settings.coordinator, error, exc_info=not isinstance(exc, RegistryError))
                    last_error = error
                ceiling = min(self.settings.backoff_max_s,
                              self.settings.backoff_base_s * 2.0 ** min(failures - 1, 30))
                delay = ceiling * self._rng.uniform(0.5, 1.0)
            else:
                if failures:
                    log.warning("the coordinator's registry at %s answers again", self.settings.coordinator)
                failures, last_error = 0, ""
                delay = lease.heartbeat_interval_s if lease.heartbeat_interval_s > 0 else DEFAULT_INTERVAL_S
            wake = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({wake}, timeout=delay)
            finally:
                wake.cancel()
            self._wake.clear()
