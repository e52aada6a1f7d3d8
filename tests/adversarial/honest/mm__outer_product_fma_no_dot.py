# operator: aten::mm
# honest: no tl.dot at all: each k adds the outer product of a column of A and a row of B to a float32 tile (a broadcast product summed with tl.sum would be rewritten by Triton's compiler into a TF32 tl.dot on the GPU)
import torch
import triton
import triton.language as tl


@triton.jit
def _mm_bcast(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
              BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    i = (pm * BM + tl.arange(0, BM)).to(tl.int64)
    j = (pn * BN + tl.arange(0, BN)).to(tl.int64)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K):
        a = tl.load(a_ptr + i * sam + k * sak, mask=i < M, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + k * sbk + j * sbn, mask=j < N, other=0.0).to(tl.float32)
        acc += a[:, None] * b[None, :]
    tl.store(c_ptr + i[:, None] * scm + j[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(i[:, None] < M) & (j[None, :] < N))


def _run(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    if M == 0 or N == 0:
        return c
    BM, BN = 32, 32
    _mm_bcast[(triton.cdiv(M, BM), triton.cdiv(N, BN))](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), BM=BM, BN=BN)
    return c


def mm(self, mat2):
    return _run(self, mat2, torch.empty((self.size(0), mat2.size(1)), dtype=self.dtype,
                                        device=self.device))


def mm_out(self, mat2, *, out):
    return _run(self, mat2, out)
