"""Warming a sandbox worker before it gets a candidate (and before it drops privileges).

Everything the harness and an honest candidate need is imported and exercised here: after the
worker switches to its private uid it may no longer read the Python installation (on hosts where
it lives in a private home directory), and anything warmed here also stays out of the
candidate's time.
"""

from __future__ import annotations

import contextlib
import importlib

import torch
import triton
import triton.language as tl

# Modules honest candidates and the harness use; imported now so later imports hit sys.modules.
MODULES = (
    "math", "cmath", "functools", "itertools", "operator", "typing", "dataclasses", "collections",
    "collections.abc", "contextlib", "enum", "numbers", "random", "warnings", "abc", "copy",
    "inspect", "statistics", "time", "numpy", "triton.testing", "triton.runtime.autotuner",
    "triton.language.math", "triton.language.extra.libdevice",
    "triton.language.extra.cuda.libdevice", "torch.nn.functional", "encodings.idna",
)


@triton.jit  # type: ignore[untyped-decorator]
def _warm_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=m) * 2.0 + 1.0, mask=m)


def warm_imports() -> None:
    """Before privileges drop: import what the harness and honest candidates use."""
    for name in MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    # The checking stage switches deterministic mode on and off; its first use imports a lot.
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.use_deterministic_algorithms(False)


def compile_warm_kernel(device: str) -> None:
    """After privileges drop, off the device's gate: compile (and load) the warm-up kernel with
    nothing run on the device, so the gated :func:`warm_kernel` only launches it."""
    from device_agent import dry_run

    with dry_run.dry(device):
        x = torch.empty(64, dtype=torch.float32, device=device)
        _warm_kernel[(2,)](x, torch.empty_like(x), 64, BLOCK=32)


def warm_kernel(device: str) -> None:
    """After privileges drop: compile and run one kernel exactly as a candidate would (same
    uid, same private Triton cache), so a sandbox that cannot compile fails at start, loudly."""
    x = torch.arange(64, dtype=torch.float32, device=device)
    y = torch.empty_like(x)
    _warm_kernel[(2,)](x, y, 64, BLOCK=32)
    if device != "cpu":
        torch.cuda.synchronize()
    if not torch.equal(y.cpu(), x.cpu() * 2 + 1):
        raise RuntimeError("warm-up kernel produced a wrong result: the device is not usable")
