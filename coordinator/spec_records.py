"""The records of a validated sweep spec: :class:`SweepSpec` (with its plan), its parts, and
:class:`SweepSpecError`. Parsing is :mod:`coordinator.spec_parser`; the public entry points are
re-exported by :mod:`coordinator.sweep_spec`."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import operators
from coordinator.spec_models import ModelSpec
from generators import Method, TrajectoryMethod, create, create_trajectory
from generators.providers.base import EndpointConfig
from generators.providers.pricing import PriceTable
from generators.registry import MethodKind
from operators.spec import OperatorSpec, Source
from protos.security import ClientAuthFiles

# The published sizes of each suite (shared/reference/operators.md): MS = 110 ATen + 50 vLLM +
# 50 cuBLAS on NVIDIA; MC = the 110 ATen problems on every platform.
SUITES: Mapping[str, tuple[tuple[Source, ...], int]] = {
    "ms": ((Source.ATEN, Source.VLLM, Source.CUBLAS), 210),
    "mc": ((Source.ATEN,), 110),
    "aten": ((Source.ATEN,), 110),
    "vllm": ((Source.VLLM,), 50),
    "cublas": ((Source.CUBLAS,), 50),
}

# An [[agents]] entry's own credentials: ClientAuthFiles' fields (docs/auth.md).
AGENT_AUTH_KEYS = ("ca", "cert", "key", "token_file")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class SweepSpecError(ValueError):
    """A sweep spec is invalid; ``str()`` is ``"<source>: <key path>: <message>"``."""

    def __init__(self, source: str, path: str, message: str) -> None:
        self.source = source
        self.path = path
        self.message = message
        where = f"{source}: {path}: " if path else f"{source}: "
        super().__init__(where + message)


# -- the records -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodEntry:
    """One ``[[methods]]`` entry: a registered method, its options, and the built instance."""

    name: str                       # the registered method name ("sample", "refine", ...)
    label: str                      # unique within the spec; defaults to ``name``
    kind: MethodKind                # "candidate" (no model) or "trajectory" (needs a model)
    options: tuple[tuple[str, Any], ...] = ()
    instance: Method | TrajectoryMethod | None = field(default=None, compare=False, repr=False,
                                                       hash=False)

    def options_dict(self) -> dict[str, Any]:
        return dict(self.options)

    def build(self) -> Method | TrajectoryMethod:
        """A fresh instance with the spec's options."""
        if self.kind == "candidate":
            return create(self.name, **self.options_dict())
        return create_trajectory(self.name, **self.options_dict())


@dataclass(frozen=True)
class AgentSpec:
    """One ``[[agents]]`` entry: a device agent the coordinator routes to."""

    address: str                    # host:port of its gRPC server
    platform: str                   # cuda, rocm or cpu
    device: str | None = None       # the device model it must report, e.g. "NVIDIA H200"
    auth: ClientAuthFiles | None = None  # TLS and token for this agent (else the sweep's default)


@dataclass(frozen=True)
class Budgets:
    """``[budgets]``: None means no limit. Per trajectory limits make a fresh budget for each
    trajectory; sweep limits are one budget shared by the whole sweep."""

    trajectory_max_tokens: int | None = None
    trajectory_max_cost_usd: float | None = None
    sweep_max_tokens: int | None = None
    sweep_max_cost_usd: float | None = None


MAX_RUNNERS_PER_ENDPOINT = 64


@dataclass(frozen=True)
class Concurrency:
    """``[concurrency]``: how much work is in flight."""

    generation_per_endpoint: int = 64  # trajectories in flight per endpoint
    evaluations_in_flight: int = 0     # candidates being evaluated; 0: twice the fleet's capacity
    runners_per_endpoint: int = 0      # trajectory runner actors per endpoint; 0: the engine's choice


@dataclass(frozen=True)
class FleetSettings:
    """``[fleet]``: how far the coordinator trusts its agents' verdicts."""

    spot_check: float | None = None  # fraction of PASSED verdicts judged again; None: not set


# [sweep] generation: how a multi-platform sweep makes its candidates (docs/sweep-spec.md).
PER_PLATFORM = "per-platform"  # a trajectory per platform: that chip's prompt, its feedback
SHARED = "shared"              # one trajectory, its final candidate judged on every platform
GENERATION_MODES = (PER_PLATFORM, SHARED)


class PlannedTrajectory(NamedTuple):
    """One trajectory of the plan (``model`` is "" for candidate methods).

    ``judged_on`` is empty for per-platform generation. For shared generation it lists every
    platform the final candidate is judged on; the trajectory itself runs on the first
    (``platform``: its prompt and feedback) and its key names no platform, so its model calls
    are stored, and counted, once."""

    platform: str
    operator_id: str
    method: str                     # the method entry's label
    model: str                      # the model entry's name, or ""
    sample: int
    judged_on: tuple[str, ...] = ()

    @property
    def key_platform(self) -> str:
        """The platform its trajectory key names: "" when generation is shared."""
        return "" if self.judged_on else self.platform

    @property
    def platforms(self) -> tuple[str, ...]:
        """Every platform a result row is stored for."""
        return self.judged_on or (self.platform,)


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep spec. ``operators`` is resolved (suites expanded, duplicates removed,
    in registry order); ``store`` is resolved against the spec file's directory."""

    name: str
    store: Path
    seed: int
    suites: tuple[str, ...]
    operators: tuple[str, ...]
    samples: int
    platforms: tuple[str, ...]
    endpoints: tuple[EndpointConfig, ...]
    models: tuple[ModelSpec, ...]
    methods: tuple[MethodEntry, ...]
    agents: tuple[AgentSpec, ...]
    budgets: Budgets
    concurrency: Concurrency
    fleet: FleetSettings = FleetSettings()
    generation: str = PER_PLATFORM
    source: str = "<spec>"
    warnings: tuple[str, ...] = ()

    def endpoint(self, name: str) -> EndpointConfig:
        for e in self.endpoints:
            if e.name == name:
                return e
        raise KeyError(name)

    def model(self, name: str) -> ModelSpec:
        for m in self.models:
            if m.name == name:
                return m
        raise KeyError(name)

    def method(self, label: str) -> MethodEntry:
        for m in self.methods:
            if m.label == label:
                return m
        raise KeyError(label)

    def price_table(self, endpoint: str) -> PriceTable:
        """The prices of the models served by ``endpoint``, keyed by model id (what a provider
        for that endpoint is given)."""
        return PriceTable({m.model: m.price for m in self.models
                           if m.endpoint == endpoint and m.price is not None})

    def plan(self) -> list[PlannedTrajectory]:
        """Every trajectory, in a stable order: platform, operator, method, model, sample.

        A problem is planned on each listed platform it declares; a candidate method runs once per
        (platform, problem, sample) with model ""; a trajectory method runs for every model. The
        number of samples is what the method says for that problem (``n`` for ``sample`` and
        ``refine``, the recorded count for ``replay``, 1 for ``reference``). With shared
        generation a problem is planned once, on the first listed platform it declares, and
        judged on all of them (:attr:`PlannedTrajectory.judged_on`).
        """
        specs = [operators.get(op_id) for op_id in self.operators]
        if self.generation == SHARED:
            out: list[PlannedTrajectory] = []
            for spec in specs:
                on = tuple(p for p in self.platforms if p in spec.platforms)
                if on:
                    out += self._planned(spec, on[0], on)
            return sorted(out, key=lambda t: self.platforms.index(t.platform))  # stable
        return [t for platform in self.platforms for spec in specs
                if platform in spec.platforms for t in self._planned(spec, platform, ())]

    def _planned(self, spec: OperatorSpec, platform: str,
                 judged_on: tuple[str, ...]) -> list[PlannedTrajectory]:
        """One problem's trajectories on ``platform``: every method, model and sample."""
        out: list[PlannedTrajectory] = []
        for entry in self.methods:
            method = entry.instance if entry.instance is not None else entry.build()
            models = [""] if entry.kind == "candidate" else [m.name for m in self.models]
            out += [PlannedTrajectory(platform, spec.id, entry.label, model, s, judged_on)
                    for model in models for s in range(method.samples(spec))]
        return out

    def dispatch_order(self) -> list[PlannedTrajectory]:
        """The plan shuffled with the sweep's ``seed``: the order work is handed out, so no
        endpoint, problem or agent is served in one long block. Same spec and seed, same order."""
        order = self.plan()
        random.Random(self.seed).shuffle(order)
        return order
