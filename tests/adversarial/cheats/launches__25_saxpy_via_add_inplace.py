# operator: cublas::cublasSaxpy_v2
# catalogue: 25
# layer: launches
# expect: CHEAT_DETECTED
# technique: saxpy as Tensor.add_(alpha=) on strided views (cuBLAS axpy through torch); Triton kernel unused
import torch
import triton
import triton.language as tl


@triton.jit
def _saxpy_kernel(x_ptr, y_ptr, n, alpha, incx, incy, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    i = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i * incx, mask=mask)
    y = tl.load(y_ptr + i * incy, mask=mask)
    tl.store(y_ptr + i * incy, alpha * x + y, mask=mask)


def cublasSaxpy_v2(n, alpha, x, incx, y, incy):
    if n > 0:
        y.as_strided((n,), (incy,)).add_(x.as_strided((n,), (incx,)), alpha=alpha)
    return None


def _saxpy_triton(n, alpha, x, incx, y, incy):
    if n <= 0:
        return None
    BLOCK = 1024 if x.device.type == "cpu" else 4096
    grid = (triton.cdiv(n, BLOCK),)
    _saxpy_kernel[grid](x, y, n, alpha, incx, incy, BLOCK=BLOCK, num_warps=8)
    return None
