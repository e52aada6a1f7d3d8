"""vllm::marlin_int4_fp8_preprocess — ``vllm._custom_ops.marlin_int4_fp8_preprocess(qweight,
qzeros_or_none=None, inplace=False)`` of vLLM 0.13.0: rewrites every 4-bit code of an int32
weight for Marlin's W4A8-FP8 path. Returns the result: ``qweight`` itself when ``inplace``,
else a new tensor of its shape.

Per nibble ``v`` (8 per int32, bits ``4i..4i+3``):

- without zero points (GPTQ-style uint4b8 codes, any layout, e.g. Marlin-packed):
  ``v >= 8 ? v - 8 : 15 - v``;
- with ``qzeros_or_none`` (AWQ: ``qweight [K, N/8]``, ``qzeros [K/G, N/8]``, both in AWQ's
  interleaved nibble order, which the op never needs to know): with ``z`` the nibble at the same
  position of ``qzeros[k // G, j]``, ``v >= z ? v - z : 15 - v``, ``G = K // qzeros.size(0)``.

vLLM 0.13's checks (``TORCH_CHECK``, RuntimeError): "qweight.dtype != torch.int32";
without zeros "qweight.size(0) * qweight.size(1) * 8 % 256 != 0"; with zeros "size_k % 32 !=
0", "qweight.size(1) != qzeros.size(1)", "qweight.size(0) % qzeros.size(0) != 0" (a group size
that does not divide K), "group_size % 8 != 0".
"""

from __future__ import annotations

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
    Out,
    Tier,
    case,
)
from operators.vllm import _gemm, _marlin, _packing, _quant

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _preprocess_kernel(q_ptr, z_ptr, out_ptr, n_words, words_per_row, group_size,
                       HAS_ZP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_words
    val = tl.load(q_ptr + offs, mask=mask, other=0)
    if HAS_ZP:
        k = offs // words_per_row
        j = offs % words_per_row
        zero = tl.load(z_ptr + (k // group_size) * words_per_row + j, mask=mask, other=0)
    out = tl.zeros((BLOCK,), dtype=tl.int32)
    for i in tl.static_range(8):
        v = (val >> (4 * i)) & 0xF
        if HAS_ZP:
            z = (zero >> (4 * i)) & 0xF
        else:
            z = 8
        r = tl.where(v >= z, v - z, 15 - v)
        out |= r << (4 * i)
    tl.store(out_ptr + offs, out, mask=mask)


def marlin_int4_fp8_preprocess(qweight, qzeros_or_none=None, inplace=False):
    out = qweight if inplace else torch.empty_like(qweight)
    n = qweight.numel()
    if n == 0:
        return out
    has_zp = qzeros_or_none is not None
    zeros = qzeros_or_none if has_zp else qweight
    group_size = qweight.shape[0] // qzeros_or_none.shape[0] if has_zp else 1
    BLOCK = 1024
    _preprocess_kernel[(triton.cdiv(n, BLOCK),)](qweight, zeros, out, n, qweight.shape[1],
                                                 group_size, HAS_ZP=has_zp, BLOCK=BLOCK)
    return out
'''

# Treats every weight as GPTQ-style (zero point 8): right only without qzeros.
NEGATIVE_NO_ZEROS = SOLUTION.replace("has_zp = qzeros_or_none is not None", "has_zp = False")

# Hard-codes AWQ's usual group size 128 for the zero-point row.
NEGATIVE_GROUP_128 = SOLUTION.replace("zero = tl.load(z_ptr + (k // group_size)",
                                      "zero = tl.load(z_ptr + (k // 128)")


REAL_CODES_MAX = 1 << 26  # codes from a real quantization up to this many


def _mk(shape: tuple[int, int], group: int | None, inplace: bool, cpu: bool = False) -> Case:
    """``shape`` is the logical ``[K, N]`` of the 4-bit weight."""
    return case("marlin_int4_fp8_preprocess", "int32", shape, group=group, inplace=inplace,
                cpu=cpu)


def _codes_sym(k: int, n: int, gen: torch.Generator) -> torch.Tensor:
    group = 128 if k % 128 == 0 else k
    return _quant.quantize_sym(_quant.weights(k, n, gen), 4, group, torch.float16).codes


@register("vllm::marlin_int4_fp8_preprocess", version=1, kind=Kind.COMPUTE)
class MarlinInt4Fp8Preprocess(_gemm.VllmSpec):
    entry_points = (
        EntryPoint(
            "marlin_int4_fp8_preprocess",
            "marlin_int4_fp8_preprocess(qweight: Tensor, qzeros_or_none: Tensor | None = None, "
            "inplace: bool = False) -> Tensor",
            "Returns qweight with every 4-bit code rewritten (into qweight itself when inplace).",
        ),
    )
    description = (
        "vLLM 0.13's `marlin_int4_fp8_preprocess(qweight, qzeros_or_none=None, "
        "inplace=False)`: rewrite every 4-bit code of the int32 tensor `qweight` (2-D, "
        "contiguous; each int32 holds 8 codes, nibble i at bits 4i..4i+3; treat words as "
        "unsigned bit patterns) for Marlin's int4-weight/fp8-activation kernels. Without "
        "zero points (`qzeros_or_none` is None; any packing, e.g. Marlin-packed GPTQ uint4b8 "
        "weights; numel % 32 == 0): each nibble v becomes `v - 8 if v >= 8 else 15 - v`. With "
        "zero points: `qweight` is AWQ-packed int32 `[K, N/8]` and `qzeros_or_none` int32 "
        "`[K/G, N/8]` packed the same way (G = K // qzeros.shape[0], K % 32 == 0, G % 8 == "
        "0); nibble i of `qweight[k, j]` with z = nibble i of `qzeros[k // G, j]` becomes "
        "`v - z if v >= z else 15 - v` (nibble positions correspond; the AWQ column order "
        "does not matter). With `inplace=True` write the result into `qweight` and return "
        "`qweight` itself; with `inplace=False` return a new int32 tensor of the same shape "
        "and leave `qweight` unchanged. Never modify `qzeros_or_none`."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_zeros", "always uses the GPTQ zero point 8, ignoring qzeros",
                 NEGATIVE_NO_ZEROS),
        Negative("group_128", "hard-codes group size 128 for the zero-point row",
                 NEGATIVE_GROUP_128),
    )

    def cases(self) -> Sequence[Case]:
        cs = [
            _mk((64, 128), None, True, cpu=True), _mk((128, 64), None, False, cpu=True),
            _mk((128, 64), 32, False, cpu=True), _mk((256, 128), 128, True, cpu=True),
            _mk((96, 64), 32, True, cpu=True), _mk((64, 192), 64, False, cpu=True),
        ]
        cs += [_mk((4096, 11008), None, True), _mk((14336, 4096), None, False),
               _mk((4096, 14336), 128, True), _mk((11008, 4096), 64, False),
               _mk((4096, 4096), 32, True), _mk((1024, 2880), 128, False)]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for group in (None, rng.choice([32, 64, 128])):
            g = group or 32
            k = g * rng.randrange(1, 3 if small else 64)
            k += (-k) % 32
            n = 64 * rng.randrange(1, 3 if small else 120)
            k, n = _gemm.capped(k, n, g, 64)
            out.append(_mk((k, n), group, rng.random() < 0.5, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [_mk((57344, 16384), None, True), _mk((14336, 28672), 128, False),
                _mk((14336, 28672), 128, True)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        k, n = c.shape
        group, inplace = c["group"], bool(c["inplace"])
        real = k * n <= REAL_CODES_MAX  # benchmark sizes: uniform codes (same op, same time)
        if group is None:  # GPTQ uint4b8 weights in Marlin's layout, as vLLM preprocesses them
            qw = (_codes_sym(k, n, gen) if real
                  else torch.randint(0, 16, (k, n), generator=gen, dtype=torch.int64))
            args: tuple[object, ...] = (_marlin.pack(qw, 4), None, inplace)
        else:  # AWQ
            layout = _packing.awq_layout(4)
            if real:
                q = _quant.quantize_zp(_quant.weights(k, n, gen), 4, int(group), torch.float16)
                codes, zeros = q.codes, q.zeros
            else:
                codes = torch.randint(0, 16, (k, n), generator=gen, dtype=torch.int64)
                zeros = torch.randint(0, 16, (k // int(group), n), generator=gen,
                                      dtype=torch.int64)
            args = (_packing.pack_cols(codes, 4, layout), _packing.pack_cols(zeros, 4, layout),
                    inplace)
        return Call(c.entry, args, outputs=(Out.ret(),),
                    mutable=frozenset({0}) if inplace else frozenset())

    def reference(self, call: Call) -> tuple[Expected, ...]:
        qweight, qzeros, inplace = call.args
        return (Expected(_transform(qweight, qzeros), torch.int32,
                         view_of=0 if inplace else None),)

    def baseline(self, call: Call) -> object:
        qweight, qzeros, inplace = call.args
        ops = _gemm.vllm_ops(qweight)
        if ops is not None:
            return ops.marlin_int4_fp8_preprocess(qweight, qzeros, inplace)
        _check(qweight, qzeros)
        result = _transform(qweight, qzeros)
        if inplace:
            qweight.copy_(result)
            return qweight
        return result

    def cost(self, c: Case) -> Cost:
        k, n = c.shape
        words = k * n / 8
        zeros = 0.0 if c["group"] is None else 4.0 * words / int(c["group"])
        return Cost(flops=0.0, bytes=8.0 * words + zeros, dtype="int32")


def _transform(qweight: torch.Tensor, qzeros: torch.Tensor | None) -> torch.Tensor:
    v = _packing.unpack_last(qweight, _packing.word_layout(4))
    if qzeros is None:
        z = torch.full_like(v, 8)
    else:
        zrow = _packing.unpack_last(qzeros, _packing.word_layout(4))
        group = qweight.shape[0] // qzeros.shape[0]
        z = zrow[torch.arange(qweight.shape[0], device=qweight.device) // group]
    r = torch.where(v >= z, v - z, 15 - v)
    return _packing.pack_last(r, _packing.word_layout(4))


def _check(qweight: torch.Tensor, qzeros: torch.Tensor | None) -> None:
    _gemm.require(qweight.dtype == torch.int32, "qweight.dtype != torch.int32")
    if qzeros is None:
        _gemm.require(qweight.shape[0] * qweight.shape[1] * 8 % 256 == 0,
                      "qweight.size(0) * qweight.size(1) * 8 % 256 != 0")
        return
    _gemm.require(qweight.shape[0] % 32 == 0, "size_k % 32 != 0")
    _gemm.require(qweight.shape[1] == qzeros.shape[1], "qweight.size(1) != qzeros.size(1)")
    _gemm.require(qzeros.shape[0] > 0 and qweight.shape[0] % qzeros.shape[0] == 0,
                  "qweight.size(0) % qzeros.size(0) != 0")
    _gemm.require((qweight.shape[0] // qzeros.shape[0]) % 8 == 0, "group_size % 8 != 0")
