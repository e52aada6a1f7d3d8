# operator: aten::add
# honest: two kernels (autotuned flat fast path keyed on n, general 6-d strided path), chosen by is_contiguous() and shape checks in the wrapper
import torch
import triton
import triton.language as tl

MAX_DIMS = 6


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256}, num_warps=2),
        triton.Config({"BLOCK": 512}, num_warps=4),
        triton.Config({"BLOCK": 1024}, num_warps=4),
    ],
    key=["n"],
)
@triton.jit
def _add_flat(a_ptr, b_ptr, out_ptr, n, alpha, IS_FLOAT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    if IS_FLOAT:
        r = a.to(tl.float32) + alpha * b.to(tl.float32)
    else:
        r = a + alpha * b
    tl.store(out_ptr + offs, r.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _add_strided(a_ptr, b_ptr, out_ptr, n, alpha,
                 d1, d2, d3, d4, d5,
                 a0, a1, a2, a3, a4, a5,
                 b0, b1, b2, b3, b4, b5,
                 o0, o1, o2, o3, o4, o5,
                 IS_FLOAT: tl.constexpr, BLOCK: tl.constexpr):
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    r = idx
    i5 = r % d5
    r = r // d5
    i4 = r % d4
    r = r // d4
    i3 = r % d3
    r = r // d3
    i2 = r % d2
    r = r // d2
    i1 = r % d1
    i0 = r // d1
    a = tl.load(a_ptr + i0 * a0 + i1 * a1 + i2 * a2 + i3 * a3 + i4 * a4 + i5 * a5, mask=mask)
    b = tl.load(b_ptr + i0 * b0 + i1 * b1 + i2 * b2 + i3 * b3 + i4 * b4 + i5 * b5, mask=mask)
    if IS_FLOAT:
        res = a.to(tl.float32) + alpha * b.to(tl.float32)
    else:
        res = a + alpha * b
    tl.store(out_ptr + i0 * o0 + i1 * o1 + i2 * o2 + i3 * o3 + i4 * o4 + i5 * o5,
             res.to(out_ptr.dtype.element_ty), mask=mask)


def _padded(vals, fill):
    vals = list(vals)
    return [fill] * (MAX_DIMS - len(vals)) + vals


def _run(a, b, out, alpha):
    n = out.numel()
    if n == 0:
        return out
    is_float = out.dtype.is_floating_point
    same = tuple(a.shape) == tuple(out.shape) and tuple(b.shape) == tuple(out.shape)
    if same and a.is_contiguous() and b.is_contiguous() and out.is_contiguous():
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
        _add_flat[grid](a, b, out, n, alpha, IS_FLOAT=is_float)
        return out
    a, b = a.expand(out.shape), b.expand(out.shape)
    sizes = _padded(out.shape, 1)
    BLOCK = 512
    _add_strided[(triton.cdiv(n, BLOCK),)](
        a, b, out, n, alpha, *sizes[1:],
        *_padded(a.stride(), 0), *_padded(b.stride(), 0), *_padded(out.stride(), 0),
        IS_FLOAT=is_float, BLOCK=BLOCK)
    return out


def add_Tensor(self, other, *, alpha=1):
    shape = torch.broadcast_shapes(self.shape, other.shape)
    out = torch.empty(shape, dtype=self.dtype, device=self.device)
    return _run(self, other, out, alpha)


def add_Scalar(self, other, alpha=1):
    # the scalar becomes a 0-d tensor broadcast with stride 0 (no compute in torch)
    b = torch.full((), other, dtype=self.dtype, device=self.device)
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    return _run(self, b, out, alpha)


def add_out(self, other, *, alpha=1, out):
    return _run(self, other, out, alpha)
