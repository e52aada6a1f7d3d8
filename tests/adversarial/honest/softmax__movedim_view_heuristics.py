# operator: aten::softmax
# honest: moves `dim` last with .movedim (a view, no copy), @triton.heuristics picks the block width and a one-block vs. looped path, one row per program
import torch
import triton
import triton.language as tl


@triton.heuristics({
    "BLOCK_L": lambda args: min(triton.next_power_of_2(args["L"]), 4096),
    "SINGLE": lambda args: args["L"] <= 4096,
})
@triton.jit
def _softmax_row(x_ptr, o_ptr, L, d1, d2, d3,
                 xs0, xs1, xs2, xs3, xs4, os0, os1, os2, os3, os4,
                 BLOCK_L: tl.constexpr, SINGLE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    i3 = row % d3
    t = row // d3
    i2 = t % d2
    t = t // d2
    i1 = t % d1
    i0 = t // d1
    xrow = x_ptr + i0 * xs0 + i1 * xs1 + i2 * xs2 + i3 * xs3
    orow = o_ptr + i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3
    ty = o_ptr.dtype.element_ty
    offs = tl.arange(0, BLOCK_L).to(tl.int64)
    if SINGLE:
        ok = offs < L
        v = tl.load(xrow + offs * xs4, mask=ok, other=-float("inf")).to(ty).to(tl.float32)
        e = tl.exp(v - tl.max(v, axis=0))
        tl.store(orow + offs * os4, (e / tl.sum(e, axis=0)).to(ty), mask=ok)
    else:
        run_max = tl.full([BLOCK_L], -float("inf"), tl.float32)  # per-lane maxima
        for k in range(0, L, BLOCK_L):
            ok = (k + offs) < L
            v = tl.load(xrow + (k + offs) * xs4, mask=ok, other=-float("inf")).to(ty)
            run_max = tl.maximum(run_max, v.to(tl.float32))
        m = tl.max(run_max, axis=0)
        acc = tl.zeros([BLOCK_L], tl.float32)
        for k in range(0, L, BLOCK_L):
            ok = (k + offs) < L
            v = tl.load(xrow + (k + offs) * xs4, mask=ok, other=-float("inf")).to(ty)
            acc += tl.exp(v.to(tl.float32) - m)
        inv = 1.0 / tl.sum(acc, axis=0)
        for k in range(0, L, BLOCK_L):
            ok = (k + offs) < L
            v = tl.load(xrow + (k + offs) * xs4, mask=ok, other=0.0).to(ty)
            tl.store(orow + (k + offs) * os4, (tl.exp(v.to(tl.float32) - m) * inv).to(ty), mask=ok)


def _pad5(t):
    shape, strides = list(t.shape), list(t.stride())
    k = 5 - len(shape)
    return [1] * k + shape, [0] * k + strides


def _softmax(x, dim, out):
    if x.numel() == 0:
        return out
    if x.dim() == 0:
        xv, ov = x.view(1), out.view(1)
    else:
        xv, ov = x.movedim(dim, -1), out.movedim(dim, -1)
    shape, xs = _pad5(xv)
    _, os_ = _pad5(ov)
    L = shape[-1]
    n_rows = shape[0] * shape[1] * shape[2] * shape[3]
    _softmax_row[(n_rows,)](xv, ov, L, shape[1], shape[2], shape[3], *xs, *os_)
    return out


def softmax_int(self, dim, dtype=None):
    out = torch.empty(self.shape, dtype=dtype if dtype is not None else self.dtype,
                      device=self.device)
    return _softmax(self, dim, out)


def softmax_int_out(self, dim, dtype=None, *, out):
    return _softmax(self, dim, out)
