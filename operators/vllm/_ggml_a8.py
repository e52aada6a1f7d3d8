"""What vLLM's GGML ``*_a8`` problems share: the Q8_1 activation quantization, the float64
reference with its per-element error bound, inputs, the PyTorch baseline and the cost model.

vLLM quantizes activations to Q8_1 (blocks of 32: ``d = amax / 127`` in float32, ``q = roundf(x /
d)``, ``d`` and the block sum ``s`` kept as fp16) and takes integer dot products with the
weight codes, scaled per block. Two forms of the result are accepted: the exact one,
``sum_j w[j] q[j] dh`` (``w`` the dequantized weight), and vLLM's own, which for some types
applies the weight offset ``b`` (-8d, -16d, m, -dmin*m) to the fp16 sum ``sh`` instead of to
``dh * sum(q)`` and, for Q4_1/Q5_1, rounds the products ``d * dh`` and ``m * sh`` to fp16
(``MMVQ_SUM_TYPES`` / ``MMQ_SUM_TYPES``, ``HALF_PRODUCT_TYPES``: vecdotq.cuh). The reference is
their midpoint in float64; ``Expected.scale`` carries each output's absolute error bound
(tolerance ``rtol = 1``): half their distance, plus

- float32 accumulation: ``(K + 8) u32 T`` with ``T`` the sum of |terms| (the worst case of a
  recursive sum, plus the few float32 roundings of each block's scale products);
- the output rounding: ``u_out |value|``;
- activation codes within 2^-14 of a rounding tie (but not on it) may take either neighbour:
  ``dh |w|`` each; a block whose float32 ``d`` (or sum ``s``, in any summation order) lies
  next to an fp16 rounding boundary may keep either fp16 neighbour: ``ulp16 |sum_j w q|``
  (``ulp16(s) |b|``), twice that where the products are rounded to fp16 as well.

An exact tie (``x / d`` exactly a half-integer in IEEE float32) gets no allowance: it rounds
away from zero, as C's ``roundf`` in vLLM's kernel does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from operators.spec import Cost, Expected, OperatorSpec, Tolerance, unit_roundoff
from operators.vllm import _ggml as G
from operators.vllm._vllm_ops import library

TIE_WINDOW = 2.0 ** -14
# Where vLLM applies a type's offset b to the fp16 sum of the activation block instead of to
# dh * sum(q) (vecdotq.cuh: MMVQ is ggml_mul_mat_vec_a8 and ggml_moe_a8_vec; MMQ is
# ggml_mul_mat_a8 and ggml_moe_a8), and the types whose scale products it rounds to fp16.
MMVQ_SUM_TYPES = frozenset({G.Q4_0, G.Q4_1, G.Q5_0, G.Q5_1})
MMQ_SUM_TYPES = frozenset({G.Q4_0, G.Q4_1, G.Q5_1, G.Q4_K, G.Q5_K})
HALF_PRODUCT_TYPES = frozenset({G.Q4_1, G.Q5_1})
U32 = unit_roundoff(torch.float32)
CHUNK_ELEMS = 1 << 22  # weight elements decoded at once by the reference
ALLOWED = Tolerance(rtol=1.0)  # Expected.scale is the absolute bound


@dataclass(frozen=True)
class Q81:
    """Q8_1 activations [M, K] (float64): codes ``q``, per-block fp16 ``dh`` and sum ``sh``;
    the error bound's ambiguities: near ties (0/1 per value) and the fp16 spacing of ``d`` and
    of the sum for blocks where either lies next to an fp16 rounding boundary (else 0)."""

    q: torch.Tensor
    dh: torch.Tensor
    sh: torch.Tensor
    tie: torch.Tensor
    d_amb: torch.Tensor
    s_amb: torch.Tensor

    def values(self) -> torch.Tensor:
        return self.q * self.dh.repeat_interleave(32, -1)


def _ulp16(v: torch.Tensor) -> torch.Tensor:
    """Spacing of fp16 numbers at |v| (the subnormal spacing below the normal range)."""
    e = torch.floor(torch.log2(v.abs().clamp(min=2.0 ** -14)))
    return torch.exp2(e - 10)


def q8_1(x: torch.Tensor) -> Q81:
    """vLLM's ``quantize_q8_1`` of ``x`` [M, K] (K a multiple of 32), on x's device."""
    m, k = x.shape
    xf = x.to(torch.float32).reshape(m, k // 32, 32)
    amax = xf.abs().amax(-1)
    d = amax / 127  # float32 IEEE division, as the kernel
    zero = amax == 0
    r = (xf / torch.where(zero, 1.0, d)[..., None]).double()
    mag = r.abs()
    fl = mag.floor()
    frac = mag - fl
    q = torch.where(frac >= 0.5, fl + 1, fl) * torch.sign(r)
    q = torch.where(zero[..., None], 0.0, q)
    tie = ((frac - 0.5).abs() <= TIE_WINDOW) & (frac != 0.5) & ~zero[..., None]
    d64 = d.double()
    ulp32 = torch.exp2(torch.floor(torch.log2(d64.clamp(min=1e-38))) - 23)
    d_amb = torch.where(_near_boundary(d64, 8 * ulp32) & ~zero, _ulp16(d64), 0.0)
    xd = xf.double()
    s = xd.sum(-1)  # exact: the float32 sum in any order is within 32 u32 sum|x| of it
    s_amb = torch.where(_near_boundary(s, 32 * U32 * xd.abs().sum(-1)), _ulp16(s), 0.0)
    return Q81(q.reshape(m, k), d.to(torch.float16).double(), s.to(torch.float16).double(),
               tie.reshape(m, k).double(), d_amb, s_amb)


def _near_boundary(v: torch.Tensor, slack: torch.Tensor) -> torch.Tensor:
    """Whether float64 ``v`` lies within ``slack`` of an fp16 rounding boundary (a midpoint)."""
    return (_ulp16(v) / 2 - (v - v.to(torch.float16).double()).abs()) <= slack


def _forms(a: Q81, dec: G.Decoded, qtype: int, vq: torch.Tensor) -> torch.Tensor:
    """vLLM's own value where it applies the offsets to the fp16 block sum ``sh`` (and, for
    Q4_1/Q5_1, rounds the scale products ``d * dh`` and ``m * sh`` to fp16), [M, R]."""
    if qtype not in HALF_PRODUCT_TYPES:
        qsum = a.q.reshape(a.q.shape[0], -1, 32).sum(-1)
        return vq + (a.sh - a.dh * qsum) @ dec.b.T
    m = a.q.shape[0]
    sumi = torch.einsum("mbj,nbj->mnb", a.q.reshape(m, -1, 32),
                        dec.q.double().reshape(dec.q.shape[0], -1, 32))
    scale = (dec.a[None] * a.dh[:, None]).to(torch.float16).double()
    offset = (dec.b[None] * a.sh[:, None]).to(torch.float16).double()
    return (scale * sumi + offset).sum(-1)


def _bound_terms(a: Q81, dec: G.Decoded, qtype: int, mmq: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(value, bound without the output rounding) of ``a`` times the decoded rows, [M, R]."""
    xq = a.values()
    wv = dec.values()
    value = xq @ wv.T
    terms = xq.abs() @ dec.abs_terms().T
    half = 2.0 if qtype in HALF_PRODUCT_TYPES else 1.0
    amb = a.tie * a.dh.repeat_interleave(32, -1) + half * a.q.abs() * a.d_amb.repeat_interleave(32, -1)
    extra = amb @ wv.abs().T
    if qtype in (MMQ_SUM_TYPES if mmq else MMVQ_SUM_TYPES):
        vllm = _forms(a, dec, qtype, value)
        terms = terms + a.sh.abs() @ dec.b.abs().T
        extra = extra + (vllm - value).abs() / 2 + half * a.s_amb @ dec.b.abs().T
        value = (value + vllm) / 2
    k = a.q.shape[1]
    return value, extra + (k + 8) * U32 * terms


def a8_expected_rows(a: Q81, w: torch.Tensor, qtype: int, k: int, out_dtype: torch.dtype,
                     mmq: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(value, bound) [M, N] of Q8_1 activations ``a`` times packed rows ``w`` [N, bytes];
    ``mmq``: vLLM's MMQ kernels (ggml_mul_mat_a8, ggml_moe_a8) rather than MMVQ."""
    n, m = w.shape[0], a.q.shape[0]
    step = max(1, CHUNK_ELEMS // max(k, 1))
    if qtype in HALF_PRODUCT_TYPES:  # _forms builds [M, rows, K / 32]
        step = max(1, min(step, CHUNK_ELEMS // max(m * k // 32, 1)))
    values, bounds = [], []
    for r0 in range(0, n, step):
        dec = G.unpack(w[r0:r0 + step], qtype, k)
        v, b = _bound_terms(a, dec, qtype, mmq)
        values.append(v)
        bounds.append(b)
    value = torch.cat(values, 1) if values else torch.zeros(m, 0, dtype=torch.float64)
    bound = torch.cat(bounds, 1) if bounds else torch.zeros_like(value)
    u = unit_roundoff(out_dtype)
    return value, (1 + u) * bound + u * value.abs()


def a8_expected(x: torch.Tensor, w: torch.Tensor, qtype: int, mmq: bool) -> Expected:
    """The answer for activations ``x`` [M, K] times packed rows ``w`` [N, bytes], in x's dtype."""
    value, bound = a8_expected_rows(q8_1(x), w, qtype, x.shape[1], x.dtype, mmq)
    return Expected(value, x.dtype, bound)


# ---- the PyTorch baseline (no vLLM) ------------------------------------------------------------

def torch_q8_1(x: torch.Tensor) -> torch.Tensor:
    """Q8_1 values of ``x`` as float32 (the baseline's activations)."""
    m, k = x.shape
    xf = x.to(torch.float32).reshape(m, k // 32, 32)
    d = xf.abs().amax(-1, keepdim=True) / 127
    r = xf / torch.where(d == 0, 1.0, d)
    q = torch.sign(r) * torch.floor(r.abs().double() + 0.5).float()
    return (q * d.to(torch.float16).float()).reshape(m, k)


def torch_dequant(w: torch.Tensor, qtype: int, k: int) -> torch.Tensor:
    """Packed rows -> float32 [R, K] (exact)."""
    return G.unpack(w.reshape(-1, w.shape[-1]), qtype, k).values().float()


# ---- inputs ------------------------------------------------------------------------------------

def weights(shape: tuple[int, ...], qtype: int, gen: torch.Generator) -> torch.Tensor:
    """Packed ``qtype`` weights of float shape ``shape`` ([..., N, K]): normal values of an LLM
    layer's scale (std 0.02) with a few outlier rows, quantized."""
    n, k = shape[-2], shape[-1]
    lead = 1
    for s in shape[:-2]:
        lead *= s
    w = torch.randn(lead * n, k, generator=gen, dtype=torch.float64) * 0.02
    if lead * n >= 8:
        rows = torch.randperm(lead * n, generator=gen)[: max(1, lead * n // 64)]
        w[rows] *= 8.0
    return G.quantize(w, qtype).reshape(*shape[:-1], -1)


def activations(m: int, k: int, dtype: torch.dtype, gen: torch.Generator, variant: str) -> torch.Tensor:
    """[M, K] activations. ``normal``: standard normal with a few 30x channels (LLM hidden
    states); ``ties``: every block on the grid j * 2^(e-7) with amax 254 * 2^(e-7), so d is a
    power of two and each odd j is an exact rounding tie of x / d; ``grid``: every block on
    the grid j * 2^e with amax 127 * 2^e, which Q8_1 represents exactly; ``small``: std 0.05."""
    if variant in ("ties", "grid"):
        top = 254 if variant == "ties" else 127
        j = torch.randint(1 - top, top, (m, k // 32, 32), generator=gen).double()
        j[..., 0] = torch.where(torch.rand(m, k // 32, generator=gen) < 0.5, top, -top)
        e = torch.randint(-4, 3, (m, k // 32, 1), generator=gen).double()
        scale = torch.exp2(e - 7) if variant == "ties" else torch.exp2(e - 6)
        return (j * scale).reshape(m, k).to(dtype)
    x = torch.randn(m, k, generator=gen, dtype=torch.float64)
    if variant == "small":
        x *= 0.05
    elif k >= 64:
        cols = torch.randperm(k, generator=gen)[: max(1, k // 64)]
        x[:, cols] *= 30.0
    return x.to(dtype)


def a8_cost(macs: float, weight_bytes: float, x_elems: float, out_elems: float,
            dtype: torch.dtype) -> Cost:
    """Integer dot products at the int8 tensor-core rate; bytes: packed weights, activations,
    outputs (and whatever routing metadata the caller adds to ``weight_bytes``)."""
    size = torch.empty((), dtype=dtype).element_size()
    return Cost(flops=2.0 * macs, bytes=weight_bytes + size * (x_elems + out_elems), dtype="int8")


class GgmlA8Spec(OperatorSpec):
    """Base of the ``*_a8`` problems: ``Expected.scale`` is each output's absolute error bound
    (see the module docstring), and vLLM's kernel is the baseline where vLLM runs."""

    tolerances = {"float16": ALLOWED, "bfloat16": ALLOWED, "float32": ALLOWED}

    def baseline_library(self) -> str:
        return library()
