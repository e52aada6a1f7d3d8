"""Parts every prompt template shares: the rules, the kind policies, the platform notes and the
worked example.

Versioning: every constant here is suffixed with the template generation that introduced it
(``_V1``) and is **never edited** once released — a stored prompt must be re-renderable exactly.
To change a rule, the example or a note, add ``..._V2`` beside the old one and register new
template versions (``aten/v2`` …) in the source modules that use it; the old versions keep
pointing at ``_V1``. ``RULES_V2`` and ``KIND_POLICY_V2`` (templates ``aten/v2``, ``vllm/v2``,
``cublas/v3``) state the anti-cheat rules of issue #22 (docs/anticheat.md): ``logging`` among the
imports, ``.item()`` judged by provenance at run time, every view in method or function form and
``resize_`` in every kind.

The system message (:func:`system_message_v1`) depends on nothing but the template version, so
every problem of a sweep shares one prefix that providers can cache; everything that depends on
the problem, its kind or the platform goes in the user message.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from generators.llm import Message, Role
from generators.prompts.registry import PromptError
from operators.spec import EntryPoint, Kind, OperatorSpec

FENCE = "```"

# ---- the rules (v1) ---------------------------------------------------------------------------

RULES_V1 = """\
Rules (every reply; candidates are checked automatically and cheating is detected):

1. Triton kernels only. All computation on tensor data happens inside your own `@triton.jit` \
kernels. No CUDA C/C++, inline PTX or assembly, CuPy, Numba or other libraries.
2. The entry points (the Python functions the problem names, with exactly the given names and \
signatures) may allocate outputs and scratch buffers, read shapes, strides, dtypes and devices, \
compute launch grids with Python arithmetic on Python numbers, and launch your kernels. They must \
not compute with torch: no torch math functions (`torch.sum`, `torch.matmul`, \
`torch.nn.functional.*`, `torch.ops.*` ...), no tensor math methods (`x.sum()`, `x.exp()`, \
`x.add_()` ...), no arithmetic operators on tensors (`a + b`, `a * 2`, `a @ b`).
3. Imports: only `torch`, `triton` (and `triton.language`), `math`, `cmath`, `functools`, \
`typing`, `itertools`, `operator`, `dataclasses`, `collections`, `numbers`, `enum`, `abc`, \
`warnings`, `copy`, `__future__`.
4. Forbidden anywhere outside kernels: host round trips (`.cpu()`, `.numpy()`, `.tolist()`, \
`.item()` unless the problem is of kind `scalar`); dynamic code and introspection (`exec`, \
`eval`, `compile`, `__import__`, `globals`, `locals`, `vars`, `open`, `getattr` with a computed \
name); changing any module's attributes (monkeypatching); streams, events, CUDA graphs, \
`torch.compile`; threads.
5. Every call must do its work: no caching of results between calls, no special-casing the \
public test shapes (hidden cases with other shapes and values are checked too), write every \
element of every output, and leave inputs unchanged unless the problem says they are updated \
in place.
6. Reply with exactly one fenced code block (```python ... ```) holding the complete Python file: \
imports, kernels and every entry point. Anything outside that block is ignored."""

# ---- the rules (v2): imports and `.item()` as the anti-cheat layers judge them (issue #22) ------
# Rule 3 lists exactly the static policy's import roots (device_agent/static_tables.py; a test
# keeps them equal); rule 4 says `.item()` is judged by provenance when it runs.

RULES_V2 = RULES_V1.replace("""\
3. Imports: only `torch`, `triton` (and `triton.language`), `math`, `cmath`, `functools`, \
`typing`, `itertools`, `operator`, `dataclasses`, `collections`, `numbers`, `enum`, `abc`, \
`warnings`, `copy`, `__future__`.
4. Forbidden anywhere outside kernels: host round trips (`.cpu()`, `.numpy()`, `.tolist()`, \
`.item()` unless the problem is of kind `scalar`); dynamic code""", """\
3. Imports: only `torch`, `triton` (and `triton.language`) and these standard-library modules: \
`math`, `cmath`, `functools`, `typing`, `itertools`, `operator`, `dataclasses`, `collections`, \
`numbers`, `enum`, `abc`, `warnings`, `copy`, `logging` (but not `logging.config` or \
`logging.handlers`), `__future__`. No relative or star imports.
4. `.item()` is judged when it runs: reading back a value that your own kernel (one defined in \
your file) was given during the same call, in a buffer that is not an argument of the call (a \
count, a flag, a size you then use to launch or allocate), is allowed; `.item()` of an input (even \
one your kernel read), of a tensor torch computed or copied, or of another module's kernel \
results is cheating. In problems of kind `scalar`, `.item()` of any tensor is allowed. Forbidden \
anywhere outside kernels: host round trips (`.cpu()`, `.numpy()`, `.tolist()`); dynamic code""")
assert RULES_V2 != RULES_V1

# ---- kind policies (v1): a summary of docs/anticheat.md, one paragraph per kind ----------------

_ALLOWED_COMPUTE_V1 = (
    "allocation (`torch.empty`, `empty_like`, `empty_strided`, `zeros`, `ones`, `full` and their "
    "`_like` forms, `torch.tensor` of Python values such as shapes), views and metadata "
    "(`broadcast_tensors`, `broadcast_shapes`, `view`, `reshape`, `expand`, `.stride()`, "
    "`.numel()`, `.dtype` ...) and device queries"
)

KIND_POLICY_V1: Mapping[Kind, str] = MappingProxyType({
    Kind.COMPUTE: (
        "Kind `compute`: the entry points must compute the answer in your own Triton kernels. "
        f"Outside kernels, only {_ALLOWED_COMPUTE_V1} are allowed."
    ),
    Kind.VIEW: (
        "Kind `view`: return the right values with the aliasing and strides PyTorch users rely on "
        "(a view shares its input's storage), copying no more than needed. Outside kernels, "
        f"{_ALLOWED_COMPUTE_V1} are allowed, plus `torch.as_strided`, `narrow`, `select`, `t`, "
        "`reshape`, `unsqueeze`, `squeeze`, `permute`, `transpose` and `flatten`."
    ),
    Kind.ALLOC: (
        "Kind `alloc`: allocate and initialise the result without calling the allocator that is "
        "the answer: `torch.zeros`, `ones`, `full` and their `_like` forms are forbidden here; "
        "fill memory with your own Triton kernel. Otherwise the `compute` allow-list applies: "
        "`torch.empty`, `empty_like`, `empty_strided`, `torch.tensor` of Python values, views, "
        "metadata and device queries."
    ),
    Kind.SCALAR: (
        "Kind `scalar`: the entry point reads a scalar back to the host (as `item` / "
        "`_local_scalar_dense` do); `.item()` is allowed for that. Otherwise only "
        f"{_ALLOWED_COMPUTE_V1} are allowed outside kernels."
    ),
    Kind.RANDOM: (
        "Kind `random`: the results are judged by statistical tests of their distribution, not "
        "by equality with PyTorch's stream; draw the random numbers in your Triton kernels "
        f"(e.g. `tl.rand` / `tl.randn` from a seed and offsets). Outside kernels, only "
        f"{_ALLOWED_COMPUTE_V1} are allowed."
    ),
})

# ---- kind policies (v2): the allow-lists since issue #22 (every view in method or function form
# in every kind, `resize_`) and `.item()` of anything in `scalar` problems ------------------------

_ALLOWED_COMPUTE_V2 = (
    "allocation (`torch.empty`, `empty_like`, `empty_strided`, `zeros`, `ones`, `full` and their "
    "`_like` forms, `torch.tensor` of Python values such as shapes), views in method or function "
    "form (`broadcast_tensors`, `broadcast_shapes`, `view`, `reshape` / `torch.reshape`, "
    "`expand`, `permute`, `transpose`, `t`, `movedim`, `squeeze`, `unsqueeze`, `flatten`, "
    "`narrow`, `select`, `as_strided` ...), "
    "metadata (`.stride()`, `.numel()`, `.dtype`, `torch.result_type` ...), `out.resize_(shape)` "
    "(PyTorch's out= convention) and device queries"
)

KIND_POLICY_V2: Mapping[Kind, str] = MappingProxyType({
    Kind.COMPUTE: (
        "Kind `compute`: the entry points must compute the answer in your own Triton kernels. "
        f"Outside kernels, only {_ALLOWED_COMPUTE_V2} are allowed."
    ),
    Kind.VIEW: (
        "Kind `view`: return the right values with the aliasing and strides PyTorch users rely on "
        "(a view shares its input's storage), copying no more than needed. Outside kernels, "
        f"{_ALLOWED_COMPUTE_V2} are allowed."
    ),
    Kind.ALLOC: (
        "Kind `alloc`: allocate and initialise the result without calling the allocator that is "
        "the answer: `torch.zeros`, `ones`, `full` and their `_like` forms are forbidden here; "
        "fill memory with your own Triton kernel. Otherwise the `compute` allow-list applies: "
        "`torch.empty`, `empty_like`, `empty_strided`, `torch.tensor` of Python values, views, "
        "metadata, `resize_` and device queries."
    ),
    Kind.SCALAR: (
        "Kind `scalar`: the entry point reads a scalar back to the host (as `item` / "
        "`_local_scalar_dense` do); `.item()` of any tensor is allowed here. Otherwise only "
        f"{_ALLOWED_COMPUTE_V2} are allowed outside kernels."
    ),
    Kind.RANDOM: (
        "Kind `random`: the results are judged by statistical tests of their distribution, not "
        "by equality with PyTorch's stream; draw the random numbers in your Triton kernels "
        f"(e.g. `tl.rand` / `tl.randn` from a seed and offsets). Outside kernels, only "
        f"{_ALLOWED_COMPUTE_V2} are allowed."
    ),
})

# ---- platform notes (v1) ----------------------------------------------------------------------

PLATFORM_NOTES_V1: Mapping[str, str] = MappingProxyType({
    "cuda": (
        "Platform `cuda`: an NVIDIA H200 GPU (Hopper, sm_90, 141 GB HBM3e). Tensors live on "
        "`cuda`; allocate on the inputs' device (`device=x.device`). Correctness is checked first, "
        "then your kernels are timed against the production baseline on large inputs, so choose "
        "block sizes, warps and stages for this GPU (`@triton.autotune` is allowed). A float32 "
        "`tl.dot` uses TF32 tensor cores unless you pass `input_precision=\"ieee\"`; TF32 loses "
        "about 3 decimal digits and fails problems that ask for full float32 precision."
    ),
    "cpu": (
        "Platform `cpu`: Triton's interpreter (TRITON_INTERPRET=1) on CPU tensors, for "
        "correctness only (no timing). Tensors live on `cpu`; allocate on the inputs' device "
        "(`device=x.device`), never hard-code `\"cuda\"`. Every program instance is simulated "
        "with numpy, so keep grids small: give each program a large block (e.g. 1024 elements "
        "or more) rather than launching one program per element or per tiny tile. No inline "
        "assembly (`tl.inline_asm_elementwise`) or other GPU-only features. A float32 `tl.dot` "
        "is rounded as TF32 unless you pass `input_precision=\"ieee\"`, exactly as on a GPU."
    ),
    # Added with the rocm platform (issue #28); the notes above are unchanged.
    "rocm": (
        "Platform `rocm`: an AMD Instinct GPU (CDNA, e.g. MI300X) through PyTorch's ROCm build "
        "and Triton's AMD backend. Tensors live on `cuda` (the ROCm build keeps that device "
        "string); allocate on the inputs' device (`device=x.device`). A wavefront is 64 lanes, "
        "not 32: `num_warps=4` is 256 threads. There is no TMA, warp specialisation or Hopper "
        "`wgmma`; `tl.dot` runs on MFMA matrix cores. Correctness is checked first, then your "
        "kernels are timed against the ROCm libraries (rocBLAS/hipBLASLt, MIOpen) on large "
        "inputs, so choose block sizes, warps and stages for this GPU (`@triton.autotune` is "
        "allowed). Pass `input_precision=\"ieee\"` to a float32 `tl.dot` when full float32 "
        "precision is needed."
    ),
})

# ---- the worked example (v1) ------------------------------------------------------------------
# A complete honest candidate for a problem that is not in the suite. tests/generators checks that
# it passes the static policy and is right under Triton's interpreter.

EXAMPLE_ENTRY_POINTS_V1: tuple[EntryPoint, ...] = (
    EntryPoint("relu", "relu(self: Tensor) -> Tensor",
               "max(self, 0) elementwise; NaN stays NaN; the result has self's shape and dtype."),
    EntryPoint("relu_out", "relu_out(self: Tensor, *, out: Tensor) -> Tensor",
               "Writes relu(self) into out (same shape and dtype, any strides) and returns out."),
)

EXAMPLE_SOURCE_V1 = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n,
                 d1, d2, d3,
                 xs0, xs1, xs2, xs3,
                 os0, os1, os2, os3,
                 BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    idx = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # int64: no overflow on big tensors
    mask = idx < n
    # Unravel the row-major flat index into 4-D coordinates, then apply each tensor's strides.
    i3 = idx % d3
    rest = idx // d3
    i2 = rest % d2
    rest = rest // d2
    i1 = rest % d1
    i0 = rest // d1
    x = tl.load(x_ptr + i0 * xs0 + i1 * xs1 + i2 * xs2 + i3 * xs3, mask=mask)
    y = tl.where(x < 0, tl.zeros_like(x), x)  # x < 0 is False for NaN: NaN propagates
    tl.store(out_ptr + i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3, y, mask=mask)


def _pad4(values, fill):
    values = list(values)
    if len(values) > 4:
        raise ValueError("relu: at most 4 dims are supported")
    return [fill] * (4 - len(values)) + values


def _launch(x, out):
    n = out.numel()
    if n == 0:
        return out
    sizes = _pad4(out.shape, 1)
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    _relu_kernel[grid](x, out, n, sizes[1], sizes[2], sizes[3],
                       *_pad4(x.stride(), 0), *_pad4(out.stride(), 0), BLOCK=BLOCK)
    return out


def relu(self):
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    return _launch(self, out)


def relu_out(self, *, out):
    return _launch(self, out)
'''

EXAMPLE_V1 = f"""\
Worked example (for illustration only; you will never be asked this problem).

Example problem `example::relu`, kind `compute`. Inputs are float16, bfloat16 or float32 tensors \
with up to 4 dims, possibly non-contiguous. Entry points:
{chr(10).join(f"- `{e.signature}`: {e.doc}" for e in EXAMPLE_ENTRY_POINTS_V1)}

Example reply:

{FENCE}python
{EXAMPLE_SOURCE_V1}{FENCE}

Note what it does: the kernel does all the arithmetic; the entry points only allocate, read \
shapes and strides, and launch; a mask guards the last partial block; strides are honoured, so \
non-contiguous inputs and outputs work; offsets are int64."""

INTRO_V1 = (
    "You are an expert GPU kernel engineer. You write correct, fast Triton kernels that replace "
    "a reference operator, following the rules below exactly."
)


def system_message_v1() -> Message:
    """The v1 system message: the same text for every problem, platform and source."""
    return Message(Role.SYSTEM, f"{INTRO_V1}\n\n{RULES_V1}\n\n{EXAMPLE_V1}")


def system_message_v2() -> Message:
    """The v2 system message: v1 with the rules of issue #22 (imports, `.item()`)."""
    return Message(Role.SYSTEM, f"{INTRO_V1}\n\n{RULES_V2}\n\n{EXAMPLE_V1}")


def entry_points_list_v1(spec: OperatorSpec) -> str:
    """The entry points as a Markdown list of exact signatures with their one-line docs."""
    lines = []
    for e in spec.entry_points:
        doc = f"\n  {e.doc}" if e.doc else ""
        lines.append(f"- `{e.signature}`{doc}")
    return "\n".join(lines)


def platform_note_v1(platform: str) -> str:
    try:
        return PLATFORM_NOTES_V1[platform]
    except KeyError:
        raise PromptError(f"v1 prompt templates have no notes for platform {platform!r} "
                          f"(known: {', '.join(sorted(PLATFORM_NOTES_V1))})") from None


def _closing(policy: str, spec: OperatorSpec, platform: str) -> str:
    names = ", ".join(f"`{e.name}`" for e in spec.entry_points)
    return (
        f"{policy}\n\n"
        f"{platform_note_v1(platform)}\n\n"
        f"Reply with exactly one {FENCE}python code block: a complete file with your "
        f"`@triton.jit` kernels and the entry points {names}."
    )


def closing_v1(spec: OperatorSpec, platform: str) -> str:
    """The kind's policy, the platform note and the reply instruction (end of every user message)."""
    return _closing(KIND_POLICY_V1[spec.kind], spec, platform)


def closing_v2(spec: OperatorSpec, platform: str) -> str:
    """:func:`closing_v1` with the v2 kind policies."""
    return _closing(KIND_POLICY_V2[spec.kind], spec, platform)
