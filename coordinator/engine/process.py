"""How a sweep process starts: Ray (joined, or local on loopback) and a quieter garbage
collector for the long-running driver and actors."""

from __future__ import annotations

import gc
import logging
import os
import signal
from typing import Any

import ray

log = logging.getLogger(__name__)

GC_YOUNG_THRESHOLD = 50_000  # allocations between young-generation collections (Python: 700)


def quiet_gc() -> None:
    """For a long-running sweep process: what exists once it has started (modules, the problem
    registry, Ray's own objects) is frozen out of the cyclic collector, and the young generation
    is collected less often. Each full collection otherwise walked every one of those objects,
    holding the event loop for up to a second (measured in a runner with 1,200 trajectories in
    flight), and a held loop delays every reply and verdict waiting on it."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def init_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Join ``address`` or start Ray on loopback, without token auth (a local, trusted run)."""
    from coordinator.local_agent import with_repo_on_path

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    loopback = address is None or address.rsplit(":", 1)[0].strip("[]") in (
        "127.0.0.1", "localhost", "::1")
    if loopback:
        # Ray turns a loopback address into this machine's external one (and binds there)
        # unless told this is a single-machine cluster; it reads that flag when imported.
        import ray._private.ray_constants as ray_constants

        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        ray_constants.ENABLE_RAY_CLUSTER = False
    if ray.is_initialized():
        return
    env = {"PYTHONPATH": with_repo_on_path(os.environ.get("PYTHONPATH")),
           "RAY_AUTH_MODE": os.environ["RAY_AUTH_MODE"]}
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "runtime_env": {"env_vars": env}}
    if address:
        ray.init(address=address, **kwargs)
    else:
        _start_local(num_cpus, kwargs)


LOCAL_START_ATTEMPTS = 3
# What Ray raises when a local start is too slow on a loaded machine: the raylet has not registered
# with the GCS within Ray's fixed 30 s, or the GCS server has not published its port in time.
_STARTUP_TIMEOUTS = ("timed out during startup", "Timed out waiting for file")
# Ray waits 30 s for the GCS server's port unless told otherwise; a 2-core CI machine running
# tests in parallel has needed more. An operator's own setting is kept.
GCS_PORT_WAIT_ENV, GCS_PORT_WAIT_S = "RAY_gcs_server_port_wait_time_s", "120"


def _start_local(num_cpus: int | None, kwargs: dict[str, Any]) -> None:
    """A local Ray on loopback. On a loaded machine Ray's own start-up waits can run out (seen
    in CI on 2 cores), which is no reason to fail the run: such a start is torn down and tried
    again, up to :data:`LOCAL_START_ATTEMPTS` times; any other error is raised."""
    os.environ.setdefault(GCS_PORT_WAIT_ENV, GCS_PORT_WAIT_S)
    for attempt in range(1, LOCAL_START_ATTEMPTS + 1):
        try:
            ray.init(num_cpus=num_cpus, _node_ip_address="127.0.0.1", **kwargs)
            return
        except Exception as exc:
            if not any(m in str(exc) for m in _STARTUP_TIMEOUTS) or attempt == LOCAL_START_ATTEMPTS:
                raise
            log.warning("local Ray did not start (%s); starting it again (%d of %d)", exc,
                        attempt + 1, LOCAL_START_ATTEMPTS)
            ray.shutdown()
            _end_stray_gcs_servers()


def _end_stray_gcs_servers() -> None:
    """A start that failed while waiting for the GCS server's port leaves that server running:
    Ray had not yet recorded the node, so ``ray.shutdown`` does not know it. Our own children
    named ``gcs_server`` are ended so that the next attempt does not compete with them."""
    me = os.getpid()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:  # no procfs: the stray server ends with this process (Ray fate-shares it)
        return
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if ppid == me and name == "gcs_server":
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
