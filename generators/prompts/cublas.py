"""cuBLAS prompt templates: the routine's reference semantics (the spec's description), the BLAS
conventions it follows and the exact signatures of its entry points. cuBLAS v12.4 itself, called
directly, is the baseline."""

from __future__ import annotations

from generators.llm import Message, Role
from generators.prompts.common import closing_v1, entry_points_list_v1, system_message_v1
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


@REGISTRY.template(Source.CUBLAS, "v1")
def render_v1(spec: OperatorSpec, platform: str) -> tuple[Message, ...]:
    name = spec.id.split("::", 1)[1]
    user = (
        f"Problem `{spec.id}` (version {spec.version}, kind `{spec.kind.value}`): the cuBLAS "
        f"{CUBLAS_VERSION} routine `{name}`, with cuBLAS itself as the baseline. Implement it in "
        "Triton with exactly these entry points (names, argument order and return values as "
        "shown):\n\n"
        f"{entry_points_list_v1(spec)}\n\n"
        f"{CONVENTIONS_V1}\n\n"
        f"Reference semantics:\n{spec.description}\n\n"
        f"{closing_v1(spec, platform)}"
    )
    return (system_message_v1(), Message(Role.USER, user))
