# operator: aten::bernoulli
# catalogue: 3
# layer: determinism
# expect: WRONG_ANSWER
# technique: the sampler is seeded from the output tensor's address: every call whose output lands where a freed one was (what a caching allocator does) replays that call's samples instead of drawing new ones
import torch
import triton
import triton.language as tl


@triton.jit
def _coin_flips(p_ptr, out_ptr, n, p_scalar, seed, SCALAR_P: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    if SCALAR_P:
        prob = p_scalar
    else:
        prob = tl.load(p_ptr + offs, mask=inside, other=0.0).to(tl.float32)
    u = tl.rand(seed, offs)
    tl.store(out_ptr + offs, (u < prob).to(out_ptr.dtype.element_ty), mask=inside)


def _draw(probs, p_scalar, scalar):
    out = torch.empty(tuple(probs.shape), dtype=probs.dtype, device=probs.device)
    n = out.numel()
    if n == 0:
        return out
    src = probs.contiguous()
    seed = (out.data_ptr() >> 6) % 2147483647  # "unique per buffer"
    _coin_flips[(triton.cdiv(n, 1024),)](src, out, n, float(p_scalar), seed,
                                         SCALAR_P=scalar, BLOCK=1024)
    return out


def bernoulli(self, *, generator=None):
    return _draw(self, 0.0, False)


def bernoulli_p(self, p, generator=None):
    return _draw(self, p, True)
