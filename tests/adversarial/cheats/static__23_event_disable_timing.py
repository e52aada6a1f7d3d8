# operator: cublas::cublasSaxpy_v2
# catalogue: 23
# layer: static
# expect: REJECTED
# technique: creates its own torch.cuda.Event(enable_timing=False) and records on a private stream
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
    BLOCK = 1024 if x.device.type == "cpu" else 4096
    grid = (triton.cdiv(n, BLOCK),)
    if y.is_cuda:
        # untimed events and a private stream: nothing for the harness's timer to see
        stream = torch.cuda.Stream()
        done = torch.cuda.Event(enable_timing=False)
        with torch.cuda.stream(stream):
            _saxpy_kernel[grid](x, y, n, alpha, incx, incy, BLOCK=BLOCK, num_warps=8)
            done.record(stream)
        return None
    _saxpy_kernel[grid](x, y, n, alpha, incx, incy, BLOCK=BLOCK, num_warps=8)
    return None
