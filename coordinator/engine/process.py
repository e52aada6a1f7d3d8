"""How a sweep process starts: Ray (joined, or local on loopback) and a quieter garbage
collector for the long-running driver and actors."""

from __future__ import annotations

import gc
import os
from typing import Any

import ray

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
        ray.init(num_cpus=num_cpus, _node_ip_address="127.0.0.1", **kwargs)
