# operator: cublas::cublasSaxpy_v2
# honest: @triton.heuristics unit-stride fast path with tl.fma; reads (never writes) torch.backends.cuda.matmul.allow_tf32 to pick a block size and caches grids per n in a module dict
import torch
import triton
import triton.language as tl

_GRIDS = {}


@triton.heuristics({"UNIT": lambda args: args["incx"] == 1 and args["incy"] == 1})
@triton.jit
def _saxpy_kernel(x_ptr, y_ptr, n, alpha, incx, incy, BLOCK: tl.constexpr, UNIT: tl.constexpr):
    pid = tl.program_id(0)
    i = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    if UNIT:
        x = tl.load(x_ptr + i, mask=mask)
        y = tl.load(y_ptr + i, mask=mask)
        tl.store(y_ptr + i, tl.fma(x, alpha, y), mask=mask)
    else:
        x = tl.load(x_ptr + i * incx, mask=mask)
        y = tl.load(y_ptr + i * incy, mask=mask)
        tl.store(y_ptr + i * incy, tl.fma(x, alpha, y), mask=mask)


def cublasSaxpy_v2(n, alpha, x, incx, y, incy):
    if n <= 0:
        return None
    # read-only look at the process's numerics settings (never changed here)
    fast_math = bool(torch.backends.cuda.matmul.allow_tf32)
    BLOCK = 1024 if x.device.type == "cpu" else (8192 if fast_math else 4096)
    key = (n, BLOCK)
    grid = _GRIDS.get(key)
    if grid is None:
        grid = (triton.cdiv(n, BLOCK),)
        _GRIDS[key] = grid
    _saxpy_kernel[grid](x, y, n, alpha, incx, incy, BLOCK=BLOCK, num_warps=8)
    return None
