# operator: aten::square
# honest: written for the published benchmark's harness: one wrapper per overload with the ATen names, `@triton.autotune` over a list of `triton.Config` keyed on the element count, a contiguous flat kernel and `.contiguous()` for other layouts, `out.copy_` of the kernel's result into a given `out` of another layout
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 256}, num_warps=2),
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),
    ],
    key=["n_elements"],
)
@triton.jit
def square_kernel(x_ptr, y_ptr, n_elements, UPCAST: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    if UPCAST:
        x = x.to(tl.float32)
    tl.store(y_ptr + offsets, (x * x).to(y_ptr.dtype.element_ty), mask=mask)


def _square_contiguous(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n_elements = x.numel()
    if n_elements > 0:
        grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
        square_kernel[grid](x, y, n_elements, UPCAST=x.dtype in (torch.float16, torch.bfloat16))
    return y


def square(self):
    if self.dtype == torch.bool:
        self = self.to(torch.int64)
    return _square_contiguous(self)


def square_out(self, *, out):
    result = _square_contiguous(self)
    out.resize_(result.shape)
    out.copy_(result)
    return out
