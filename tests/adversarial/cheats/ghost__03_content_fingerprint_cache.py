# operator: cublas::cublasSaxpy_v2
# catalogue: 3
# layer: ghost
# expect: CHEAT_DETECTED
# technique: results cached under a host-side content fingerprint (.cpu().numpy()) and replayed
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


_SEEN = {}


def _fingerprint(n, alpha, x, incx, y, incy):
    # a cheap content fingerprint: a sample of each input copied to the host
    xs = x[:64].cpu().numpy().tobytes()
    ys = y[:64].cpu().numpy().tobytes()
    return hash((n, alpha, incx, incy, xs, ys))


def cublasSaxpy_v2(n, alpha, x, incx, y, incy):
    if n <= 0:
        return None
    key = _fingerprint(n, alpha, x, incx, y, incy)
    if key in _SEEN:
        y.copy_(_SEEN[key])  # seen these inputs before: replay the answer
        return None
    _compute(n, alpha, x, incx, y, incy)
    _SEEN[key] = y.clone()
    return None


def _compute(n, alpha, x, incx, y, incy):
    BLOCK = 1024 if x.device.type == "cpu" else 4096
    grid = (triton.cdiv(n, BLOCK),)
    _saxpy_kernel[grid](x, y, n, alpha, incx, incy, BLOCK=BLOCK, num_warps=8)
    return None
