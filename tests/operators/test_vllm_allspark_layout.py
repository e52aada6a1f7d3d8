"""AllSpark's N32K16 order (operators/vllm/allspark_w8a16_gemm.py) against transcriptions of
vLLM 0.13's two CUDA kernels that define it: ``rearrange_kn_weight_as_n32k16_order_ldg16_kernel``
(what ``allspark_repack_weight`` runs to make the layout) and
``restore_N32_K16_dequantize_rhs_w8a16_perc_kernel`` (how the cuBLAS path reads it back). vLLM
has no Python helper for this layout, so the kernels' index arithmetic is run thread by thread."""

from __future__ import annotations

import pytest
import torch

from operators.vllm.allspark_w8a16_gemm import reorder_columns, reorder_weight, restore_weight


def _rearrange(b: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """rearrange_kn_weight_as_n32k16_order_ldg16_kernel, one thread at a time."""
    size_k, size_n = b.shape
    n32 = (size_n + 31) // 32 * 32
    out = torch.full((n32 // 4, 4 * size_k), -1, dtype=torch.int64)
    sout = torch.full((n32,), -1.0, dtype=torch.float64)
    grid_x, grid_y = (size_k + 63) // 64 + 1, (size_n + 127) // 128
    for bx in range(grid_x):
        for by in range(grid_y):
            for tid in range(128):
                lane, warp = tid % 32, tid // 32
                if bx != grid_x - 1:
                    base = bx * 64 + warp * 16 + ((lane % 8) // 2) * 2
                    col = by * 128 + (lane // 8) * 32 + (lane % 2) * 16
                    frag = []
                    for i in range(4):
                        row = base + (i // 2) * 8 + (i % 2)
                        ok = row < size_k and col < size_n
                        frag.append([int(b[row, col + j]) if ok else 0 for j in range(16)])
                    reo = [[0] * 8 for _ in range(8)]
                    for i in range(4):
                        for j in range(16):
                            reo[j % 8][i + (j // 8) * 4] = frag[i][j]
                    drow = by * 32 + (lane // 8) * 8
                    dcol = bx * 256 + warp * 64 + (lane % 8) * 8
                    for i in range(8):
                        if drow < n32 // 4 and dcol < 4 * size_k:
                            out[drow + i, dcol:dcol + 8] = torch.tensor(reo[i])
                else:
                    src = by * 128 + tid
                    val = float(scale[src]) if src < size_n else 0.0
                    dst = by * 128 + warp * 32 + (lane % 8) * 4 + lane // 8
                    if dst < n32:
                        sout[dst] = val
    return out.reshape(n32, size_k), sout


def _restore(bq: torch.Tensor, size_n: int) -> torch.Tensor:
    """restore_N32_K16_dequantize_rhs_w8a16_perc_kernel with unit scales and no zeros: the
    [K, N] codes minus 128, one thread at a time (its shared-memory transpose included)."""
    n32, size_k = bq.shape
    q = bq.reshape(n32 // 4, 4 * size_k).to(torch.int64)
    out = torch.full((size_k, size_n), -999, dtype=torch.int64)
    for bx in range(n32 // 32):
        for by in range((size_k // 16 + 3) // 4):
            smem = [0] * (64 * 32)
            for tid in range(128):
                warp, lane = tid // 32, tid % 32
                srow = bx * 8 + lane // 4
                scol = by * 256 + warp * 64 + (lane % 4) * 16
                qval = [int(q[srow, scol + j]) if scol < 4 * size_k else 0 for j in range(16)]
                base = (warp * 16 + (lane % 4) * 2) * 32 + lane // 4
                for ni in range(4):
                    for ki in range(4):
                        off = base + ((ki // 2) * 8 + (ki % 2)) * 32 + ((ni + lane % 4) % 4) * 8
                        smem[off] = qval[ni * 4 + ki] - 128
            for tid in range(128):
                lds = (tid // 4) * 32 + ((tid % 4 + tid // 8) % 4) * 8
                for i in range(2):
                    vals = smem[lds + i * 32 * 32: lds + i * 32 * 32 + 8]
                    krow = by * 64 + tid // 4 + i * 32
                    ncol = bx * 32 + (tid % 4) * 8
                    if krow < size_k and ncol < size_n:
                        out[krow, ncol:ncol + 8] = torch.tensor(vals)
    return out


@pytest.mark.parametrize("shape", [(64, 32), (96, 48), (128, 160), (48, 80)])
def test_n32k16_order_matches_the_cuda_repack(shape: tuple[int, int]) -> None:
    size_k, size_n = shape
    i = torch.arange(size_k * size_n).reshape(size_k, size_n)
    q = ((i * 37 + i // 7) % 256).to(torch.uint8)
    scale = torch.arange(size_n, dtype=torch.float64) + 1
    want, want_scale = _rearrange(q, scale)
    assert torch.equal(reorder_weight(q).to(torch.int64), want)
    assert torch.equal(reorder_columns(scale), want_scale)
    assert torch.equal(restore_weight(reorder_weight(q), size_n), q)


@pytest.mark.parametrize("shape", [(64, 32), (128, 96)])
def test_n32k16_order_matches_the_cuda_restore(shape: tuple[int, int]) -> None:
    size_k, size_n = shape
    i = torch.arange(size_k * size_n).reshape(size_k, size_n)
    q = ((i * 53 + i // 5) % 256).to(torch.uint8)
    assert torch.equal(_restore(reorder_weight(q), size_n), q.to(torch.int64) - 128)
