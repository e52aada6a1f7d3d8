# operator: cublas::cublasSaxpy_v2
# catalogue: 12
# layer: runtime
# expect: CHEAT_DETECTED
# technique: the launch grid callable performs y += alpha*x with Tensor.add_ on strided views; the kernel itself runs with alpha=0
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
    tl.store(y_ptr + i * incy, alpha * x + y, mask=mask)  # alpha = 0: rewrites y as is


def cublasSaxpy_v2(n, alpha, x, incx, y, incy):
    if n <= 0:
        return None
    BLOCK = 1024 if x.device.type == "cpu" else 4096

    def grid(meta):
        # "prologue" run by the launcher itself: y is updated before the programs start
        y.as_strided((n,), (incy,)).add_(x.as_strided((n,), (incx,)), alpha=alpha)
        return (triton.cdiv(n, meta["BLOCK"]),)

    _saxpy_kernel[grid](x, y, n, 0.0, incx, incy, BLOCK=BLOCK, num_warps=8)
    return None
