# operator: cublas::cublasSaxpy_v2
# honest: returns without launching anything when alpha == 0 (y = 0*x + y = y), exactly as cuBLAS itself does; a correct no-op, not a decoy
import torch
import triton
import triton.language as tl


@triton.jit
def _saxpy(x_ptr, y_ptr, n, alpha, incx, incy, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = i < n
    x = tl.load(x_ptr + i * incx, mask=ok)
    y = tl.load(y_ptr + i * incy, mask=ok)
    tl.store(y_ptr + i * incy, alpha * x + y, mask=ok)


def cublasSaxpy_v2(n, alpha, x, incx, y, incy):
    if n <= 0 or alpha == 0.0:
        return None  # nothing to do: y already holds the answer
    BLOCK = 1024
    _saxpy[(triton.cdiv(n, BLOCK),)](x, y, n, alpha, incx, incy, BLOCK=BLOCK)
    return None
