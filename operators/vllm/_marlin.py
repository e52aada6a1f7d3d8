"""Marlin's tile-permuted layouts (vLLM 0.13): weights, scales, zero points and bias as the
``gptq_marlin_gemm`` kernel reads them, and as ``gptq_marlin_repack`` / ``awq_marlin_repack``
write them.

The weight layout in words: the ``[K, N]`` codes are cut into 16x16 tiles (32x16 when the
activations are 8-bit, ``is_a_8bit``), the tiles of each 16-row (32-row) band laid side by side
(``[K/16, 16*N]``), each run of 1024 consecutive values of a band row permuted by
:func:`weight_perm`, then packed ``32/bits`` per int32, value ``t`` of a group in bits
``t*bits ..``. :func:`weight_location` gives the same mapping as index arithmetic.
"""

from __future__ import annotations

import torch

from operators.vllm._packing import pack_last, unpack_last, word_layout

TILE = 16
INTERLEAVE = {4: (0, 2, 4, 6, 1, 3, 5, 7), 8: (0, 2, 1, 3)}
INTERLEAVE_A8 = {4: (0, 4, 1, 5, 2, 6, 3, 7), 8: (0, 1, 2, 3)}


def _check_bits(bits: int) -> None:
    if bits not in (4, 8):
        raise ValueError(f"Marlin packs 4 or 8-bit values, not {bits}-bit")


def weight_perm(bits: int, is_a_8bit: bool = False) -> torch.Tensor:
    """The 1024-entry permutation applied to each run of a band row (new[j] = old[perm[j]])."""
    _check_bits(bits)
    perm: list[int] = []
    for i in range(32):
        col, q = divmod(i, 4)
        if is_a_8bit:
            rows = [4 * q + d for d in range(4)] + [4 * (q + 4) + d for d in range(4)]
            block = [16 * r + col + 8 * b for b in (0, 1) for r in rows]
            perm += [p + 512 * j for j in range(2) for p in block]
        else:
            rows = [2 * q, 2 * q + 1, 2 * (q + 4), 2 * (q + 4) + 1]
            block = [16 * r + col + 8 * b for b in (0, 1) for r in rows]
            perm += [p + 256 * j for j in range(4) for p in block]
    inter = (INTERLEAVE_A8 if is_a_8bit else INTERLEAVE)[bits]
    t = torch.tensor(perm, dtype=torch.int64).reshape(-1, len(inter))[:, list(inter)]
    return t.reshape(-1)


def _tiles(q: torch.Tensor, is_a_8bit: bool) -> torch.Tensor:
    k, n = q.shape
    rows = 2 * TILE if is_a_8bit else TILE
    if k % rows or n % TILE:
        raise ValueError(f"Marlin tiles need K % {rows} == 0 and N % 16 == 0, got K={k}, N={n}")
    t = q.reshape(k // rows, rows, n // TILE, TILE).permute(0, 2, 1, 3)
    return t.reshape(k // TILE, n * TILE)


def _untiles(t: torch.Tensor, k: int, n: int, is_a_8bit: bool) -> torch.Tensor:
    rows = 2 * TILE if is_a_8bit else TILE
    return t.reshape(k // rows, n // TILE, rows, TILE).permute(0, 2, 1, 3).reshape(k, n)


def pack(q: torch.Tensor, bits: int, is_a_8bit: bool = False,
         perm: torch.Tensor | None = None) -> torch.Tensor:
    """``[K, N]`` codes -> Marlin words ``[K/16, N*16*bits/32]`` (``perm``: another 1024-entry
    permutation, e.g. the 2:4 kernel's)."""
    _check_bits(bits)
    k, n = q.shape
    perm = (weight_perm(bits, is_a_8bit) if perm is None else perm).to(q.device)
    t = _tiles(q.to(torch.int64), is_a_8bit)
    if t.shape[1] % perm.numel():
        raise ValueError(f"N={n}: a band row of {t.shape[1]} values is not a whole number of "
                         f"{perm.numel()}-value runs (Marlin needs N % 64 == 0)")
    t = t.reshape(-1, perm.numel())[:, perm].reshape(t.shape)
    return pack_last(t, word_layout(bits))


def unpack(words: torch.Tensor, k: int, n: int, bits: int, is_a_8bit: bool = False,
           perm: torch.Tensor | None = None) -> torch.Tensor:
    """Inverse of :func:`pack`: the ``[K, N]`` int64 codes."""
    _check_bits(bits)
    perm = (weight_perm(bits, is_a_8bit) if perm is None else perm).to(words.device)
    t = unpack_last(words, word_layout(bits))
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel(), device=perm.device)
    t = t.reshape(-1, perm.numel())[:, inv].reshape(t.shape)
    return _untiles(t, k, n, is_a_8bit)


def weight_location(k: torch.Tensor, n: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(word column within band row ``k // 16``, bit shift) of logical element ``(k, n)`` in the
    16-bit-activation layout: the closed form of :func:`pack` that kernels evaluate."""
    _check_bits(bits)
    kk, nn = k % 16, n % 16
    j, chunk = (n // 16) % 4, n // 64
    i = (nn % 8) * 4 + (kk % 8) // 2
    r = kk % 2 + 2 * (kk // 8)
    if bits == 4:
        e = (nn // 8) * 4 + r
        return chunk * 128 + i * 4 + j, 4 * ((e % 2) * 4 + e // 2)
    slot = torch.tensor([0, 2, 1, 3], device=r.device)[r]
    return chunk * 256 + i * 8 + j * 2 + nn // 8, 8 * slot


# ---- scales, zero points, bias ------------------------------------------------------------------

def scale_perm() -> torch.Tensor:
    """Grouped scales: each run of 64 columns, ``new[8i + j] = old[i + 8j]``."""
    return torch.tensor([i + 8 * j for i in range(8) for j in range(8)], dtype=torch.int64)


def scale_perm_single() -> torch.Tensor:
    """Per-channel scales (one group) and bias: each run of 32 columns,
    ``new[8i + t] = old[2i + (0, 1, 8, 9, 16, 17, 24, 25)[t]]``."""
    return torch.tensor([2 * i + j for i in range(4) for j in (0, 1, 8, 9, 16, 17, 24, 25)],
                        dtype=torch.int64)


def _permute_runs(x: torch.Tensor, perm: torch.Tensor, inverse: bool) -> torch.Tensor:
    perm = perm.to(x.device)
    if inverse:
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(perm.numel(), device=x.device)
        perm = inv
    flat = x.reshape(-1, perm.numel())
    return flat[:, perm].reshape(x.shape).contiguous()


def permute_scales(s: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """``[G, N]`` scales as Marlin reads them: the grouped permutation when ``G > 1``, the
    single one when ``G == 1`` (per channel, or one group spanning K)."""
    perm = scale_perm() if s.shape[0] > 1 else scale_perm_single()
    return _permute_runs(s, perm, inverse)


def permute_bias(b: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    return _permute_runs(b, scale_perm_single(), inverse)


def pack_zero_points(zp: torch.Tensor, bits: int) -> torch.Tensor:
    """``[G, N]`` zero points -> ``[G, N*bits/32]`` int32: the grouped scale permutation (also
    for one group), then each 8 (4) values interleaved as the dequantizer expects, then packed."""
    _check_bits(bits)
    z = _permute_runs(zp.to(torch.int64), scale_perm(), False)
    z = _permute_runs(z, torch.tensor(INTERLEAVE[bits]), False)
    return pack_last(z, word_layout(bits))


def unpack_zero_points(words: torch.Tensor, bits: int) -> torch.Tensor:
    _check_bits(bits)
    z = unpack_last(words, word_layout(bits))
    z = _permute_runs(z, torch.tensor(INTERLEAVE[bits]), True)
    return _permute_runs(z, scale_perm(), True)
