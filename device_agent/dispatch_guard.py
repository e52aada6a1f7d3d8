"""The runtime dispatch guard: which ATen operators the candidate's own code runs.

A ``TorchDispatchMode`` active around each call of an entry point records every ATen operator
that reaches the dispatcher, whatever Python spelled it (``a + b``, ``x.sum()``, a function
found through ``getattr``, a C extension calling back into torch …). Triton launches are
excluded: the interpreter and the autotuner use torch themselves, so while a Triton kernel or
autotuner runs the guard is suspended (its entry points are wrapped once per worker, before any
candidate is imported). An operator outside the problem kind's allow-list is evidence of
computing the answer with torch: ``CHEAT_DETECTED``, layer ``runtime``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from device_agent import triton_hooks
from operators.spec import Kind

# Allocation, views, metadata and plain data movement: what any kind's wrappers may do.
_COMMON = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
    "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full",
    "fill_", "zero_", "expand", "view", "_unsafe_view", "as_strided", "permute", "transpose", "t",
    "unsqueeze", "squeeze", "slice", "select", "narrow", "detach", "alias", "lift_fresh",
    "lift_fresh_copy", "split", "unbind", "clone", "copy_", "_to_copy", "_reshape_alias",
    "view_as_real", "view_as_complex", "resolve_conj", "resolve_neg", "_conj", "_neg_view",
    "set_", "is_same_size", "_has_compatible_shallow_copy_type",
    "resize_", "resize_as_",  # PyTorch's out= convention: size the out tensor, values untouched
    "promote_types", "can_cast", "result_type",  # dtype arithmetic, no tensor data
})
_BY_KIND: dict[Kind, frozenset[str]] = {
    Kind.SCALAR: frozenset({"_local_scalar_dense"}),
}
_DENIED_BY_KIND: dict[Kind, frozenset[str]] = {
    Kind.ALLOC: frozenset({"zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
                           "new_zeros", "new_ones", "new_full"}),
}

def allowed_ops(kind: Kind) -> frozenset[str]:
    return frozenset((_COMMON | _BY_KIND.get(kind, frozenset())) - _DENIED_BY_KIND.get(kind, frozenset()))


class DispatchGuard(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Records ATen operators outside the kind's allow-list (it never raises: the call goes on,
    and the agent turns the record into a finding).

    Reading a scalar back (``.item()``: ``_local_scalar_dense``) is judged by provenance outside
    ``scalar`` problems: allowed on a tensor whose storage one of the candidate's own launches
    (kernels defined in ``own_module``) received during the call and that is none of the call's
    ``inputs``; refused on inputs and on what torch computed (their storage no kernel of the
    candidate's was handed)."""

    def __init__(self, kind: Kind, own_module: str | None = None,
                 inputs: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.allowed = allowed_ops(kind)
        self.own_module = own_module
        self.inputs = {t.untyped_storage().data_ptr() for t in inputs}
        self.violations: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if triton_hooks.depth() == 0:
            name = func.overloadpacket.__name__
            if name not in self.allowed and not (name == "_local_scalar_dense"
                                                 and self._own_result(args[0])):
                self.violations.add(str(func))
        return func(*args, **(kwargs or {}))

    def _own_result(self, t: Any) -> bool:
        if self.own_module is None or not isinstance(t, torch.Tensor):
            return False
        storage = t.untyped_storage()
        return (storage.data_ptr() not in self.inputs
                and triton_hooks.received(self.own_module, storage))
