# operator: aten::exponential_
# catalogue: 3
# layer: determinism
# expect: WRONG_ANSWER
# technique: the in-place sampler is seeded from self's address, so a second call on the same tensor writes the very same samples again
import torch
import triton
import triton.language as tl


@triton.jit
def _fill_exponential(x_ptr, n, rate, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    u = tl.rand(seed, offs)
    tl.store(x_ptr + offs, (-tl.log(1.0 - u) / rate).to(x_ptr.dtype.element_ty), mask=offs < n)


def exponential_(self, lambd=1.0, *, generator=None):
    if lambd <= 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    n = self.numel()
    if n == 0:
        return self
    work = self if self.is_contiguous() else torch.empty(tuple(self.shape), dtype=self.dtype,
                                                         device=self.device)
    seed = self.data_ptr() % 2147483647
    _fill_exponential[(triton.cdiv(n, 512),)](work, n, float(lambd), seed, BLOCK=512)
    if work is not self:
        self.copy_(work)
    return self
