# operator: aten::sum
# honest: every overload through one row-reduction kernel: the reduced dims moved last with function-form `torch.permute` and `torch.reshape` of a contiguous copy, an empty reduction answered by `zero_()` on the output (a sum over nothing is 0), `out.resize_` in the `_out` forms, and the accumulator chosen per dtype (fp32 for halves, fp64, int64 for integers and bool)
import torch
import triton
import triton.language as tl


@triton.jit
def _row_sums(x_ptr, out_ptr, K, ACC: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if ACC == 0:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
    elif ACC == 1:
        acc = tl.zeros([BLOCK], dtype=tl.float64)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.int64)
    for start in range(0, K, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * K + offs, mask=offs < K, other=0)
        acc += x.to(acc.dtype)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


def _result_dtype(x, dtype):
    if dtype is not None:
        return dtype
    return x.dtype if x.dtype.is_floating_point else torch.int64


def _reduce(self, dim, keepdim, dtype):
    nd = self.dim()
    dims = sorted({d % max(nd, 1) for d in dim}) if dim else list(range(nd))
    keep = [d for d in range(nd) if d not in dims]
    shape = [1 if d in dims else self.shape[d] for d in range(nd)] if keepdim else \
        [self.shape[d] for d in keep]
    out_dtype = _result_dtype(self, dtype)
    m = 1
    for d in keep:
        m *= self.shape[d]
    k = 1
    for d in dims:
        k *= self.shape[d]
    res = torch.empty((m,), dtype=out_dtype, device=self.device)
    if m == 0:
        return torch.reshape(res, shape)
    if k == 0:
        res.zero_()
        return torch.reshape(res, shape)
    src = self.view(torch.uint8) if self.dtype == torch.bool else self
    rows = torch.reshape(torch.permute(src, keep + dims).contiguous(), (m, k))
    if out_dtype.is_floating_point:
        acc = 1 if torch.float64 in (out_dtype, self.dtype) else 0
    else:
        acc = 2
    _row_sums[(m,)](rows, res, k, ACC=acc, BLOCK=256)
    return torch.reshape(res, shape)


def sum(self, *, dtype=None):
    return _reduce(self, None, False, dtype)


def sum_dim_IntList(self, dim, keepdim=False, *, dtype=None):
    return _reduce(self, dim, keepdim, dtype)


def sum_IntList_out(self, dim, keepdim=False, *, dtype=None, out):
    result = _reduce(self, dim, keepdim, dtype if dtype is not None else out.dtype)
    out.resize_(result.shape)
    out.copy_(result)
    return out


def sum_out(self, *, dtype=None, out):
    return sum_IntList_out(self, None, False, dtype=dtype, out=out)
