"""The sweep engine: a spec's trajectories on Ray, judged by an agent fleet, each exactly once.

The one pipeline behind ``kgb sweep`` and ``kgb run`` (which writes the spec of a local run,
:mod:`coordinator.local_run`). Who does what (one Ray cluster; the driver is the command's
process), one concept per module:

* :mod:`~coordinator.engine.driver` — :func:`run_sweep`: plans, skips what the store says is
  finished, hands out trajectories with at most ``generation_per_endpoint`` in flight per
  endpoint, takes results in completion order, stores them (batched), feeds the callbacks.
* :mod:`~coordinator.engine.cluster` — :class:`SweepCluster`: the actors below as one group,
  started together and torn down together (``async with``).
* :mod:`~coordinator.engine.storage` — the ``StoreWriter`` actor (model calls group-committed:
  the calls that arrive while one commit is fsynced go into the next) and the driver's
  ``ResultSink``, both pinned to the driver's node.
* :mod:`~coordinator.engine.router` — the ``FleetRouter`` actor: the sweep's one
  :class:`~coordinator.fleet.Fleet` behind :class:`~coordinator.fleet.Evaluations` (stored
  verdicts reused, identical evaluations in flight shared, new verdicts stored before use).
* :mod:`~coordinator.engine.runner` — ``TrajectoryRunner`` actors: a few per model endpoint
  (:mod:`~coordinator.engine.placement` says how many and where), each with its share of the
  endpoint's concurrency and rate limits, and one for the candidate methods; each runs many
  trajectories as asyncio tasks.
* :mod:`~coordinator.engine.handles` — typed protocols of those actors' remote methods.

Resume: trajectories with a stored result are skipped, except those that ended ``INFRA_ERROR``
(the system's failure, run again). An unfinished trajectory is started again with the calls
the store holds for it; :class:`~coordinator.recorded_provider.RecordedProvider` replays them
without sending (zero tokens), and its candidates' verdicts come from the store. The sweep
budget starts from what the run's stored calls billed.

Stopping (Ctrl-C, ``kgb sweep cancel``): no new trajectory and no new model call starts; calls
already sent are awaited and stored (they are paid for), then in-flight work is abandoned — it is
resumable. A second Ctrl-C stops at once.
"""

from coordinator.engine.cluster import SweepCluster
from coordinator.engine.driver import run_sweep
from coordinator.engine.options import SweepOptions, SweepStop
from coordinator.engine.outcomes import Outcome, SweepProgress
from coordinator.engine.placement import CANDIDATES, runner_count, shard_limits
from coordinator.engine.process import init_ray, quiet_gc
from coordinator.engine.storage import store_path

__all__ = [
    "CANDIDATES", "Outcome", "SweepCluster", "SweepOptions", "SweepProgress", "SweepStop",
    "init_ray", "quiet_gc", "run_sweep", "runner_count", "shard_limits", "store_path",
]
