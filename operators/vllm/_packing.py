"""Bit packing of quantized weights into int32 words, as vLLM 0.13's GPTQ, AWQ and ExLlama
kernels read them.

Every layout here is a *block layout*: a block of ``V`` consecutive values (along the packed
dim) is stored in ``W`` int32 words, and for each value and each of its bits the layout names
the bit position (0 .. 32*W-1) that holds it. One packer and one unpacker serve every format,
so GPTQ rows, AWQ's interleaved columns and ExLlama's shuffled words differ only by a table.

Values are int64 tensors of unsigned codes (0 .. 2**bits - 1); words are int32 tensors holding
the 32-bit patterns (bit 31 is the sign bit, as vLLM stores them).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

# For each value of a block, the bit positions of its bits (least significant first).
Layout = tuple[tuple[int, ...], ...]

AWQ_ORDER_4BIT = (0, 2, 4, 6, 1, 3, 5, 7)  # value (column) stored in nibble t of a word
AWQ_ORDER_8BIT = (0, 2, 1, 3)


def wrap_int32(x: torch.Tensor) -> torch.Tensor:
    """int64 holding 32-bit patterns -> int32 with the same bits."""
    x = x & 0xFFFFFFFF
    return torch.where(x >= 2**31, x - 2**32, x).to(torch.int32)


def as_uint32(x: torch.Tensor) -> torch.Tensor:
    """int32 words -> int64 holding their unsigned 32-bit values."""
    return x.to(torch.int64) & 0xFFFFFFFF


def word_layout(bits: int, order: Sequence[int] | None = None) -> Layout:
    """``32 // bits`` values in one word; ``order[t]`` is the value stored in slot ``t`` (bits
    ``t*bits ..``). Default: value ``t`` in slot ``t`` (GPTQ, Marlin after its permutation)."""
    n = 32 // bits
    order = tuple(range(n)) if order is None else tuple(order)
    if sorted(order) != list(range(n)):
        raise ValueError(f"order must permute range({n}), got {order}")
    slot = {v: t for t, v in enumerate(order)}
    return tuple(tuple(slot[v] * bits + b for b in range(bits)) for v in range(n))


def gptq3_layout() -> Layout:
    """GPTQ's 3-bit packing: 32 values in 3 words, value ``i`` at bits ``3i .. 3i+2`` of the
    96-bit little-endian concatenation (values 10 and 21 straddle two words)."""
    return tuple(tuple(3 * i + b for b in range(3)) for i in range(32))


def exllama_layout(bits: int) -> Layout:
    """The word layout ``gptq_shuffle`` produces (ExLlama's dequantizers read it).

    4-bit: even values of a word in the low nibbles, odd values in the high ones (value ``v`` in
    nibble ``v // 2 + 4 * (v % 2)``). 2-bit: the same with 16 values and 2-bit slots. 8-bit:
    unchanged. 3-bit (32 values in 3 words): values ``10w .. 10w + 9`` live in word ``w``, even
    ones at bits ``0, 3, .., 12`` and odd ones at ``16, 19, .., 28``; bit ``b`` of value 30 is
    bit 15 of word ``b`` and bit ``b`` of value 31 is bit 31 of word ``b``.
    """
    if bits == 8:
        return word_layout(8)
    if bits in (2, 4):
        n = 32 // bits
        return tuple(tuple(((v // 2) + (n // 2) * (v % 2)) * bits + b for b in range(bits))
                     for v in range(n))
    if bits == 3:
        out: list[tuple[int, ...]] = []
        for v in range(30):
            w, r = divmod(v, 10)
            base = 32 * w + 16 * (r % 2) + 3 * (r // 2)
            out.append(tuple(base + b for b in range(3)))
        out.append(tuple(32 * b + 15 for b in range(3)))
        out.append(tuple(32 * b + 31 for b in range(3)))
        return tuple(out)
    raise ValueError(f"ExLlama shuffles 2, 3, 4 and 8-bit weights, not {bits}-bit")


def _runs(layout: Layout) -> list[tuple[int, int, int, int, int]]:
    """(value, first value bit, bit count, word, shift) for each run of a value's bits that lie
    next to each other in one word."""
    runs = []
    for v, positions in enumerate(layout):
        b = 0
        while b < len(positions):
            start = positions[b]
            n = 1
            while (b + n < len(positions) and positions[b + n] == start + n
                   and (start + n) // 32 == start // 32):
                n += 1
            runs.append((v, b, n, start // 32, start % 32))
            b += n
    return runs


def _words_of(layout: Layout) -> int:
    return max(p for pos in layout for p in pos) // 32 + 1


def pack_last(values: torch.Tensor, layout: Layout) -> torch.Tensor:
    """Pack the last dim of ``values`` (a multiple of the block size) into int32 words."""
    n_vals, n_words = len(layout), _words_of(layout)
    length = values.shape[-1]
    if length % n_vals:
        raise ValueError(f"packed dim {length} is not a multiple of {n_vals}")
    v = values.to(torch.int64).reshape(*values.shape[:-1], length // n_vals, n_vals)
    out = torch.zeros(*v.shape[:-1], n_words, dtype=torch.int64, device=values.device)
    for val, lo, n, word, shift in _runs(layout):
        out[..., word] |= ((v[..., val] >> lo) & ((1 << n) - 1)) << shift
    return wrap_int32(out.reshape(*values.shape[:-1], -1))


def unpack_last(words: torch.Tensor, layout: Layout) -> torch.Tensor:
    """Inverse of :func:`pack_last`: int64 codes."""
    n_vals, n_words = len(layout), _words_of(layout)
    length = words.shape[-1]
    if length % n_words:
        raise ValueError(f"word dim {length} is not a multiple of {n_words}")
    w = as_uint32(words).reshape(*words.shape[:-1], length // n_words, n_words)
    out = torch.zeros(*w.shape[:-1], n_vals, dtype=torch.int64, device=words.device)
    for val, lo, n, word, shift in _runs(layout):
        out[..., val] |= ((w[..., word] >> shift) & ((1 << n) - 1)) << lo
    return out.reshape(*words.shape[:-1], -1)


def gptq_layout(bits: int) -> Layout:
    """How GPTQ packs ``bits``-bit values along a dim (rows of weights, columns of zeros)."""
    if bits == 3:
        return gptq3_layout()
    if bits in (2, 4, 8):
        return word_layout(bits)
    raise ValueError(f"GPTQ packs 2, 3, 4 or 8-bit values, not {bits}-bit")


def pack_rows(q: torch.Tensor, bits: int, layout: Layout | None = None) -> torch.Tensor:
    """``[K, N]`` codes -> ``[K * bits / 32, N]`` int32, packed along K (GPTQ ``qweight``)."""
    return pack_last(q.mT, layout or gptq_layout(bits)).mT.contiguous()


def unpack_rows(packed: torch.Tensor, bits: int, layout: Layout | None = None) -> torch.Tensor:
    return unpack_last(packed.mT, layout or gptq_layout(bits)).mT.contiguous()


def pack_cols(q: torch.Tensor, bits: int, layout: Layout | None = None) -> torch.Tensor:
    """``[R, N]`` codes -> ``[R, N * bits / 32]`` int32, packed along N (GPTQ ``qzeros``)."""
    return pack_last(q, layout or gptq_layout(bits)).contiguous()


def unpack_cols(packed: torch.Tensor, bits: int, layout: Layout | None = None) -> torch.Tensor:
    return unpack_last(packed, layout or gptq_layout(bits)).contiguous()


def awq_layout(bits: int) -> Layout:
    """AWQ's interleaved columns: nibble ``t`` of a word holds column ``AWQ_ORDER[t]``."""
    if bits == 4:
        return word_layout(4, AWQ_ORDER_4BIT)
    if bits == 8:
        return word_layout(8, AWQ_ORDER_8BIT)
    raise ValueError(f"AWQ packs 4 or 8-bit values, not {bits}-bit")


def exllama_shuffle(packed_rows: torch.Tensor, perm: torch.Tensor | None, bits: int) -> torch.Tensor:
    """What ``gptq_shuffle(q_weight, q_perm, bit)`` leaves in ``q_weight``: rows made sequential
    (``new row i = old row perm[i]``, when ``perm`` has elements) and every block of words
    re-laid out by :func:`exllama_layout`."""
    q = unpack_rows(packed_rows, bits)
    if perm is not None and perm.numel():
        q = q[perm.to(device=q.device, dtype=torch.int64)]
    return pack_rows(q, bits, exllama_layout(bits))


def unshuffle(shuffled: torch.Tensor, bits: int) -> torch.Tensor:
    """The ``[K, N]`` codes of an ExLlama-shuffled ``qweight`` (in its sequential row order)."""
    return unpack_rows(shuffled, bits, exllama_layout(bits))
