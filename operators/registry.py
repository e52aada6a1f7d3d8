"""The one registry of operator problems.

Problems register themselves with the :func:`register` decorator (the only way in). Discovery is
lazy: nothing under ``operators/<source>/`` is imported until the registry is first asked for
something, and then every problem module is imported once. Duplicate ids and invalid specs raise
at import, never warn-and-skip.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import pkgutil
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TypeVar

from operators.spec import PLATFORMS, Kind, OperatorSpec, Source

S = TypeVar("S", bound=type[OperatorSpec])

_ID_RE = re.compile(r"^(aten|vllm|cublas)::[A-Za-z_][A-Za-z0-9_]*$")
_PACKAGES = tuple(f"operators.{s.value}" for s in Source)

_lock = threading.RLock()
_specs: dict[str, OperatorSpec] = {}
_discovered = False


class SpecError(ValueError):
    """A problem module declares something invalid."""


class UnknownOperatorError(KeyError):
    """No problem has that id."""

    def __init__(self, op_id: str, known: Iterable[str]) -> None:
        known = sorted(known)
        close = difflib.get_close_matches(op_id, known, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        super().__init__(f"unknown operator {op_id!r}{hint} (`kgb operators list` shows all)")
        self.op_id = op_id

    def __str__(self) -> str:
        return str(self.args[0])


def register(op_id: str, *, version: int, kind: Kind | str) -> Callable[[S], S]:
    """Register a problem class under a stable id (``source::name``) and version.

    Bump ``version`` whenever the reference, the inputs or the tolerances change.
    """

    def deco(cls: S) -> S:
        if not _ID_RE.match(op_id):
            raise SpecError(f"{cls.__qualname__}: invalid operator id {op_id!r} (want source::name)")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise SpecError(f"{op_id}: version must be a positive int, got {version!r}")
        cls.id = op_id
        cls.version = version
        cls.kind = Kind(kind)
        cls.source = Source(op_id.split("::", 1)[0])
        spec = cls()
        _validate(spec)
        with _lock:
            if op_id in _specs:
                other = type(_specs[op_id])
                raise SpecError(
                    f"duplicate operator id {op_id!r}: {cls.__module__}.{cls.__qualname__} and "
                    f"{other.__module__}.{other.__qualname__}"
                )
            _specs[op_id] = spec
        return cls

    return deco


# Views and scalar reads move no data: their answers are sizes, strides and offsets (or one
# element read back), so they need no kernel and have nothing worth timing (docs/suite.md).
METADATA_KINDS = frozenset({Kind.VIEW, Kind.SCALAR})


def _metadata_only(spec: OperatorSpec) -> bool:
    return spec.kind in METADATA_KINDS or spec.metadata_only


def _validate(spec: OperatorSpec) -> None:
    def fail(msg: str) -> None:
        raise SpecError(f"{spec.id}: {msg}")

    if not spec.entry_points:
        fail("declares no entry points")
    names = [e.name for e in spec.entry_points]
    if len(set(names)) != len(names):
        fail(f"duplicate entry point names {names}")
    if not spec.description.strip():
        fail("has no prompt description")
    if not spec.platforms or not spec.platforms <= PLATFORMS:
        fail(f"platforms must be a non-empty subset of {sorted(PLATFORMS)}")
    for label, src in [("solution", spec.solution)] + [
        (f"negative {n.name!r}", n.source) for n in spec.negatives
    ]:
        if not src.strip():
            fail(f"{label} is empty")
        try:
            ast.parse(src)
        except SyntaxError as exc:
            fail(f"{label} does not parse: {exc}")
        if "@triton.jit" not in src and not _metadata_only(spec):
            fail(f"{label} has no @triton.jit kernel")
    if not spec.negatives:
        fail("ships no negative control")
    if len({n.name for n in spec.negatives}) != len(spec.negatives):
        fail("negative controls need distinct names")
    cases = list(spec.cases())
    if not cases:
        fail("has no correctness cases")
    if not any(c.cpu for c in cases):
        fail("has no cpu-tier case")
    bench = list(spec.benchmark_cases())
    if not bench and spec.timed and not _metadata_only(spec):
        fail("has no benchmark cases")
    for c in cases + bench:
        if c.entry not in names:
            fail(f"case {c.name} names unknown entry point {c.entry!r}")
    if len({c.name for c in cases}) != len(cases):
        fail("correctness case names are not unique")


def _discover() -> None:
    global _discovered
    with _lock:
        if _discovered:
            return
        for pkg_name in _PACKAGES:
            pkg = importlib.import_module(pkg_name)
            for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
                if not info.name.startswith("_"):
                    importlib.import_module(f"{pkg_name}.{info.name}")
        _discovered = True


# The published benchmark names its vLLM problems ``vllm13::`` (vLLM 0.13.0, whose semantics ours
# follow); that spelling is accepted wherever an id is and means the same problem.
_ALIASES = {"vllm13::": "vllm::"}


def canonical_id(op_id: str) -> str:
    """``op_id`` with a published alias prefix (``vllm13::``) replaced by ours."""
    for alias, prefix in _ALIASES.items():
        if op_id.startswith(alias):
            return prefix + op_id[len(alias):]
    return op_id


def get(op_id: str) -> OperatorSpec:
    """The problem with this id (or a published alias of it); raises
    :class:`UnknownOperatorError` with suggestions."""
    _discover()
    try:
        return _specs[canonical_id(op_id)]
    except KeyError:
        raise UnknownOperatorError(op_id, _specs) from None


def all_specs(source: Source | str | None = None) -> list[OperatorSpec]:
    """Every registered problem, sorted by source then id."""
    _discover()
    order = {s: i for i, s in enumerate(Source)}
    specs = sorted(_specs.values(), key=lambda s: (order[s.source], s.id))
    if source is not None:
        specs = [s for s in specs if s.source == Source(source)]
    return specs


def ids() -> list[str]:
    return [s.id for s in all_specs()]


def baseline_libraries() -> dict[str, str]:
    """What each problem's baseline times against on this host (its
    :meth:`~operators.spec.OperatorSpec.baseline_library`), compactly: per source, the library
    most of its problems use, and by problem id each problem that uses another (a source's
    problems may differ: ``vllm::rotary_embedding`` is PyTorch's wherever vLLM imports).
    Asking imports what the answer depends on (``vllm``), so a worker asks while it may still
    read the Python installation."""
    by_source: dict[str, dict[str, str]] = {}
    for spec in all_specs():
        by_source.setdefault(spec.source.value, {})[spec.id] = spec.baseline_library()
    out: dict[str, str] = {}
    for source, libs in by_source.items():
        counts = Counter(libs.values())
        main = max(sorted(counts), key=counts.__getitem__)  # the most used; ties by name
        out[source] = main
        out.update({op_id: lib for op_id, lib in libs.items() if lib != main})
    return out
