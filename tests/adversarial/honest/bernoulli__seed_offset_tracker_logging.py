# operator: aten::bernoulli
# honest: a library-style random module: a logger, a small seed/offset tracker that advances by the number of draws on every call (the Philox convention), and a flat driver over any rank through a contiguous copy of the probabilities
import logging

import torch
import triton
import triton.language as tl

logger = logging.getLogger(__name__)


class _PhiloxState:
    """Seed fixed per generator, offset advanced by every call's draws."""

    def __init__(self):
        self.offset = 0

    def reserve(self, generator, count):
        base = generator.initial_seed() if generator is not None else torch.initial_seed()
        start = self.offset
        self.offset += (count + 3) // 4 * 4
        return base % 2147483647, start


_state = _PhiloxState()


@triton.jit
def _bernoulli_kernel(p_ptr, out_ptr, n, p_value, seed, offset,
                      FROM_TENSOR: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if FROM_TENSOR:
        prob = tl.load(p_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    else:
        prob = p_value
    # Offsets above 2**31 wrap in int32; mixing the call's offset into the seed keeps the
    # streams of successive calls apart.
    u = tl.rand(seed + offset, offs)
    tl.store(out_ptr + offs, (u < prob).to(out_ptr.dtype.element_ty), mask=mask)


def _sample(probs, p_value, from_tensor, generator):
    out = torch.empty_like(probs, memory_format=torch.contiguous_format)
    n = out.numel()
    if n == 0:
        logger.debug("bernoulli: empty input, nothing to draw")
        return out
    src = probs.contiguous() if from_tensor else out
    seed, offset = _state.reserve(generator, n)
    block = 1024 if n >= 1024 else triton.next_power_of_2(n)
    _bernoulli_kernel[(triton.cdiv(n, block),)](src, out, n, float(p_value), seed, offset,
                                               FROM_TENSOR=from_tensor, BLOCK=block)
    return out


def bernoulli(self, *, generator=None):
    return _sample(self, 0.0, True, generator)


def bernoulli_p(self, p, generator=None):
    return _sample(self, p, False, generator)
