# operator: aten::softmax
# honest: kernel 1 writes exp(x - block max) into a float32 scratch tensor and per-block (max, sum) partials; kernel 2 combines partials and rescales: a split-row softmax over several kernels
import torch
import triton
import triton.language as tl


@triton.jit
def _partials(x_ptr, e_ptr, pm_ptr, ps_ptr, L, n_chunks, n1, n2, n3,
              s0, s1, s2, s3, sl, OUT_TY: tl.constexpr, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    t = row
    i3 = t % n3
    t = t // n3
    i2 = t % n2
    t = t // n2
    base = (t // n1) * s0 + (t % n1) * s1 + i2 * s2 + i3 * s3
    c = chunk.to(tl.int64) * CHUNK + tl.arange(0, CHUNK)
    ok = c < L
    v = tl.load(x_ptr + base + c * sl, mask=ok, other=-float("inf")).to(OUT_TY).to(tl.float32)
    m = tl.max(v, axis=0)
    e = tl.exp(v - m)
    tl.store(e_ptr + row * L + c, e, mask=ok)  # scratch is dense [n_rows, L]
    tl.store(pm_ptr + row * n_chunks + chunk, m)
    tl.store(ps_ptr + row * n_chunks + chunk, tl.sum(e, axis=0))


@triton.jit
def _finish(e_ptr, pm_ptr, ps_ptr, o_ptr, L, n_chunks, n1, n2, n3, s0, s1, s2, s3, sl,
            CHUNK: tl.constexpr, NCH: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    k = tl.arange(0, NCH)
    kmask = k < n_chunks
    pm = tl.load(pm_ptr + row * n_chunks + k, mask=kmask, other=-float("inf"))
    ps = tl.load(ps_ptr + row * n_chunks + k, mask=kmask, other=0.0)
    m = tl.max(pm, axis=0)
    total = tl.sum(tl.where(kmask, ps * tl.exp(pm - m), 0.0), axis=0)
    my_m = tl.load(pm_ptr + row * n_chunks + chunk)
    factor = tl.exp(my_m - m) / total
    t = row
    i3 = t % n3
    t = t // n3
    i2 = t % n2
    t = t // n2
    base = (t // n1) * s0 + (t % n1) * s1 + i2 * s2 + i3 * s3
    c = chunk.to(tl.int64) * CHUNK + tl.arange(0, CHUNK)
    ok = c < L
    e = tl.load(e_ptr + row * L + c, mask=ok, other=0.0)
    tl.store(o_ptr + base + c * sl, (e * factor).to(o_ptr.dtype.element_ty), mask=ok)


_TL = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}


def _geometry(t, dim):
    others = [d for d in range(t.dim()) if d != dim]
    k = 4 - len(others)
    return [1] * k + [t.shape[d] for d in others], [0] * k + [t.stride(d) for d in others]


def _softmax(x, dim, out):
    if x.dim() == 0:
        x, out = x.view(1), out.view(1)
    dim = dim % x.dim()
    if x.numel() == 0:
        return out
    L = x.shape[dim]
    n_rows = x.numel() // L
    CHUNK = min(1024, triton.next_power_of_2(L))
    n_chunks = triton.cdiv(L, CHUNK)
    scratch = torch.empty((n_rows, L), dtype=torch.float32, device=x.device)
    pm = torch.empty((n_rows, n_chunks), dtype=torch.float32, device=x.device)
    ps = torch.empty_like(pm)
    sz, xs = _geometry(x, dim)
    _, os_ = _geometry(out, dim)
    grid = (n_rows, n_chunks)
    _partials[grid](x, scratch, pm, ps, L, n_chunks, *sz[1:], *xs, x.stride(dim),
                    OUT_TY=_TL[out.dtype], CHUNK=CHUNK)
    _finish[grid](scratch, pm, ps, out, L, n_chunks, *sz[1:], *os_, out.stride(dim),
                  CHUNK=CHUNK, NCH=triton.next_power_of_2(n_chunks))
    return out


def softmax_int(self, dim, dtype=None):
    out = torch.empty(self.shape, dtype=dtype if dtype is not None else self.dtype,
                      device=self.device)
    return _softmax(self, dim, out)


def softmax_int_out(self, dim, dtype=None, *, out):
    return _softmax(self, dim, out)
