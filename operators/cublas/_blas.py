"""What the cuBLAS routines share: BLAS storage made from a seed, fp64 views of it for the
references, pointer arrays for Batched routines, cost models and tolerance rules.

The conventions these implement are stated once in docs/suite.md ("cuBLAS conventions") and in
the cuBLAS prompt: buffers are 1-D tensors of the routine's precision; vector element ``i`` of
``(n, inc)`` lives at ``i*inc``, or at ``(n-1-i)*|inc|`` for a negative ``inc``; matrices are
column-major with a leading dimension; every element a routine must not read (gaps between
strided elements, padding rows, the unreferenced triangle or band, a unit diagonal) holds NaN
in the inputs, so a kernel that reads it poisons its own result, and in an output must come
back as it was. Registers nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.spec import Cost, PointerArray, Tolerance, dtype_from_name

# The routine-name prefix's precision.
PRECISIONS = {"S": "float32", "D": "float64", "C": "complex64", "Z": "complex128", "H": "float16"}

# cublasOperation_t, cublasFillMode_t, cublasSideMode_t, cublasDiagType_t.
OP_N, OP_T, OP_C = 0, 1, 2
LOWER, UPPER = 0, 1
LEFT, RIGHT = 0, 1
NON_UNIT, UNIT = 0, 1

NAN = float("nan")


def _dt(dtype: str | torch.dtype) -> torch.dtype:
    return dtype_from_name(dtype) if isinstance(dtype, str) else dtype


def as_c(value: complex, dtype: str | torch.dtype) -> complex:
    """The scalar a routine computes with when given the Python number ``value``: rounded to its
    precision (a C ``float`` for S, ``cuComplex`` for C, ``__half`` for H). References use it."""
    return complex(torch.tensor(value, dtype=_dt(dtype)).item())


def as_real(value: complex, dtype: str | torch.dtype) -> float:
    """:func:`as_c` for a real routine's scalar, as a float."""
    return as_c(value, dtype).real


def hp(t: torch.Tensor) -> torch.Tensor:
    """A copy in float64 (complex128 for complex data): what references compute in. Always a
    copy (``to`` of a float64 tensor is the tensor itself, and a reference must never write
    its inputs: the agent sends them to the worker afterwards)."""
    return t.to(torch.complex128 if t.is_complex() else torch.float64, copy=True)


def variant(source: str, *edits: tuple[str, str]) -> str:
    """``source`` with each ``(old, new)`` edit applied once: how a negative control is made
    from a reference solution. An edit whose ``old`` text is not there raises, so a control can
    never silently become the solution itself."""
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"a control's edit must match once, found {source.count(old)}: "
                             f"{old[:60]!r}")
        source = source.replace(old, new)
    return source


def random_values(count: int, dtype: str | torch.dtype, gen: torch.Generator, *,
                  std: float = 1.0) -> torch.Tensor:
    """``count`` normal values rounded to ``dtype``; complex ones have independent real and
    imaginary parts (``randn`` into a complex dtype would leave the imaginary parts zero)."""
    dt = _dt(dtype)
    re = torch.randn(count, generator=gen, dtype=torch.float64) * std
    if not dt.is_complex:
        return re.to(dt)
    im = torch.randn(count, generator=gen, dtype=torch.float64) * std
    return torch.complex(re, im).to(dt)


# ---- vectors ------------------------------------------------------------------------------------

def vector_len(n: int, inc: int) -> int:
    """Elements the vector ``(n, inc)`` spans: ``1 + (n-1)*|inc|``, and at least 1 (a routine
    gets a valid pointer even when ``n <= 0``)."""
    return 1 + (n - 1) * abs(inc) if n > 0 else 1


def vector_index(n: int, inc: int) -> torch.Tensor:
    """Buffer positions of ``x_0 … x_{n-1}``: ``i*inc`` for ``inc >= 0``; for a negative
    increment the vector starts at ``x[(n-1)*|inc|]`` and walks back, ``(n-1-i)*|inc|``."""
    i = torch.arange(max(n, 0), dtype=torch.int64)
    return i * inc if inc >= 0 else (n - 1 - i) * (-inc)


def gather(buf: torch.Tensor, n: int, inc: int) -> torch.Tensor:
    """The vector ``(n, inc)`` of ``buf`` as a new 1-D tensor, ``x_0`` first."""
    return buf[vector_index(n, inc).to(buf.device)]


def scatter_(buf: torch.Tensor, n: int, inc: int, values: torch.Tensor) -> None:
    """Write ``values`` (``x_0`` first) into the vector ``(n, inc)`` of ``buf``; nothing else of
    ``buf`` changes. ``inc`` must not be 0 (positions must be distinct)."""
    if n > 0:
        buf[vector_index(n, inc).to(buf.device)] = values.to(buf.dtype)


def make_vector(n: int, inc: int, dtype: str | torch.dtype, gen: torch.Generator, *,
                std: float = 1.0, tail: int = 0, gap: float | None = NAN) -> torch.Tensor:
    """A buffer of ``vector_len(n, inc) + tail`` elements holding a random vector ``(n, inc)``;
    every other element (the gaps of a strided vector, ``tail`` elements past its end) holds
    ``gap``: NaN unless said otherwise, random values when None (for a buffer whose gaps must
    show a write that NaN would hide, such as ``scal``'s ``alpha * NaN``)."""
    size = vector_len(n, inc) + tail
    if gap is None:
        buf = random_values(size, dtype, gen, std=std)
    else:
        buf = torch.full((size,), gap, dtype=_dt(dtype))
    scatter_(buf, n, inc, random_values(max(n, 0), dtype, gen, std=std))
    return buf


# ---- matrices -----------------------------------------------------------------------------------

def stored(buf: torch.Tensor, rows: int, cols: int, ld: int) -> torch.Tensor:
    """The ``rows x cols`` column-major matrix with leading dimension ``ld`` in ``buf``, as a
    view: element ``(i, j)`` is ``buf[i + j*ld]``."""
    return buf.as_strided((rows, cols), (1, ld), buf.storage_offset())


def op_view(buf: torch.Tensor, trans: int, rows: int, cols: int, ld: int) -> torch.Tensor:
    """``op(X)`` as a ``rows x cols`` tensor: X itself (``OP_N``), stored ``cols x rows`` and
    transposed (``OP_T``), or also conjugated (``OP_C``; the same as ``OP_T`` for real data)."""
    if trans == OP_N:
        return stored(buf, rows, cols, ld)
    t = stored(buf, cols, rows, ld).t()
    return t.conj() if trans == OP_C and t.is_complex() else t


def make_matrix(rows: int, cols: int, ld: int, dtype: str | torch.dtype, gen: torch.Generator,
                *, std: float = 1.0) -> torch.Tensor:
    """A buffer of ``ld * cols`` elements: a random ``rows x cols`` matrix, its padding rows
    (``rows <= i < ld``) NaN."""
    if ld < max(1, rows):
        raise ValueError(f"leading dimension {ld} below the {rows} rows")
    buf = torch.full((ld * max(cols, 0),), NAN, dtype=_dt(dtype))
    if rows > 0 and cols > 0:
        stored(buf, rows, cols, ld).copy_(random_values(rows * cols, dtype, gen, std=std)
                                          .reshape(rows, cols))
    return buf


def in_triangle(n: int, uplo: int, *, diagonal: bool = True) -> torch.Tensor:
    """The ``n x n`` boolean mask of the triangle ``uplo`` names (with its diagonal or not)."""
    ones = torch.ones(n, n, dtype=torch.bool)
    k = 0 if diagonal else 1
    return torch.triu(ones, k) if uplo == UPPER else torch.tril(ones, -k)


def make_triangle(n: int, ld: int, uplo: int, dtype: str | torch.dtype, gen: torch.Generator, *,
                  unit: bool = False, dominant: bool = False) -> torch.Tensor:
    """An ``n x n`` matrix of which only the triangle ``uplo`` is stored: the other triangle and
    the padding hold NaN, and so does the diagonal when ``unit`` (a unit diagonal is never read).
    ``dominant`` makes each diagonal element exceed the magnitudes of its row and column in the
    triangle by at least 1, so triangular solves are well conditioned and the error measured is
    the candidate's."""
    buf = make_matrix(n, n, ld, dtype, gen)
    a = stored(buf, n, n, ld)
    if dominant and not unit and n > 0:
        off = a.abs().double() * in_triangle(n, uplo, diagonal=False)
        margin = (off.sum(0) + off.sum(1) + 1.0).to(a.real.dtype)
        sign = torch.where(a.diagonal().real < 0, -1.0, 1.0).to(margin.dtype)
        a.diagonal().copy_(sign * margin)
    a.masked_fill_(~in_triangle(n, uplo, diagonal=not unit), NAN)
    return buf


def dense_from_triangle(buf: torch.Tensor, n: int, ld: int, uplo: int, kind: str, *,
                        unit: bool = False) -> torch.Tensor:
    """The full ``n x n`` matrix a triangle stands for, in complex128/float64: ``"triangular"``
    (zeros outside; ones on a unit diagonal), ``"symmetric"`` (mirrored) or ``"hermitian"``
    (mirrored conjugated; the diagonal's imaginary parts are taken as zero, as BLAS does)."""
    a = stored(buf, n, n, ld).to(torch.complex128 if buf.is_complex() else torch.float64)
    strict = in_triangle(n, uplo, diagonal=False)
    body = torch.where(strict, a, torch.zeros_like(a))
    diag = torch.ones(n, dtype=a.dtype) if unit else a.diagonal().clone()
    if kind == "triangular":
        return body + torch.diag(diag)
    if kind == "symmetric":
        return body + body.t() + torch.diag(diag)
    if kind == "hermitian":
        return body + body.t().conj() + torch.diag(diag.real.to(a.dtype))
    raise ValueError(f"unknown matrix kind {kind!r}")


def band_index(n: int, k: int, uplo: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows ``i``, columns ``j`` and band-storage rows of every element of an ``n x n`` band
    matrix with ``k`` off-diagonals in triangle ``uplo``: BLAS stores upper ``A(i, j)`` at
    ``(k + i - j, j)`` and lower ``A(i, j)`` at ``(i - j, j)`` of an ``ld x n`` matrix."""
    rows, cols, band = [], [], []
    for d in range(min(k, max(n - 1, 0)) + 1):  # the d-th diagonal off the main one
        j = torch.arange(d, n) if uplo == UPPER else torch.arange(0, n - d)
        i = j - d if uplo == UPPER else j + d
        rows.append(i)
        cols.append(j)
        band.append(torch.full_like(j, k - d if uplo == UPPER else d))
    if not rows:
        empty = torch.empty(0, dtype=torch.int64)
        return empty, empty, empty
    return torch.cat(rows), torch.cat(cols), torch.cat(band)


def make_band(n: int, k: int, ld: int, uplo: int, dtype: str | torch.dtype,
              gen: torch.Generator) -> torch.Tensor:
    """A band matrix in BLAS band storage (``ld >= k + 1``, ``ld * n`` elements): the band's
    elements random, every other element (the corner no element maps to, the padding) NaN."""
    if ld < k + 1:
        raise ValueError(f"band storage needs ld >= k + 1 = {k + 1}, got {ld}")
    buf = torch.full((ld * n,), NAN, dtype=_dt(dtype))
    _, j, b = band_index(n, k, uplo)
    buf[b + j * ld] = random_values(j.numel(), dtype, gen)
    return buf


def dense_from_band(buf: torch.Tensor, n: int, k: int, ld: int, uplo: int) -> torch.Tensor:
    """The ``n x n`` triangle (zeros elsewhere) a band stores, in float64/complex128."""
    dense = torch.zeros(n, n, dtype=torch.complex128 if buf.is_complex() else torch.float64)
    i, j, b = band_index(n, k, uplo)
    dense[i, j] = buf[b + j * ld].to(dense.dtype)
    return dense


# ---- Batched routines: arrays of pointers -------------------------------------------------------

# Where every pointee of a pointer array starts: a multiple of 16 bytes from the buffer's
# (aligned) start. cuBLAS's Batched kernels cannot see device pointers before launch and assume
# them aligned: HgemmBatched with pointees at odd float16 offsets stopped with "misaligned
# address" on an H100.
POINTEE_ALIGN_BYTES = 16


def pointer_array(entries: Sequence[torch.Tensor], gen: torch.Generator) -> PointerArray:
    """One buffer holding every entry (1-D, one dtype) in an order drawn from ``gen``, each
    followed by NaN elements — at least one, then 0 to 2 more alignment steps, so entries are
    unevenly spaced — and the pointer array addressing them in batch order, every pointee at a
    :data:`POINTEE_ALIGN_BYTES` boundary; so a kernel that walks from the first pointer by a
    fixed stride instead of loading each one fails, and one that writes past an entry shows.
    Entries may be the same tensor object (a broadcast operand is then one pointee addressed
    several times)."""
    if not entries:
        return PointerArray(torch.empty(0, dtype=torch.float32), ())
    dtype = entries[0].dtype
    step = max(1, POINTEE_ALIGN_BYTES // entries[0].element_size())
    unique: list[torch.Tensor] = []
    slot = []
    for e in entries:
        same = next((u for u, t in enumerate(unique) if t is e), None)
        if same is None:
            unique.append(e)
            same = len(unique) - 1
        slot.append(same)
    order = torch.randperm(len(unique), generator=gen).tolist()
    where = [0] * len(unique)
    pos = 0
    for i, u in enumerate(order):
        where[u] = pos
        end = pos + unique[u].numel() + 1 + (i % 3) * step
        pos = -(-end // step) * step
    buf = torch.full((pos,), NAN, dtype=dtype)
    for u in order:
        buf[where[u]:where[u] + unique[u].numel()] = unique[u]
    return PointerArray(buf, tuple(where[s] for s in slot))


def pointee(arr: PointerArray, b: int, size: int) -> torch.Tensor:
    """Entry ``b`` of a pointer array (its first ``size`` elements), a view of the buffer."""
    o = arr.offsets[b]
    return arr.buffer[o:o + size]


# ---- cost models --------------------------------------------------------------------------------

def element_size(dtype: str | torch.dtype) -> int:
    return torch.empty((), dtype=_dt(dtype)).element_size()


def rate_dtype(dtype: str | torch.dtype) -> str:
    """The dtype whose peak bounds a routine's FLOPs: complex64 runs on fp32 units, complex128
    on fp64 units (FLOPs are counted as real operations: a complex multiply-add is 8)."""
    name = str(_dt(dtype)).removeprefix("torch.")
    return {"complex64": "float32", "complex128": "float64"}.get(name, name)


def flops_per_fma(dtype: str | torch.dtype) -> int:
    """Real FLOPs of one multiply-add: 2, or 8 for complex data."""
    return 8 if _dt(dtype).is_complex else 2


def streaming_cost(flops: float, elements: float, dtype: str | torch.dtype) -> Cost:
    """BLAS-1 and BLAS-2 routines are bandwidth-bound: each element read or written once is
    their floor (``elements`` counts reads plus writes; strided vectors count their elements
    only, the fewest bytes that must move)."""
    return Cost(flops=float(flops), bytes=float(elements) * element_size(dtype),
                dtype=rate_dtype(dtype))


def gemm_cost(m: int, n: int, k: int, dtype: str | torch.dtype, *, reads_c: bool,
              batch: int = 1) -> Cost:
    """BLAS-3 routines are compute-bound: ``2mnk`` real FLOPs (``8mnk`` complex) per product
    plus the scaling by alpha and beta, and A, B, C read once (C only if beta != 0) and C
    written once."""
    f = flops_per_fma(dtype) * m * n * k + 3.0 * m * n
    elements = m * k + k * n + m * n * (2 if reads_c else 1)
    return Cost(flops=float(batch * f), bytes=float(batch * elements * element_size(dtype)),
                dtype=rate_dtype(dtype))


# ---- tolerances ---------------------------------------------------------------------------------

# Sums and dot products, relative to the sum of |terms|: a blocked tree reduction (chunks per
# lane, then log2-depth trees, then a pass over the blocks) stays within ~16 u of that scale for
# the sizes here, as aten::sum measures; a wrong term (a wrong sign, conjugate or element) is
# O(1) of it.
SUM_ULPS = 16


def sum_tolerance(dtype: str | torch.dtype) -> Tolerance:
    """Dots, sums and other reductions, judged against :func:`product_terms`' scale."""
    return Tolerance.ulps(dtype, SUM_ULPS)


def exact() -> Tolerance:
    """Copies and swaps move values: bit for bit (NaN where NaN)."""
    return Tolerance(0.0, 0.0)


def product_terms(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``sum_i x_i * y_i`` in float64/complex128 and its conditioning: the sum of |terms|, per
    component for complex data — the real part sums ``|xr yr| + |xi yi|``, the imaginary part
    ``|xr yi| + |xi yr|`` — as :func:`operators.checking.compare` bounds each component. Pass
    ``x.conj()`` for a conjugated dot (``dotc``)."""
    a, b = hp(x), hp(y)
    value = (a * b).sum()
    if not value.is_complex():
        return value, (a * b).abs().sum()
    ar, ai, br, bi = a.real.abs(), a.imag.abs(), b.real.abs(), b.imag.abs()
    return value, torch.complex((ar * br + ai * bi).sum(), (ar * bi + ai * br).sum())


def solve_scale(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Per element of the solution ``x`` of ``a @ x = b`` (``x`` a vector or a matrix of right
    hand sides), the forward error a backward-stable solve may make per unit of roundoff:
    ``|a^-1| (|a| |x|)``. A triangular substitution's computed solution solves a system
    perturbed by a few u of ``|a|`` (componentwise backward error); this is that backward error
    carried to the solution, so a solve is judged by its backward error, as a tolerance on the
    solution. Complex data get the same scale on both components."""
    aa = hp(a)
    inv_abs = torch.linalg.inv(aa).abs()
    s = inv_abs @ (aa.abs() @ hp(x).abs())
    return torch.complex(s, s) if aa.is_complex() else s
