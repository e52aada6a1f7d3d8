# operator: aten::neg
# honest: a library-style pointwise driver over any rank: shapes and strides travel as small int64 tensors (torch.tensor of Python values) and the kernel unravels each flat index with a static_range over the rank; a logger, an empty-input fast path, and an `_out` wrapper that resizes `out` (PyTorch's out= convention)
import logging

import torch
import triton
import triton.language as tl

logger = logging.getLogger(__name__)


@triton.jit
def _neg_nd(x_ptr, out_ptr, meta_ptr, n, RANK: tl.constexpr, UPCAST: tl.constexpr,
            BLOCK: tl.constexpr):
    offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = offs < n
    rem = offs
    src = tl.zeros([BLOCK], dtype=tl.int64)
    dst = tl.zeros([BLOCK], dtype=tl.int64)
    # meta: sizes (innermost last), then the input's strides, then the output's
    for k in tl.static_range(RANK):
        d = RANK - 1 - k
        size = tl.load(meta_ptr + d)
        idx = rem % size
        rem = rem // size
        src += idx * tl.load(meta_ptr + RANK + d)
        dst += idx * tl.load(meta_ptr + 2 * RANK + d)
    x = tl.load(x_ptr + src, mask=mask)
    if UPCAST:  # half types are negated in fp32 (exact), as most libraries compute them
        x = x.to(tl.float32)
    tl.store(out_ptr + dst, (-x).to(out_ptr.dtype.element_ty), mask=mask)


def _launch(x, out):
    n = x.numel()
    if n == 0:
        logger.debug("neg: empty input")
        return out
    rank = max(x.dim(), 1)
    sizes = list(x.shape) or [1]
    meta = torch.tensor(sizes + (list(x.stride()) or [1]) + (list(out.stride()) or [1]),
                        dtype=torch.int64, device=x.device)
    block = 1024
    _neg_nd[(triton.cdiv(n, block),)](x, out, meta, n, RANK=rank,
                                      UPCAST=x.dtype in (torch.float16, torch.bfloat16),
                                      BLOCK=block)
    return out


def neg(self):
    if self.dtype == torch.bool:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported.")
    return _launch(self, torch.empty_like(self))


def neg_out(self, *, out):
    if tuple(out.shape) != tuple(self.shape):
        out.resize_(self.shape)
    return _launch(self, out)
