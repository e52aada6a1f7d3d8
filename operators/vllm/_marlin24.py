"""Marlin 2:4 (sparse) layouts of vLLM 0.13's ``gptq_marlin_24_gemm``: the compressed weight
(two kept values of every four along K), its 2-bit position metadata in CUTLASS's reordered
int16 layout, and the 2:4 kernel's own weight and scale permutations.

Metadata: for output column ``n`` and quad ``q`` (dense rows ``4q .. 4q+3``) the kept positions
``i0 < i1`` make the nibble ``i0 | i1 << 2``; four quads make one int16 ``meta[n, c]``
(quad ``4c + t`` in bits ``4t ..``), and ``meta[n, c]`` is stored at flat position
:func:`meta_offset` of the ``[K/32, 2N]`` int16 tensor.
"""

from __future__ import annotations

import torch

from operators.vllm import _marlin

SCALE_ORDER_24 = (0, 4, 1, 5, 2, 6, 3, 7)


def weight_perm_24(bits: int) -> torch.Tensor:
    """The 1024-entry run permutation of the 2:4 kernel (applied to the compressed
    ``[K/2, N]`` codes cut into 16x16 tiles, as :func:`operators.vllm._marlin.pack` does)."""
    perm: list[int] = []
    for i in range(32):
        col, q = divmod(i, 4)
        rows = [2 * q, 2 * q + 1, 2 * (q + 4), 2 * (q + 4) + 1]
        block = [16 * r + (col // 2) * 256 + 8 * (col % 2) + 4 * b for b in (0, 1) for r in rows]
        perm += [p + j for j in range(4) for p in block]
    inter = _marlin.INTERLEAVE[bits]
    t = torch.tensor(perm, dtype=torch.int64).reshape(-1, len(inter))[:, list(inter)]
    return t.reshape(-1)


def scale_perm_24(grouped: bool) -> torch.Tensor:
    """Runs of 64 columns: grouped ``new[8i + t] = old[8i + (0, 4, 1, 5, 2, 6, 3, 7)[t]]``;
    per channel unchanged."""
    if grouped:
        return torch.tensor([8 * i + j for i in range(8) for j in SCALE_ORDER_24])
    return torch.arange(64)


def permute_scales_24(s: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    perm = scale_perm_24(s.shape[0] > 1).to(s.device)
    if inverse:
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(perm.numel(), device=s.device)
        perm = inv
    return s.reshape(-1, 64)[:, perm].reshape(s.shape).contiguous()


def keep_mask(w: torch.Tensor) -> torch.Tensor:
    """The 2:4 mask along K of ``[K, N]`` weights: the two largest magnitudes of each quad (of
    equal magnitudes, the later one), as vLLM's ``mask_creator`` prunes."""
    k, n = w.shape
    a = w.abs().mT.reshape(n, k // 4, 4)
    below = torch.zeros_like(a, dtype=torch.int8)  # quad members sorting before each one
    for j in range(4):
        aj = a[..., j:j + 1]
        earlier = (torch.arange(4, device=w.device) > j)  # j comes first on a tie
        below += ((aj < a) | ((aj == a) & earlier)).to(torch.int8)
    return (below >= 2).reshape(n, k).mT.contiguous()


def encode_positions(nonzero: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """CUTLASS's choice of the two stored positions of a quad from its non-zero flags
    ``[..., 4]`` (fewer than two non-zeros fall back to fixed positions, more keep the first
    two): ``(i0, i1)`` with ``i0 < i1``."""
    m0, m1, m3 = nonzero[..., 0], nonzero[..., 1], nonzero[..., 3]
    expr0, expr1, expr2 = m0 & m1, ~m0 & m1, ~m0 & ~m1
    i0 = expr1.to(torch.int64) | (expr2.to(torch.int64) << 1)
    i1 = (expr0 | expr2 | m3).to(torch.int64) | ((expr1 | ~m1).to(torch.int64) << 1)
    return i0, i1


def compress(q_signed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[K, N]`` codes with the bias removed (pruned values 0) -> the ``[K/2, N]`` kept codes
    (still without bias) and the positions ``i0, i1`` (``[N, K/4]``)."""
    k, n = q_signed.shape
    quads = q_signed.mT.reshape(n, k // 4, 4)
    i0, i1 = encode_positions(quads != 0)
    kept = torch.stack([quads.gather(-1, i0[..., None])[..., 0],
                        quads.gather(-1, i1[..., None])[..., 0]], dim=-1)
    return kept.reshape(n, k // 2).mT.contiguous(), i0, i1


def decompress(kept: torch.Tensor, i0: torch.Tensor, i1: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`compress`: ``[K, N]`` with zeros at the pruned positions."""
    k2, n = kept.shape
    pairs = kept.mT.reshape(n, k2 // 2, 2)
    dense = torch.zeros(n, k2 // 2, 4, dtype=kept.dtype, device=kept.device)
    dense.scatter_(-1, i0[..., None], pairs[..., :1])
    dense.scatter_(-1, i1[..., None], pairs[..., 1:])
    return dense.reshape(n, 2 * k2).mT.contiguous()


def meta_offset(n: torch.Tensor, c: torch.Tensor, size_n: int) -> torch.Tensor:
    """Flat position of ``meta[n, c]`` in the stored int16 tensor (CUTLASS's
    ColumnMajorInterleaved<2> reordering of the ``[N, K/16]`` metadata)."""
    r = (n // 64 * 64 + (n % 2) * 2 + (n % 8) // 4 + ((n % 32) % 4) // 2 * 32
         + ((n % 64) // 8) * 4)
    top_right = ((r % 2 == 0) & (c % 2 == 1)).to(torch.int64)
    bottom_left = ((r % 2 == 1) & (c % 2 == 0)).to(torch.int64)
    r = r + top_right - bottom_left
    c = c - top_right + bottom_left
    return (c // 2) * size_n * 2 + r * 2 + c % 2


def _meta_grid(size_k: int, size_n: int,
               device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    n = torch.arange(size_n, device=device)[:, None].expand(size_n, size_k // 16)
    c = torch.arange(size_k // 16, device=device)[None, :].expand(size_n, size_k // 16)
    return n, c


def pack_meta(i0: torch.Tensor, i1: torch.Tensor) -> torch.Tensor:
    """Positions ``[N, K/4]`` -> the stored int16 metadata ``[K/32, 2N]``."""
    size_n, quads = i0.shape
    size_k = 4 * quads
    nib = (i0 | (i1 << 2)).reshape(size_n, size_k // 16, 4)
    word = nib[..., 0] | (nib[..., 1] << 4) | (nib[..., 2] << 8) | (nib[..., 3] << 12)
    word = torch.where(word >= 2**15, word - 2**16, word)
    flat = torch.empty(size_n * size_k // 16, dtype=torch.int64)
    n, c = _meta_grid(size_k, size_n)
    flat[meta_offset(n, c, size_n).reshape(-1)] = word.reshape(-1)
    return flat.to(torch.int16).reshape(size_k // 32, 2 * size_n)


def unpack_meta(meta: torch.Tensor, size_k: int, size_n: int) -> tuple[torch.Tensor, torch.Tensor]:
    n, c = _meta_grid(size_k, size_n, meta.device)
    word = meta.reshape(-1).to(torch.int64)[meta_offset(n, c, size_n)] & 0xFFFF
    nib = torch.stack([(word >> (4 * t)) & 0xF for t in range(4)], dim=-1).reshape(size_n, -1)
    return nib & 3, nib >> 2


def pack_weights_24(kept_codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Compressed ``[K/2, N]`` codes (bias included) -> the 2:4 kernel's words
    ``[K/32, N*16*bits/32]``."""
    return _marlin.pack(kept_codes, bits, perm=weight_perm_24(bits))


def unpack_weights_24(words: torch.Tensor, size_k: int, size_n: int, bits: int) -> torch.Tensor:
    return _marlin.unpack(words, size_k // 2, size_n, bits, perm=weight_perm_24(bits))
