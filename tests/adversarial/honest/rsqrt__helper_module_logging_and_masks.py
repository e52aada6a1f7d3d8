# operator: aten::rsqrt
# honest: a small "utils" section as third-party libraries have (a logger, a dataclass launch plan, an enum of layouts, `itertools`-free shape math with `math.prod`), a 2-D row/column kernel whose mask is a Python `and`, fp32 math for every float type and an `_out` form that resizes
import enum
import logging
import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

log = logging.getLogger("rsqrt_kernels")


class Layout(enum.Enum):
    FLAT = 1
    ROWS = 2


@dataclass(frozen=True)
class Plan:
    rows: int
    cols: int
    layout: Layout


def _plan(t):
    if t.dim() >= 2:
        cols = t.shape[-1]
        return Plan(math.prod(t.shape[:-1]), cols, Layout.ROWS)
    return Plan(1, max(t.numel(), 1), Layout.FLAT)


@triton.jit
def _rsqrt_rows(x_ptr, y_ptr, rows, cols, BR: tl.constexpr, BC: tl.constexpr):
    r = (tl.program_id(0) * BR + tl.arange(0, BR))[:, None]
    c = (tl.program_id(1) * BC + tl.arange(0, BC))[None, :]
    m = (r < rows) and (c < cols)
    x = tl.load(x_ptr + r * cols + c, mask=m, other=1.0).to(tl.float32)
    tl.store(y_ptr + r * cols + c, (1.0 / tl.sqrt(x)).to(y_ptr.dtype.element_ty), mask=m)


def _rsqrt(self):
    dtype = self.dtype if self.dtype.is_floating_point else torch.float32
    src = self.contiguous()
    out = torch.empty(src.shape, dtype=dtype, device=src.device)
    if src.numel() == 0:
        return out
    plan = _plan(src)
    log.debug("rsqrt plan %s", plan)
    grid = (triton.cdiv(plan.rows, 8), triton.cdiv(plan.cols, 128))
    _rsqrt_rows[grid](src, out, plan.rows, plan.cols, BR=8, BC=128)
    return out


def rsqrt(self):
    return _rsqrt(self)


def rsqrt_out(self, *, out):
    result = _rsqrt(self)
    out.resize_(result.shape)
    out.copy_(result)
    return out
