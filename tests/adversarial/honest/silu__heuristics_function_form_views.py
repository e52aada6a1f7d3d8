# operator: aten::silu
# honest: FlagGems-like layout: a logger, a `heuristics` helper choosing the block and warps from the element count, function-form views (`torch.flatten`, `torch.reshape`) of a contiguous copy, an empty-input fast path and an `_out` wrapper that resizes and copies the kernel's result into `out`
import logging
import math

import torch
import triton
import triton.language as tl

logger = logging.getLogger(__name__)


def _block_size(args):
    return min(4096, max(64, triton.next_power_of_2(args["n"])))


def _num_warps(args):
    return 4 if args["n"] < 65536 else 8


@triton.heuristics({"BLOCK": _block_size, "num_warps": _num_warps})
@triton.jit
def _silu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = x / (1.0 + tl.exp(-x))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def _silu_flat(self):
    src = torch.flatten(self.contiguous())
    out = torch.empty_like(src)
    n = src.numel()
    if n == 0:
        logger.info("silu: nothing to do for an empty tensor")
        return torch.reshape(out, self.shape)
    grid = lambda meta: (math.ceil(n / meta["BLOCK"]),)  # noqa: E731
    _silu_kernel[grid](src, out, n)
    return torch.reshape(out, self.shape)


def silu(self):
    return _silu_flat(self)


def silu_out(self, *, out):
    result = _silu_flat(self)
    out.resize_(self.shape)
    out.copy_(result)
    return out
