# operator: aten::cumsum
# honest: three kernels (chunk-local scans into an accumulator-typed scratch plus chunk totals, a scan of the totals into carries, then carry add and a single final cast), 2-D grids
import torch
import triton
import triton.language as tl


@triton.jit
def _rowbase(r, n1, n2, n3, s0, s1, s2, s3):
    i3 = r % n3
    r = r // n3
    i2 = r % n2
    r = r // n2
    return (r // n1) * s0 + (r % n1) * s1 + i2 * s2 + i3 * s3


@triton.jit
def _local_scan(x_ptr, tmp_ptr, tot_ptr, L, n_chunks, n1, n2, n3, s0, s1, s2, s3, sl,
                OUT_TY: tl.constexpr, ACC_TY: tl.constexpr, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    ch = tl.program_id(1)
    c = ch.to(tl.int64) * CHUNK + tl.arange(0, CHUNK)
    ok = c < L
    x = tl.load(x_ptr + _rowbase(row, n1, n2, n3, s0, s1, s2, s3) + c * sl, mask=ok, other=0)
    x = x.to(OUT_TY).to(ACC_TY)
    y = tl.cumsum(x, axis=0)
    tl.store(tmp_ptr + row * L + c, y, mask=ok)
    tl.store(tot_ptr + row * n_chunks + ch, tl.sum(x, axis=0))


@triton.jit
def _scan_totals(tot_ptr, carry_ptr, n_chunks, ACC_TY: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    running = tl.zeros([1], dtype=ACC_TY)
    for start in range(0, n_chunks, BLOCK):
        k = start + tl.arange(0, BLOCK)
        ok = k < n_chunks
        t = tl.load(tot_ptr + row * n_chunks + k, mask=ok, other=0)
        incl = tl.cumsum(t, axis=0)
        tl.store(carry_ptr + row * n_chunks + k, incl - t + running, mask=ok)  # exclusive
        running += tl.sum(t, axis=0)


@triton.jit
def _add_carry(tmp_ptr, carry_ptr, o_ptr, L, n_chunks, n1, n2, n3, s0, s1, s2, s3, sl,
               CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    ch = tl.program_id(1)
    c = ch.to(tl.int64) * CHUNK + tl.arange(0, CHUNK)
    ok = c < L
    carry = tl.load(carry_ptr + row * n_chunks + ch)
    y = tl.load(tmp_ptr + row * L + c, mask=ok, other=0) + carry
    tl.store(o_ptr + _rowbase(row, n1, n2, n3, s0, s1, s2, s3) + c * sl,
             y.to(o_ptr.dtype.element_ty), mask=ok)


_TL = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32,
       torch.float64: tl.float64, torch.int32: tl.int32, torch.int64: tl.int64,
       torch.int16: tl.int16, torch.int8: tl.int8, torch.uint8: tl.uint8}


def _geom(t, dim):
    others = [d for d in range(t.dim()) if d != dim]
    pad = 4 - len(others)
    return [1] * pad + [t.shape[d] for d in others], [0] * pad + [t.stride(d) for d in others]


def _cumsum(x, dim, out):
    if x.dim() == 0:
        x, out = x.view(1), out.view(1)
    dim = dim % x.dim()
    if x.numel() == 0:
        return out
    L = x.shape[dim]
    rows = x.numel() // L
    is_float = out.dtype.is_floating_point
    acc_t = torch.float32 if is_float else torch.int64
    CHUNK = min(512, triton.next_power_of_2(L))
    n_chunks = triton.cdiv(L, CHUNK)
    tmp = torch.empty((rows, L), dtype=acc_t, device=x.device)
    totals = torch.empty((rows, n_chunks), dtype=acc_t, device=x.device)
    carries = torch.empty_like(totals)
    sz, xs = _geom(x, dim)
    _, os_ = _geom(out, dim)
    _local_scan[(rows, n_chunks)](x, tmp, totals, L, n_chunks, *sz[1:], *xs, x.stride(dim),
                                  OUT_TY=_TL[out.dtype], ACC_TY=_TL[acc_t], CHUNK=CHUNK)
    _scan_totals[(rows,)](totals, carries, n_chunks, ACC_TY=_TL[acc_t],
                          BLOCK=min(256, triton.next_power_of_2(n_chunks)))
    _add_carry[(rows, n_chunks)](tmp, carries, out, L, n_chunks, *sz[1:], *os_, out.stride(dim),
                                 CHUNK=CHUNK)
    return out


def _result_dtype(x, dtype):
    if dtype is not None:
        return dtype
    return x.dtype if (x.dtype.is_floating_point or x.dtype.is_complex) else torch.int64


def cumsum(self, dim, *, dtype=None):
    out = torch.empty(self.shape, dtype=_result_dtype(self, dtype), device=self.device)
    return _cumsum(self, dim, out)


def cumsum_out(self, dim, *, dtype=None, out):
    return _cumsum(self, dim, out)
