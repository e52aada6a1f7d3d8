# operator: aten::gt
# honest: the published benchmark's wrapper names (gt_Tensor, gt_Scalar and their _out forms), operands broadcast with `torch.broadcast_tensors` and brought to the promoted dtype by `torch.result_type` (`.to`, data movement), then compared in the kernel on their own dtype (bf16 against bf16 included), the mask spelled with Python `and`
import torch
import triton
import triton.language as tl


@triton.jit
def _greater(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = (offs < n) and (offs >= 0)
    a = tl.load(a_ptr + offs, mask=ok)
    b = tl.load(b_ptr + offs, mask=ok)
    tl.store(out_ptr + offs, a > b, mask=ok)


def _compare(a, b):
    common = torch.result_type(a, b)
    a, b = torch.broadcast_tensors(a, b)
    a = a.to(common).contiguous()
    b = b.to(common).contiguous()
    out = torch.empty(a.shape, dtype=torch.bool, device=a.device)
    n = out.numel()
    if n:
        _greater[(triton.cdiv(n, 512),)](a, b, out, n, BLOCK=512)
    return out


def gt_Tensor(self, other):
    return _compare(self, other)


def gt_Scalar(self, other):
    scalar = torch.tensor(other, device=self.device)
    return _compare(self, scalar)


def gt_Tensor_out(self, other, *, out):
    result = _compare(self, other)
    out.resize_(result.shape)
    out.copy_(result)
    return out


def gt_Scalar_out(self, other, *, out):
    result = gt_Scalar(self, other)
    out.resize_(result.shape)
    out.copy_(result)
    return out
