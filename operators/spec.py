"""The operator-problem contract: what one problem module declares.

A problem is a subclass of :class:`OperatorSpec` in one module under ``operators/<source>/``,
registered with :func:`operators.registry.register`. Everything the harness needs — entry points,
cases, inputs, the fp64 reference, tolerances, the cost model, the controls — lives in that one
file, beside the reference, so a tolerance can never drift away from the problem it belongs to.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch


class Source(str, enum.Enum):
    """Where a problem comes from; also the prefix of its id."""

    ATEN = "aten"
    VLLM = "vllm"
    CUBLAS = "cublas"


class Kind(str, enum.Enum):
    """What the candidate's entry points must do; decides the anti-cheat policy."""

    COMPUTE = "compute"
    VIEW = "view"
    ALLOC = "alloc"
    SCALAR = "scalar"
    RANDOM = "random"


class Tier(str, enum.Enum):
    """Case sets. ``cpu`` is small enough for Triton's interpreter in seconds; ``full`` is every
    correctness case (run on real devices); ``bench`` holds the timed benchmark cases."""

    CPU = "cpu"
    FULL = "full"
    BENCH = "bench"


PLATFORMS: frozenset[str] = frozenset({"cuda", "rocm", "cpu"})


@dataclass(frozen=True)
class EntryPoint:
    """A function the candidate must define, with the exact signature callers use."""

    name: str
    signature: str
    doc: str = ""


@dataclass(frozen=True)
class Case:
    """One configuration of a problem: which entry point, dtype, main shape and extra parameters.

    Cases are pure data: the inputs are made from a case and a seed by ``make_call``.
    ``cpu`` marks the case as part of the small tier Triton's interpreter runs.
    """

    entry: str
    dtype: str
    shape: tuple[int, ...]
    params: tuple[tuple[str, Any], ...] = ()
    cpu: bool = False

    def get(self, key: str, default: Any = None) -> Any:
        for k, v in self.params:
            if k == key:
                return v
        return default

    def __getitem__(self, key: str) -> Any:
        for k, v in self.params:
            if k == key:
                return v
        raise KeyError(key)

    @property
    def torch_dtype(self) -> torch.dtype:
        return dtype_from_name(self.dtype)

    @property
    def name(self) -> str:
        dims = "x".join(str(d) for d in self.shape) or "scalar"
        extra = "".join(f",{k}={_fmt(v)}" for k, v in self.params)
        return f"{self.entry}[{self.dtype},{dims}{extra}]"


def case(entry: str, dtype: str, shape: Sequence[int], *, cpu: bool = False, **params: Any) -> Case:
    """Build a :class:`Case`; keyword arguments become its params (kept in the given order)."""
    dtype_from_name(dtype)  # validate early
    return Case(entry=entry, dtype=dtype, shape=tuple(int(d) for d in shape),
                params=tuple(params.items()), cpu=cpu)


def _fmt(v: Any) -> str:
    if isinstance(v, tuple | list):
        return "(" + ",".join(_fmt(x) for x in v) + ")"
    return str(v)


@dataclass(frozen=True)
class Out:
    """Where a checked output lives after the call: the return value (``key`` indexes a returned
    tuple, or None for a single tensor) or an argument written in place (``key`` is a positional
    index or a keyword name, for out= and in-place ops)."""

    where: str  # "return" | "arg"
    key: int | str | None = None

    @staticmethod
    def ret(index: int | None = None) -> Out:
        return Out("return", index)

    @staticmethod
    def arg(key: int | str) -> Out:
        return Out("arg", key)

    def describe(self) -> str:
        if self.where == "return":
            return "return value" if self.key is None else f"return value [{self.key}]"
        return f"argument {self.key!r}" if isinstance(self.key, str) else f"argument {self.key}"


@dataclass(eq=False)
class PointerArray:
    """An argument that is a device array of pointers, as cuBLAS's Batched routines take
    (``Aarray``, ``Carray``): the candidate receives ``pointers``, a 1-D int64 tensor on the
    buffer's device whose element ``b`` is the address of element ``offsets[b]`` of ``buffer``.
    The harness owns the pointees through ``buffer``, so it moves, poisons and checks them like
    any argument: the buffer is what ``Call.tensor_args`` lists under the argument's key and
    what an ``Out.arg`` of it checks. ``pointers`` are rebuilt whenever the buffer is (a copy
    to the device, a dry run's fresh allocation). Pointees may repeat (a broadcast operand);
    the elements of ``buffer`` no pointee covers must come back as they were."""

    buffer: torch.Tensor
    offsets: tuple[int, ...]
    pointers: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        buf = self.buffer
        if buf.dim() != 1 or (buf.numel() > 1 and buf.stride(0) != 1):
            raise ValueError(f"a pointer array's buffer must be 1-D and dense, got shape "
                             f"{tuple(buf.shape)} with strides {buf.stride()}")
        self.offsets = tuple(int(o) for o in self.offsets)
        for o in self.offsets:
            if not 0 <= o < buf.numel():
                raise ValueError(f"pointee offset {o} lies outside the buffer of "
                                 f"{buf.numel()} elements")
        base, size = buf.data_ptr(), buf.element_size()
        self.pointers = torch.tensor([base + o * size for o in self.offsets], dtype=torch.int64,
                                     device=buf.device)


@dataclass
class Call:
    """A concrete invocation of one entry point, made from a case and a seed on the CPU.

    ``mutable`` lists the arguments (positional index or keyword name) the call may write
    (out= buffers, in-place targets); every other tensor argument must come back unchanged.
    ``out_buffers`` (a subset of ``mutable`` the op only writes, never reads) are poisoned by
    the harness before the call, so unwritten elements show up. A :class:`PointerArray`
    argument stands for its buffer in all of these.
    """

    entry: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    outputs: tuple[Out, ...] = (Out("return"),)
    mutable: frozenset[int | str] = frozenset()
    out_buffers: frozenset[int | str] = frozenset()

    def arg(self, key: int | str) -> Any:
        """A positional (int) or keyword (str) argument."""
        return self.args[key] if isinstance(key, int) else self.kwargs[key]

    def buffer(self, key: int | str) -> Any:
        """The argument as the harness checks it: a pointer array's buffer, else the argument."""
        value = self.arg(key)
        return value.buffer if isinstance(value, PointerArray) else value

    def tensor_args(self) -> list[tuple[int | str, Any]]:
        """Every (key, tensor) of the arguments, positional first; a pointer array gives its
        buffer."""
        items: list[tuple[int | str, Any]] = list(enumerate(self.args))
        items += list(self.kwargs.items())
        return [(k, v.buffer if isinstance(v, PointerArray) else v) for k, v in items
                if isinstance(v, torch.Tensor | PointerArray)]

    def passed(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments as the candidate receives them: a pointer
        array as its int64 tensor of addresses."""
        def unwrap(v: Any) -> Any:
            return v.pointers if isinstance(v, PointerArray) else v
        return (tuple(unwrap(a) for a in self.args),
                {k: unwrap(v) for k, v in self.kwargs.items()})


@dataclass(frozen=True)
class Expected:
    """The reference answer for one output, computed in high precision on the CPU.

    ``value`` is float64 for floating outputs (complex128 for complex), exact for integers and
    bools. ``dtype`` is the dtype the candidate must produce. ``scale`` is the conditioning of each
    element — for sums and dot products the sum of absolute terms — so tolerances follow the
    problem's error bound instead of a blanket allowance; None means ``abs(value)``.

    What else an output may have to be, beyond its values:

    - ``strides``: the strides PyTorch gives it (dims of size 1 are not compared) — for views,
      ``clone(memory_format=...)``, ``empty_strided``.
    - ``view_of``: the argument (positional index or keyword) whose storage it must share, at
      ``offset`` elements from that argument's own storage offset — for view and alias ops. An
      output with ``view_of`` None must *not* share storage with a read-only argument.
    - ``values=False``: its values are undefined (``empty_strided``); only dtype, shape and
      strides are checked.
    - ``python``: the output is a Python number of this type (``"bool"``, ``"int"``,
      ``"float"``, ``"complex"``), as ``Tensor.item()`` returns; ``value`` is it as a 0-d tensor.
    - ``judge``: a random op's output is judged by a distribution test instead of by value
      (see :mod:`operators.distributions`); it returns why the sample fails, or None.
    - ``canonical``: where the op leaves part of an output unspecified (the order atomics give
      entries within a group, padding no consumer reads), a function from an output to its
      canonical form (same shape and dtype, any device); the produced output is compared by
      value after it, ``value`` being canonical already. Unlike a judge it keeps the output
      judged by value, so every layer that compares outputs (ghost, replay, determinism)
      still applies.
    - ``from_shapes``: the value follows from the arguments' shapes alone (an index map the
      op writes beside its real results), so ``validate`` does not ask it to depend on the
      inputs' seed.
    """

    value: torch.Tensor
    dtype: torch.dtype
    scale: torch.Tensor | None = None
    strides: tuple[int, ...] | None = None
    view_of: int | str | None = None
    offset: int = 0
    values: bool = True
    python: str | None = None
    judge: Any = None  # Callable[[torch.Tensor], str | None]
    canonical: Any = None  # Callable[[torch.Tensor], torch.Tensor]
    from_shapes: bool = False

    @property
    def by_value(self) -> bool:
        """Whether the output's values are compared with ``value`` (not undefined, not random)."""
        return self.values and self.judge is None


@dataclass(frozen=True)
class Tolerance:
    """``|out - expected| <= atol + rtol * scale`` elementwise, NaN/Inf positions exact.

    Integer and bool outputs are always compared exactly, whatever this says.
    """

    rtol: float
    atol: float = 0.0

    @staticmethod
    def ulps(dtype: torch.dtype | str, n: float,
             atol_ulps: float | None = None) -> Tolerance:
        """``n`` units of roundoff of ``dtype`` relative to the scale, plus an absolute floor of
        ``atol_ulps`` (default ``n``) times the smallest normal number, for flushed denormals."""
        dt = dtype_from_name(dtype) if isinstance(dtype, str) else dtype
        u = unit_roundoff(dt)
        tiny = torch.finfo(dt).tiny
        return Tolerance(rtol=n * u, atol=(n if atol_ulps is None else atol_ulps) * tiny)


@dataclass(frozen=True)
class Cost:
    """Minimum work of one case, for speed-of-light: floating-point operations and the fewest
    unique bytes that must cross device memory (each input read once, each output written once)."""

    flops: float
    bytes: float
    dtype: str = "float32"  # the dtype whose matrix/vector rate bounds ``flops``


@dataclass(frozen=True)
class Negative:
    """A negative control: a plausible Triton candidate that passes at least one public case but
    is wrong. ``why`` says what is wrong with it."""

    name: str
    why: str
    source: str


class OperatorSpec:
    """Base class of every problem. Subclasses set the class attributes and implement the methods.

    Attributes set by :func:`operators.registry.register`: ``id``, ``version``, ``kind``,
    ``source``. Attributes the subclass sets: ``entry_points``, ``description``, ``solution``,
    ``negatives``, optionally ``platforms`` and ``tolerances``.
    """

    id: ClassVar[str]
    version: ClassVar[int]
    kind: ClassVar[Kind]
    source: ClassVar[Source]

    entry_points: ClassVar[tuple[EntryPoint, ...]] = ()
    description: ClassVar[str] = ""
    solution: ClassVar[str] = ""
    negatives: ClassVar[tuple[Negative, ...]] = ()
    platforms: ClassVar[frozenset[str]] = PLATFORMS
    # Tolerances keyed by the output dtype's name ("float16", ...). Integer/bool are exact.
    tolerances: ClassVar[Mapping[str, Tolerance]] = {}
    # Whether two runs of the candidate must agree bitwise (else within tolerance).
    bitwise_deterministic: ClassVar[bool] = False
    # An answer of metadata only (``empty_strided``: sizes, strides, dtype, no values), so no
    # kernel to write and nothing to time; views and scalar reads are so by their kind.
    metadata_only: ClassVar[bool] = False
    # False for an answer of one element (``scalar_tensor``): launch-bound whatever the kernel,
    # so it has no benchmark cases.
    timed: ClassVar[bool] = True

    # ---- cases -------------------------------------------------------------------------------
    def cases(self) -> Sequence[Case]:
        """Public correctness cases. Those with ``cpu=True`` form the interpreter tier."""
        raise NotImplementedError

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        """Hidden cases drawn from ``rng`` (seeded by the agent's secret); for ``Tier.CPU`` they
        must be as small as the cpu tier."""
        raise NotImplementedError

    def benchmark_cases(self) -> Sequence[Case]:
        """Timed cases: large enough not to be launch-bound on a modern GPU."""
        raise NotImplementedError

    # ---- inputs, reference, baseline ---------------------------------------------------------
    def make_call(self, case: Case, gen: torch.Generator) -> Call:
        """Deterministic inputs for ``case`` from ``gen`` (a CPU generator), on the CPU."""
        raise NotImplementedError

    def reference(self, call: Call) -> tuple[Expected, ...]:
        """The answer for each of ``call.outputs``, in high precision, from pristine CPU inputs."""
        raise NotImplementedError

    def baseline(self, call: Call) -> Any:
        """Run the production implementation (PyTorch / cuBLAS through torch) on the call's
        tensors, wherever they live, with the entry point's semantics (writing out-buffers).
        Timed against the candidate; also used by ``validate`` as a second-precision check."""
        raise NotImplementedError

    def baseline_library(self) -> str:
        """Which implementation :meth:`baseline` runs on this host (``"torch"``, ``"vllm"``,
        ``"cublas"``): verdicts carry it and results are stored under it, since a speed-up means
        nothing without what it was measured against. Problems whose baseline switches on what
        the host has installed override this."""
        return "torch"

    def cost(self, case: Case) -> Cost:
        raise NotImplementedError

    # ---- tolerances --------------------------------------------------------------------------
    def tolerance(self, case: Case, dtype: torch.dtype) -> Tolerance:
        """Tolerance for an output of ``dtype`` in ``case``; defaults to ``tolerances``."""
        name = dtype_name(dtype)
        if not (dtype.is_floating_point or dtype.is_complex):
            return Tolerance(0.0, 0.0)  # integers and bools: exact
        try:
            return self.tolerances[name]
        except KeyError:
            raise KeyError(f"{self.id}: no tolerance declared for output dtype {name}") from None

    # ---- helpers -----------------------------------------------------------------------------
    def public_cases(self, tier: Tier) -> list[Case]:
        """The public correctness cases of a tier (``cpu``: those marked cpu; else all)."""
        cases = list(self.cases())
        return [c for c in cases if c.cpu] if tier is Tier.CPU else cases

    def entry_point(self, name: str) -> EntryPoint:
        for ep in self.entry_points:
            if ep.name == name:
                return ep
        raise KeyError(f"{self.id} has no entry point {name!r}")

    @property
    def ref(self) -> str:
        """``id@version``, the key results are stored under."""
        return f"{self.id}@{self.version}"


# ---- dtype helpers ----------------------------------------------------------------------------

_DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}


def dtype_from_name(name: str) -> torch.dtype:
    try:
        return _DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(_DTYPES)}") from None


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def unit_roundoff(dtype: torch.dtype) -> float:
    """Half the machine epsilon: the largest relative error of one correctly rounded operation."""
    if dtype.is_complex:
        dtype = torch.float32 if dtype == torch.complex64 else torch.float64
    return torch.finfo(dtype).eps / 2


def high_precision(dtype: torch.dtype) -> torch.dtype:
    """The dtype references are computed in."""
    if dtype.is_complex:
        return torch.complex128
    if dtype.is_floating_point:
        return torch.float64
    return dtype
