# operator: aten::cumsum
# catalogue: 17
# layer: determinism
# expect: WRONG_ANSWER
# technique: chunk totals for the carry are atomically added into a per-shape buffer cached in a module dict and never reset, so a second call carries twice the totals
import torch
import triton
import triton.language as tl

MAX_DIMS = 5
CHUNK = 256

# Chunk totals (the "look-back" aggregates), one row of slots per scanned row, cached per
# problem so repeated calls reuse the buffer.
_AGG = {}


@triton.jit
def _row_offsets(rows, s1, s2, s3, s0_, s1_, s2_, s3_):
    rem = rows
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    return i0 * s0_ + i1 * s1_ + i2 * s2_ + i3 * s3_


@triton.jit
def _chunk_totals(x_ptr, agg_ptr, L, n_chunks, s1, s2, s3, xs0, xs1, xs2, xs3, xsl,
                  OUT_DTYPE: tl.constexpr, INT_ACC: tl.constexpr, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    x_row = _row_offsets(row, s1, s2, s3, xs0, xs1, xs2, xs3)
    c = chunk * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + x_row + c.to(tl.int64) * xsl, mask=c < L, other=0).to(OUT_DTYPE)
    if INT_ACC:
        total = tl.sum(x.to(tl.int64), axis=0)
    else:
        total = tl.sum(x.to(tl.float32), axis=0)
    tl.atomic_add(agg_ptr + row * n_chunks + chunk, total)


@triton.jit
def _chunk_scan(x_ptr, out_ptr, agg_ptr, L, n_chunks, s1, s2, s3,
                xs0, xs1, xs2, xs3, xsl, os0, os1, os2, os3, osl,
                INT_ACC: tl.constexpr, CHUNK: tl.constexpr, MAX_CHUNKS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    x_row = _row_offsets(row, s1, s2, s3, xs0, xs1, xs2, xs3)
    o_row = _row_offsets(row, s1, s2, s3, os0, os1, os2, os3)
    k = tl.arange(0, MAX_CHUNKS)
    prev = tl.load(agg_ptr + row * n_chunks + k, mask=k < chunk, other=0)
    carry = tl.sum(prev, axis=0)
    c = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = c < L
    x = tl.load(x_ptr + x_row + c.to(tl.int64) * xsl, mask=mask, other=0).to(out_ptr.dtype.element_ty)
    if INT_ACC:
        y = tl.cumsum(x.to(tl.int64), axis=0) + carry
    else:
        y = tl.cumsum(x.to(tl.float32), axis=0) + carry
    tl.store(out_ptr + o_row + c.to(tl.int64) * osl, y.to(out_ptr.dtype.element_ty), mask=mask)


_TL = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32,
       torch.float64: tl.float64, torch.int32: tl.int32, torch.int64: tl.int64}


def _result_dtype(self, dtype):
    if dtype is not None:
        return dtype
    if self.dtype.is_floating_point or self.dtype.is_complex:
        return self.dtype
    return torch.int64  # integral and bool inputs promote to int64


def _aggregates(x, dim, out, n_rows, n_chunks, int_acc):
    key = (tuple(x.shape), dim, out.dtype, str(x.device))
    buf = _AGG.get(key)
    if buf is None:
        buf = torch.zeros(n_rows * n_chunks, dtype=torch.int64 if int_acc else torch.float32,
                          device=x.device)
        _AGG[key] = buf
    return buf


def _cumsum(x, dim, out):
    if x.dim() == 0:
        x = x.reshape(1)
        out = out.reshape(1)
    nd = x.dim()
    if nd > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dims supported")
    dim = dim % nd
    if x.numel() == 0:
        return
    others = [i for i in range(nd) if i != dim]
    pad = MAX_DIMS - 1 - len(others)
    sizes = [1] * pad + [x.shape[i] for i in others]
    xs = [0] * pad + [x.stride(i) for i in others]
    os_ = [0] * pad + [out.stride(i) for i in others]
    L = x.shape[dim]
    n_rows = x.numel() // L
    n_chunks = triton.cdiv(L, CHUNK)
    int_acc = not (out.dtype.is_floating_point or out.dtype.is_complex)
    agg = _aggregates(x, dim, out, n_rows, n_chunks, int_acc)
    grid = (n_rows, n_chunks)
    _chunk_totals[grid](x, agg, L, n_chunks, *sizes[1:], *xs, x.stride(dim),
                        OUT_DTYPE=_TL[out.dtype], INT_ACC=int_acc, CHUNK=CHUNK)
    _chunk_scan[grid](x, out, agg, L, n_chunks, *sizes[1:], *xs, x.stride(dim), *os_,
                      out.stride(dim), INT_ACC=int_acc, CHUNK=CHUNK,
                      MAX_CHUNKS=max(2, triton.next_power_of_2(n_chunks)))


def cumsum(self, dim, *, dtype=None):
    out = torch.empty(self.shape, dtype=_result_dtype(self, dtype), device=self.device)
    _cumsum(self, dim, out)
    return out


def cumsum_out(self, dim, *, dtype=None, out):
    _cumsum(self, dim, out)
    return out
