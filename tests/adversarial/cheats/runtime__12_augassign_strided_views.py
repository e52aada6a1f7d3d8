# operator: cublas::cublasSaxpy_v2
# catalogue: 12
# layer: runtime
# expect: CHEAT_DETECTED
# technique: strided saxpy as `yv += alpha * xv` on as_strided views (augmented assignment on tensors)
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
    if n <= 0:
        return None
    if incx != 1 or incy != 1:
        # strided vectors: let torch handle the gather/scatter
        yv = y.as_strided((n,), (incy,))
        yv += alpha * x.as_strided((n,), (incx,))
        return None
    BLOCK = 1024 if x.device.type == "cpu" else 4096
    grid = (triton.cdiv(n, BLOCK),)
    _saxpy_kernel[grid](x, y, n, alpha, incx, incy, BLOCK=BLOCK, num_warps=8)
    return None
