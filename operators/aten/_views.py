"""What the view and alias problems share (``t``, ``narrow``, ``expand``, ``unsafe_split`` …).

A view op computes no values: its answer is a size, strides and a storage offset over its
input's storage. So the expected output of every case is PyTorch's own result on the pristine
CPU input — its values (exact), its strides, and whether and where it shares the input's storage
— and a candidate's output must match all three (``operators.checking.check``). Where PyTorch
copies instead (``reshape`` or ``contiguous`` of a layout no view can express), the expected
output is a new tensor that must *not* alias the input.

Views have nothing worth timing (no data moves), so the pure views have no benchmark cases;
``reshape`` and ``contiguous`` time their copying cases. See docs/suite.md.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.inputs import randint, randn, with_layout
from operators.spec import (
    Call,
    Case,
    Cost,
    Expected,
    OperatorSpec,
    Out,
    Tier,
    Tolerance,
    high_precision,
)

# Views copy nothing, so values must come back bit for bit.
EXACT = {name: Tolerance(0.0, 0.0)
         for name in ("float16", "bfloat16", "float32", "float64", "complex64")}


def make_input(c: Case, gen: torch.Generator, shape: Sequence[int] | None = None) -> torch.Tensor:
    """The case's input: normal floats (or small ints) in the case's layout."""
    shape = tuple(c.shape if shape is None else shape)
    layout = c.get("layout", "contiguous")
    if c.dtype.startswith("int"):
        return randint(shape, c.dtype, gen, low=-100, high=100, layout=layout)
    if c.dtype == "complex64":
        re = randn(shape, "float32", gen)
        im = randn(shape, "float32", gen)
        return with_layout(torch.complex(re, im), layout)
    return randn(shape, c.dtype, gen, layout=layout)


def expected_like(result: torch.Tensor, source: torch.Tensor, key: int | str = 0) -> Expected:
    """PyTorch's ``result`` as the expectation: exact values, its strides, and a view of
    ``source`` (argument ``key``) exactly when PyTorch's result shares ``source``'s storage."""
    shares = (result.numel() > 0 and source.untyped_storage().nbytes() > 0
              and result.untyped_storage().data_ptr() == source.untyped_storage().data_ptr())
    value = result.detach().to(high_precision(result.dtype))
    return Expected(value, result.dtype, strides=tuple(result.stride()),
                    view_of=key if shares else None,
                    offset=int(result.storage_offset() - source.storage_offset()) if shares else 0)


class ViewProblem(OperatorSpec):
    """Base of the view problems. A subclass sets the usual class attributes and implements
    ``torch_op`` (PyTorch's op on a call's arguments) and ``make_call``."""

    tolerances = EXACT

    def torch_op(self, call: Call) -> Any:
        raise NotImplementedError

    def reference(self, call: Call) -> tuple[Expected, ...]:
        result = self.torch_op(call)
        outs = list(result) if isinstance(result, list | tuple) else [result]
        return tuple(expected_like(o, call.args[0]) for o in outs)

    def baseline(self, call: Call) -> object:
        return self.torch_op(call)

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return []

    def benchmark_cases(self) -> Sequence[Case]:
        return []

    def cost(self, c: Case) -> Cost:
        return Cost(flops=0.0, bytes=0.0, dtype=c.dtype)


def split_call(entry: str, x: torch.Tensor, n_out: int, *args: Any, **kwargs: Any) -> Call:
    """A call returning a list of ``n_out`` views (each one checked)."""
    return Call(entry, (x, *args), kwargs, outputs=tuple(Out.ret(i) for i in range(n_out)))


def copy_cost(c: Case) -> Cost:
    """A copy's minimum traffic: read and write every element once."""
    n = 1
    for d in c.shape:
        n *= d
    size = torch.empty((), dtype=c.torch_dtype).element_size()
    return Cost(flops=0.0, bytes=2.0 * n * size, dtype=c.dtype)


# The strided copy every copying view problem's solution uses: out (contiguous, row-major over
# ``sizes``) <- x (any strides), flat index decomposed over up to six dims.
COPY_KERNEL = r'''
MAX_DIMS = 6


@triton.jit
def _strided_copy(x_ptr, out_ptr, n, s1, s2, s3, s4, s5,
                  x0, x1, x2, x3, x4, x5, BLOCK: tl.constexpr):
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
    off = i0 * x0 + i1 * x1 + i2 * x2 + i3 * x3 + i4 * x4 + i5 * x5
    tl.store(out_ptr + idx, tl.load(x_ptr + off, mask=mask), mask=mask)


def _copy_into(x, out):
    """out (contiguous, x's shape) <- x, whatever x's strides."""
    if x.numel() == 0:
        return out
    src, dst = x, out
    if x.dtype.is_complex:  # Triton has no complex type: move (re, im) pairs as 2 floats
        src, dst = torch.view_as_real(x), torch.view_as_real(out)
    n = src.numel()
    sizes = [1] * (MAX_DIMS - src.dim()) + list(src.shape)
    strides = [0] * (MAX_DIMS - src.dim()) + list(src.stride())
    BLOCK = 1024
    _strided_copy[(triton.cdiv(n, BLOCK),)](src, dst, n, *sizes[1:], *strides, BLOCK=BLOCK)
    return out
'''
