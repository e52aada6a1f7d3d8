"""Prompt text the GGML problems share: the weight block layouts and the activation
quantization (registers nothing). Kept next to _ggml.py, whose unpack() it describes."""

from __future__ import annotations

FORMATS = (
    "GGML weight layout (vLLM's `qweight`): a weight row of K values is K / QK blocks stored back "
    "to back, each a fixed number of bytes; a [N, K] weight is a contiguous uint8 tensor "
    "[N, K / QK * BYTES] (an expert stack is [E, N, K / QK * BYTES]). Multi-byte fields are "
    "little-endian; `half` is IEEE fp16. `quant_type` is the GGML type id. Inside a block, value "
    "j (0-based) dequantizes as follows.\n"
    "- Q4_0 (id 2; QK 32, 18 bytes): half d; u8 qs[16]. q = qs[j % 16] & 15 for j < 16, "
    "qs[j % 16] >> 4 for j >= 16; w = (q - 8) * d.\n"
    "- Q4_1 (id 3; QK 32, 20 bytes): half d; half m; u8 qs[16]. q as Q4_0; w = q * d + m.\n"
    "- Q5_0 (id 6; QK 32, 22 bytes): half d; u8 qh[4] (one u32, bit j = 5th bit of value j); "
    "u8 qs[16]. q = (4-bit q as Q4_0) | (((qh >> j) & 1) << 4); w = (q - 16) * d.\n"
    "- Q5_1 (id 7; QK 32, 24 bytes): half d; half m; u8 qh[4]; u8 qs[16]. q as Q5_0; "
    "w = q * d + m.\n"
    "- Q8_0 (id 8; QK 32, 34 bytes): half d; i8 qs[32]. w = qs[j] * d.\n"
    "K-quants (QK 256), with h = j // 128, g = (j % 128) // 32, l = j % 32:\n"
    "- Q2_K (id 10; 84 bytes): u8 scales[16]; u8 qs[64]; half d; half dmin. "
    "q = (qs[32h + l] >> 2g) & 3; s = scales[j // 16]; w = d * (s & 15) * q - dmin * (s >> 4).\n"
    "- Q3_K (id 11; 110 bytes): u8 hmask[32]; u8 qs[64]; u8 scales[12]; half d. "
    "q = ((qs[32h + l] >> 2g) & 3) - (((hmask[l] >> (4h + g)) & 1) ? 0 : 4) (so -4..3); "
    "for i = j // 16 the 6-bit scale is sc = ((scales[i % 8] >> 4(i // 8)) & 15) | "
    "(((scales[8 + i % 4] >> 2(i // 4)) & 3) << 4); w = d * (sc - 32) * q.\n"
    "- Q4_K (id 12; 144 bytes): half d; half dmin; u8 scales[12]; u8 qs[128]. For i = j // 32: "
    "if i < 4: sc = scales[i] & 63, m = scales[i + 4] & 63; else sc = (scales[i + 4] & 15) | "
    "((scales[i - 4] >> 6) << 4), m = (scales[i + 4] >> 4) | ((scales[i] >> 6) << 4). "
    "q = (qs[32 (j // 64) + l] >> 4 (i % 2)) & 15; w = d * sc * q - dmin * m.\n"
    "- Q5_K (id 13; 176 bytes): half d; half dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]. "
    "sc, m, 4-bit q as Q4_K; q |= ((qh[l] >> i) & 1) << 4; w = d * sc * q - dmin * m.\n"
    "- Q6_K (id 14; 210 bytes): u8 ql[128]; u8 qh[64]; i8 scales[16]; half d. "
    "low = (ql[64h + 32 (g % 2) + l] >> 4 (g // 2)) & 15; high = (qh[32h + l] >> 2g) & 3; "
    "w = d * scales[j // 16] * ((low | (high << 4)) - 32).\n"
    "Only these 10 types are in scope (the IQ types are not used in this problem)."
)

Q8_1 = (
    "Activations are quantized to Q8_1 first, as vLLM's kernels do: each row of X (the values "
    "converted to float32) is cut into blocks of 32 consecutive values; per block "
    "amax = max |x|, d = amax / 127 (float32, IEEE division), q = roundf(x / d) (IEEE float32 "
    "division, then rounding halves AWAY from zero, as C roundf does -- not half-to-even as "
    "torch.round / rint do), q = 0 for a block with amax = 0; the block keeps dh = fp16(d) and "
    "sh = fp16(sum of its 32 float32 x). The exact result is, per output, "
    "sum over k of w[k] * q[k] * dh (w the dequantized weight value, accumulated in float32). "
    "vLLM's own kernels differ for some types, and their form is accepted as well: "
    + "{forms}" + " Outputs are compared with the midpoint of the two forms (float64) under a "
    "per-element error bound: half their distance, float32 accumulation over K, the output "
    "rounding, and -- only where x / d lies within 2^-14 of a half-integer without being "
    "exactly one, or d or the block sum lies next to an fp16 rounding boundary -- either "
    "neighbour; an exact half-integer x / d must round away from zero."
)

# The types whose offset b (w = a * q + b: -8d, -16d, m, -dmin*m) vLLM applies to sh.
FORMS_MMVQ = (
    "for Q4_0, Q4_1, Q5_0 and Q5_1 it adds b * sh per 32-value block instead of "
    "b * dh * sum(q), and for Q4_1/Q5_1 it rounds d * dh and m * sh to fp16 before using them "
    "(sum_blocks fp16(d*dh) * sum(q_w * q) + fp16(m*sh))."
)
FORMS_MMQ = (
    "for Q4_0, Q4_1, Q5_1, Q4_K and Q5_K it adds b * sh per 32-value block instead of "
    "b * dh * sum(q), and for Q4_1/Q5_1 it rounds d * dh and m * sh to fp16 before using them "
    "(sum_blocks fp16(d*dh) * sum(q_w * q) + fp16(m*sh))."
)


def q8_1_text(mmq: bool) -> str:
    """The activation-quantization paragraph for vLLM's MMQ (batched) or MMVQ kernels."""
    return Q8_1.replace("{forms}", FORMS_MMQ if mmq else FORMS_MMVQ)
