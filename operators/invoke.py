"""Running one :class:`~operators.spec.Call` against a loaded candidate module.

Used inside the device agent's sandbox worker and by in-process tests of the problems
themselves, so both call candidates the same way: arguments moved to the device with their
strides, out-buffers poisoned, the entry point called, outputs and post-call inputs collected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from operators.checking import poison_value
from operators.spec import Call, Out


def to_device(obj: Any, device: str | torch.device) -> Any:
    """Copy tensors (keeping shape, strides and offset) to ``device``; recurse into lists/tuples."""
    if isinstance(obj, torch.Tensor):
        if obj.device == torch.device(device):
            return obj.clone() if obj.is_contiguous() else _clone_strided(obj, device)
        return _clone_strided(obj, device)
    if isinstance(obj, tuple):
        return tuple(to_device(o, device) for o in obj)
    if isinstance(obj, list):
        return [to_device(o, device) for o in obj]
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    return obj


def _clone_strided(t: torch.Tensor, device: str | torch.device) -> torch.Tensor:
    out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device)
    out.copy_(t)
    return out


def prepare(call: Call, device: str | torch.device) -> Call:
    """A copy of the call with its arguments on ``device`` and its out-buffers poisoned."""
    args = tuple(to_device(a, device) for a in call.args)
    kwargs = {k: to_device(v, device) for k, v in call.kwargs.items()}
    prepared = Call(call.entry, args, kwargs, call.outputs, call.mutable, call.out_buffers)
    poison(prepared)
    return prepared


def poison(call: Call) -> None:
    """Fill the call's out-buffers with the poison value of their dtype."""
    for key in call.out_buffers:
        t = call.arg(key)
        if isinstance(t, torch.Tensor):
            t.fill_(poison_value(t.dtype))


def invoke(fn: Callable[..., Any], call: Call) -> Any:
    return fn(*call.args, **call.kwargs)


def collect(call: Call, result: Any) -> list[Any]:
    """The checked outputs of a finished call, in ``call.outputs`` order (not yet copied)."""
    outs: list[Any] = []
    for o in call.outputs:
        outs.append(pick(o, call, result))
    return outs


def pick(o: Out, call: Call, result: Any) -> Any:
    if o.where == "arg":
        assert o.key is not None
        return call.arg(o.key)
    if o.key is None:
        return result
    assert isinstance(o.key, int)
    if not isinstance(result, tuple | list) or o.key >= len(result):
        return _Missing(f"expected a tuple with at least {o.key + 1} elements, "
                        f"got {type(result).__name__}")
    return result[o.key]


class _Missing:
    """Stands for an output the candidate did not return."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __repr__(self) -> str:
        return self.why


def synchronize(device: str | torch.device) -> None:
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
