"""vllm::hadacore_transform — ``vllm._custom_ops.hadacore_transform(x, inplace=True)``
(vLLM 0.13.0): the normalized Sylvester-Hadamard transform of the last dim (QuaRot/SpinQuant
rotations), ``y = x @ H_n / sqrt(n)`` per row, ``H_2n = [[H_n, H_n], [H_n, -H_n]]``.

Semantics pinned to ``csrc/quantization/hadamard/hadacore/hadamard_transform_cuda.cu``:
float16/bfloat16 only, ``n = x.size(-1)`` a power of two up to 2^15. The kernel always works in
place on ``x.reshape(-1, n)``: for a contiguous ``x`` whose numel is a multiple of 256 that is a
view, so ``x`` itself is transformed and the returned tensor shares its storage (offset 0);
otherwise vLLM pads a copy to a multiple of 256 elements, transforms it and returns the copy's
rows (``x`` unchanged). ``inplace=False`` is out of scope: 0.13.0's kernel still transforms its
input's storage and returns an uninitialized ``empty_like``. Inputs are contiguous (with padded
rows, vLLM's ``reshape`` keeps a view and the kernel reads the gaps as data).

Accuracy: vLLM multiplies 16-point blocks on tensor cores (ceil(log2(n) / 4) rounds over 4
index bits each, low bits first, each rounded to the dtype; fp16 accumulates in fp16). The
float64 reference carries an absolute bound per output (tolerance rtol 1): the last round's
error (one unit of the dtype relative to |y|, plus the accumulation: fp16 one unit of the
round's sum of |terms|, bfloat16 16 float32 units of it), and the earlier rounds' errors (the
same per round) as they reach the output through the later orthonormal rounds: the smaller of
their |H|-weighted sum and, as a sum of independent rounding errors, the probabilistic bound
(Hoeffding, 8 "sigmas": exceeded with probability below 2.5e-14 per output). The elementwise
worst case alone grows like sqrt(n) units and would pass garbage at n = 2^15 in bfloat16; this
bound stays within about 90 (fp16) or 30 (bf16) units of the rms output up to n = 2^15.
Computing in float32 and rounding once is well within it.
Bad input: another dtype fails ``TORCH_CHECK`` "Only fp16 and bf16 supported currently"; a last
dim that is not a power of two up to 2^15, "Only power of two Hadamard sizes up to 2^15 are
supported, got N" (RuntimeError), as the PyTorch baseline does.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import torch

from operators.registry import register
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    OperatorSpec,
    Tier,
    Tolerance,
    case,
    unit_roundoff,
)
from operators.vllm._ggml_triton import patched
from operators.vllm._vllm_ops import library, vllm_ops

SOLUTION = r'''
import math
import torch
import triton
import triton.language as tl


@triton.jit
def _fwht_kernel(x_ptr, y_ptr, rows, scale, N: tl.constexpr, LOG: tl.constexpr,
                 ROWS: tl.constexpr):
    # ROWS rows of N values: log2(N) radix-2 butterfly stages in float32 (Sylvester order),
    # then the 1 / sqrt(N) scale and one rounding.
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = r < rows
    rr = tl.where(rmask, r, 0).to(tl.int64)
    c = tl.arange(0, N)
    x = tl.load(x_ptr + rr[:, None] * N + c[None, :]).to(tl.float32)
    for _ in tl.static_range(LOG):
        # Constant geometry: value j pairs with j + N/2, their sum and difference go to 2j and
        # 2j + 1. LOG such stages make the Sylvester-ordered transform with every shape fixed
        # (a stage-dependent shape needs a constexpr that Triton will not let a loop reassign).
        a, b = tl.split(tl.permute(tl.reshape(x, (ROWS, 2, N // 2)), (0, 2, 1)))
        x = tl.reshape(tl.join(a + b, a - b), (ROWS, N))
    y = x * scale
    tl.store(y_ptr + rr[:, None] * N + c[None, :], y.to(y_ptr.dtype.element_ty),
             mask=rmask[:, None])


def hadacore_transform(x, inplace=True):
    n = x.shape[-1]
    rows = x.numel() // n if n else 0
    in_place = x.is_contiguous() and x.numel() % 256 == 0
    out = x if in_place else torch.empty_like(x, memory_format=torch.contiguous_format)
    if rows == 0 or n == 1:
        if not in_place:
            out.copy_(x)
        return out
    block_rows = max(1, min(16, 4096 // n))
    grid = (triton.cdiv(rows, block_rows),)
    _fwht_kernel[grid](x, out, rows, 1.0 / math.sqrt(n), N=n, LOG=n.bit_length() - 1,
                       ROWS=block_rows)
    return out
'''

# Always returns a new tensor: vLLM transforms a contiguous x whose numel is a multiple of 256 in
# place and returns it.
NEGATIVE_COPY = patched(SOLUTION, "in_place = x.is_contiguous() and x.numel() % 256 == 0",
                        "in_place = False")
# Transforms within 256-value chunks only (each chunk a row of 256), the normalization still
# 1 / sqrt(n): right for n <= 256.
NEGATIVE_CHUNK_256 = patched(
    SOLUTION,
    "    _fwht_kernel[grid](x, out, rows, 1.0 / math.sqrt(n), N=n, LOG=n.bit_length() - 1,\n",
    "    m = min(n, 256)\n"
    "    rows, grid = rows * (n // m), (triton.cdiv(rows * (n // m), block_rows),)\n"
    "    _fwht_kernel[grid](x, out, rows, 1.0 / math.sqrt(n), N=m, LOG=m.bit_length() - 1,\n")

_DTYPES = ("float16", "bfloat16")


def _case(shape: Sequence[int], dt: str, explicit: bool = False, *, cpu: bool = False) -> Case:
    return case("hadacore_transform", dt, shape, pass_inplace=explicit, cpu=cpu)


def in_place(shape: Sequence[int]) -> bool:
    """Whether vLLM transforms a contiguous x of this shape in place (numel % 256 == 0)."""
    return math.prod(shape) % 256 == 0


@register("vllm::hadacore_transform", version=2, kind=Kind.COMPUTE)
class HadacoreTransform(OperatorSpec):
    entry_points = (
        EntryPoint(
            "hadacore_transform",
            "hadacore_transform(x: Tensor, inplace: bool = True) -> Tensor",
            "Returns x @ H_n / sqrt(n) over the last dim (Sylvester order): x itself, "
            "transformed in place, when x.numel() % 256 == 0, else a new tensor.",
        ),
    )
    description = (
        "The normalized Walsh-Hadamard transform of vLLM 0.13's `vllm._custom_ops."
        "hadacore_transform(x, inplace=True)` (QuaRot-style rotations): x is a contiguous "
        "float16 or bfloat16 tensor whose last dim n is a power of two (2 <= n <= 32768). For "
        "every row r (all leading dims flattened), y[r] = x[r] @ H_n / sqrt(n) with the Sylvester "
        "Hadamard matrix H_1 = [1], H_2n = [[H_n, H_n], [H_n, -H_n]] (natural order: H_n[i, j] = "
        "(-1)^popcount(i & j)). In-place rule (vLLM's): when x.numel() is a multiple of 256, "
        "write y into x itself and return x (the same storage, same shape); otherwise return a "
        "NEW contiguous tensor of x's shape and dtype holding y and leave x unchanged. inplace "
        "is always True here. Accuracy: vLLM computes in 16-point rounds on tensor cores, "
        "rounding to the dtype after each; outputs are compared with a float64 reference under a "
        "per-element bound of two units of the dtype per such round relative to that round's sum "
        "of |terms| (carried through the later rounds), so float32 butterflies with one final "
        "rounding are well within it."
    )
    solution = SOLUTION
    negatives = (
        Negative("returns_copy", "always returns a new tensor instead of transforming x in place "
                 "when x.numel() % 256 == 0", NEGATIVE_COPY),
        Negative("chunks_of_256", "transforms only within 256-value chunks (8 butterfly stages)",
                 NEGATIVE_CHUNK_256),
    )
    tolerances = {"float16": Tolerance(1.0), "bfloat16": Tolerance(1.0)}

    def cases(self) -> Sequence[Case]:
        return [
            _case((4, 64), "bfloat16", cpu=True), _case((3, 16), "float16", cpu=True),
            _case((2, 2, 128), "bfloat16", True, cpu=True), _case((5, 32), "float16", cpu=True),
            _case((1, 512), "bfloat16", cpu=True), _case((128, 2), "float16", True, cpu=True),
            _case((7, 4096), "bfloat16"), _case((33, 8192), "float16"),
            _case((16, 32, 128), "bfloat16"), _case((3, 32768), "float16", True),
            _case((1000, 1024), "bfloat16"), _case((5, 512), "float16"), _case((3, 64), "bfloat16"),
            _case((9, 2048), "float16"), _case((1, 16384), "bfloat16"), _case((37, 256), "float16"),
        ]

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(2 if small else 5):
            n = 2 ** rng.randrange(1, 9 if small else 16)
            lead = [rng.randrange(1, 6 if small else max(2, 2 ** 17 // n))]
            if rng.random() < 0.3:
                lead.append(rng.randrange(1, 4 if small else 40))
            out.append(_case((*lead, n), rng.choice(_DTYPES), rng.random() < 0.5, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case((16384, 8192), "bfloat16"),
            _case((16384, 32, 128), "float16"),
            _case((2048, 32768), "bfloat16"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        n = c.shape[-1]
        x = torch.randn(*c.shape, generator=gen, dtype=torch.float64)
        if n >= 64:  # a few outlier channels: what the rotation exists to spread
            cols = torch.randperm(n, generator=gen)[: n // 64]
            x[..., cols] *= 20.0
        x = x.to(c.torch_dtype)
        args = (x, True) if c["pass_inplace"] else (x,)
        mutable = frozenset({0}) if in_place(c.shape) else frozenset()
        return Call(c.entry, args, mutable=mutable)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x = call.args[0]
        value, bound = hadamard_with_bound(x)
        return (Expected(value, x.dtype, bound, view_of=0 if in_place(x.shape) else None),)

    def baseline(self, call: Call) -> object:
        x = call.args[0]
        ops = vllm_ops(x)
        if ops is not None:
            return ops.hadacore_transform(*call.args)
        check_input(x)
        y = fwht(x.to(torch.float32)).div_(math.sqrt(x.shape[-1])).to(x.dtype)
        if in_place(x.shape) and x.is_contiguous():
            return x.copy_(y)
        return y

    def baseline_library(self) -> str:
        return library()

    def cost(self, c: Case) -> Cost:
        numel = math.prod(c.shape)
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        return Cost(flops=float(numel * max(1, c.shape[-1].bit_length() - 1)),
                    bytes=float(2 * numel * size), dtype=c.dtype)


def fwht(x: torch.Tensor) -> torch.Tensor:
    """The unnormalized Sylvester transform of the last dim, radix 2, in x's dtype."""
    n = x.shape[-1]
    y = x.reshape(-1, n).clone()
    s = 1
    while s < n:
        v = y.view(-1, n // (2 * s), 2, s)
        a, b = v[:, :, 0, :].clone(), v[:, :, 1, :].clone()
        v[:, :, 0, :] = a + b
        v[:, :, 1, :] = a - b
        s *= 2
    return y.reshape(x.shape)


def _round(z: torch.Tensor, lo: int, hi: int, kind: str) -> torch.Tensor:
    """One round over index bits [lo, hi) of rows ``z`` [R, n]: ``signed`` the normalized
    Hadamard; ``abs`` its |H| (for sums of |terms|); ``mean`` the mean over each group (how the
    variance of independent errors reaches the outputs)."""
    n = z.shape[1]
    size = 1 << (hi - lo)
    v = z.reshape(z.shape[0], n >> hi, size, 1 << lo)
    if kind == "mean":
        return v.mean(2, keepdim=True).expand_as(v).reshape(z.shape)
    h = torch.ones(1, 1, dtype=z.dtype, device=z.device)
    while h.shape[0] < size:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h if kind == "signed" else h], 1)], 0)
    return torch.einsum("ij,rajb->raib", h / math.sqrt(size), v).reshape(z.shape)


# Hoeffding's inequality with this many "sigmas" (the root sum of squared per-term bounds):
# an output exceeds the bound with probability below 2 exp(-LAMBDA^2 / 2) = 2.5e-14.
LAMBDA = 8.0


def hadamard_with_bound(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact transform in float64 and each output's error bound: the last round's error,
    plus each earlier round's errors as they reach the output through the later rounds'
    orthonormal butterflies: at most their |H|-weighted sum, and (a sum of independent terms)
    at most LAMBDA times the root of their summed squares; the smaller of the two. A round's
    error: its result rounded to the dtype, ``u |z|``, and its 16-term sum accumulated in fp16
    (``u a``, ``a`` the sum of |terms|) or, for bfloat16, in float32 (``16 u32 a``)."""
    n = x.shape[-1]
    logn = n.bit_length() - 1
    groups = [(lo, min(lo + 4, logn)) for lo in range(0, logn, 4)]
    z = x.reshape(-1, n).to(torch.float64)
    u = unit_roundoff(x.dtype)
    acc = u if x.dtype == torch.float16 else 16 * unit_roundoff(torch.float32)
    earlier: list[tuple[torch.Tensor, torch.Tensor]] = []  # per round: (|H| sum, squares)
    last = None
    for lo, hi in groups:
        if last is not None:  # the previous round's error goes through this round
            earlier.append((last, last ** 2))
        earlier = [(_round(d, lo, hi, "abs"), _round(v, lo, hi, "mean")) for d, v in earlier]
        terms = _round(z.abs(), lo, hi, "abs")
        z = _round(z, lo, hi, "signed")
        last = u * z.abs() + acc * terms
    assert last is not None
    bound = last + sum((torch.minimum(d, LAMBDA * v.sqrt()) for d, v in earlier),
                       torch.zeros_like(z))
    return z.reshape(x.shape), (bound * (1 + 8 * u)).reshape(x.shape)


def check_input(x: torch.Tensor) -> None:
    """vLLM 0.13's TORCH_CHECKs (the CUDA one aside)."""
    if x.dtype not in (torch.float16, torch.bfloat16):
        raise RuntimeError("Only fp16 and bf16 supported currently")
    n = x.shape[-1]
    if n <= 0 or n & (n - 1) or n > 1 << 15:
        raise RuntimeError(f"Only power of two Hadamard sizes up to 2^15 are supported, got {n}")
