"""cublas::cublasSgemmEx — ``C = alpha * op(A) @ op(B) + beta * C`` computed in float32, with A, B
and C of the data types the call names (``cudaDataType``): float32, float16 or bfloat16 inputs,
float32 output, or half-precision inputs and output of the same type."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from operators.cublas import _blas, _gemm, _gemm_cases, _gemm_text, _gemm_triton
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative, Tolerance

_ROUTINE = "cublasSgemmEx"
# (A's and B's dtype, C's dtype): the combinations cuBLAS lists for cublasSgemmEx, without its
# int8 inputs (CUDA_R_8I with a float32 C, which carries extra alignment rules).
COMBINATIONS = (("float32", "float32"), ("float16", "float32"), ("bfloat16", "float32"),
                ("float16", "float16"), ("bfloat16", "bfloat16"))

SOLUTION = _gemm_triton.solution(_gemm_triton.Shape(
    _ROUTINE,
    "transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc",
    None, "none", "128, 128, 32, 8, 3", ieee="A.dtype == torch.float32"))

_TYPES = (
    "`A`, `B`, `C` are 1-D contiguous tensors holding the device buffers, of the types "
    "`Atype`, `Btype`, `Ctype` name (cudaDataType ints: CUDA_R_32F=0 float32, CUDA_R_16F=2 "
    "float16, CUDA_R_16BF=14 bfloat16; the tensors' dtypes match). The combinations are "
    "(Atype, Btype, Ctype) = (32F, 32F, 32F), (16F, 16F, 32F), (16BF, 16BF, 32F), "
    "(16F, 16F, 16F) and (16BF, 16BF, 16BF). Whatever the types, the routine computes in "
    "float32 — float32 products and accumulation (products of float16/bfloat16 values are "
    "exact in float32; float32 inputs must not be read as TF32: with tl.dot use "
    "input_precision=\"ieee\" for them) — and rounds the result once to C's type.")


def _g(ab: str, ct: str, ta: str, tb: str, m: int, n: int, k: int, alpha: float, beta: float,
       *, cpu: bool = False, **pads: int) -> Case:
    return _gemm_cases.gemm_case(_ROUTINE, ab, ta, tb, m, n, k, alpha=alpha, beta=beta, cpu=cpu,
                           ctype=ct, **pads)


@register("cublas::cublasSgemmEx", version=2, kind=Kind.COMPUTE)
class SgemmEx(_gemm.Gemm):
    routine, precision, convention = _ROUTINE, "float32", "ex"
    entry_points = (
        EntryPoint(
            _ROUTINE,
            "cublasSgemmEx(transa: int, transb: int, m: int, n: int, k: int, alpha: float, "
            "A: Tensor, Atype: int, lda: int, B: Tensor, Btype: int, ldb: int, beta: float, "
            "C: Tensor, Ctype: int, ldc: int) -> None",
            "C = alpha * op(A) @ op(B) + beta * C in float32 on column-major matrices of the "
            "named data types, C updated in place.",
        ),
    )
    description = _gemm_text.describe(_ROUTINE, "float32", "ex", types=_TYPES)
    solution = SOLUTION
    negatives = (
        Negative("tf32", "uses Triton's default tl.dot precision, reading float32 inputs as "
                 "TF32 (10 mantissa bits); right for float16/bfloat16 inputs",
                 _blas.variant(SOLUTION, ("IEEE=A.dtype == torch.float32,", "IEEE=False,"))),
        Negative("product_in_input_type", "rounds the float32 product to the inputs' type "
                 "before scaling (computes in float16/bfloat16); right for float32 inputs",
                 _blas.variant(SOLUTION, (
                     "    out = alpha * acc\n",
                     "    out = alpha * acc.to(a_base.dtype.element_ty).to(tl.float32)\n"))),
    )
    # A float32 C: float32 accumulation, as cublasSgemm_v2 (_gemm.TOLERANCES). A half-precision
    # C: that error (about 2^-9 of a float16 ulp) plus one rounding to C's type, at most 1 u of
    # |C| <= scale; 2 u leaves the same headroom.
    tolerances = {"float32": _gemm.TOLERANCES["float32"],
                  "float16": Tolerance.ulps("float16", 2),
                  "bfloat16": Tolerance.ulps("bfloat16", 2)}

    def cases(self) -> Sequence[Case]:
        cs = [
            _g("float16", "float32", "N", "N", 37, 45, 29, 1.0, 0.0, cpu=True),
            _g("bfloat16", "float32", "T", "N", 33, 40, 47, -1.5, 1.0, pad_a=3, cpu=True),
            _g("float32", "float32", "N", "T", 19, 30, 41, 0.5, -0.75, pad_b=5, pad_c=2,
               cpu=True),
            _g("float16", "float16", "C", "C", 24, 21, 35, 2.0, 0.5, cpu=True),
            _g("bfloat16", "bfloat16", "N", "N", 20, 18, 22, 1.0, 0.0, pad_c=1, cpu=True),
            _g("float32", "float32", "T", "T", 16, 20, 12, 0.0, 0.5, cpu=True),  # alpha == 0
            _g("float16", "float32", "T", "N", 17, 9, 0, 1.0, -0.75, cpu=True),  # k == 0
            _g("float32", "float32", "N", "N", 1, 1, 1, 1.0, 1.0),
            _g("float16", "float16", "N", "N", 0, 5, 3, 1.0, 1.0),  # m == 0: nothing
        ]
        for j, (ab, ct) in enumerate(COMBINATIONS):  # a third of the (types, transposes)
            cs += _gemm_cases.plain_grid(_ROUTINE, ab, every=3, shift=j, ctype=ct)
        cs += [_g("float16", "float32", "N", "N", 511, 257, 1023, -1.5, 0.5, pad_a=7, pad_c=13),
               _g("bfloat16", "float32", "T", "N", 1024, 1024, 1024, 1.0, 0.0),
               _g("float32", "float32", "N", "T", 1000, 999, 65, 2.0, 1.0, pad_b=24)]
        return cs

    def hidden_types(self, rng: random.Random) -> tuple[str, dict[str, Any]]:
        ab, ct = rng.choice(COMBINATIONS)
        return ab, {"ctype": ct}

    def benchmark_cases(self) -> Sequence[Case]:
        return [_g("float16", "float32", "N", "N", 4096, 4096, 4096, 1.0, 0.0),
                _g("bfloat16", "bfloat16", "T", "N", 8192, 8192, 4096, 1.0, 1.0),
                _g("float32", "float32", "N", "N", 4096, 4096, 2048, 1.0, 0.0)]
