"""The GEMM family's problems (``cublas?gemm``, ``SgemmEx``, the ``Batched`` and
``StridedBatched`` routines and their ``_64`` forms) as one spec class: a routine's module names
its routine, precision, calling convention, the reference solution's GPU tiles and its
negative controls, and gives its benchmark cases; its entry point, statement, solution,
controls, tolerance, inputs, reference, baseline, cost and cases follow from those
(``_gemm_cases``, ``_gemm_data``, ``_gemm_text``, ``_gemm_triton``). Registers nothing.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from operators.cublas import _blas, _cublas, _gemm_cases, _gemm_data, _gemm_text, _gemm_triton
from operators.cublas._gemm_cases import Dims
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    OperatorSpec,
    Out,
    Tier,
    Tolerance,
    dtype_from_name,
)

# cudaDataType_t values (library_types.h) of the element types SgemmEx takes.
DATA_TYPES = {"float32": 0, "float16": 2, "bfloat16": 14}

# ---- tolerances -----------------------------------------------------------------------------------

# Hgemm accumulates in float16 (CUBLAS_COMPUTE_16F). Relative to the scale |alpha| (|op(A)| @
# |op(B)|) + |beta C| (the sum S of |terms|), k products summed one by one in float16 err by at
# most u * sum_j |s_j| over the partial sums s_j (plus the final roundings, a few u of |C|). For
# these cases' independent zero-mean inputs |s_j| ~ sqrt(j) * sigma^2 while S ~ 0.64 k sigma^2,
# so the rounding errors, random in sign, add up to about 0.64 u of S whatever k (rms), and to
# under 4 u over a million outputs; blocked or tensor-core orders round fewer partial sums. 16 u
# of S is the fp32 GEMMs' allowance in float16 units. A wrong answer (a transpose, an entry,
# a conjugation) is off by about |C| ~ S / sqrt(k), over 80 u of S for k <= 1024; the fp16
# cases' k stays at or below that (tests/operators/test_cublas_gemm.py simulates float16
# accumulation at every public case's size).
HALF_ACCUMULATION = Tolerance.ulps("float16", 16)


# ---- the routines' spec behaviour ----------------------------------------------------------------

# Per precision, relative to |alpha| (|op(A)| @ |op(B)|) + |beta C| (per component for complex
# data; _gemm_data.reference): the accumulation error of 16 units of roundoff that
# cublasSgemm_v2 measured for float32 (sequential float32 sums over k <= 4096 err by up to 6.3
# u; split-K and other orders stay inside 16), in each routine's own precision. TF32 inputs
# (~2^-11 per product) land hundreds of float32 ulps off; a wrong operand is O(1) off.
TOLERANCES = {
    "float32": Tolerance.ulps("float32", 16),
    "float64": Tolerance.ulps("float64", 16),
    "complex64": Tolerance.ulps("float32", 16),
    "complex128": Tolerance.ulps("float64", 16),
    "float16": HALF_ACCUMULATION,
}


class Gemm(OperatorSpec):
    """A GEMM routine. A subclass sets ``routine``, ``precision``, ``convention`` and, unless it
    writes its own solution and statement (``cublasSgemm_v2``, ``cublasSgemmEx``), ``tiles``
    (the reference solution's GPU tiles: "BM, BN, BK, warps, stages") and ``controls`` (names
    in :data:`_gemm_triton.CONTROLS`); everything else follows from them."""

    routine: ClassVar[str]
    precision: ClassVar[str]  # A's and B's dtype (and C's, except for SgemmEx)
    convention: ClassVar[str]  # "none" | "ex" | "pointers" | "strided"
    scalar: ClassVar[str] = ""  # the dtype alpha and beta are used in; default: precision
    wide: ClassVar[bool] = False  # the _64 API
    tiles: ClassVar[str] = ""
    controls: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.scalar = cls.scalar or cls.precision
        if not cls.tiles:
            return
        names = _gemm_data.arg_names(cls.convention)
        cls.entry_points = (EntryPoint(
            cls.routine, _gemm_text.signature(cls.routine, names, cls.precision),
            _gemm_text.summary(cls.precision, cls.convention)),)
        cls.description = _gemm_text.describe(cls.routine, cls.precision, cls.convention,
                                              wide=cls.wide)
        half = cls.precision == "float16"
        cls.solution = _gemm_triton.solution(_gemm_triton.Shape(
            cls.routine, ", ".join(names), cls.precision, cls.convention, cls.tiles,
            prologue=_gemm_triton.HALF_SCALARS if half else "",
            ieee="False" if half else "True"))
        cls.negatives = tuple(_gemm_triton.control(name, cls.solution, cls.precision,
                                                   cls.convention) for name in cls.controls)
        cls.tolerances = {cls.precision: TOLERANCES[cls.precision]}

    # ---- cases -----------------------------------------------------------------------------------
    def cases(self) -> Sequence[Case]:
        if self.convention == "pointers":
            return _gemm_cases.pointer_cases(self.routine, self.precision)
        return _gemm_cases.strided_cases(self.routine, self.precision)

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        return _gemm_cases.hidden(self.routine, self.precision, self.convention, rng,
                                  tier is Tier.CPU, self.hidden_types)

    def hidden_types(self, rng: random.Random) -> tuple[str, dict[str, Any]]:
        """A hidden case's dtype and type params (SgemmEx draws its data types)."""
        return self.precision, {}

    # ---- inputs, reference, baseline -------------------------------------------------------------
    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        d = Dims.of(c)
        batch = int(c.get("batch", 1))
        ab, ct = c.dtype, c.get("ctype", c.dtype)
        # alpha == 0: cuBLAS in DEVICE pointer mode still reads A and B (seen on an H100 for
        # C and D GEMMs: NaN there comes back as NaN), so they hold finite values then too.
        fill_ab = "random"
        fill_c = "nan" if c["beta"] == 0 else "dense"  # beta == 0: C is not read
        a: Any
        b: Any
        cc: Any
        if self.convention == "strided":
            a = _gemm_data.strided(d.rows_a, d.cols_a, d.lda, c["stride_a"], batch, ab, gen,
                                   fill_ab)
            b = _gemm_data.strided(d.rows_b, d.cols_b, d.ldb, c["stride_b"], batch, ab, gen,
                                   fill_ab)
            cc = _gemm_data.strided(d.m, d.n, d.ldc, c["stride_c"], batch, ct, gen, fill_c)
        elif self.convention == "pointers":
            a = _gemm_data.pointer_entries(d.rows_a, d.cols_a, d.lda, ab, batch, gen, fill_ab,
                                           c.get("shared_a", False))
            b = _gemm_data.pointer_entries(d.rows_b, d.cols_b, d.ldb, ab, batch, gen, fill_ab,
                                           c.get("shared_b", False))
            cc = _gemm_data.pointer_entries(d.m, d.n, d.ldc, ct, batch, gen, fill_c, False)
        else:
            a = _gemm_data.matrix(d.rows_a, d.cols_a, d.lda, ab, gen, fill_ab)
            b = _gemm_data.matrix(d.rows_b, d.cols_b, d.ldb, ab, gen, fill_ab)
            cc = _gemm_data.matrix(d.m, d.n, d.ldc, ct, gen, fill_c)
        values = {"transa": c["transa"], "transb": c["transb"], "m": d.m, "n": d.n, "k": d.k,
                  "alpha": c["alpha"], "beta": c["beta"], "A": a, "Aarray": a, "B": b,
                  "Barray": b, "C": cc, "Carray": cc, "lda": d.lda, "ldb": d.ldb, "ldc": d.ldc,
                  "Atype": DATA_TYPES.get(ab), "Btype": DATA_TYPES.get(ab),
                  "Ctype": DATA_TYPES.get(ct), "batchCount": batch,
                  "strideA": c.get("stride_a"), "strideB": c.get("stride_b"),
                  "strideC": c.get("stride_c")}
        names = _gemm_data.arg_names(self.convention)
        out = names.index("Carray" if self.convention == "pointers" else "C")
        return Call(c.entry, tuple(values[x] for x in names), outputs=(Out.arg(out),),
                    mutable=frozenset({out}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        return (_gemm_data.reference(_gemm_data.operands(self.convention, call.args),
                                     self.scalar),)

    def baseline_library(self) -> str:
        return _cublas.library()

    def baseline(self, call: Call) -> object:
        g = _gemm_data.operands(self.convention, call.args)
        if g.c.is_cuda and _cublas.available():
            _cublas.call(self.routine, *_gemm_data.cublas_args(
                self.convention, call.args, dtype_from_name(self.scalar)))
        else:
            _gemm_data.torch_baseline(g)
        return None

    # ---- cost ---------------------------------------------------------------------------------
    def cost(self, c: Case) -> Cost:
        """Compute-bound: ``2mnk`` real FLOPs per entry (``8mnk`` complex) over the peak of the
        input dtype (fp16/bf16 inputs run on their tensor-core rate, complex64 on fp32, D and
        Z on fp64); bytes are each matrix read once (a shared or stride-0 operand once for the
        batch) and C written once (read too unless beta == 0). The ``_64`` routines' offset
        cases allocate far more than these unique bytes: their gaps."""
        d = Dims.of(c)
        batch = int(c.get("batch", 1))
        ab, ct = c.dtype, c.get("ctype", c.dtype)
        rate = _blas.rate_dtype(ab)
        if d.m <= 0 or d.n <= 0 or batch <= 0:
            return Cost(0.0, 0.0, rate)
        reads_c = c["beta"] != 0
        c_bytes = d.m * d.n * batch * (2 if reads_c else 1) * _blas.element_size(ct)
        if c["alpha"] == 0 or d.k <= 0:
            return Cost(float(d.m * d.n * batch), float(c_bytes), rate)
        entries_a = 1 if c.get("shared_a") or c.get("stride_a", 1) == 0 else batch
        entries_b = 1 if c.get("shared_b") or c.get("stride_b", 1) == 0 else batch
        ab_bytes = (entries_a * d.m * d.k + entries_b * d.k * d.n) * _blas.element_size(ab)
        flops = batch * (_blas.flops_per_fma(ab) * d.m * d.n * d.k + 3 * d.m * d.n)
        return Cost(float(flops), float(ab_bytes + c_bytes), rate)
