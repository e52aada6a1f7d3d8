"""What vLLM's fp8 / int8 activation-quantization problems share: the grids, vLLM's scale
rules, how a quantized output is judged, Triton rounding helpers and PyTorch quantizers.
Registers nothing. (Weight quantization for the quantized GEMMs is :mod:`operators.vllm._quant`.)

**Grids.** fp8 is ``float8_e4m3fn`` (vLLM's ``current_platform.fp8_dtype()`` on CUDA): largest
finite 448, no infinities, 3 mantissa bits, subnormals down to 2**-9. int8 is [-128, 127].
Both round to nearest (ties to even on the GPU) and saturate: vLLM clamps to ±448 before the
hardware cast (which saturates too); ``cvt.rni.sat.s8.f32`` does both for int8.

**Scales.** Dynamic scales are ``absmax / qmax`` (qmax 448 or 127); vLLM's per-token and
per-block kernels clamp them from below with ``min_scaling_factor``: ``1 / (448 * 512)`` for fp8,
float32's epsilon for int8 (so an all-zero row quantizes to zeros); fp8's per-token scales are
first capped by the optional ``scale_ub``. The per-tensor dynamic fp8 scale has no floor.

**Judging.** A quantized output must be the grid point nearest to the exact quotient
``x / scale`` (computed in float64 from the pristine inputs); the other neighbour is accepted
only within ``SLACK`` (2**-16, relative) of a tie, room for a few hundred float32 roundings on
the way to the rounding, under 1/1000 of a quantum. That is "exactly one quantum at rounding
ties, nothing more". A problem whose kernel rounds an intermediate to a 16-bit dtype first (the
fused RMS-norm quantizers) widens the tie band by that rounding's bound, stated there.
Every output of these problems carries its *allowed absolute error* in ``Expected.scale`` and is
judged with :data:`ALLOWED` (``|out - exact| <= scale``): :class:`QuantSpec` applies it to every
dtype, int8 included; outputs whose value is an integer tensor (azp) are exact.
"""

from __future__ import annotations

import torch

from operators.spec import Case, Expected, OperatorSpec, Tolerance, unit_roundoff

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
FP8_MIN_NORMAL_EXP = -6  # 2**-6, the smallest normal e4m3fn number
FP8_MANTISSA_BITS = 3
INT8_MIN, INT8_MAX = -128.0, 127.0
FP8_MIN_SCALE = 1.0 / (FP8_MAX * 512.0)
INT8_MIN_SCALE = float(torch.finfo(torch.float32).eps)
SLACK = 2.0 ** -16
U32 = unit_roundoff(torch.float32)
# A float32 scale: a division (and a subtraction for the asymmetric range) -> 4 roundings' room.
SCALE_REL = 4 * U32

ALLOWED = Tolerance(rtol=1.0, atol=0.0)

# Activation shapes (tokens, hidden): vLLM's odd test sizes, Llama-3 8B/70B hidden and MLP
# sizes, DeepSeek-V3's hidden.
SHAPES = ((1, 17), (7, 1025), (4096, 1024), (7, 8193), (2048, 4096), (1024, 7168),
          (512, 14336), (4096, 5137))


class QuantSpec(OperatorSpec):
    """Base of the quantization problems: every output's ``Expected.scale`` is its allowed
    absolute error, whatever its dtype (int8 outputs are judged by value too; the listing
    shows rtol 1 for each dtype an output may have)."""

    tolerances = {name: ALLOWED for name in ("float8_e4m3fn", "int8", "uint8", "int32",
                                             "float16", "bfloat16", "float32")}

    def tolerance(self, case: object, dtype: torch.dtype) -> Tolerance:
        return ALLOWED


def qmax(quant_dtype: torch.dtype) -> float:
    return FP8_MAX if quant_dtype == FP8 else INT8_MAX


def min_scale(quant_dtype: torch.dtype) -> float:
    return FP8_MIN_SCALE if quant_dtype == FP8 else INT8_MIN_SCALE


def fp8_half_quantum(v: torch.Tensor) -> torch.Tensor:
    """Half the e4m3fn grid spacing at each |v| (float64): 2**(e - 4) for 2**e <= |v| < 2**(e+1),
    e clamped to the subnormal range's -6."""
    _, exp = torch.frexp(v.abs())
    e = torch.where(v == 0, torch.full_like(exp, FP8_MIN_NORMAL_EXP), exp - 1)
    e = e.clamp(min=FP8_MIN_NORMAL_EXP)
    return torch.ldexp(torch.full_like(v, 0.5), (e - FP8_MANTISSA_BITS).to(torch.int32))


def approx(value: torch.Tensor, dtype: torch.dtype, allowed: torch.Tensor) -> Expected:
    """A float output within ``allowed`` (absolute, per element) of ``value``."""
    return Expected(value, dtype, allowed)


def quantized(v: torch.Tensor, quant_dtype: torch.dtype, rel: float = 0.0,
              magnitude: torch.Tensor | None = None) -> Expected:
    """The expectation for ``v`` (the exact pre-rounding values, float64) quantized to
    ``quant_dtype`` (fp8 or int8) with saturation: nearest grid point, the other neighbour
    within ``(SLACK + rel) * magnitude`` of a tie (``magnitude`` defaults to |v|; an int8 zero
    point added after scaling makes it |x / scale| + |azp|)."""
    mag = v.abs() if magnitude is None else magnitude
    if quant_dtype == FP8:
        c = v.clamp(-FP8_MAX, FP8_MAX)
        return Expected(c, FP8, fp8_half_quantum(c) + (SLACK + rel) * mag.clamp(max=FP8_MAX))
    if quant_dtype == torch.int8:
        c = v.clamp(INT8_MIN, INT8_MAX)
        return Expected(c, torch.int8, 0.5 + (SLACK + rel) * mag.clamp(max=2 * 256.0))
    raise ValueError(f"not a quantized dtype: {quant_dtype}")


def fp8_code_position(v: torch.Tensor) -> torch.Tensor:
    """Where ``v`` (float64) falls among the e4m3fn byte codes, as a fraction: code k + t for a
    value t of the way from code k's value to code k+1's, saturated at 448 (code 126); the sign
    bit adds 128 (negative values that round to zero are code 128, as the hardware gives)."""
    a = v.abs().clamp(max=FP8_MAX)
    half_q = fp8_half_quantum(a)
    q = 2 * half_q
    _, exp = torch.frexp(a)
    e = torch.where(a == 0, torch.full_like(exp, FP8_MIN_NORMAL_EXP), exp - 1)
    normal = e >= FP8_MIN_NORMAL_EXP
    # Codes 0..7 are the subnormals k * 2**-9; code 8 * (e + 7) + m is 2**e * (1 + m / 8).
    base = torch.where(normal, (8 * (e + 7)).to(torch.float64), torch.zeros_like(a))
    start = torch.where(normal, torch.ldexp(torch.ones_like(a), e.to(torch.int32)),
                        torch.zeros_like(a))
    pos = base + (a - start) / q
    return pos + 128.0 * torch.signbit(v).to(torch.float64)


def fp8_bytes(v: torch.Tensor) -> Expected:
    """The expectation for uint8 bytes holding ``v`` (float64) as e4m3fn codes: the nearest
    code, the other neighbour within SLACK of a tie (one code is one quantum)."""
    pos = fp8_code_position(v)
    a = v.abs().clamp(max=FP8_MAX)
    slack = SLACK * a / (2 * fp8_half_quantum(a))
    return Expected(pos, torch.uint8, 0.5 + slack)


def exact(value: torch.Tensor, dtype: torch.dtype) -> Expected:
    """An output that must equal ``value`` (given in float64 or as integers)."""
    return Expected(value, dtype, torch.zeros(value.shape, dtype=torch.float64))


def passed_through(t: torch.Tensor, key: str) -> Expected:
    """An output that must be the argument ``key`` itself (vLLM's wrappers return a given
    static scale or zero point as they got it)."""
    return Expected(t.double(), t.dtype, torch.zeros(t.shape, dtype=torch.float64), view_of=key)


def unique(cases: list[Case]) -> list[Case]:
    """``cases`` without repeated names, the first (a cpu-tier copy of a grid case) kept."""
    seen: dict[str, Case] = {}
    for c in cases:
        seen.setdefault(c.name, c)
    return list(seen.values())


# ---- PyTorch quantizers (baselines) -------------------------------------------------------------

def torch_quantize(v: torch.Tensor, quant_dtype: torch.dtype) -> torch.Tensor:
    """float32 values to fp8 or int8 as vLLM's kernels do: clamp, then round to nearest even."""
    if quant_dtype == FP8:
        return v.clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return v.round().clamp(INT8_MIN, INT8_MAX).to(torch.int8)


# ---- Triton helpers pasted into reference solutions ---------------------------------------------

# Both round in float32 arithmetic and cast only exact grid values: Triton's interpreter
# converts float32 to float8e4nv wrongly (no mantissa carry: values just under a power of two
# fall to the power below; subnormals truncate; no saturation), while an exactly representable
# value converts exactly on every platform.
TRITON_ROUNDING = r'''

@triton.jit
def _rne(y):
    # Round float32 to the nearest integer, ties to even (|y| < 2**22).
    return (y + 12582912.0) - 12582912.0


@triton.jit
def _e4m3(v):
    # Saturate to +-448 and round to the nearest e4m3fn value (ties to even), in float32.
    a = tl.minimum(tl.abs(v), 448.0)
    e = ((a.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127
    e = tl.maximum(e, -6)
    quantum = ((e - 3 + 127) << 23).to(tl.float32, bitcast=True)
    r = _rne(a / quantum) * quantum
    return r * tl.where(v < 0, -1.0, 1.0)  # keeps the sign of a zero (-r would not)


@triton.jit
def _rows_absmax(x_ptr, rows, rmask, n_cols, sx, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # max |x| of each row of a [rows, n_cols] tensor with row stride sx (dense rows).
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = rmask[:, None] & (cols < n_cols)[None, :]
        x = tl.load(x_ptr + rows[:, None] * sx + cols[None, :], mask=mask, other=0.0)
        acc = tl.maximum(acc, tl.abs(x.to(tl.float32)))
    return tl.max(acc, axis=1)


@triton.jit
def _int8(v):
    # Saturate to [-128, 127] and round to nearest even.
    return _rne(tl.minimum(tl.maximum(v, -128.0), 127.0))
'''
