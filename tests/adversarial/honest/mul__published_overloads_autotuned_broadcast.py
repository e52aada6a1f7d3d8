# operator: aten::mul
# honest: the published benchmark's wrapper names (mul_Tensor, mul_Scalar, mul_out), operands broadcast with `torch.broadcast_tensors` and made contiguous (data movement), an autotuned kernel multiplying on the operands' own dtype (bf16 * bf16 in bf16, rounded once as compiled Triton does; a float scalar held in fp32, so bf16 * fp32 computes in fp32 and rounds on the store)
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 1024})],
                 key=["n"])
@triton.jit
def _mul_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a * b, mask=mask)


def _multiply(a, b, dtype):
    a, b = torch.broadcast_tensors(a, b)
    a, b = a.contiguous(), b.contiguous()
    out = torch.empty(a.shape, dtype=dtype, device=a.device)
    n = out.numel()
    if n:
        _mul_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](a, b, out, n)
    return out


def mul_Tensor(self, other):
    return _multiply(self, other, self.dtype)


def mul_Scalar(self, other):
    held = torch.float32 if self.dtype in (torch.float16, torch.bfloat16) else self.dtype
    scalar = torch.tensor(other, dtype=held, device=self.device)
    return _multiply(self, scalar, self.dtype)


def mul_out(self, other, *, out):
    out.copy_(_multiply(self, other, out.dtype))
    return out
