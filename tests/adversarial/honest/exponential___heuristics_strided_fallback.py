# operator: aten::exponential_
# honest: in-place sampler in a third-party style: @triton.heuristics picks the block, a module-level call counter mixed into the seed, a contiguous fast path and, for any other layout, draws into a contiguous buffer that `copy_` moves into self
import functools

import torch
import triton
import triton.language as tl

_calls = [0]


@functools.lru_cache(maxsize=None)
def _block_for(n):
    return min(2048, max(128, triton.next_power_of_2(n)))


@triton.heuristics({"BLOCK": lambda args: _block_for(args["n"])})
@triton.jit
def _exponential_fill(x_ptr, n, inv_rate, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    u = tl.rand(seed, offs)
    # -log(1 - u) with u in [0, 1) is finite and >= 0
    sample = -tl.log(1.0 - u) * inv_rate
    tl.store(x_ptr + offs, sample.to(x_ptr.dtype.element_ty), mask=offs < n)


def _next_seed(generator):
    base = generator.initial_seed() if generator is not None else torch.initial_seed()
    _calls[0] += 1
    return (base ^ (_calls[0] * 0x9E3779B1)) % 2147483647


def exponential_(self, lambd=1.0, *, generator=None):
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    n = self.numel()
    if n == 0:
        return self
    target = self if self.is_contiguous() else torch.empty(self.shape, dtype=self.dtype,
                                                           device=self.device)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    _exponential_fill[grid](target, n, 1.0 / float(lambd), _next_seed(generator))
    if target is not self:
        self.copy_(target)
    return self
