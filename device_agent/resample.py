"""The freshness probe of random problems: a second call on the very same tensors, its new
outputs at the addresses the first call's freed outputs had.

A random op must draw new samples on every call (PyTorch's generator advances). A candidate that
seeds its sampler from a tensor's address, its shape or a constant draws the same ones again when
called on the same tensor — or on a new tensor that a caching allocator placed where a freed one
was. The CUDA allocator does that by itself; the cpu platform's ``malloc`` does not (aligned
allocations of a freed size land elsewhere), so the probe hands the freed storage to the
candidate's next allocation of that size itself, on every platform alike.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from device_agent import triton_hooks
from operators.invoke import collect, invoke, poison, synchronize, wire_output
from operators.spec import Call

# Allocations whose result may take a freed block's place (what the caching allocator serves).
_ALLOCATIONS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
    "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full",
})


def freed_storages(call: Call, outputs: list[Any]) -> list[torch.UntypedStorage]:
    """The storages of ``outputs`` the candidate allocated itself (not the call's arguments'):
    the blocks its next call may be given back once the first call's outputs are dropped."""
    args = {t.untyped_storage().data_ptr() for _, t in call.tensor_args()}
    found: dict[int, torch.UntypedStorage] = {}
    for o in outputs:
        if isinstance(o, torch.Tensor) and o.numel() > 0:
            s = o.untyped_storage()
            if s.data_ptr() not in args:
                found.setdefault(s.data_ptr(), s)
    return list(found.values())


class ReuseFreed(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Within the block, the candidate's first allocation of each freed storage's size is made
    in that storage, filled as the allocation itself filled its memory. A storage something
    still refers to (the candidate kept the output) is not free and is never handed out."""

    def __init__(self, storages: list[torch.UntypedStorage]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.free = [s for s in storages if torch._C._storage_Use_Count(s._cdata) == 1]
        self.reused = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if (triton_hooks.depth() == 0 and func.overloadpacket.__name__ in _ALLOCATIONS
                and isinstance(out, torch.Tensor) and out.storage_offset() == 0):
            size = out.untyped_storage().nbytes()
            for k, s in enumerate(self.free):
                if s.nbytes() == size and s.device == out.device:
                    placed = torch.empty((0,), dtype=out.dtype, device=out.device)
                    placed.set_(self.free.pop(k), 0, out.shape, out.stride())
                    placed.copy_(out)
                    self.reused += 1
                    return placed
        return out


def resample_run(fn: Any, call: Call, dev_call: Call,
                 freed: list[torch.UntypedStorage]) -> list[Any] | None:
    """The case again on the first call's own tensors (``dev_call``), their contents restored
    from ``call`` and out-buffers poisoned, with the first call's freed outputs' storages handed
    to the new allocations; None when the second call fails (a difference too)."""
    pristine = dict(call.tensor_args())
    try:
        for key, t in dev_call.tensor_args():
            t.copy_(pristine[key])
        poison(dev_call)
        device = next((t.device for _, t in dev_call.tensor_args()), "cpu")
        with ReuseFreed(freed):
            freed.clear()  # the mode holds the only references now
            result = invoke(fn, dev_call)
        synchronize(str(device))
        return [wire_output(o) for o in collect(dev_call, result)]
    except BaseException:  # noqa: BLE001 - a crash on the second call is a difference too
        return None
