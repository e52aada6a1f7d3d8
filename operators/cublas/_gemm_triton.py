"""The Triton source of the GEMM family's reference solutions: one kernel text for real data
and one for complex data, the batch addressing (one matrix, arrays of pointers, strided
batches) and the wrapper filled in per routine, so the thirteen solutions cannot drift apart.
Each generated source is complete and standalone, as a candidate's must be. Registers nothing.

Every solution tiles C in BLOCK_M x BLOCK_N blocks, one program per tile of one batch entry
(entries tile-major in a 1-D grid, so a batch never meets CUDA's 65,535 limit on grid axes), and
computes every offset in int64 (the ``_64`` routines' cases pass 2^31). Quick returns are the
wrapper's: nothing when m, n or batchCount is not positive; ``alpha == 0`` runs the kernel with
K = 0, so C = beta * C and neither A nor B is read; ``beta == 0`` compiles the C load away.
"""

from __future__ import annotations

from dataclasses import dataclass

from operators.cublas._blas import variant
from operators.spec import Negative

_HEADER = "import math\n\nimport torch\nimport triton\nimport triton.language as tl\n"

# The tile this program computes: entry, then a grouped (L2-friendly) order of the tiles.
_TILE = r'''    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    entry = pid // (num_m * num_n)
    tile = pid % (num_m * num_n)
    group = GROUP_M * num_n
    first_m = (tile // group) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (tile % group) % size_m
    pid_n = (tile % group) // size_m
'''
# The tile's rows, columns and the k offsets of one step, in int64.
_ROWS = r'''    rm = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K).to(tl.int64)
    m_ok = rm < M
    n_ok = rn < N
'''

_MMA = r'''
@triton.jit
def _mma(a, b, acc, IEEE: tl.constexpr):
    # IEEE: exact float32 products (no TF32), as the routine computes. The accumulator's
    # dtype (float32, or float64 for double precision) is the product's.
    if IEEE:
        acc = tl.dot(a, b, acc, input_precision="ieee", out_dtype=acc.dtype)
    else:
        acc = tl.dot(a, b, acc, out_dtype=acc.dtype)
    return acc
'''

_REAL_KERNEL = r'''
@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, alpha, beta, s_am, s_ak, s_bk, s_bn, ldc,
                 stride_a, stride_b, stride_c, BETA_ZERO: tl.constexpr, IEEE: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 GROUP_M: tl.constexpr):
    # One BLOCK_M x BLOCK_N tile of C_entry = alpha * op(A) @ op(B) + beta * C, column-major.
{tile}{bases}    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.{acc})
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        k_ok = kk < K
        a = tl.load(a_base + rm[:, None] * s_am + kk[None, :] * s_ak,
                    mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_base + kk[:, None] * s_bk + rn[None, :] * s_bn,
                    mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = _mma(a, b, acc, IEEE)
    c_ptrs = c_base + rm[:, None] + rn[None, :] * ldc
    c_mask = m_ok[:, None] & n_ok[None, :]
    out = alpha * acc
    if not BETA_ZERO:
        out += beta * tl.load(c_ptrs, mask=c_mask, other=0.0).to(tl.{acc})
    tl.store(c_ptrs, out.to(c_base.dtype.element_ty), mask=c_mask)
'''

_COMPLEX_KERNEL = r'''
@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, alpha_re, alpha_im, beta_re, beta_im,
                 s_am, s_ak, s_bk, s_bn, ldc, stride_a, stride_b, stride_c,
                 CONJ_A: tl.constexpr, CONJ_B: tl.constexpr, BETA_ZERO: tl.constexpr,
                 IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Complex buffers seen as {real} (torch.view_as_real): complex element e has its real
    # part at 2e and its imaginary part at 2e + 1. Strides and leading dims count complex
    # elements. One tile of C_entry = alpha * op(A) @ op(B) + beta * C.
{tile}{bases}    acc_re = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.{real})
    acc_im = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.{real})
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        k_ok = kk < K
        a_mask = m_ok[:, None] & k_ok[None, :]
        pa = a_base + 2 * (rm[:, None] * s_am + kk[None, :] * s_ak)
        ar = tl.load(pa, mask=a_mask, other=0.0)
        ai = tl.load(pa + 1, mask=a_mask, other=0.0)
        b_mask = k_ok[:, None] & n_ok[None, :]
        pb = b_base + 2 * (kk[:, None] * s_bk + rn[None, :] * s_bn)
        br = tl.load(pb, mask=b_mask, other=0.0)
        bi = tl.load(pb + 1, mask=b_mask, other=0.0)
        if CONJ_A:  # CUBLAS_OP_C: the conjugate transpose
            ai = -ai
        if CONJ_B:
            bi = -bi
        acc_re = _mma(ar, br, acc_re, IEEE)
        acc_re = _mma(-ai, bi, acc_re, IEEE)
        acc_im = _mma(ar, bi, acc_im, IEEE)
        acc_im = _mma(ai, br, acc_im, IEEE)
    pc = c_base + 2 * (rm[:, None] + rn[None, :] * ldc)
    c_mask = m_ok[:, None] & n_ok[None, :]
    out_re = alpha_re * acc_re - alpha_im * acc_im
    out_im = alpha_re * acc_im + alpha_im * acc_re
    if not BETA_ZERO:
        c_re = tl.load(pc, mask=c_mask, other=0.0)
        c_im = tl.load(pc + 1, mask=c_mask, other=0.0)
        out_re += beta_re * c_re - beta_im * c_im
        out_im += beta_re * c_im + beta_im * c_re
    tl.store(pc, out_re, mask=c_mask)
    tl.store(pc + 1, out_im, mask=c_mask)
'''

# Where entry `entry`'s matrices start. Complex strides count complex elements: twice as many
# reals.
_BASES = {
    "none": "    a_base, b_base, c_base = a_ptr, b_ptr, c_ptr\n",
    "pointers": (
        "    # Arrays of pointers: entry e's matrices live wherever Aarray[e], ... point.\n"
        "    a_base = tl.load(a_ptr + entry).to(tl.pointer_type(tl.{a}))\n"
        "    b_base = tl.load(b_ptr + entry).to(tl.pointer_type(tl.{b}))\n"
        "    c_base = tl.load(c_ptr + entry).to(tl.pointer_type(tl.{c}))\n"),
    "strided": (
        "    # Strided batch: entry e's matrices start e * stride elements in (0 broadcasts).\n"
        "    e = entry.to(tl.int64)\n"
        "    a_base = a_ptr + {w}e * stride_a\n"
        "    b_base = b_ptr + {w}e * stride_b\n"
        "    c_base = c_ptr + {w}e * stride_c\n"),
}

_WRAPPER = r'''

def {name}({params}):
    if m <= 0 or n <= 0{batch_quick}:
        return None
{prologue}    # op(A) is m x k: N -> A(i, p) at i + p*lda; T/C -> A(p, i) at p + i*lda.
    s_am, s_ak = (1, lda) if transa == 0 else (lda, 1)
    # op(B) is k x n: N -> B(p, j) at p + j*ldb; T/C -> B(j, p) at j + p*ldb.
    s_bk, s_bn = (1, ldb) if transb == 0 else (ldb, 1)
    # alpha == 0: C = beta * C, and neither A nor B is read (K = 0: no loads).
    kk = k if alpha != 0 else 0
    if {c}.device.type == "cpu":  # Triton's interpreter: few programs, small tiles
        BM, BN, BK, warps, stages = 32, 32, 32, 4, 1
    else:
        BM, BN, BK, warps, stages = {gpu}
    tiles = triton.cdiv(m, BM) * triton.cdiv(n, BN)
    _gemm_kernel[({grid},)](
        {operands},
        m, n, kk, {scalars}, s_am, s_ak, s_bk, s_bn, ldc, {strides},
        {flags}BETA_ZERO=(beta == 0), IEEE={ieee}, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK,
        GROUP_M=8, num_warps=warps, num_stages=stages)
    return None
'''

# Hgemm's alpha and beta are __half: the wrapper rounds the Python floats as cuBLAS reads them
# (in Python: a torch conversion would be host-side torch work, which the harness refuses).
HALF_SCALARS = "    alpha, beta = _as_half(alpha), _as_half(beta)\n"
_AS_HALF = r'''

def _round(x, bits, least):
    # x rounded to `bits` significant bits (ties to even), in steps of 2^least at the least.
    if x == 0 or not math.isfinite(x):
        return float(x)
    step = 2.0 ** max(math.frexp(x)[1] - bits, least)
    return round(x / step) * step


def _as_half(x):
    # The __half a Python float becomes (through float32, as torch converts it).
    h = _round(_round(x, 24, -149), 11, -24)
    return h if abs(h) < 65520.0 else math.copysign(math.inf, x)
'''

# Triton dtype names of the routines' element types (complex: their real parts).
_TL = {"float32": "float32", "float64": "float64", "float16": "float16", "bfloat16": "bfloat16",
       "complex64": "float32", "complex128": "float64"}


@dataclass(frozen=True)
class Shape:
    """What a routine's solution needs to know: its entry point and C parameter names, the
    element dtype of A/B and C (None: the tensors' own, for ``SgemmEx``), batching, the GPU
    tile configuration and extra wrapper lines (``Hgemm`` rounds its scalars to fp16)."""

    name: str
    params: str
    dtype: str | None
    batching: str  # "none" | "pointers" | "strided"
    gpu: str  # "BM, BN, BK, warps, stages"
    prologue: str = ""
    ieee: str = "True"


def solution(shape: Shape) -> str:
    """The complete source of the reference solution for ``shape``."""
    cplx = shape.dtype is not None and shape.dtype.startswith("complex")
    real = _TL[shape.dtype] if shape.dtype else "float32"
    bases = _BASES[shape.batching].format(a=real, b=real, c=real, w="2 * " if cplx else "")
    acc = "float64" if real == "float64" else "float32"
    kernel = (_COMPLEX_KERNEL if cplx else _REAL_KERNEL).format(
        tile=_TILE, bases=bases + _ROWS, real=real, acc=acc)
    names = {"none": ("A", "B", "C"), "pointers": ("Aarray", "Barray", "Carray"),
             "strided": ("A", "B", "C")}[shape.batching]
    operands = ", ".join(f"torch.view_as_real({x})" if cplx and shape.batching != "pointers"
                         else x for x in names)
    strides = "strideA, strideB, strideC" if shape.batching == "strided" else "0, 0, 0"
    scalars = ("alpha.real, alpha.imag, beta.real, beta.imag" if cplx
               else "float(alpha), float(beta)")
    prologue = shape.prologue
    if cplx:
        prologue = "    alpha, beta = complex(alpha), complex(beta)\n" + prologue
    wrapper = _WRAPPER.format(
        name=shape.name, params=shape.params, c=names[2], gpu=shape.gpu, prologue=prologue,
        batch_quick="" if shape.batching == "none" else " or batchCount <= 0",
        grid="tiles" if shape.batching == "none" else "tiles * batchCount", operands=operands,
        scalars=scalars, strides=strides, ieee=shape.ieee,
        flags="CONJ_A=(transa == 2), CONJ_B=(transb == 2),\n        " if cplx else "")
    helpers = _AS_HALF if shape.prologue == HALF_SCALARS else ""
    return _HEADER + _MMA + kernel + helpers + wrapper


# ---- negative controls: edits of a solution -------------------------------------------------------
# Every control's edit keeps its accesses inside the buffers on the cases it runs on under the
# interpreter, which does not catch out-of-bounds accesses (they corrupt the process instead of
# failing the case).

# Triton's default tl.dot precision: float32 inputs read as TF32 (10 mantissa bits).
TF32 = ("IEEE=True,", "IEEE=False,")
# CUBLAS_OP_C taken as T: no conjugation.
NO_CONJUGATION = ("CONJ_A=(transa == 2), CONJ_B=(transb == 2),",
                  "CONJ_A=False, CONJ_B=False,")
# CUBLAS_OP_T taken as the conjugate transpose too (conjugates whenever transposed).
CONJUGATES_T = ("CONJ_A=(transa == 2), CONJ_B=(transb == 2),",
                "CONJ_A=(transa != 0), CONJ_B=(transb != 0),")
# Reads C even when beta == 0: NaN in the uninitialised C leaks through 0 * NaN.
READS_C = ("BETA_ZERO=(beta == 0)", "BETA_ZERO=False")
# Takes alpha == 0 as a quick return, leaving C unscaled (BLAS computes C = beta * C).
ALPHA_ZERO_RETURNS = ("    if m <= 0 or n <= 0", "    if m <= 0 or n <= 0 or alpha == 0")
# Takes k == 0 as a quick return too, leaving C unscaled (BLAS computes C = beta * C).
K_ZERO_RETURNS = ("    if m <= 0 or n <= 0", "    if m <= 0 or n <= 0 or k <= 0")
# Only CUBLAS_OP_T (1) transposes: CUBLAS_OP_C (2) is taken as N for A (its cases read inside
# A when k <= m).
OP_C_AS_N = ("(1, lda) if transa == 0 else (lda, 1)", "(1, lda) if transa != 1 else (lda, 1)")
# Arrays of pointers: A of entry 0 used for every entry (the batch index forgotten on one
# operand); right for a batch of one or when every entry points at the same A.
FIRST_A_ONLY_POINTERS = ("    a_base = tl.load(a_ptr + entry)", "    a_base = tl.load(a_ptr)")
# Arrays of pointers: B_e taken from the other end of Barray (B_{batch-1-e}); right for a
# batch of one or a shared B.
REVERSED_B_POINTERS = ("    b_base = tl.load(b_ptr + entry)",
                       "    b_base = tl.load(b_ptr + tl.num_programs(0) // (num_m * num_n) - 1 "
                       "- entry)")
# Strided batches: A's stride ignored (entry 0's A for every entry); right for a batch of one
# or a stride of 0.
FIRST_A_ONLY_STRIDED = ("    a_base = a_ptr + {w}e * stride_a\n", "    a_base = a_ptr\n")
# Strided batches: C assumed packed (ldc * n apart) whatever strideC says; right when it is.
C_PACKED = ("ldc, strideA, strideB, strideC,", "ldc, strideA, strideB, ldc * n,")
# Complex strided batches: strides applied to the real view as they are, forgetting that they
# count complex elements (two reals each).
REAL_STRIDE_UNITS = ("    a_base = a_ptr + 2 * e * stride_a\n    b_base = b_ptr + 2 * e * stride_b\n"
                     "    c_base = c_ptr + 2 * e * stride_c\n",
                     "    a_base = a_ptr + e * stride_a\n    b_base = b_ptr + e * stride_b\n"
                     "    c_base = c_ptr + e * stride_c\n")


def first_a_only_strided(dtype: str) -> tuple[str, str]:
    """:data:`FIRST_A_ONLY_STRIDED` for a routine of ``dtype``."""
    w = "2 * " if dtype.startswith("complex") else ""
    return FIRST_A_ONLY_STRIDED[0].format(w=w), FIRST_A_ONLY_STRIDED[1]


def _edits(name: str, dtype: str, convention: str) -> tuple[tuple[str, str], ...]:
    simple = {"tf32": TF32, "no_conjugation": NO_CONJUGATION, "conjugates_t": CONJUGATES_T,
              "reads_c_when_beta_zero": READS_C, "alpha_zero_returns":
              ALPHA_ZERO_RETURNS, "k_zero_returns": K_ZERO_RETURNS,
              "op_c_as_n": OP_C_AS_N, "reversed_b": REVERSED_B_POINTERS,
              "c_packed": C_PACKED, "real_stride_units": REAL_STRIDE_UNITS}
    if name in simple:
        return (simple[name],)
    if name == "first_a_only":
        return ((FIRST_A_ONLY_POINTERS,) if convention == "pointers" else
                (first_a_only_strided(dtype),))
    raise KeyError(f"no GEMM control named {name!r}")


# Each control: what is wrong with it (its Negative's ``why``).
CONTROLS = {
    "tf32": "uses Triton's default tl.dot precision, reading float32 inputs as TF32 (10 "
            "mantissa bits)",
    "no_conjugation": "takes CUBLAS_OP_C as T, never conjugating; right when neither operand "
                      "is C",
    "conjugates_t": "conjugates for CUBLAS_OP_T as well as for C; right when no operand is T",
    "reads_c_when_beta_zero": "computes alpha * acc + beta * C even when beta == 0, so NaN in "
                              "the uninitialised C leaks",
    "alpha_zero_returns": "returns at once when alpha == 0, leaving C unscaled (BLAS computes "
                          "C = beta * C); right when beta == 1",
    "k_zero_returns": "returns at once when k == 0, leaving C unscaled (BLAS computes C = beta "
                      "* C)",
    "op_c_as_n": "takes CUBLAS_OP_C (2) for A as no transpose instead of as T",
    "first_a_only": "reads entry 0's A for every entry (the batch index forgotten on A); "
                    "right for a batch of one or a shared (stride-0) A",
    "reversed_b": "pairs A_e with B_(batchCount-1-e); right for a batch of one or a shared B",
    "c_packed": "assumes C's entries are packed (ldc * n apart) whatever strideC says; right "
                "when they are",
    "real_stride_units": "applies the strides to the real view as they are, forgetting they "
                         "count complex elements",
}


def control(name: str, solution: str, dtype: str, convention: str) -> Negative:
    """The negative control ``name`` of a routine (its dtype and calling convention) whose
    reference solution is ``solution``."""
    return Negative(name, CONTROLS[name], variant(solution, *_edits(name, dtype, convention)))
