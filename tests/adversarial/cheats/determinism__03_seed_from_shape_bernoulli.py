# operator: aten::bernoulli
# catalogue: 3
# layer: determinism
# expect: WRONG_ANSWER
# technique: the sampler is seeded from the input's shape and dtype ("reproducible per problem"), so every call on a tensor of that shape repeats its samples
import torch
import triton
import triton.language as tl


@triton.jit
def _flip(p_ptr, out_ptr, n, p_scalar, seed, SCALAR_P: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    if SCALAR_P:
        prob = p_scalar
    else:
        prob = tl.load(p_ptr + offs, mask=inside, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (tl.rand(seed, offs) < prob).to(out_ptr.dtype.element_ty),
             mask=inside)


def _seed_of(t):
    h = 17
    for d in t.shape:
        h = (h * 31 + d) % 2147483647
    return (h * 131 + t.element_size()) % 2147483647


def _draw(probs, p_scalar, scalar):
    out = torch.empty(tuple(probs.shape), dtype=probs.dtype, device=probs.device)
    n = out.numel()
    if n:
        _flip[(triton.cdiv(n, 1024),)](probs.contiguous(), out, n, float(p_scalar),
                                       _seed_of(probs), SCALAR_P=scalar, BLOCK=1024)
    return out


def bernoulli(self, *, generator=None):
    return _draw(self, 0.0, False)


def bernoulli_p(self, p, generator=None):
    return _draw(self, p, True)
