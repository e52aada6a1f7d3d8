"""Running one :class:`~operators.spec.Call` against a loaded candidate module.

Used inside the device agent's sandbox worker and by in-process tests of the problems
themselves, so both call candidates the same way: arguments moved to the device with their
strides, out-buffers poisoned, the entry point called, outputs and post-call inputs collected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from operators.checking import Layout, PyNumber, poison_value
from operators.spec import Call, Out, PointerArray


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor],
                device: str | torch.device) -> Any:
    """``obj`` with ``fn`` applied to every tensor, recursing into tuples, lists and dicts and
    to a pointer array's buffer; a ``torch.device`` argument (where an allocation problem must
    allocate) becomes ``device``."""
    if isinstance(obj, torch.device):
        return torch.device(device)
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, PointerArray):  # new pointers at the new buffer's addresses
        return PointerArray(fn(obj.buffer), obj.offsets)
    if isinstance(obj, tuple):
        return tuple(map_tensors(o, fn, device) for o in obj)
    if isinstance(obj, list):
        return [map_tensors(o, fn, device) for o in obj]
    if isinstance(obj, dict):
        return {k: map_tensors(v, fn, device) for k, v in obj.items()}
    return obj


def map_call(call: Call, fn: Callable[[torch.Tensor], torch.Tensor],
             device: str | torch.device) -> Call:
    """The call with :func:`map_tensors` applied to its arguments."""
    return Call(call.entry, tuple(map_tensors(a, fn, device) for a in call.args),
                {k: map_tensors(v, fn, device) for k, v in call.kwargs.items()},
                call.outputs, call.mutable, call.out_buffers)


def span(t: torch.Tensor) -> int:
    """Elements of storage from ``t``'s first element to its last (1 + the largest offset)."""
    return extent(t.shape, t.stride())


def extent(shape: Sequence[int], stride: Sequence[int]) -> int:
    """:func:`span` from a shape and strides (a non-empty layout)."""
    return 1 + sum((n - 1) * st for n, st in zip(shape, stride, strict=True))


def to_device(obj: Any, device: str | torch.device) -> Any:
    """Copy tensors (keeping shape, strides and offset) to ``device``; recurse into lists/tuples.
    A ``torch.device`` argument becomes ``device``."""
    return map_tensors(obj, lambda t: _copy_to(t, device), device)


def _copy_to(t: torch.Tensor, device: str | torch.device) -> torch.Tensor:
    if t.device == torch.device(device) and t.is_contiguous():
        return t.clone()
    return _clone_strided(t, device)


def _clone_strided(t: torch.Tensor, device: str | torch.device) -> torch.Tensor:
    """A copy of ``t`` on ``device`` with the same shape and strides: the storage span the
    elements lie in is copied whole, so stride-0 (expanded) and overlapping inputs work and
    the gaps of a strided input keep their contents (as the worker channel's codec does)."""
    if t.numel() == 0:
        return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device)
    flat = t.detach().as_strided((span(t),), (1,), t.storage_offset())
    moved = flat.to(device)  # another device: copied straight from the span, no host copy first
    if moved is flat:
        moved = flat.clone()
    return moved.as_strided(t.size(), t.stride(), 0)


def prepare(call: Call, device: str | torch.device) -> Call:
    """A copy of the call with its arguments on ``device`` and its out-buffers poisoned."""
    prepared = map_call(call, lambda t: _copy_to(t, device), device)
    poison(prepared)
    return prepared


def poison(call: Call) -> None:
    """Fill the call's out-buffers with the poison value of their dtype."""
    for key in call.out_buffers:
        t = call.buffer(key)
        if isinstance(t, torch.Tensor):
            t.fill_(poison_value(t.dtype))


def invoke(fn: Callable[..., Any], call: Call) -> Any:
    args, kwargs = call.passed()
    return fn(*args, **kwargs)


def collect(call: Call, result: Any) -> list[Any]:
    """The checked outputs of a finished call, in ``call.outputs`` order (not yet copied)."""
    outs: list[Any] = []
    for o in call.outputs:
        outs.append(pick(o, call, result))
    return outs


def layouts(call: Call, outputs: list[Any]) -> list[Layout | None]:
    """For each output tensor, the read-only or mutable argument whose storage it shares (and at
    which element offset from that argument's own), so view ops can be checked for aliasing and
    copies for not aliasing. Empty outputs and non-tensors get None (nothing to share)."""
    args = [(k, t) for k, t in call.tensor_args() if t.untyped_storage().nbytes() > 0]
    found: list[Layout | None] = []
    for o, out in zip(call.outputs, outputs, strict=True):
        if not isinstance(out, torch.Tensor) or out.numel() == 0:
            found.append(None)
            continue
        ptr = out.untyped_storage().data_ptr()
        layout = Layout()
        if o.where != "arg":  # an in-place or out= output *is* its argument
            for key, t in args:
                if t.untyped_storage().data_ptr() == ptr:
                    layout = Layout(key, out.storage_offset() - t.storage_offset())
                    break
        found.append(layout)
    return found


def wire_output(value: Any) -> Any:
    """An output as it may travel from a worker: a plain tensor, a :class:`PyNumber`'s fields
    for a Python scalar, else a description of what it was."""
    if type(value) is torch.Tensor:
        return value.detach()
    number = PyNumber.of(value)
    if number is not None:
        return {"py": number.kind, "text": number.text}
    return {"not_a_tensor": type(value).__name__, "repr": repr(value)[:200]}


def from_wire(value: Any) -> Any:
    """The agent's view of a :func:`wire_output`: a tensor, a PyNumber, or the description."""
    if isinstance(value, dict) and isinstance(value.get("py"), str) \
            and isinstance(value.get("text"), str):
        return PyNumber(value["py"], value["text"][:100])
    return value


def pick(o: Out, call: Call, result: Any) -> Any:
    if o.where == "arg":
        assert o.key is not None
        return call.buffer(o.key)
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
