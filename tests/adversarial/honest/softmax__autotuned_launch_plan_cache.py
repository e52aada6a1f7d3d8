# operator: aten::softmax
# honest: @triton.autotune over three (BLOCK_R, BLOCK_L) configs with an online softmax; launch plans (padded sizes, strides) cached per shape in a module dict, but the kernel runs on every call
import torch
import triton
import triton.language as tl

MAX_DIMS = 5

# Launch plans (padded sizes and strides, row count) cached per (shape, strides, dim): the
# Python bookkeeping is skipped on repeated shapes, the kernel always runs.
_PLANS = {}


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_R": 1, "BLOCK_L": 256}, num_warps=2),
        triton.Config({"BLOCK_R": 4, "BLOCK_L": 128}, num_warps=4),
        triton.Config({"BLOCK_R": 2, "BLOCK_L": 1024}, num_warps=8),
    ],
    key=["n_rows", "L"],
)
@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_rows, L,
                    s1, s2, s3,
                    xs0, xs1, xs2, xs3, xsl,
                    os0, os1, os2, os3, osl,
                    BLOCK_R: tl.constexpr, BLOCK_L: tl.constexpr):
    pid = tl.program_id(0)
    rows = (pid * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    row_mask = rows < n_rows
    rem = rows
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    x_row = i0 * xs0 + i1 * xs1 + i2 * xs2 + i3 * xs3
    o_row = i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3
    cols = tl.arange(0, BLOCK_L).to(tl.int64)
    m = tl.full([BLOCK_R], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_R], dtype=tl.float32)
    for start in range(0, L, BLOCK_L):
        c = start + cols
        mask = row_mask[:, None] & (c[None, :] < L)
        x = tl.load(x_ptr + x_row[:, None] + c[None, :] * xsl, mask=mask, other=float("-inf"))
        x = x.to(out_ptr.dtype.element_ty).to(tl.float32)
        x = tl.where(row_mask[:, None], x, 0.0)
        m_new = tl.maximum(m, tl.max(x, axis=1))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)
        m = m_new
    for start in range(0, L, BLOCK_L):
        c = start + cols
        mask = row_mask[:, None] & (c[None, :] < L)
        x = tl.load(x_ptr + x_row[:, None] + c[None, :] * xsl, mask=mask, other=float("-inf"))
        x = x.to(out_ptr.dtype.element_ty).to(tl.float32)
        y = tl.exp(x - m[:, None]) / s[:, None]
        tl.store(out_ptr + o_row[:, None] + c[None, :] * osl, y.to(out_ptr.dtype.element_ty),
                 mask=mask)


def _plan(x, dim, out):
    key = (tuple(x.shape), tuple(x.stride()), tuple(out.stride()), dim)
    plan = _PLANS.get(key)
    if plan is None:
        nd = x.dim()
        others = [i for i in range(nd) if i != dim]
        pad = MAX_DIMS - 1 - len(others)
        sizes = [1] * pad + [x.shape[i] for i in others]
        xs = [0] * pad + [x.stride(i) for i in others] + [x.stride(dim)]
        os_ = [0] * pad + [out.stride(i) for i in others] + [out.stride(dim)]
        L = x.shape[dim]
        plan = (x.numel() // L, L, tuple(sizes[1:]), tuple(xs), tuple(os_))
        _PLANS[key] = plan
    return plan


def _softmax(x, dim, out):
    if x.dim() == 0:
        x = x.reshape(1)
        out = out.reshape(1)
    if x.dim() > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dims supported")
    dim = dim % x.dim()
    if x.numel() == 0:
        return
    n_rows, L, sizes, xs, os_ = _plan(x, dim, out)
    grid = lambda meta: (triton.cdiv(n_rows, meta["BLOCK_R"]),)
    _softmax_kernel[grid](x, out, n_rows, L, *sizes, *xs, *os_)


def softmax_int(self, dim, dtype=None):
    out = torch.empty(self.shape, dtype=dtype if dtype is not None else self.dtype, device=self.device)
    _softmax(self, dim, out)
    return out


def softmax_int_out(self, dim, dtype=None, *, out):
    _softmax(self, dim, out)
    return out
