# operator: cublas::cublasSgemm_v2
# honest: no tl.dot: the K loop (tl.range) does one rank-1 outer-product update per step in float32; beta == 0 handled by never loading C
import torch
import triton
import triton.language as tl


@triton.jit
def _sgemm_outer(a_ptr, b_ptr, c_ptr, M, N, K, alpha, beta, s_am, s_ak, s_bk, s_bn, ldc,
                 READ_C: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    i = (tl.program_id(0) * BM + tl.arange(0, BM)).to(tl.int64)
    j = (tl.program_id(1) * BN + tl.arange(0, BN)).to(tl.int64)
    iok = i < M
    jok = j < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for p in tl.range(0, K):
        a_col = tl.load(a_ptr + i * s_am + p * s_ak, mask=iok, other=0.0)
        b_row = tl.load(b_ptr + p * s_bk + j * s_bn, mask=jok, other=0.0)
        acc += a_col[:, None] * b_row[None, :]
    cp = c_ptr + i[:, None] + j[None, :] * ldc
    cm = iok[:, None] & jok[None, :]
    if READ_C:
        acc = alpha * acc + beta * tl.load(cp, mask=cm, other=0.0)
    else:
        acc = alpha * acc
    tl.store(cp, acc, mask=cm)


def cublasSgemm_v2(transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
    if m <= 0 or n <= 0:
        return None
    if transa == 0:
        s_am, s_ak = 1, lda
    else:
        s_am, s_ak = lda, 1
    if transb == 0:
        s_bk, s_bn = 1, ldb
    else:
        s_bk, s_bn = ldb, 1
    BM, BN = 32, 32
    _sgemm_outer[(triton.cdiv(m, BM), triton.cdiv(n, BN))](
        A, B, C, m, n, k, alpha, beta, s_am, s_ak, s_bk, s_bn, ldc,
        READ_C=beta != 0, BM=BM, BN=BN)
    return None
