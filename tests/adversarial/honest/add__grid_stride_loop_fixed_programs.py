# operator: aten::add
# honest: a fixed, small number of programs each walking a grid-stride loop with tl.range; alpha == 1 specialised away as a constexpr; fp16/bf16 promoted explicitly
import torch
import triton
import triton.language as tl


@triton.jit
def _index_to_offset(idx, sizes_1, sizes_2, sizes_3, sizes_4, sizes_5,
                     st0, st1, st2, st3, st4, st5):
    off = (idx % sizes_5) * st5
    idx = idx // sizes_5
    off += (idx % sizes_4) * st4
    idx = idx // sizes_4
    off += (idx % sizes_3) * st3
    idx = idx // sizes_3
    off += (idx % sizes_2) * st2
    idx = idx // sizes_2
    off += (idx % sizes_1) * st1
    idx = idx // sizes_1
    return off + idx * st0


@triton.jit
def _add_loop(a_ptr, b_ptr, o_ptr, n, alpha, z1, z2, z3, z4, z5,
              a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5, o0, o1, o2, o3, o4, o5,
              UNIT_ALPHA: tl.constexpr, UPCAST: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    base = tl.arange(0, BLOCK).to(tl.int64)
    for start in tl.range(pid * BLOCK, n, nprog * BLOCK):
        idx = start + base
        m = idx < n
        a = tl.load(a_ptr + _index_to_offset(idx, z1, z2, z3, z4, z5, a0, a1, a2, a3, a4, a5), mask=m)
        b = tl.load(b_ptr + _index_to_offset(idx, z1, z2, z3, z4, z5, b0, b1, b2, b3, b4, b5), mask=m)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        if UNIT_ALPHA:
            y = a + b
        else:
            y = a + alpha * b
        tl.store(o_ptr + _index_to_offset(idx, z1, z2, z3, z4, z5, o0, o1, o2, o3, o4, o5),
                 y.to(o_ptr.dtype.element_ty), mask=m)


def _six(v, fill):
    v = list(v)
    return [fill] * (6 - len(v)) + v


def _add(a, b, out, alpha):
    n = out.numel()
    if n == 0:
        return out
    BLOCK = 512
    programs = max(1, min(triton.cdiv(n, BLOCK), 16))
    sizes = _six(out.shape, 1)
    _add_loop[(programs,)](a, b, out, n, alpha, *sizes[1:],
                           *_six(a.stride(), 0), *_six(b.stride(), 0), *_six(out.stride(), 0),
                           UNIT_ALPHA=(alpha == 1),
                           UPCAST=out.dtype in (torch.float16, torch.bfloat16),
                           BLOCK=BLOCK)
    return out


def add_Tensor(self, other, *, alpha=1):
    a, b = torch.broadcast_tensors(self, other)
    return _add(a, b, torch.empty(a.shape, dtype=a.dtype, device=a.device), alpha)


def add_Scalar(self, other, alpha=1):
    b = torch.full(self.shape, other, dtype=self.dtype, device=self.device)
    return _add(self, b, torch.empty_like(self), alpha)


def add_out(self, other, *, alpha=1, out):
    a, b = torch.broadcast_tensors(self, other)
    return _add(a, b, out, alpha)
