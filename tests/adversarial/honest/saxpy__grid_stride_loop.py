# operator: cublas::cublasSaxpy_v2
# honest: a capped number of programs each walk the vector with a tl.range grid-stride loop; increments baked into pointer steps
import torch
import triton
import triton.language as tl


@triton.jit
def _saxpy_loop(x_ptr, y_ptr, n, alpha, incx, incy, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    lane = tl.arange(0, BLOCK).to(tl.int64)
    for start in tl.range(pid * BLOCK, n, step):
        idx = start + lane
        ok = idx < n
        px = x_ptr + idx * incx
        py = y_ptr + idx * incy
        tl.store(py, tl.load(py, mask=ok) + alpha * tl.load(px, mask=ok), mask=ok)


def cublasSaxpy_v2(n, alpha, x, incx, y, incy):
    if n <= 0:
        return None
    BLOCK = 512
    programs = min(8, triton.cdiv(n, BLOCK))
    _saxpy_loop[(programs,)](x, y, n, alpha, incx, incy, BLOCK=BLOCK)
    return None
