"""The problem statements of the GEMM family, written from one text so that every routine
states the same semantics the same way: the operation, op() and conjugation, column-major
layouts and padding, the batch addressing of its calling convention, the 64-bit API, the quick
returns and the precision it computes in. Registers nothing."""

from __future__ import annotations

_DTYPE_WORDS = {
    "float32": "float32", "float64": "float64", "float16": "float16",
    "complex64": "complex64 (single-precision complex)",
    "complex128": "complex128 (double-precision complex)",
}

_PRECISION = {
    "float32": ("Compute in float32 with float32 accumulation: no TF32 (with tl.dot use "
                "input_precision=\"ieee\"; its default reads float32 inputs as TF32)."),
    "float64": "Compute in float64.",
    "complex64": ("Compute in float32 per component with float32 accumulation: no TF32 (with "
                  "tl.dot use input_precision=\"ieee\"; its default reads float32 inputs as "
                  "TF32)."),
    "complex128": "Compute in float64 per component.",
    "float16": ("cuBLAS computes in float16 (CUBLAS_COMPUTE_16F: products accumulated in "
                "float16, alpha and beta are __half); accumulating in float16 or in float32 is "
                "accepted, and the result is rounded to float16."),
}


def _buffers(convention: str, dtype: str) -> str:
    word = _DTYPE_WORDS.get(dtype, dtype)
    complex_note = (" `torch.view_as_real` gives a real view (complex element e's real part at "
                    "2e, imaginary part at 2e + 1); leading dimensions and strides count complex "
                    "elements." if dtype.startswith("complex") else "")
    if convention == "pointers":
        elem = {"complex64": "float32", "complex128": "float64"}.get(dtype, dtype)
        return (
            "`Aarray`, `Barray`, `Carray` are arrays of device pointers: 1-D int64 tensors of "
            f"batchCount addresses of {word} matrices; entry e of A is the matrix at address "
            f"`Aarray[e]` (in Triton: `tl.load(Aarray + e).to(tl.pointer_type(tl.{elem}))`), "
            "and likewise for B and C. The entries are not evenly spaced and are in no "
            "particular order; several entries of A (or of B) may be the same matrix; C's "
            "entries never overlap. Memory between the entries must be left untouched."
            + complex_note)
    text = f"`A`, `B`, `C` are 1-D contiguous {word} tensors holding the device buffers."
    if convention == "strided":
        text += (
            " Entry e of A starts at element `e*strideA` of A (of B at `e*strideB`, of C at "
            "`e*strideC`). A stride of 0 uses the same matrix for every entry; A's and B's "
            "entries may also overlap (a stride smaller than one matrix) — they are only "
            "read; C's entries never overlap, and elements between them must be left "
            "untouched.")
    return text + complex_note


def _ops(complex_data: bool) -> str:
    if complex_data:
        return ("`transa`/`transb` are CUBLAS_OP_N=0 (op(X) = X), CUBLAS_OP_T=1 (X transposed, "
                "not conjugated) and CUBLAS_OP_C=2 (X transposed and conjugated).")
    return ("`transa`/`transb` are CUBLAS_OP_N=0 (op(X) = X), CUBLAS_OP_T=1 (X transposed) and "
            "CUBLAS_OP_C=2 (for real data the same as T).")


def describe(routine: str, dtype: str, convention: str, *, wide: bool = False,
             types: str = "") -> str:
    """The prompt description of ``routine``: ``dtype`` is A's and B's (and C's) dtype,
    ``convention`` its calling convention ("none", "ex", "pointers", "strided"), ``wide`` the
    ``_64`` API, ``types`` SgemmEx's statement of its data types."""
    batched = convention in ("pointers", "strided")
    each = "for each batch entry e in 0..batchCount-1, " if batched else ""
    sub = "_e" if batched else ""
    cplx = dtype.startswith("complex")
    text = [
        f"cuBLAS `{routine}` (handle omitted): {each}`C{sub} = alpha * op(A{sub}) @ op(B{sub}) "
        f"+ beta * C{sub}` on column-major matrices, C updated in place; returns None.",
        types or _buffers(convention, dtype),
        _ops(cplx),
        "Element (i, j) of a matrix with leading dimension ld is at offset i + j*ld (from the "
        "start of its entry). op(A) is m x k: A is stored m x k with lda >= m when transa is N, "
        "else k x m with lda >= k; op(B) is k x n: B is stored k x n with ldb >= k when transb "
        "is N, else n x k with ldb >= n; C is m x n with ldc >= m. Rows beyond a matrix "
        "(padding up to ld) must not be used and, in C, must be left untouched; A and B must "
        "not be modified.",
        ("`alpha` and `beta` are Python complex numbers used as "
         f"{'cuComplex (complex64)' if dtype == 'complex64' else 'cuDoubleComplex'}."
         if cplx else
         f"`alpha` and `beta` are Python floats used as {_scalar_word(dtype, convention)}."),
        "Quick returns: when m <= 0 or n <= 0"
        + (" or batchCount <= 0" if batched else "")
        + " nothing is written. When alpha == 0 or k == 0, C = beta * C (A and B then hold finite "
        "values: cuBLAS may read them, and skipping them is as right). When beta == 0, C is not "
        "read (it may hold NaN, which must "
        "not propagate) and is overwritten.",
    ]
    if wide:
        text.append(
            "This is the 64-bit API (`_64`): sizes, leading dimensions, strides and batchCount "
            "are 64-bit integers, and some cases place elements more than 2^31 elements into "
            "a buffer (or, for complex data, its real view): compute offsets in int64.")
    text.append(_PRECISION.get(dtype, "Compute in float32, rounding once to C's dtype."))
    return " ".join(text)


def _scalar_word(dtype: str, convention: str) -> str:
    if dtype == "float16":
        return "__half (float16)"
    return "float64" if dtype == "float64" else "float32"


def signature(routine: str, names: tuple[str, ...], dtype: str) -> str:
    """The Python signature of the entry point: the C arguments in C order, the handle
    omitted; scalars are floats (complex for complex routines), buffers and arrays of pointers
    tensors, everything else ints."""
    scalar = "complex" if dtype.startswith("complex") else "float"

    def kind(name: str) -> str:
        if name in ("alpha", "beta"):
            return scalar
        return "Tensor" if name in ("A", "B", "C", "Aarray", "Barray", "Carray") else "int"

    return f"{routine}({', '.join(f'{x}: {kind(x)}' for x in names)}) -> None"


def summary(dtype: str, convention: str) -> str:
    """The entry point's one-line doc."""
    each = "for each batch entry, " if convention in ("pointers", "strided") else ""
    where = {"pointers": " addressed by arrays of pointers",
             "strided": " at a fixed stride in one buffer"}.get(convention, "")
    return (f"{each}C = alpha * op(A) @ op(B) + beta * C on column-major {dtype} "
            f"matrices{where}, C updated in place.")
