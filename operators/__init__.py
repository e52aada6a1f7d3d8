"""The problem suite: the OperatorSpec contract, the registry and one module per problem.

Imports only torch (never triton, never anything of ours), so every part of the system can use it.
"""

from operators.registry import (
    SpecError,
    UnknownOperatorError,
    all_specs,
    baseline_libraries,
    canonical_id,
    get,
    ids,
    register,
)
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    OperatorSpec,
    Out,
    Source,
    Tier,
    Tolerance,
    case,
)

__all__ = [
    "Call", "Case", "Cost", "EntryPoint", "Expected", "Kind", "Negative", "OperatorSpec", "Out",
    "Source", "SpecError", "Tier", "Tolerance", "UnknownOperatorError", "all_specs",
    "baseline_libraries", "canonical_id", "case", "get", "ids", "register",
]
