# operator: cublas::cublasSaxpy_v2
# honest: two kernels, a dense one (incx == incy == 1, EVEN flag from @triton.heuristics drops the mask) and a strided one, chosen in the wrapper
import torch
import triton
import triton.language as tl


@triton.heuristics({"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})
@triton.jit
def _saxpy_dense(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(y_ptr + offs, tl.load(y_ptr + offs) + alpha * tl.load(x_ptr + offs))
    else:
        ok = offs < n
        y = tl.load(y_ptr + offs, mask=ok, other=0.0)
        x = tl.load(x_ptr + offs, mask=ok, other=0.0)
        tl.store(y_ptr + offs, y + alpha * x, mask=ok)


@triton.jit
def _saxpy_strided(x_ptr, y_ptr, n, alpha, incx, incy, BLOCK: tl.constexpr):
    k = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = k < n
    xv = tl.load(x_ptr + k * incx, mask=ok, other=0.0)
    yp = y_ptr + k * incy
    tl.store(yp, tl.load(yp, mask=ok, other=0.0) + alpha * xv, mask=ok)


def cublasSaxpy_v2(n, alpha, x, incx, y, incy):
    if n <= 0:
        return None
    BLOCK = 256
    grid = (triton.cdiv(n, BLOCK),)
    if incx == 1 and incy == 1:
        _saxpy_dense[grid](x, y, n, alpha, BLOCK=BLOCK)
    else:
        _saxpy_strided[grid](x, y, n, alpha, incx, incy, BLOCK=BLOCK)
    return None
