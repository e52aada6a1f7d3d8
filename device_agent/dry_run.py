"""The dry run: a case's call made once with nothing done on the device, to compile its kernels.

Why: a candidate's first launch of each kernel specialization compiles it (and, on Triton 3.6,
builds its launcher with the C compiler) — seconds of host work per case, since the benchmark
demands fresh Triton caches. Made while holding the device's gate, that work kept timers out of
the device for seconds at a time. So each case is first run dry, without the gate: its kernels
compile and load, and the real call that follows under the gate launches ready kernels.

Dry means the device's memory is never read or written:

- arguments are fresh allocations with the case's shapes, strides, offsets and dtypes (the
  values Triton specializes on), never copies of its inputs;
- Triton launches compile and load their kernel but run nothing (:mod:`triton_hooks`), and an
  autotuner compiles every config but tunes nothing, leaving its choice to the real call;
- any torch operator on a device tensor is computed on the meta device: its results are fresh
  uninitialised device allocations of the right shape and strides, views stay views, and an
  operator that needs values (``.item()``, data-dependent shapes) stops the dry run.

A dry run that fails or stops early costs nothing but the compiles it did not do: the real call
compiles the rest. Its outcome never counts for or against the candidate.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from device_agent import triton_hooks
from operators.invoke import map_call, span
from operators.spec import Call


class DryRunStop(RuntimeError):
    """An operator needed the values of device memory, which a dry run never has."""


def _storage_elements(t: torch.Tensor) -> int:
    return t.untyped_storage().nbytes() // max(1, t.element_size())


def _meta_like(t: torch.Tensor) -> torch.Tensor:
    """``t`` on the meta device: same shape, strides, storage offset and dtype."""
    if t.storage_offset() == 0:
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
    base = torch.empty(max(_storage_elements(t), t.storage_offset() + 1), dtype=t.dtype,
                       device="meta")
    return base.as_strided(t.shape, t.stride(), t.storage_offset())


def empty_like_layout(t: torch.Tensor, device: str | torch.device) -> torch.Tensor:
    """An uninitialised tensor on ``device`` laid out as ``t`` (shape, strides, offset)."""
    if t.numel() == 0 or t.storage_offset() == 0:
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device)
    base = torch.empty(t.storage_offset() + span(t), dtype=t.dtype, device=device)
    return base.as_strided(t.shape, t.stride(), t.storage_offset())


def dry_call(call: Call, device: str | torch.device) -> Call:
    """``call`` with every tensor argument replaced by an uninitialised allocation on ``device``
    laid out the same way (nothing is copied to the device)."""
    return map_call(call, lambda t: empty_like_layout(t, device), device)


class NoDeviceWork(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Runs torch operators on ``device`` tensors as their meta-device versions, so they cost
    allocations and nothing else; operators on host tensors alone run as usual."""

    def __init__(self, device: str | torch.device) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.device_type = torch.device(device).type
        self.device = device

    def _on_device(self, value: Any) -> bool:
        if isinstance(value, torch.Tensor):
            return value.device.type == self.device_type
        if isinstance(value, torch.device):
            return value.type == self.device_type
        if isinstance(value, str):
            with contextlib.suppress(RuntimeError):
                return torch.device(value).type == self.device_type
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        flat = [*args, *kwargs.values()]
        touches = any(self._on_device(v) for v in flat) or any(
            isinstance(v, list | tuple) and any(self._on_device(x) for x in v) for v in flat)
        if not touches:
            return func(*args, **kwargs)  # host work: real values, real results
        if func is torch.ops.aten._local_scalar_dense.default:
            raise DryRunStop(f"{func} reads a value from device memory")
        if getattr(func, "is_view", False):
            return func(*args, **kwargs)  # a view launches nothing
        real: dict[int, torch.Tensor] = {}

        def to_meta(v: Any) -> Any:
            if isinstance(v, torch.Tensor):
                m = _meta_like(v)
                real[id(m)] = v
                return m
            if self._on_device(v) and not isinstance(v, str):
                return torch.device("meta")
            return v

        meta_kwargs = {k: (None if k == "generator"  # the meta device draws nothing
                           else torch.device("meta") if k == "device" and self._on_device(v)
                           else tree_map(to_meta, v))
                       for k, v in kwargs.items()}
        try:
            out = func(*tree_map(to_meta, list(args)), **meta_kwargs)
        except (NotImplementedError, RuntimeError) as exc:  # data-dependent, or no meta kernel
            raise DryRunStop(f"{func} cannot run without device values: {exc}") from None

        def to_device(v: Any) -> Any:
            if isinstance(v, torch.Tensor) and v.device.type == "meta":
                if id(v) in real:  # in place, or out=: the argument itself
                    return real[id(v)]
                return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=self.device)
            return v

        return tree_map(to_device, out)


@contextlib.contextmanager
def dry(device: str | torch.device) -> Iterator[None]:
    """Nothing inside touches ``device``'s memory: Triton launches only compile, torch operators
    on its tensors only allocate, and uninitialised memory is not filled."""
    from torch.utils import deterministic

    filling = deterministic.fill_uninitialized_memory  # type: ignore[attr-defined]
    deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]
    try:
        with triton_hooks.compiling_only(), NoDeviceWork(device):
            yield
    finally:
        deterministic.fill_uninitialized_memory = filling  # type: ignore[attr-defined]


def warm(fn: Callable[..., Any], call: Call, device: str | torch.device) -> tuple[float, str]:
    """Run ``fn`` on ``call`` dry. Returns (seconds, why it stopped early or ""); never raises
    for what the candidate does (its own exit calls included)."""
    t0 = time.perf_counter()
    try:
        args, kwargs = dry_call(call, device).passed()
        with dry(device):
            fn(*args, **kwargs)
        why = ""
    except BaseException as exc:  # noqa: BLE001 - the real call decides; this only warms
        why = f"{type(exc).__name__}: {exc}"[:300]
    return time.perf_counter() - t0, why


def warm_made(fn: Callable[..., Any], make: Callable[[], Call],
              device: str | torch.device) -> tuple[float, str]:
    """Like :func:`warm` for a call made by ``make`` inside the dry run (a benchmark case's
    inputs: its input code allocates on the device and fills nothing)."""
    t0 = time.perf_counter()
    try:
        with dry(device), torch.device(device):
            args, kwargs = make().passed()
            fn(*args, **kwargs)
        why = ""
    except BaseException as exc:  # noqa: BLE001
        why = f"{type(exc).__name__}: {exc}"[:300]
    return time.perf_counter() - t0, why
