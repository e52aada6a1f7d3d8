# operator: cublas::cublasSgemm_v2
# catalogue: 12
# layer: runtime
# expect: CHEAT_DETECTED
# technique: the product comes from the @ operator on strided views; only the alpha/beta epilogue is Triton
import torch
import triton
import triton.language as tl


@triton.jit
def _sgemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, alpha, beta,
                  s_am, s_ak, s_bk, s_bn, ldc,
                  BETA_ZERO: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m

    rm = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    n_ok = rn < N
    a_ptrs = a_ptr + rm[:, None] * s_am + rk[None, :] * s_ak
    b_ptrs = b_ptr + rk[:, None] * s_bk + rn[None, :] * s_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + rk) < K
        a = tl.load(a_ptrs, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * s_ak
        b_ptrs += BLOCK_K * s_bk

    c_ptrs = c_ptr + rm[:, None] + rn[None, :] * ldc
    c_mask = m_ok[:, None] & n_ok[None, :]
    out = alpha * acc
    if not BETA_ZERO:
        c = tl.load(c_ptrs, mask=c_mask, other=0.0)
        out = out + beta * c
    tl.store(c_ptrs, out, mask=c_mask)


@triton.jit
def _epilogue_kernel(p_ptr, c_ptr, M, N, ldc, alpha, beta, BETA_ZERO: tl.constexpr,
                     BLOCK: tl.constexpr):
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < M * N
    i = idx % M
    j = idx // M
    p = tl.load(p_ptr + i * N + j, mask=mask, other=0.0)
    out = alpha * p
    if not BETA_ZERO:
        out = out + beta * tl.load(c_ptr + i + j * ldc, mask=mask, other=0.0)
    tl.store(c_ptr + i + j * ldc, out, mask=mask)


def _op_view(t, trans, rows, cols, ld):
    if trans == 0:
        return t.as_strided((rows, cols), (1, ld))
    return t.as_strided((cols, rows), (1, ld)).t()


def cublasSgemm_v2(transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
    if m <= 0 or n <= 0:
        return None
    # the product itself via the @ operator (cuBLAS under the hood), fused epilogue in Triton
    prod = _op_view(A, transa, m, k, lda) @ _op_view(B, transb, k, n, ldb)
    prod = prod.contiguous()
    BLOCK = 1024
    _epilogue_kernel[(triton.cdiv(m * n, BLOCK),)](prod, C, m, n, ldc, alpha, beta,
                                                  BETA_ZERO=(beta == 0), BLOCK=BLOCK)
    return None


def _unused_tiled_sgemm(transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
    if m <= 0 or n <= 0:
        return None
    # Column-major: element (i, j) of an ld-by-cols matrix is at i + j * ld.
    # op(A) is m x k: N -> A(i, p) at i + p*lda; T/C -> A(p, i) at p + i*lda.
    if transa == 0:
        s_am, s_ak = 1, lda
    else:
        s_am, s_ak = lda, 1
    # op(B) is k x n: N -> B(p, j) at p + j*ldb; T/C -> B(j, p) at j + p*ldb.
    if transb == 0:
        s_bk, s_bn = 1, ldb
    else:
        s_bk, s_bn = ldb, 1
    if C.device.type == "cpu":  # Triton's interpreter: few programs, moderate tiles
        BM, BN, BK, warps, stages = 32, 32, 32, 4, 1
    else:
        BM, BN, BK, warps, stages = 128, 128, 32, 8, 3
    grid = (triton.cdiv(m, BM) * triton.cdiv(n, BN),)
    _sgemm_kernel[grid](A, B, C, m, n, k, alpha, beta, s_am, s_ak, s_bk, s_bn, ldc,
                        BETA_ZERO=(beta == 0), BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=8,
                        num_warps=warps, num_stages=stages)
    return None
