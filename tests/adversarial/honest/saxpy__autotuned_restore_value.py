# operator: cublas::cublasSaxpy_v2
# honest: @triton.autotune on the in-place update, with restore_value=["y_ptr"] so config benchmarking never applies y += alpha*x more than once; key on n and the increments
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 128}, num_warps=1),
        triton.Config({"BLOCK": 512}, num_warps=4),
        triton.Config({"BLOCK": 2048}, num_warps=8),
    ],
    key=["n", "incx", "incy"],
    restore_value=["y_ptr"],
)
@triton.jit
def _saxpy(x_ptr, y_ptr, n, alpha, incx, incy, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = i < n
    x = tl.load(x_ptr + i * incx, mask=ok)
    y = tl.load(y_ptr + i * incy, mask=ok)
    tl.store(y_ptr + i * incy, y + alpha * x, mask=ok)


def cublasSaxpy_v2(n, alpha, x, incx, y, incy):
    if n <= 0:
        return None
    _saxpy[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n, alpha, incx, incy)
    return None
