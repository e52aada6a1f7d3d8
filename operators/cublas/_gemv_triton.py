"""The Triton source of the gemv family's reference solutions: one text per routine, with the
precision (real or complex, float32 or float64) and the batching mode (one matrix, arrays of
pointers, strided batches) filled in, so the ten solutions cannot drift apart. Each source is
complete and standalone, as a candidate's must be; negative controls are ``_blas.variant``
edits of it, and the edit texts they share are named here. Registers nothing.

One kernel program computes ``BLOCK_O`` outputs of one batch entry: it walks the reduction
index in ``BLOCK_R`` steps, reading a ``BLOCK_O x BLOCK_R`` tile of op(A) (element ``(o, r)``
at ``o * s_out + r * s_red``: ``N`` is ``s_out = 1, s_red = lda``, ``T``/``C`` the reverse)
and accumulating lane by lane, then reduces the tile's rows once. Offsets are int64 (the
``_64`` routines' offsets pass 2^31). Quick returns are the wrapper's; ``alpha == 0`` reads
neither A nor x and ``beta == 0`` does not read y (constexpr branches).
"""

from __future__ import annotations

PLAIN, BATCHED, STRIDED = "plain", "batched", "strided"

_HEADER = r'''
import torch
import triton
import triton.language as tl
'''

# Real data: one load per element.
_REAL_KERNEL = r'''

@triton.jit
def _gemv_kernel(a_ptr, x_ptr, y_ptr, n_out, n_red, s_out, s_red, incx, incy, x0, y0,
                 {batch_params}alpha: tl.{real}, beta: tl.{real},
                 ALPHA_ZERO: tl.constexpr, BETA_ZERO: tl.constexpr,
                 BLOCK_O: tl.constexpr, BLOCK_R: tl.constexpr):
{bases}
    o = tile.to(tl.int64) * BLOCK_O + tl.arange(0, BLOCK_O)
    o_ok = o < n_out
    acc = tl.zeros((BLOCK_O, BLOCK_R), dtype=tl.{real})
    if not ALPHA_ZERO:  # alpha == 0 reads neither A nor x
        for r0 in range(0, n_red, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R).to(tl.int64)
            r_ok = r < n_red
            av = tl.load(a + o[:, None] * s_out + r[None, :] * s_red,
                         mask=o_ok[:, None] & r_ok[None, :], other=0.0)
            xv = tl.load(x + x0 + r * incx, mask=r_ok, other=0.0)
            acc += av * xv[None, :]
    out = alpha * tl.sum(acc, axis=1)
    py = y + y0 + o * incy
    if not BETA_ZERO:  # beta == 0 does not read y (it may hold NaN)
        out += beta * tl.load(py, mask=o_ok, other=0.0)
    tl.store(py, out, mask=o_ok)
'''

# Complex data through the real view: element k's real part at 2k, imaginary part at 2k + 1.
_COMPLEX_KERNEL = r'''

@triton.jit
def _gemv_kernel(a_ptr, x_ptr, y_ptr, n_out, n_red, s_out, s_red, incx, incy, x0, y0,
                 {batch_params}alpha_re: tl.{real}, alpha_im: tl.{real},
                 beta_re: tl.{real}, beta_im: tl.{real},
                 CONJ: tl.constexpr, ALPHA_ZERO: tl.constexpr, BETA_ZERO: tl.constexpr,
                 BLOCK_O: tl.constexpr, BLOCK_R: tl.constexpr):
{bases}
    o = tile.to(tl.int64) * BLOCK_O + tl.arange(0, BLOCK_O)
    o_ok = o < n_out
    acc_re = tl.zeros((BLOCK_O, BLOCK_R), dtype=tl.{real})
    acc_im = tl.zeros((BLOCK_O, BLOCK_R), dtype=tl.{real})
    if not ALPHA_ZERO:  # alpha == 0 reads neither A nor x
        for r0 in range(0, n_red, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R).to(tl.int64)
            r_ok = r < n_red
            m = o_ok[:, None] & r_ok[None, :]
            pa = 2 * (o[:, None] * s_out + r[None, :] * s_red)
            ar = tl.load(a + pa, mask=m, other=0.0)
            ai = tl.load(a + pa + 1, mask=m, other=0.0)
            px = 2 * (x0 + r * incx)
            xr = tl.load(x + px, mask=r_ok, other=0.0)[None, :]
            xi = tl.load(x + px + 1, mask=r_ok, other=0.0)[None, :]
            if CONJ:  # op(A) = A^H: conj(a) * x
                acc_re += ar * xr + ai * xi
                acc_im += ar * xi - ai * xr
            else:
                acc_re += ar * xr - ai * xi
                acc_im += ar * xi + ai * xr
    t_re = tl.sum(acc_re, axis=1)
    t_im = tl.sum(acc_im, axis=1)
    out_re = alpha_re * t_re - alpha_im * t_im
    out_im = alpha_re * t_im + alpha_im * t_re
    py = 2 * (y0 + o * incy)
    if not BETA_ZERO:  # beta == 0 does not read y (it may hold NaN)
        yr = tl.load(y + py, mask=o_ok, other=0.0)
        yi = tl.load(y + py + 1, mask=o_ok, other=0.0)
        out_re += beta_re * yr - beta_im * yi
        out_im += beta_re * yi + beta_im * yr
    tl.store(y + py, out_re, mask=o_ok)
    tl.store(y + py + 1, out_im, mask=o_ok)
'''

# Where a program's batch entry starts, per mode.
_BASES = {
    PLAIN: ("    tile = tl.program_id(0)\n"
            "    a = a_ptr\n"
            "    x = x_ptr\n"
            "    y = y_ptr"),
    BATCHED: ("    pid = tl.program_id(0)\n"
              "    b = pid // tiles\n"
              "    tile = pid % tiles\n"
              "    # Entry b of each array of pointers: the address of its first element.\n"
              "    a = tl.load(a_ptr + b).to(tl.pointer_type(tl.{real}))\n"
              "    x = tl.load(x_ptr + b).to(tl.pointer_type(tl.{real}))\n"
              "    y = tl.load(y_ptr + b).to(tl.pointer_type(tl.{real}))"),
    STRIDED: ("    pid = tl.program_id(0)\n"
              "    b = (pid // tiles).to(tl.int64)\n"
              "    tile = pid % tiles\n"
              "    # Entry b starts b strides in (a stride of 0 shares one entry).\n"
              "    a = a_ptr + {scale}b * stride_a\n"
              "    x = x_ptr + {scale}b * stride_x\n"
              "    y = y_ptr + {scale}b * stride_y"),
}
_BATCH_PARAMS = {PLAIN: "", BATCHED: "tiles, ", STRIDED: "stride_a, stride_x, stride_y, tiles, "}

_PARAMS = {
    PLAIN: "trans, m, n, alpha, A, lda, x, incx, beta, y, incy",
    BATCHED: ("trans, m, n, alpha, Aarray, lda, xarray, incx, beta, yarray, incy,\n"
              "        batchCount"),
    STRIDED: ("trans, m, n, alpha, A, lda, strideA, x, incx, stridex, beta, y, incy,\n"
              "        stridey, batchCount"),
}
_EMPTY = {PLAIN: "m <= 0 or n <= 0", BATCHED: "m <= 0 or n <= 0 or batchCount <= 0",
          STRIDED: "m <= 0 or n <= 0 or batchCount <= 0"}
_OPERANDS = {PLAIN: "A, x, y", BATCHED: "Aarray, xarray, yarray", STRIDED: "A, x, y"}
# Complex buffers go to the kernel as their float views (the arrays of pointers as they are).
_VIEWS = "    A, x, y = torch.view_as_real(A), torch.view_as_real(x), torch.view_as_real(y)\n"
_BATCH_ARGS = {PLAIN: "", BATCHED: " tiles,", STRIDED: " strideA, stridex, stridey, tiles,"}

_WRAPPER = r"""

def _start(count, inc):
    # A negative increment starts at the far end: element i is at (count - 1 - i) * |inc|.
    return (count - 1) * -inc if inc < 0 else 0


def {entry}({params}):
    if {empty} or (alpha == 0 and beta == 1):
        return None  # BLAS's quick returns: y is left as it is
    if trans == 0:  # y (m) = A x (n): A(i, j) at i + j*lda, i the output
        n_out, n_red, s_out, s_red = m, n, 1, lda
    else:  # T and C: y (n) = op(A) x (m), the output j reading column j
        n_out, n_red, s_out, s_red = n, m, lda, 1
{views}    BLOCK_O, BLOCK_R = 64, 64  # outputs per program, reduction step
    tiles = triton.cdiv(n_out, BLOCK_O)
    _gemv_kernel[({grid},)](
        {operands}, n_out, n_red, s_out, s_red, incx, incy,
        _start(n_red, incx), _start(n_out, incy),{batch_args}
        {scalars},
        {flags}ALPHA_ZERO=(alpha == 0), BETA_ZERO=(beta == 0),
        BLOCK_O=BLOCK_O, BLOCK_R=BLOCK_R, num_warps=4)
    return None
"""

# Shared edit texts of the controls.
# The conjugate transpose taken as the plain transpose (complex routines).
CONJ_FLAG = "CONJ=(trans == 2), "
NO_CONJ_FLAG = "CONJ=False, "
# The beta == 0 rule: y not read.
BETA_ZERO_FLAG = "BETA_ZERO=(beta == 0)"
READS_Y_FLAG = "BETA_ZERO=False"
# The alpha == 0 rule: neither A nor x read.
ALPHA_ZERO_FLAG = "ALPHA_ZERO=(alpha == 0)"
READS_A_FLAG = "ALPHA_ZERO=False"
# Negative increments: the far-end start.
STARTS = "_start(n_red, incx), _start(n_out, incy)"
ZERO_STARTS = "0, 0"
# The quick return on an empty matrix (y left as it is even when beta != 1).
EMPTY_RETURN = "    if {empty} or (alpha == 0 and beta == 1):\n"
# Which trans values transpose.
TRANSPOSE_TEST = "    if trans == 0:  # y (m) = A x (n)"
# A control's early return for CUBLAS_OP_C, as if it were an invalid argument.
REJECT_C = "    if trans == 2:\n        return None\n"


def solution(entry: str, dtype: str, mode: str) -> str:
    """The reference solution of ``entry``: ``dtype`` is the routine's (float32, float64,
    complex64, complex128), ``mode`` one of :data:`PLAIN`, :data:`BATCHED`, :data:`STRIDED`."""
    complex_ = dtype.startswith("complex")
    real = {"float32": "float32", "float64": "float64", "complex64": "float32",
            "complex128": "float64"}[dtype]
    bases = _BASES[mode].format(real=real, scale="2 * " if complex_ else "")
    kernel = (_COMPLEX_KERNEL if complex_ else _REAL_KERNEL).format(
        batch_params=_BATCH_PARAMS[mode], bases=bases, real=real)
    if complex_:
        scalars = ("complex(alpha).real, complex(alpha).imag, complex(beta).real, "
                   "complex(beta).imag")
    else:
        scalars = "float(alpha), float(beta)"
    wrapper = _WRAPPER.format(
        entry=entry, params=_PARAMS[mode], empty=_EMPTY[mode],
        views=_VIEWS if complex_ and mode != BATCHED else "",
        grid="tiles" if mode == PLAIN else "tiles * batchCount", operands=_OPERANDS[mode],
        batch_args=_BATCH_ARGS[mode], scalars=scalars, flags=CONJ_FLAG if complex_ else "")
    return _HEADER + kernel + wrapper


def empty_return(mode: str) -> str:
    """The quick-return line of ``mode``'s wrapper (a control edits it)."""
    return EMPTY_RETURN.format(empty=_EMPTY[mode])


# ---- edit texts of the batched routines' controls ----------------------------------------------
# The grid of every batch entry, and one that forgets the batch (entry 0 only).
BATCH_GRID = "_gemv_kernel[(tiles * batchCount,)]("
ONE_ENTRY_GRID = "_gemv_kernel[(tiles,)]("
# Negative increments' far-end starts, and |inc| walked from the first element instead.
INCREMENTS = ("incx, incy,\n        _start(n_red, incx), _start(n_out, incy),")
ABS_INCREMENTS = "abs(incx), abs(incy),\n        0, 0,"
# conj(a) * x's imaginary part, and a * conj(x)'s (x conjugated instead of A).
CONJ_A_IMAG = "                acc_im += ar * xi - ai * xr\n"
CONJ_X_IMAG = "                acc_im += ai * xr - ar * xi\n"


def pointer_load(name: str, real: str) -> str:
    """The kernel line that loads entry b's pointer of array ``name`` (``a``, ``x``, ``y``)."""
    return f"    {name} = tl.load({name}_ptr + b).to(tl.pointer_type(tl.{real}))\n"


def strided_base(name: str, complex_: bool) -> str:
    """The kernel line that offsets operand ``name`` to entry b of a strided batch."""
    return f"    {name} = {name}_ptr + {'2 * ' if complex_ else ''}b * stride_{name}\n"
