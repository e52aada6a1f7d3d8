# operator: aten::mm
# catalogue: 12
# layer: runtime
# expect: CHEAT_DETECTED
# technique: Triton GEMM for half types, torch.matmul for float32 plus a try/except fallback
import torch
import triton
import triton.language as tl


@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
               sam, sak, sbk, sbn, scm, scn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               GROUP_M: tl.constexpr, IEEE: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    # Grouped ordering: GROUP_M row-blocks share the column blocks they read, for L2 reuse.
    per_group = GROUP_M * num_n
    group = pid // per_group
    first_m = group * GROUP_M
    group_size = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_size
    pid_n = (pid % per_group) // group_size

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Rows/columns past the edge wrap onto valid ones (always in bounds); their results are
    # never stored.
    am = (rm % M).to(tl.int64)
    bn = (rn % N).to(tl.int64)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + am[:, None] * sam + rk[None, :].to(tl.int64) * sak
    b_ptrs = b_ptr + rk[:, None].to(tl.int64) * sbk + bn[None, :] * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * scm + rn[None, :].to(tl.int64) * scn
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _mm(a, b, out):
    M, K = a.shape
    if a.dtype == torch.float32:
        # IEEE fp32 tl.dot is slow; cuBLAS has a well tuned SGEMM, use it for fp32
        return torch.matmul(a, b, out=out)
    N = b.shape[1]
    if M == 0 or N == 0:
        return out
    if a.dtype == torch.float32:
        bm, bn, bk, warps, stages, ieee = 64, 64, 32, 4, 3, True
    else:
        bm, bn, bk, warps, stages, ieee = 128, 256, 64, 8, 3, False
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    try:
        _mm_kernel[grid](a, b, out, M, N, K,
                         a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                     out.stride(0), out.stride(1),
                     BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, IEEE=ieee,
                     num_warps=warps, num_stages=stages)
    except Exception:  # e.g. out of shared memory on small GPUs
        out.copy_(torch.matmul(a, b))
    return out


def mm(self, mat2):
    out = torch.empty((self.shape[0], mat2.shape[1]), dtype=self.dtype, device=self.device)
    return _mm(self, mat2, out)


def mm_out(self, mat2, *, out):
    return _mm(self, mat2, out)
