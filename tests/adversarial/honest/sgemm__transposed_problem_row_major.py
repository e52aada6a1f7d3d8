# operator: cublas::cublasSgemm_v2
# honest: solves the column-major problem as the row-major product C^T = op(B)^T op(A)^T (same memory, no copies), 2-D grid over (n, m) tiles
import torch
import triton
import triton.language as tl


@triton.jit
def _rm_gemm(p_ptr, q_ptr, r_ptr, R, S, K, s_pr, s_pk, s_qk, s_qs, ld_r, alpha, beta,
             BETA_ZERO: tl.constexpr, BR: tl.constexpr, BS: tl.constexpr, BK: tl.constexpr):
    # row-major: Rm[r, s] = sum_k P[r, k] * Q[k, s]; Rm is stored with row stride ld_r
    rr = (tl.program_id(0) * BR + tl.arange(0, BR)).to(tl.int64)
    ss = (tl.program_id(1) * BS + tl.arange(0, BS)).to(tl.int64)
    kk = tl.arange(0, BK).to(tl.int64)
    r_ok = rr < R
    s_ok = ss < S
    acc = tl.zeros((BR, BS), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k_ok = (k0 + kk) < K
        p = tl.load(p_ptr + rr[:, None] * s_pr + (k0 + kk)[None, :] * s_pk,
                    mask=r_ok[:, None] & k_ok[None, :], other=0.0)
        q = tl.load(q_ptr + (k0 + kk)[:, None] * s_qk + ss[None, :] * s_qs,
                    mask=k_ok[:, None] & s_ok[None, :], other=0.0)
        acc = tl.dot(p, q, acc, input_precision="ieee")
    out = r_ptr + rr[:, None] * ld_r + ss[None, :]
    m = r_ok[:, None] & s_ok[None, :]
    val = acc * alpha
    if not BETA_ZERO:
        val = val + beta * tl.load(out, mask=m, other=0.0)
    tl.store(out, val, mask=m)


def cublasSgemm_v2(transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
    if m <= 0 or n <= 0:
        return None
    # op(A)[i, p]: N -> A[i + p*lda], T/C -> A[p + i*lda]; op(A)^T[p, i] has the swapped strides.
    a_i, a_p = (1, lda) if transa == 0 else (lda, 1)
    b_p, b_j = (1, ldb) if transb == 0 else (ldb, 1)
    # P = op(B)^T (n x k): P[j, p] = op(B)[p, j]; Q = op(A)^T (k x m): Q[p, i] = op(A)[i, p]
    BR, BS, BK = 32, 32, 16
    grid = (triton.cdiv(n, BR), triton.cdiv(m, BS))
    _rm_gemm[grid](B, A, C, n, m, k, b_j, b_p, a_p, a_i, ldc, alpha, beta,
                   BETA_ZERO=(beta == 0), BR=BR, BS=BS, BK=BK)
    return None
