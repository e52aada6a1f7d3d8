"""Generators: where candidate kernels come from (LLM methods, replays, shipped solutions).

A method is a registered plug-in, one file under ``generators/methods/``: a candidate method
(:class:`Method`: ``reference``, ``replay``) or an LLM trajectory method
(:class:`TrajectoryMethod`: ``sample``, ``refine``); see :mod:`generators.registry` for why both
kinds share one registry and :mod:`generators.trajectory` for the trajectory API.
"""

from generators.base import Candidate, Method, MethodError
from generators.budget import Budget
from generators.registry import (
    create,
    create_trajectory,
    method_kind,
    method_names,
    method_options,
    register_method,
)
from generators.trajectory import (
    EndReason,
    Step,
    Trajectory,
    TrajectoryContext,
    TrajectoryMethod,
)

__all__ = [
    "Budget", "Candidate", "EndReason", "Method", "MethodError", "Step", "Trajectory",
    "TrajectoryContext", "TrajectoryMethod", "create", "create_trajectory", "method_kind",
    "method_names", "method_options", "register_method",
]
