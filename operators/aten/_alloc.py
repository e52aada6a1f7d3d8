"""What the allocation problems share (``zeros``, ``full``, ``fill_``, ``empty_strided`` …).

An allocation problem's answer is a new (or overwritten) tensor whose values follow from its
parameters alone, so the expectation is exact values plus the dtype, shape and — where PyTorch
defines them (``*_like`` preserving a dense input's layout, ``empty_strided``) — the strides.
Candidates may allocate with ``torch.empty*`` but must write the values with their own Triton
kernels: ``torch.zeros``, ``ones``, ``full`` and friends are the answer itself and are refused
for this kind (``device_agent/static_policy.py``, ``dispatch_guard.py``).

Calls of problems without a tensor input carry ``device=torch.device("cpu")``: the harness turns
every ``torch.device`` argument into the device the candidate runs on (``operators.invoke``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.inputs import randn, with_layout
from operators.spec import (
    Case,
    Cost,
    Expected,
    OperatorSpec,
    Tier,
    Tolerance,
    dtype_from_name,
    high_precision,
)

EXACT = {name: Tolerance(0.0, 0.0) for name in ("float16", "bfloat16", "float32", "float64")}
HERE = torch.device("cpu")  # stands for "the candidate's device" in a call (see above)


def expected_tensor(t: torch.Tensor, *, strides: bool = False, values: bool = True) -> Expected:
    """PyTorch's result ``t`` as the exact expectation (strides checked when asked)."""
    return Expected(t.to(high_precision(t.dtype)), t.dtype,
                    strides=tuple(t.stride()) if strides else None, values=values)


def source_tensor(c: Case, gen: torch.Generator) -> torch.Tensor:
    """The ``self`` of a ``*_like`` / ``new_*`` / in-place case: normal values, or small ints /
    bools, in the case's layout."""
    dt = dtype_from_name(c.dtype)
    layout = c.get("layout", "contiguous")
    if dt == torch.bool:
        t = torch.randint(0, 2, c.shape, generator=gen).bool()
    elif not dt.is_floating_point:
        t = torch.randint(-100, 100, c.shape, generator=gen).to(dt)
    else:
        return randn(c.shape, dt, gen, layout=layout)
    return with_layout(t, layout)


def numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def write_cost(shape: Sequence[int], dtype: str | torch.dtype) -> Cost:
    """Writing every element once: the whole minimum traffic of an allocation."""
    dt = dtype_from_name(dtype) if isinstance(dtype, str) else dtype
    size = torch.empty((), dtype=dt).element_size()
    return Cost(flops=0.0, bytes=float(numel(shape) * size), dtype=str(dt).removeprefix("torch."))


class AllocProblem(OperatorSpec):
    """Base of the allocation problems: exact tolerances and no hidden cases (the values follow
    from the public parameters; hidden cases would add nothing)."""

    tolerances = EXACT

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return []


# The strided fill the allocation solutions share: every element of ``out`` (any strides, up to
# six dims) <- the one element at ``value_ptr``, converted to out's dtype. A float64 / int64
# one-element tensor carries the value: a Python float kernel argument would be rounded to fp32.
FILL_KERNEL = r'''
MAX_DIMS = 6


@triton.jit
def _fill_strided(out_ptr, value_ptr, n, s1, s2, s3, s4, s5,
                  o0, o1, o2, o3, o4, o5, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    idx = (pid * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = idx < n
    rem = idx
    i5 = rem % s5
    rem = rem // s5
    i4 = rem % s4
    rem = rem // s4
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    off = i0 * o0 + i1 * o1 + i2 * o2 + i3 * o3 + i4 * o4 + i5 * o5
    vals = tl.load(value_ptr + tl.zeros([BLOCK], dtype=tl.int32))
    tl.store(out_ptr + off, vals.to(out_ptr.dtype.element_ty), mask=mask)


def _fill_from(out, value_t):
    """Write the one element of tensor ``value_t`` into every element of ``out``."""
    n = out.numel()
    if n == 0:
        return out
    sizes = [1] * (MAX_DIMS - out.dim()) + list(out.shape)
    strides = [0] * (MAX_DIMS - out.dim()) + list(out.stride())
    BLOCK = 1024
    _fill_strided[(triton.cdiv(n, BLOCK),)](out, value_t, n, *sizes[1:], *strides, BLOCK=BLOCK)
    return out


def _fill(out, value):
    """Write the Python number ``value`` into every element of ``out``; returns ``out``."""
    if isinstance(value, bool):
        value = int(value)
    dtype = torch.float64 if isinstance(value, float) else torch.int64
    return _fill_from(out, torch.tensor([value], dtype=dtype, device=out.device))
'''
