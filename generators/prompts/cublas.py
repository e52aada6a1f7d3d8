"""cuBLAS prompt templates: the routine's reference semantics (the spec's description), the BLAS
conventions it follows and the exact signatures of its entry points. cuBLAS v12.4 itself, called
directly, is the baseline."""

from __future__ import annotations

from collections.abc import Callable

from generators.llm import Message, Role
from generators.prompts.common import (
    closing_v1,
    closing_v2,
    entry_points_list_v1,
    system_message_v1,
    system_message_v2,
)
from generators.prompts.registry import REGISTRY
from operators.spec import OperatorSpec, Source

CUBLAS_VERSION = "v12.4"

CONVENTIONS_V1 = (
    "cuBLAS conventions (the problem statement below is authoritative where it is more "
    "specific): the handle argument is omitted; device buffers arrive as 1-D tensors; matrices "
    "are column-major, element (i, j) of a matrix with leading dimension `ld` at index "
    "`i + j*ld`, and rows beyond the matrix (padding up to `ld`) are neither used nor written; "
    "vectors step by their `inc*` strides; `alpha`/`beta` arrive as Python numbers; "
    "`trans`/`uplo`/`side`/`diag` flags are passed as ints; results are written in place into "
    "the output buffers and the routine returns None."
)


# v2 (issue #25, the whole cuBLAS suite): the conventions of docs/suite.md's "cuBLAS
# conventions" — scalar results, complex buffers, negative increments, NaN in what a routine
# never reads, pointer arrays of Batched routines, quick returns.
CONVENTIONS_V2 = (
    "cuBLAS conventions (the problem statement below is authoritative where it is more "
    "specific): entry points keep the routine's name and its C arguments in C order, the handle "
    "omitted, and return None; results are written in place into the output buffers the C API "
    "writes. Device buffers arrive as 1-D contiguous tensors of the routine's precision (S "
    "float32, D float64, C complex64, Z complex128, H float16); view a complex buffer as real "
    "with `torch.view_as_real(x)` (interleaved real, imaginary). `alpha`/`beta` arrive as Python "
    "numbers (complex for C/Z routines) and are used rounded to the routine's precision. A "
    "routine that produces a scalar (dot, dotu, dotc, asum) writes it into `result`, its last "
    "argument, a 1-element tensor of the result's dtype: write `result[0]`, do not return it. "
    "Vector element i of (n, inc) is `x[i*inc]`; a negative increment starts at "
    "`x[(n-1)*|inc|]` and walks back (`x[(n-1-i)*|inc|]`). Matrices are column-major: element "
    "(i, j) with leading dimension `ld` is at `i + j*ld`. Flags are ints: trans N=0, T=1, C=2 "
    "(C is T for real data); uplo LOWER=0, UPPER=1; side LEFT=0, RIGHT=1; diag NON_UNIT=0, "
    "UNIT=1. Everything a routine does not read — gaps between strided vector elements, padding "
    "rows up to `ld`, the other triangle or the band's unused part, a unit diagonal — may hold "
    "NaN: never read it, and leave it untouched in outputs. Batched routines take arrays of "
    "pointers as a 1-D int64 device tensor of addresses: load entry b's pointer with "
    "`tl.load(A_array + b).to(tl.pointer_type(tl.float32))` (entries are not evenly spaced; "
    "each starts 16-byte aligned). "
    "Quick returns are part of the semantics: n <= 0 writes nothing except a scalar result of "
    "0; scal and asum return at once when incx <= 0 (asum's result 0); alpha == 0 gives C = "
    "beta * C without needing A or B (in GEMM-like routines they then hold finite values, "
    "since cuBLAS reads them; skipping them is as right); beta == 0 does not read C, which may "
    "hold NaN."
    # BLAS-2 (ger, symv, sbmv, syr2, tbmv, trsv).
    " In BLAS-2 routines alpha == 0 leaves unread the vectors alpha scales in gemv and ger (x; "
    "x and y for ger), which may then hold NaN, while symv, sbmv and syr2 get finite ones "
    "(cuBLAS reads them); beta == 0 leaves y unread; the triangle "
    "of an output a routine does not write (syr2) may hold any values and must come back bit "
    "for bit. A Python float reaches a Triton kernel as float32 unless the kernel parameter "
    "is annotated `tl.float64`: D and Z routines need that for alpha and beta."
    " Routines that allow it run in place: C may be the very tensor A or B (same leading "
    "dimension), so read each element before writing it. `*Ex` routines take data types as "
    "cudaDataType ints; complex int8 (CUDA_C_8I) data arrive as a 1-D int8 tensor of (real, "
    "imaginary) pairs."
    " StridedBatched routines take one buffer per operand and the stride, in elements, between "
    "consecutive entries: a stride of 0 shares one entry across the batch (read-only entries "
    "may also overlap; output entries never do). `_64` routines take 64-bit sizes, strides and "
    "counts, and their element offsets may pass 2^31: compute indices in int64."
)


def _render(spec: OperatorSpec, platform: str, conventions: str, system: Message | None = None,
            closing: Callable[[OperatorSpec, str], str] = closing_v1) -> tuple[Message, ...]:
    name = spec.id.split("::", 1)[1]
    user = (
        f"Problem `{spec.id}` (version {spec.version}, kind `{spec.kind.value}`): the cuBLAS "
        f"{CUBLAS_VERSION} routine `{name}`, with cuBLAS itself as the baseline. Implement it in "
        "Triton with exactly these entry points (names, argument order and return values as "
        "shown):\n\n"
        f"{entry_points_list_v1(spec)}\n\n"
        f"{conventions}\n\n"
        f"Reference semantics:\n{spec.description}\n\n"
        f"{closing(spec, platform)}"
    )
    return (system or system_message_v1(), Message(Role.USER, user))


@REGISTRY.template(Source.CUBLAS, "v1")
def render_v1(spec: OperatorSpec, platform: str) -> tuple[Message, ...]:
    return _render(spec, platform, CONVENTIONS_V1)


@REGISTRY.template(Source.CUBLAS, "v2")
def render_v2(spec: OperatorSpec, platform: str) -> tuple[Message, ...]:
    return _render(spec, platform, CONVENTIONS_V2)


@REGISTRY.template(Source.CUBLAS, "v3")
def render_v3(spec: OperatorSpec, platform: str) -> tuple[Message, ...]:
    """v2 with the rules of issue #22: imports (`logging`) and `.item()` by provenance."""
    return _render(spec, platform, CONVENTIONS_V2, system_message_v2(), closing_v2)
