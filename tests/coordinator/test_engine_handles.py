"""The typed actor handles (``coordinator/engine/handles.py``) say exactly what the actors
answer: every public method, with the same parameters and result, and nothing else."""

from __future__ import annotations

import inspect
import typing

import pytest

from coordinator.engine.handles import FleetRouterHandle, StoreWriterHandle, TrajectoryRunnerHandle
from coordinator.engine.router import FleetRouter
from coordinator.engine.runner import TrajectoryRunner
from coordinator.engine.storage import StoreWriter


@pytest.mark.parametrize(("protocol", "actor"), [(StoreWriterHandle, StoreWriter),
                                                 (FleetRouterHandle, FleetRouter),
                                                 (TrajectoryRunnerHandle, TrajectoryRunner)])
def test_each_handle_describes_its_actor(protocol: type, actor: type) -> None:
    declared = typing.get_type_hints(protocol)
    public = {n for n, _ in inspect.getmembers(actor, inspect.isfunction) if not n.startswith("_")}
    assert set(declared) == public
    for name, remote in declared.items():
        params, result = typing.get_args(remote)
        method = getattr(actor, name)
        hints = typing.get_type_hints(method)
        taken = [p for p in inspect.signature(method).parameters.values() if p.name != "self"]
        required = [p for p in taken if p.default is inspect.Parameter.empty]
        assert len(required) <= len(params) <= len(taken), name
        assert [hints[p.name] for p in taken[:len(params)]] == list(params), name
        assert hints["return"] == (type(None) if result is None else result), name
