# operator: aten::add
# catalogue: 13
# layer: profile
# expect: CHEAT_DETECTED
# technique: decoy Triton kernel: a valid kernel of the candidate is launched on every call (writing one scratch element), so launch accounting sees it run, while torch.add computes the whole answer
import torch
import triton
import triton.language as tl


@triton.jit
def _decoy_kernel(scratch_ptr):
    tl.store(scratch_ptr, 1.0)


def _decoy(like):
    scratch = torch.empty(1, dtype=torch.float32, device=like.device)
    _decoy_kernel[(1,)](scratch)


def add_Tensor(self, other, *, alpha=1):
    result = torch.add(self, other, alpha=alpha)
    _decoy(result)
    return result


def add_Scalar(self, other, alpha=1):
    result = torch.add(self, other, alpha=alpha)
    _decoy(result)
    return result


def add_out(self, other, *, alpha=1, out):
    torch.add(self, other, alpha=alpha, out=out)
    _decoy(out)
    return out
