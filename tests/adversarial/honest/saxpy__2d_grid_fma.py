# operator: cublas::cublasSaxpy_v2
# honest: 2-D program grid (rows of ROW elements x column tiles), int64 index math, the update as a single tl.fma
import torch
import triton
import triton.language as tl

ROW = 1024


@triton.jit
def _saxpy2d(x_ptr, y_ptr, n, alpha, incx, incy, ROW: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    i = r * ROW + c
    ok = (c < ROW) & (i < n)
    x = tl.load(x_ptr + i * incx, mask=ok, other=0.0)
    y = tl.load(y_ptr + i * incy, mask=ok, other=0.0)
    a = tl.full([BLOCK], alpha, dtype=tl.float32)
    tl.store(y_ptr + i * incy, tl.fma(a, x, y), mask=ok)


def cublasSaxpy_v2(n, alpha, x, incx, y, incy):
    if n < 1:
        return None
    BLOCK = 256
    grid = (triton.cdiv(n, ROW), triton.cdiv(min(n, ROW), BLOCK))
    _saxpy2d[grid](x, y, n, alpha, incx, incy, ROW=ROW, BLOCK=BLOCK)
    return None
