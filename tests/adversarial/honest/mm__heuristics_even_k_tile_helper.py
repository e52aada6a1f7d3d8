# operator: aten::mm
# honest: @triton.heuristics sets EVEN_K / EVEN_MN flags that drop masks, the K loop lives in a @triton.jit helper returning the accumulator tile, mm allocates with torch.empty_strided
import torch
import triton
import triton.language as tl


@triton.jit
def _tile_product(a_ptrs, b_ptrs, rm_ok, rn_ok, K, sak, sbk,
                  BK: tl.constexpr, EVEN_K: tl.constexpr, EVEN_MN: tl.constexpr,
                  IEEE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    rk = tl.arange(0, BK)
    for k in range(0, tl.cdiv(K, BK)):
        if EVEN_K and EVEN_MN:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            kmask = rk < K - k * BK
            a = tl.load(a_ptrs, mask=rm_ok[:, None] & kmask[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=kmask[:, None] & rn_ok[None, :], other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    return acc


@triton.heuristics({
    "EVEN_K": lambda args: args["K"] % args["BK"] == 0,
    "EVEN_MN": lambda args: args["M"] % args["BM"] == 0 and args["N"] % args["BN"] == 0,
})
@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
               EVEN_K: tl.constexpr, EVEN_MN: tl.constexpr, IEEE: tl.constexpr):
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    pid_m = pid // grid_n
    pid_n = pid % grid_n
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None].to(tl.int64) * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :].to(tl.int64) * sbn
    acc = _tile_product(a_ptrs, b_ptrs, rm < M, rn < N, K, sak, sbk, BK, EVEN_K, EVEN_MN, IEEE,
                        BM, BN)
    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * scm + rn[None, :].to(tl.int64) * scn
    if EVEN_MN:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty))
    else:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _mm(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    if M * N == 0:
        return c
    BM, BN, BK = 16, 16, 16
    _mm_kernel[(triton.cdiv(M, BM) * triton.cdiv(N, BN),)](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), BM=BM, BN=BN, BK=BK, IEEE=a.dtype is torch.float32)
    return c


def mm(self, mat2):
    M, N = self.shape[0], mat2.shape[1]
    c = torch.empty_strided((M, N), (N, 1), dtype=self.dtype, device=self.device)
    return _mm(self, mat2, c)


def mm_out(self, mat2, *, out):
    return _mm(self, mat2, out)
