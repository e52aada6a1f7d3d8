"""The static policy layer on its own: honest code passes, each cheat pattern and each way around
the filter is caught by its rule with the line, and a real agent (layer on) turns a violation
into REJECTED.

The lists below are this test's own copy of the policy's tables (``device_agent/static_tables.py``),
kept apart on purpose: dropping an entry from a deny list there, or adding one to an allow list,
fails a test here.
"""

from __future__ import annotations

import asyncio
import sys
import types
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import triton

import operators
from device_agent.static_policy import check
from operators.spec import Kind
from protos.client import AgentClient
from protos.records import EvalRequest, Status
from tests.adversarial.catalogue import headers
from tests.helpers import running_agent, softmax_with_libdevice

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "candidates"
HONEST_FIXTURES = ["add_autotuned.py", "add_inline_asm.py", "add_mutates_input.py",
                   "add_unwritten.py", "add_oob_write.py"]
HONEST_CORPUS = sorted((Path(__file__).resolve().parent.parent / "adversarial" / "honest")
                       .glob("*.py"))

WRAP = ("import torch\nimport triton\nimport triton.language as tl\n\n\n"
        "def add_Tensor(self, other, *, alpha=1):\n{}\n")

# ---- the tables, as this test expects them --------------------------------------------------------
ALLOWED_ROOTS = ["torch", "triton", "math", "cmath", "functools", "typing", "itertools",
                 "operator", "dataclasses", "collections", "numbers", "enum", "abc", "__future__",
                 "warnings", "copy", "logging"]
ESCAPE_MODULES = [
    "os", "sys", "subprocess", "ctypes", "importlib", "inspect", "builtins", "gc", "threading",
    "multiprocessing", "socket", "pickle", "marshal", "types", "code", "codeop", "pty", "signal",
    "shutil", "pathlib", "io", "tempfile", "mmap", "resource", "sysconfig", "site", "runpy",
    "platform", "atexit", "weakref", "traceback", "linecache", "_thread", "posix", "_posixsubprocess",
    "_imp", "zipimport", "pkgutil", "faulthandler", "tracemalloc", "fcntl", "select", "asyncio",
    "concurrent", "queue", "time", "json", "struct", "hashlib", "copyreg", "dis", "ast", "tokenize",
    "numpy", "cupy", "vllm", "random", "glob", "urllib", "http", "ssl", "pdb",
    "trace", "cProfile", "contextvars", "_ctypes", "_io", "nt", "posixpath", "stat",
]
DENIED_BUILTINS = ["exec", "eval", "compile", "__import__", "globals", "locals", "vars",
                   "breakpoint", "input", "open", "delattr", "__build_class__"]
NAME_TAKING_BUILTINS = ["getattr", "setattr"]
ESCAPE_NAMES = ["__builtins__", "__loader__", "__spec__", "__match_args__"]
ESCAPE_ATTRIBUTES = [
    "__base__", "__bases__", "__mro__", "__subclasses__", "__globals__",
    "__builtins__", "__code__", "__closure__", "__dict__", "__self__", "__objclass__",
    "__getattribute__", "__getattr__", "__setattr__", "__delattr__", "__traceback__",
    "__reduce__", "__reduce_ex__", "__loader__", "__spec__", "__import__", "__defaults__",
    "__kwdefaults__", "__annotations__", "__match_args__",
    "tb_frame", "tb_next", "f_back", "f_globals", "f_locals", "f_builtins", "f_code",
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code",
]
ESCAPE_MODULE_ATTRIBUTES = [
    "os", "sys", "builtins", "subprocess", "ctypes", "importlib", "inspect", "gc", "posix", "nt",
    "marshal", "pty", "multiprocessing", "socket", "runpy", "pickle", "shutil",
    "_os", "_sys", "_imp", "_thread", "_posixsubprocess", "_ctypes",
]
TRITON_ALLOWED = [
    "jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "language",
    "constexpr_function", "must_use_result", "reinterpret", "set_allocator", "OutOfResources",
    "CompilationError", "TritonError", "InterpreterError", "__version__",
    "tools.tensor_descriptor", "tools.tensor_descriptor.TensorDescriptor",
    "runtime.driver.active.get_active_torch_device", "runtime.driver.active.get_current_device",
    "runtime.driver.active.get_current_target", "runtime.driver.active.utils.get_device_properties",
    "language.core", "language.extra.libdevice", "language.math", "language.constexpr",
]
TRITON_REFUSED = [
    "runtime", "runtime.driver", "runtime.driver.active", "tools",
    "runtime.driver.active.utils.load_binary", "runtime.driver.active.launcher_cls",
    "runtime.jit", "runtime.autotuner.Autotuner", "runtime.cache", "compiler", "compile", "knobs",
    "knobs.runtime.launch_enter_hook", "backends", "testing", "testing.do_bench",
    "testing.set_gpu_clock", "tools", "tools.disasm", "_C", "_utils", "errors", "JITFunction",
    "KernelInterface", "MockTensor", "TensorWrapper", "FutureKernel", "AsyncCompileMode",
]
TORCH_BASE = [
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "broadcast_tensors", "broadcast_shapes", "broadcast_to", "is_tensor",
    "is_floating_point", "is_complex", "result_type", "promote_types", "can_cast",
    "get_default_dtype", "finfo", "iinfo", "device", "dtype", "Size", "Generator",
    "cuda.is_available", "cuda.current_device", "cuda.device_count", "cuda.get_device_properties",
    "cuda.get_device_capability", "cuda.get_device_name", "cuda.device", "cuda.set_device",
    "cuda.synchronize", "version.hip", "no_grad", "inference_mode", "tensor", "view_as_real",
    "view_as_complex", "reshape", "squeeze", "unsqueeze", "flatten", "unflatten", "permute",
    "transpose", "swapaxes", "movedim", "t", "narrow", "select", "as_strided", "chunk", "split",
    "unbind", "tensor_split", "atleast_1d", "atleast_2d", "atleast_3d", "numel",
]
TORCH_ALLOC_DENIED = ["zeros", "zeros_like", "ones", "ones_like", "full", "full_like"]
TORCH_VIEW_EXTRA = ["expand_copy"]
# Rules a runtime layer backs up: recorded as warnings, never a rejection.
WARNING_RULES = ["torch-call", "tensor-method", "matmul-operator", "cpu-roundtrip"]
TORCH_RANDOM_EXTRA = ["initial_seed"]
TORCH_DTYPES = ["float32", "float16", "bfloat16", "float64", "int32", "int64", "int8", "int16",
                "uint8", "bool", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2"]
TORCH_REFUSED = {
    "ops": "torch-ops", "ops.aten.add": "torch-ops",
    "compile": "cuda-graph", "cuda.graph": "cuda-graph", "cuda.graphs": "cuda-graph",
    "cuda.CUDAGraph": "cuda-graph", "cuda.make_graphed_callables": "cuda-graph",
    "cuda.Stream": "stream", "cuda.stream": "stream", "cuda.set_stream": "stream",
    "cuda.Event": "stream", "cuda.ExternalStream": "stream", "cuda.streams.Stream": "stream",
    "Stream": "stream", "Event": "stream", "accelerator.set_stream": "stream",
    "library": "library-internals", "classes": "library-internals",
    "utils.cpp_extension": "library-internals", "utils.cpp_extension.load_inline":
    "library-internals", "hub": "library-internals", "load": "library-internals",
    "package": "library-internals", "jit": "library-internals", "jit.script": "library-internals",
    "multiprocessing": "library-internals", "distributed": "library-internals",
    "cuda.cudart": "library-internals", "cuda.jiterator": "library-internals",
    "cuda.memory": "library-internals", "cuda.CUDAPluggableAllocator": "library-internals",
    "cuda.change_current_allocator": "library-internals", "_C": "library-internals",
    "_foreach_add": "library-internals", "cuda._sleep": "library-internals",
    "compiler": "cuda-graph", "compiler.cudagraph_mark_step_begin": "cuda-graph",
    "serialization": "library-internals", "utils.benchmark.Timer": "library-internals",
    "utils.data.DataLoader": "library-internals", "utils.collect_env.run": "library-internals",
    "utils.model_zoo": "library-internals", "cuda.tunable": "library-internals",
    "profiler.profile": "library-internals", "autograd.profiler": "library-internals",
}
PRIVATE_NAMES = ["collections._count_elements", "collections._sys", "typing._eval_type",
                 "functools._lru_cache_wrapper", "enum._simple_enum", "dataclasses._create_fn",
                 "torch._dynamo", "torch._ops"]
EVALUATING_NAMES = ["typing.get_type_hints", "typing.ForwardRef"]
OPERATOR_REFUSED = {"operator.matmul": "matmul-operator", "operator.imatmul": "matmul-operator",
                    "operator.methodcaller": "dynamic-attribute"}
COMPUTE_NAMES = [
    "abs", "abs_", "acos", "acosh", "add_", "addbmm", "addcdiv", "addcmul", "addmm", "addmv",
    "addr", "all", "amax", "amin", "any", "argmax", "argmin", "argsort", "asin", "atan",
    "atan2", "baddbmm", "bernoulli", "bernoulli_", "bincount", "bmm", "cdist", "ceil",
    "chain_matmul", "clamp", "clamp_", "clip", "copysign", "corrcoef", "cos", "cosh", "cov",
    "cross", "cummax", "cummin", "cumprod", "cumsum", "cumsum_", "cumulative_trapezoid",
    "diff", "digamma", "dist", "div", "div_", "dot", "einsum", "eq", "erf", "erfc", "erfinv",
    "exp", "exp2", "exp_", "expm1", "exponential_", "flip", "fliplr", "flipud", "float_power",
    "floor", "floor_divide", "fmax", "fmin", "fmod", "frac", "frexp", "gather", "ge", "gt",
    "heaviside", "histc", "hypot", "i0", "index_add", "index_add_", "index_copy", "index_fill",
    "index_put", "index_put_", "index_select", "inner", "kron", "kthvalue", "ldexp", "le",
    "lerp", "lgamma", "log", "log10", "log1p", "log2", "log_softmax", "logaddexp",
    "logaddexp2", "logcumsumexp", "logical_and", "logical_not", "logical_or", "logical_xor",
    "logit", "logsumexp", "lt", "masked_fill", "masked_fill_", "masked_scatter",
    "masked_select", "matmul", "max", "maximum", "mean", "median", "min", "minimum", "mm",
    "msort", "mul", "mul_", "mv", "nan_to_num", "nanmean", "nansum", "ne", "neg", "neg_",
    "nextafter", "norm", "normal_", "outer", "polygamma", "pow", "pow_", "prod", "reciprocal",
    "relu", "remainder", "renorm", "repeat", "repeat_interleave", "roll", "rot90", "round",
    "rsqrt", "rsub", "scatter", "scatter_", "scatter_add", "scatter_add_", "sgn", "sigmoid",
    "sign", "sin", "sinc", "sinh", "softmax", "softplus", "sqrt", "square", "std", "sub",
    "sub_", "sum", "take", "take_along_dim", "tan", "tanh", "tensordot", "topk", "trace",
    "tril", "triu", "true_divide", "trunc", "uniform_", "unique", "var", "vdot", "where",
    "xlogy",
]
COMPUTE_METHODS = sorted(set(COMPUTE_NAMES) | {n + "_" for n in COMPUTE_NAMES
                                               if not n.endswith("_")})
ARITHMETIC_DUNDERS = [f"__{r}{op}__" for op in ("add", "sub", "mul", "matmul", "truediv",
                                                 "floordiv", "mod", "pow", "neg", "abs", "and",
                                                 "or", "xor", "lshift", "rshift")
                      for r in ("", "r", "i")]
CPU_ROUND_TRIPS = ["cpu", "numpy", "tolist"]


def _body(code: str) -> str:
    return WRAP.format("\n".join("    " + line for line in code.splitlines()))


def rules(source: str, kind: Kind = Kind.COMPUTE) -> set[str]:
    found = check(source, kind)
    assert all(v.line > 0 and v.explanation for v in found), found
    return {v.rule for v in found}


# ---- honest code ------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", operators.all_specs(), ids=lambda s: s.id)
def test_shipped_solutions_and_negatives_pass(spec: operators.OperatorSpec) -> None:
    for src in [spec.solution] + [n.source for n in spec.negatives]:
        assert check(src, spec.kind) == []


@pytest.mark.parametrize("path", HONEST_CORPUS, ids=lambda p: p.stem)
def test_honest_corpus_passes(path: Path) -> None:
    """Every honest candidate of the red-team corpus, under its problem's kind (the corpus test
    runs them through an agent; this is the fast static-only check)."""
    assert check(path.read_text(), operators.get(headers(path)["operator"]).kind) == []


@pytest.mark.parametrize("name", HONEST_FIXTURES)
def test_honest_fixtures_pass(name: str) -> None:
    assert check((FIXTURES / name).read_text()) == []


def test_libdevice_candidate_passes() -> None:
    assert check(softmax_with_libdevice().decode()) == []


HONEST_SPELLINGS = {
    "annotations_and_defaults":
        "import torch\nimport triton.language as tl\n"
        "def f(x: torch.Tensor, dim: int = -1, dtype=None, eps: float = 1e-5,\n"
        "      *, out: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:\n    return (x,)\n",
    "jit_constexpr_default":
        "import triton\nimport triton.language as tl\n@triton.jit\n"
        "def k(x_ptr, n, BLOCK: tl.constexpr = 1024, EVEN: 'tl.constexpr' = False):\n"
        "    o = tl.arange(0, BLOCK)\n    tl.store(x_ptr + o, tl.load(x_ptr + o).sum(0))\n",
    "string_annotations":
        "import torch\ndef f(x: 'torch.Tensor', y: 'list[torch.Tensor]') -> 'torch.Tensor':\n"
        "    return x\n",
    "literal_strings_are_values":
        "from typing import Literal\ndef f(mode: Literal['open', 'exec'] = 'open'):\n"
        "    return mode\n",
    "future_annotations":
        "from __future__ import annotations\nimport torch\n"
        "def f(x: torch.Tensor | None = None) -> torch.Tensor | None:\n    return x\n",
    "builtin_names_as_parameters":
        "def softmax(input, dim, compile=False, vars=None):\n"
        "    return [input for input in (input, dim)], compile, vars\n",
    "utf8_coding_line": "# -*- coding: utf-8 -*-\nx = 1\n",
    "versions": "import torch\nimport triton\nv = (torch.__version__, triton.__version__)\n",
    "main_guard_and_name": "if __name__ == '__main__':\n    print(__name__, __doc__)\n",
    "exception_subclass":
        "class E(RuntimeError):\n    def __init__(self, m):\n        super().__init__(m)\n",
    "class_name_in_a_message":
        "class Op:\n    def __repr__(self):\n        return f'{self.__class__.__name__}()'\n",
    "tma_descriptor": "from triton.tools.tensor_descriptor import TensorDescriptor\n",
    "libdevice_imports": "from triton.language.extra import libdevice\n"
                         "from triton.language.extra.cuda import libdevice as cuda_libdevice\n",
    "tutorial_device_queries":
        "import torch\nimport triton\nfrom triton.runtime import driver\n"
        "DEVICE = triton.runtime.driver.active.get_active_torch_device()\n"
        "CUDA = driver.active.get_current_target().backend == 'cuda'\n"
        "SMS = torch.cuda.get_device_properties(0).multi_processor_count\n",
    "launch_errors":
        "import triton\ntry:\n    pass\nexcept (triton.OutOfResources, triton.CompilationError):\n"
        "    pass\n",
    "getattr_of_metadata": "def f(x):\n    return getattr(x, 'shape'), getattr(x, 'dtype', None)\n",
    "closures_and_match":
        "def f(x):\n    def g():\n        return x\n    match x:\n        case (a, b):\n"
        "            return a, b\n        case {'k': v, **rest}:\n            return v, rest\n"
        "        case _:\n            return g()\n",
    "functools_and_dataclass":
        "import functools\nimport dataclasses\n@dataclasses.dataclass(frozen=True)\n"
        "class Plan:\n    block: int = 1024\n@functools.lru_cache(maxsize=None)\n"
        "def plan(n: int) -> Plan:\n    return Plan(max(16, n))\n",
    "autotune_and_heuristics":
        "import triton\nimport triton.language as tl\n"
        "@triton.autotune(configs=[triton.Config({'B': 64}, num_warps=2)], key=['n'])\n"
        "@triton.heuristics({'EVEN': lambda args: args['n'] % args['B'] == 0})\n"
        "@triton.jit\ndef k(x, n, B: tl.constexpr, EVEN: tl.constexpr):\n    pass\n",
}


@pytest.mark.parametrize("name", HONEST_SPELLINGS)
def test_honest_spellings_pass(name: str) -> None:
    assert check(HONEST_SPELLINGS[name]) == []


@pytest.mark.parametrize("root", ALLOWED_ROOTS)
def test_allowed_imports_pass(root: str) -> None:
    assert check(f"import {root}\nimport {root} as alias_\n") == []


@pytest.mark.parametrize("entry", TRITON_ALLOWED)
def test_allowed_triton_names_pass(entry: str) -> None:
    assert check(f"import triton\nx = triton.{entry}\n") == []
    head, _, leaf = f"triton.{entry}".rpartition(".")
    assert check(f"from {head} import {leaf}\n") == []


@pytest.mark.parametrize("kind", list(Kind))
def test_allowed_torch_calls_pass(kind: Kind) -> None:
    allowed = set(TORCH_BASE) | set(TORCH_VIEW_EXTRA if kind is Kind.VIEW else []) \
        | set(TORCH_RANDOM_EXTRA if kind is Kind.RANDOM else [])
    if kind is Kind.ALLOC:
        allowed -= set(TORCH_ALLOC_DENIED)
    flagged = [n for n in sorted(allowed) if check(_body(f"return torch.{n}(self)"), kind)]
    assert flagged == []
    dtypes = [d for d in TORCH_DTYPES if check(_body(f"return getattr(torch, '{d}')"), kind)]
    assert dtypes == []


def test_names_shared_with_python_containers_are_left_to_the_runtime_layer() -> None:
    """``seen.add(key)`` on a set and ``torch.tensor`` metadata are honest wrapper code; the
    dispatch guard still sees ``tensor.add`` if it reaches torch."""
    src = _body("seen = set()\nseen.add(self.shape)\nparts = 'a.b'.split('.')\n"
                "i = parts.index('b') + parts.count('a')\nc = list(parts).copy()\n"
                "meta = torch.tensor(list(self.shape), device=self.device)\nreturn meta")
    assert check(src) == []


# ---- imports ------------------------------------------------------------------------------------
@pytest.mark.parametrize("spelling", ["import {m}\n", "import {m} as x\n",
                                      "from {m} import x\n", "import {m}.sub\n",
                                      "def f():\n    import {m}\n",
                                      "import triton\n@triton.jit\ndef k():\n    import {m}\n"])
@pytest.mark.parametrize("module", ESCAPE_MODULES)
def test_escape_modules_cannot_be_imported(module: str, spelling: str) -> None:
    assert "import" in rules(spelling.format(m=module))


def test_every_other_standard_library_module_is_refused() -> None:
    allowed = [m for m in sorted(sys.stdlib_module_names)
               if m not in ALLOWED_ROOTS and "import" not in rules(f"import {m}\n")]
    assert allowed == []


@pytest.mark.parametrize("source", ["from . import x\n", "from .kernels import k\n",
                                    "from torch import *\n"])
def test_relative_and_star_imports_are_refused(source: str) -> None:
    assert "import" in rules(source)


# ---- builtins and names -------------------------------------------------------------------------
BUILTIN_SPELLINGS = {
    "call": "x = {b}('1')\n",
    "alias": "o = {b}\no('1')\n",
    "partial": "import functools\nf = functools.partial({b}, '1')\n",
    "default": "def f(x={b}):\n    return x\n",
    "kw_default": "def f(*, x={b}('1')):\n    return x\n",
    "annotation": "def f(x: {b}('1')):\n    return x\n",
    "return_annotation": "def f() -> {b}('1'):\n    pass\n",
    "string_annotation": "def f(x: \"{b}('1')\"):\n    return x\n",
    "nested_string_annotation": "def f(x: list[\"{b}('1')\"]):\n    return x\n",
    "variable_annotation": "x: {b}('1') = 1\n",
    "lambda_default": "f = lambda x={b}: x\n",
    "lambda_body": "f = lambda: {b}\n",
    "decorator_argument": "import functools\n@functools.lru_cache(maxsize={b})\ndef f():\n"
                          "    pass\n",
    "decorator": "@{b}\ndef f():\n    pass\n",
    "class_body": "class C:\n    x = {b}\n",
    "class_keyword": "class C(metaclass={b}):\n    pass\n",
    "comprehension": "x = [{b} for _ in range(1)]\n",
    "comprehension_iterable": "x = [{b} for {b} in {b}('1')]\n",
    "declared_global": "def f():\n    global {b}\n    return {b}\n",
    "class_shadow": "def f({b}):\n    class C:\n        {b} = 1\n        y = {b}\n",
    "type_made_class": "C = type('C', (), {{'f': staticmethod({b})}})\n",
    "jit_body": "import triton\n@triton.jit\ndef k(x):\n    y = {b}\n",
    "match_value": "match 1:\n    case 2:\n        x = {b}\n",
}


@pytest.mark.parametrize("spelling", BUILTIN_SPELLINGS)
@pytest.mark.parametrize("builtin", DENIED_BUILTINS)
def test_denied_builtins_are_refused_wherever_they_can_be_reached(builtin: str,
                                                                  spelling: str) -> None:
    assert "dynamic-code" in rules(BUILTIN_SPELLINGS[spelling].format(b=builtin))


@pytest.mark.parametrize("builtin", DENIED_BUILTINS + NAME_TAKING_BUILTINS)
def test_builtin_names_bound_in_a_function_are_the_candidates_own(builtin: str) -> None:
    src = (f"def f({builtin}, y):\n    return {builtin}(y)\n"
           f"def g(xs):\n    return [{builtin}(1) for {builtin} in xs]\n"
           f"def h():\n    {builtin} = len\n    def inner():\n        return {builtin}('ab')\n"
           f"    return inner\nk = lambda {builtin}: {builtin}(2)\n")
    assert check(src) == []


@pytest.mark.parametrize("builtin", NAME_TAKING_BUILTINS)
def test_getattr_and_setattr_passed_around_are_refused(builtin: str) -> None:
    assert "dynamic-attribute" in rules(f"f = {builtin}\n")
    assert "dynamic-attribute" in rules(f"import functools\nf = functools.reduce({builtin}, "
                                        "('a', 'b'), object)\n")
    assert "dynamic-attribute" in rules(f"x = {builtin}(object, 'a' + 'b')\n")


@pytest.mark.parametrize("spelling", ["x = {n}\n", "x = {n}['open']\n", "x = {n}.open\n",
                                      "import torch as {n}\n", "from math import pi as {n}\n",
                                      "def {n}():\n    pass\n", "class {n}:\n    pass\n",
                                      "def f({n}):\n    pass\n", "{n} = {{}}\n"])
@pytest.mark.parametrize("name", ESCAPE_NAMES)
def test_escape_names_are_refused(name: str, spelling: str) -> None:
    assert "introspection" in rules(spelling.format(n=name))


# ---- attributes ---------------------------------------------------------------------------------
ATTRIBUTE_SPELLINGS = {
    "attribute": "def f(x):\n    return x.{a}\n",
    "chained": "x = ().{a}\n",
    "on_a_module": "import torch\nx = torch.{a}\n",
    "literal_getattr": "def f(x):\n    return getattr(x, '{a}')\n",
    "literal_getattr_on_module": "import math\nx = getattr(math, '{a}')\n",
    "hasattr_or_setattr": "def f(x):\n    setattr(x, '{a}', None)\n",
    "attrgetter": "import operator\ng = operator.attrgetter('x.{a}')\n",
    "type_dict_key": "C = type('C', (), {{'{a}': 1}})\n",
    "match_class": "def f(x):\n    match x:\n        case object({a}=y):\n            return y\n",
    "store": "def f(x):\n    x.{a} = None\n",
    "jit_body": "import triton\n@triton.jit\ndef k(x):\n    y = x.{a}\n",
    "default": "def f(x=().{a}):\n    return x\n",
}


@pytest.mark.parametrize("spelling", ATTRIBUTE_SPELLINGS)
@pytest.mark.parametrize("attr", ESCAPE_ATTRIBUTES)
def test_escape_attributes_are_refused(attr: str, spelling: str) -> None:
    assert "introspection" in rules(ATTRIBUTE_SPELLINGS[spelling].format(a=attr))


@pytest.mark.parametrize("attr", ESCAPE_MODULE_ATTRIBUTES)
def test_attributes_named_after_escape_modules_are_refused_on_any_object(attr: str) -> None:
    assert "module-escape" in rules(f"def f(x):\n    return x().{attr}.modules\n")
    assert "module-escape" in rules(f"def f(x):\n    return getattr(x, '{attr}')\n")


def _reachable_modules() -> Iterator[str]:
    """``root.path.attr`` for every module that is not allowed, one or two hops from an allowed
    module (``typing.sys``, ``torch.cuda.os``, ``triton.language.core.builtins`` …)."""
    def allowed(name: str) -> bool:
        root = name.split(".")[0]
        if root == "triton":  # and the packages on the way to an allowed name
            return name.startswith(("triton.language", "triton.tools.tensor_descriptor")) \
                or name in ("triton.runtime", "triton.tools")
        return root in ALLOWED_ROOTS

    __import__("triton.language.extra.libdevice")
    __import__("triton.tools.tensor_descriptor")
    frontier = [(root, sys.modules[root]) for root in ALLOWED_ROOTS if root in sys.modules]
    for _ in range(2):
        nxt = []
        for path, module in frontier:
            for attr, value in sorted(vars(module).items()):
                if not isinstance(value, types.ModuleType):
                    continue
                if not allowed(value.__name__):
                    yield f"{path}.{attr}"
                elif not attr.startswith("_"):
                    nxt.append((f"{path}.{attr}", value))
        frontier = nxt


@pytest.mark.filterwarnings("ignore::FutureWarning")  # deprecated torch.distributed names
def test_modules_reached_through_allowed_modules_are_refused() -> None:
    paths = sorted(set(_reachable_modules()))
    assert len(paths) > 20  # typing.sys, torch.os, dataclasses.inspect, tl.core.builtins …
    missed = [p for p in paths if not rules(f"import {p.split('.')[0]}\nx = {p}\n")]
    assert missed == []


@pytest.mark.parametrize("name", PRIVATE_NAMES)
def test_private_names_of_libraries_are_refused(name: str) -> None:
    root = name.split(".")[0]
    assert "library-internals" in rules(f"import {root}\nx = [{name}]\n")
    assert "library-internals" in rules(f"from {name.rpartition('.')[0]} import "
                                        f"{name.rpartition('.')[2]}\n")


# ---- triton -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", TRITON_REFUSED)
def test_triton_outside_the_allow_list_is_refused(name: str) -> None:
    assert "triton-internals" in rules(f"import triton\nx = [triton.{name}]\n")
    assert "triton-internals" in rules(f"import triton\ndef f():\n    triton.{name}()\n")
    if name not in ("runtime", "runtime.driver", "runtime.driver.active", "tools"):
        head, _, leaf = f"triton.{name}".rpartition(".")  # importing a path to an allowed name
        assert "triton-internals" in rules(f"from {head} import {leaf}\n")


def test_every_other_triton_name_is_refused() -> None:
    allowed = {e.split(".")[0] for e in TRITON_ALLOWED}
    missed = [n for n in dir(triton) if n not in allowed and n not in ("__doc__", "__name__")
              and not rules(f"import triton\nx = triton.{n}\n")]
    assert missed == []


@pytest.mark.parametrize("source", [
    "import triton.language as tl\nf = tl.core.builtins.open\n",
    "import triton.language as tl\nk = tl.core.knobs\n",
    "import triton.language as tl\ni = tl.core.inspect\n",
    "import triton\n@triton.jit\ndef k(x):\n    triton.knobs.runtime.interpret = True\n",
    "from triton.runtime import driver\nu = driver.active.utils.load_binary\n",
    "import triton\nd = triton.runtime.driver\nd.active.launcher_cls\n",
    "import triton.runtime.jit\n",
    "import triton.compiler.compiler as c\n",
])
def test_triton_escapes_are_refused(source: str) -> None:
    assert rules(source) & {"triton-internals", "module-escape"}


# ---- torch --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", TORCH_REFUSED)
def test_refused_torch_names_are_refused_called_or_not(name: str) -> None:
    rule = TORCH_REFUSED[name]
    for kind in Kind:
        assert rule in rules(f"import torch\nx = [torch.{name}]\n", kind)
        assert rule in rules(_body(f"return torch.{name}(self)"), kind)
    head, _, leaf = f"torch.{name}".rpartition(".")
    assert rule in rules(f"from {head} import {leaf}\n")


def _torch_callables() -> Iterator[str]:
    for module, prefix in [(torch, ""), (torch.cuda, "cuda."), (torch.nn.functional,
                                                                 "nn.functional."),
                           (torch.linalg, "linalg."), (torch.special, "special."),
                           (torch.fft, "fft.")]:
        for n in dir(module):
            if not n.startswith("_") and callable(getattr(module, n, None)):
                yield prefix + n


@pytest.mark.parametrize("kind", list(Kind))
def test_torch_calls_outside_the_kinds_list_are_refused(kind: Kind) -> None:
    allowed = set(TORCH_BASE) | set(TORCH_VIEW_EXTRA if kind is Kind.VIEW else []) \
        | set(TORCH_RANDOM_EXTRA if kind is Kind.RANDOM else [])
    if kind is Kind.ALLOC:
        allowed -= set(TORCH_ALLOC_DENIED)
    names = [n for n in _torch_callables() if n not in allowed and n not in TORCH_DTYPES]
    assert len(names) > 500
    missed = [n for n in names if not check(_body(f"return torch.{n}(self)"), kind)]
    assert missed == []


@pytest.mark.parametrize("name", TORCH_ALLOC_DENIED)
def test_alloc_problems_may_not_call_the_allocator_that_is_the_answer(name: str) -> None:
    assert rules(_body(f"return torch.{name}(self.shape)"), Kind.ALLOC) == {"torch-call"}
    assert check(_body(f"return torch.{name}(self.shape)"), Kind.COMPUTE) == []


@pytest.mark.parametrize("name", TORCH_VIEW_EXTRA + TORCH_RANDOM_EXTRA)
def test_view_and_random_names_are_only_for_their_kind(name: str) -> None:
    own = Kind.VIEW if name in TORCH_VIEW_EXTRA else Kind.RANDOM
    assert check(_body(f"return torch.{name}(self)"), own) == []
    for kind in set(Kind) - {own}:
        assert rules(_body(f"return torch.{name}(self)"), kind) == {"torch-call"}


# ---- compute ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", COMPUTE_METHODS + ARITHMETIC_DUNDERS)
def test_tensor_methods_that_compute_are_refused_outside_triton(name: str) -> None:
    assert rules(_body(f"return self.{name}(other)")) == {"tensor-method"}
    assert "tensor-method" in rules(_body(f"return getattr(self, '{name}')(other)"))
    jit = f"import triton\n@triton.jit\ndef k(x):\n    y = x.{name}(1)\n"
    assert check(jit) == []


def test_attrgetter_of_a_compute_method_is_refused() -> None:
    assert "tensor-method" in rules("import operator\ng = operator.attrgetter('sum')\n")
    assert "dynamic-attribute" in rules("import operator\ng = operator.attrgetter('s' + n)\n")
    assert check("import operator\ng = operator.attrgetter('shape', 'dtype')\n") == []


@pytest.mark.parametrize("name", CPU_ROUND_TRIPS)
def test_cpu_round_trips_are_refused(name: str) -> None:
    for kind in Kind:
        found = rules(_body(f"v = self.{name}()\nreturn self"), kind)
        assert found == {"cpu-roundtrip"}


def test_item_is_left_to_the_dispatch_guard() -> None:
    """``.item()`` is judged when it runs, by what it reads (test_dispatch_guard.py: allowed on
    the candidate's own kernel results, refused on inputs and torch results): no static finding
    in any kind."""
    assert all(check(_body("v = self.item()\nreturn self"), k) == [] for k in Kind)


@pytest.mark.parametrize("name", OPERATOR_REFUSED)
def test_operator_spellings_are_refused_called_or_not(name: str) -> None:
    assert OPERATOR_REFUSED[name] in rules(f"import operator\nf = [{name}]\n")
    assert OPERATOR_REFUSED[name] in rules(_body(f"import operator\nreturn {name}('x')"))


@pytest.mark.parametrize("name", EVALUATING_NAMES)
def test_string_evaluators_are_refused(name: str) -> None:
    assert "dynamic-code" in rules(f"import typing\nf = {name}\n")
    assert "dynamic-code" in rules(f"from typing import {name.split('.')[1]}\n")


# ---- the ways around the filter that are closed, one test each ----------------------------------
BYPASSES = {
    "default_value_import": ("def f(x=__import__('os')):\n    return x\n", "dynamic-code"),
    "annotation_runs_code": ("def f(x: exec('1')):\n    pass\n", "dynamic-code"),
    "string_annotation_for_get_type_hints":
        ("def f(x: \"__import__('os').system('id')\"):\n    pass\n", "dynamic-code"),
    "jit_parameter_default": ("import triton\n@triton.jit\ndef k(x, B=open('/etc/passwd')):\n"
                              "    pass\n", "dynamic-code"),
    "jit_body_runs_as_python_in_the_interpreter":
        ("import triton\n@triton.jit\ndef k(x):\n    open('/etc/passwd')\n", "dynamic-code"),
    "triton_driver_loads_a_binary":
        ("import triton\ntriton.runtime.driver.active.utils.load_binary('k', b'', 0, 0)\n",
         "triton-internals"),
    "triton_knobs_unhook_launches":
        ("import triton\nh = triton.knobs.runtime.launch_enter_hook\n", "triton-internals"),
    "triton_language_reaches_builtins":
        ("import triton.language as tl\ntl.core.builtins.open('/etc/passwd')\n", "module-escape"),
    "builtins_subscript": ("__builtins__['open']('/etc/passwd')\n", "introspection"),
    "builtins_attribute": ("__builtins__.open('/etc/passwd')\n", "introspection"),
    "import_as_builtins": ("import torch as __builtins__\n", "introspection"),
    "open_alias": ("o = open\no('/etc/passwd')\n", "dynamic-code"),
    "getattr_alias": ("g = getattr\ng(object, 'x')\n", "dynamic-attribute"),
    "getattr_of_builtins": ("f = getattr(__builtins__, 'open')\n", "introspection"),
    "literal_getattr_of_globals": ("def f(g):\n    return getattr(g, '__globals__')\n",
                                   "introspection"),
    "subclasses_walk": ("x = ().__class__.__base__.__subclasses__()\n", "introspection"),
    "bound_builtin_self": ("m = len.__self__\n", "introspection"),
    "traceback_frames": ("try:\n    1 / 0\nexcept Exception as e:\n"
                         "    g = e.__traceback__.tb_frame.f_back.f_globals\n", "introspection"),
    "lambda_default": ("f = lambda x=open('/x'): x\n", "dynamic-code"),
    "decorator_argument": ("import functools\n@functools.lru_cache(maxsize=eval('1'))\n"
                           "def f():\n    pass\n", "dynamic-code"),
    "class_body": ("class C:\n    x = open('/x')\n", "dynamic-code"),
    "comprehension_shadowing_its_iterable": ("x = [open for open in open('/x')]\n",
                                             "dynamic-code"),
    "match_class_pattern_reads_torch_ops":
        ("import torch\nmatch torch:\n    case object(ops=o):\n        o.aten.add\n", "torch-ops"),
    "match_class_pattern_reads_globals":
        ("def f(g):\n    match g:\n        case object(__globals__=gl):\n            return gl\n",
         "introspection"),
    "vars_with_a_built_name": ("x = vars()['__buil' + 'tins__']\n", "dynamic-code"),
    "type_made_class_with_open": ("C = type('C', (), {'f': staticmethod(open)})\n",
                                  "dynamic-code"),
    "functools_partial_open": ("import functools\nf = functools.partial(open, '/x')\n",
                               "dynamic-code"),
    "attrgetter_globals": ("import operator\ng = operator.attrgetter('__globals__')\n",
                           "introspection"),
    "attrgetter_computed": ("import operator\ng = operator.attrgetter('__glo' + n)\n",
                            "dynamic-attribute"),
    "importlib_through_typing_sys":
        ("import typing\ntyping.sys.modules['importlib'].import_module('os')\n",
         "module-escape"),
    "os_through_torch": ("import torch\n(torch.os,)[0].system('id')\n", "module-escape"),
    "inspect_through_dataclasses": ("import dataclasses\ndataclasses.inspect.currentframe()\n",
                                    "module-escape"),
    "sys_through_a_container": ("import typing\nx = [typing][0].sys.modules\n", "module-escape"),
    "get_type_hints": ("import typing\ntyping.get_type_hints(f)\n", "dynamic-code"),
    "update_wrapper_copies_a_dict": ("import functools\nfunctools.update_wrapper(a, b, "
                                     "updated=('__dict__',))\n", "introspection"),
    "singledispatch_annotations": ("def f(g):\n    g.__annotations__['x'] = \"open('/x')\"\n",
                                   "introspection"),
    "cpp_extension_through_a_container":
        ("import torch\n[torch.utils.cpp_extension][0].load_inline('x', '')\n",
         "library-internals"),
    "object_setattr_on_a_module": ("import torch\nobject.__setattr__(torch, 'empty', None)\n",
                                   "introspection"),
    "monkeypatch_in_tuple_target": ("import torch\ntorch.empty, x = None, 1\n", "monkeypatch"),
    "monkeypatch_in_for_target": ("import torch\nfor torch.cuda.synchronize in [None]:\n"
                                  "    pass\n", "monkeypatch"),
    "monkeypatch_in_annotated_assignment": ("import torch\ntorch.cuda.synchronize: int = 1\n",
                                            "monkeypatch"),
    "monkeypatch_by_del": ("import torch\ndel torch.cuda.synchronize\n", "monkeypatch"),
    "monkeypatch_in_with_target": ("import torch\nwith open_ctx() as torch.empty:\n    pass\n",
                                   "monkeypatch"),
    "walrus_alias": ("import torch\ndef f(x):\n    (F := torch.nn.functional)\n"
                     "    return F.softmax(x, -1)\n", "torch-call"),
    "utf7_coding_hides_code": ("# -*- coding: utf-7 -*-\nx = 1  #+AAo-print(1)\n", "encoding"),
    "loader_reads_files": ("d = __loader__.get_data('/etc/passwd')\n", "introspection"),
    "torch_stream_without_cuda": ("import torch\ns = torch.Stream()\n", "stream"),
    "match_args_turns_a_class_pattern_into_getattr":
        ("class C:\n    __match_args__ = ('__glo' + 'bals__',)\n", "introspection"),
}


@pytest.mark.parametrize("name", BYPASSES)
def test_closed_bypass(name: str) -> None:
    source, rule = BYPASSES[name]
    assert rule in rules(source), check(source)


def test_nesting_too_deep_to_walk_is_refused_not_raised() -> None:
    assert rules("x = y" + ".a" * 2000 + "\n") == {"nesting"}
    assert rules("x = 1" + " + 1" * 2000 + "\n") == {"nesting"}
    assert check("x = 1" + " + 1" * 200 + "\n") == []


@pytest.mark.parametrize("coding, refused", [("utf-8", False), ("utf8", False), ("UTF-8", False),
                                             ("utf-7", True), ("latin-1", True),
                                             ("cp1252", True), ("no-such-codec", True)])
def test_only_utf8_coding_declarations_pass(coding: str, refused: bool) -> None:
    for src in (f"# -*- coding: {coding} -*-\nx = 1\n", f"#!/usr/bin/env python\n# coding={coding}\n"):
        assert (rules(src) == {"encoding"}) is refused


# ---- the rules as they were ---------------------------------------------------------------------
@pytest.mark.parametrize("code, rule", [
    ("return torch.matmul(self, other)", "torch-call"),
    ("return torch.add(self, other, alpha=alpha)", "torch-call"),
    ("return torch.nn.functional.relu(self)", "torch-call"),
    ("return torch.ops.aten.add(self, other)", "torch-ops"),
    ("return self.add_(other)", "tensor-method"),
    ("return self.__matmul__(other)", "tensor-method"),
    ("return self.addmm_(other, other)", "tensor-method"),
    ("return torch.__dict__['ops'].aten.add(self, other)", "introspection"),
    ("return self.sum() + other", "tensor-method"),
    ("return self @ other", "matmul-operator"),
    ("return torch.tensor(self.cpu().numpy())", "cpu-roundtrip"),
    ("v = self.tolist()\nreturn self", "cpu-roundtrip"),
    ("return eval('torch.add')(self, other)", "dynamic-code"),
    ("return getattr(torch, 'ma' + 'tmul')(self, other)", "dynamic-attribute"),
    ("return getattr(torch, 'matmul')(self, other)", "torch-call"),
    ("return getattr(self, 'sum')()", "tensor-method"),
    ("torch.empty = lambda *a, **k: self\nreturn self", "monkeypatch"),
    ("torch.cuda.synchronize += 1\nreturn self", "monkeypatch"),
    ("setattr(torch, 'empty', None)\nreturn self", "monkeypatch"),
    ("triton.testing.do_bench = None\nreturn self", "monkeypatch"),
    ("s = torch.cuda.Stream()\nreturn self", "stream"),
    ("g = torch.cuda.CUDAGraph()\nreturn self", "cuda-graph"),
    ("return torch.compile(lambda a, b: a + b)(self, other)", "cuda-graph"),
])
def test_cheat_patterns_are_caught(code: str, rule: str) -> None:
    found = check(_body(code))
    assert rule in {v.rule for v in found}, found
    assert all(v.line > 0 and v.evidence for v in found)


@pytest.mark.parametrize("source, rule", [
    ("import torch as T\n\ndef f(x):\n    return T.matmul(x, x)\n", "torch-call"),
    ("from torch import matmul as mm\n\ndef f(x):\n    return mm(x, x)\n", "torch-call"),
    ("import torch\nF = torch.nn.functional\n\ndef f(x):\n    return F.softmax(x, -1)\n",
     "torch-call"),
    ("import torch\nop = torch.cumsum\n\ndef f(x):\n    return op(x, 0)\n", "torch-call"),
    ("x = __import__('os')\n", "dynamic-code"),
    ("g = globals()\n", "dynamic-code"),
    ("f = open('/etc/passwd')\n", "dynamic-code"),
])
def test_aliases(source: str, rule: str) -> None:
    assert rule in rules(source)


def test_violations_carry_rule_line_and_evidence() -> None:
    src = "import torch\n\n\ndef f(x=open('/x')):\n    return x\n"
    (v,) = check(src)
    assert (v.rule, v.line, v.evidence) == ("dynamic-code", 4, "def f(x=open('/x')):")
    assert v.describe().startswith("line 4: `open` is not allowed")
    (s,) = check('def f(x: """list[\n  open(\'/x\')]"""):\n    pass\n')
    assert (s.rule, s.line) == ("dynamic-code", 2)


@pytest.mark.parametrize("rule", WARNING_RULES)
def test_rules_a_runtime_layer_backs_up_are_warnings(rule: str) -> None:
    source = {"torch-call": "return torch.equal(self, other)",
              "tensor-method": "return self.sum()", "matmul-operator": "return self @ other",
              "cpu-roundtrip": "return self.numpy()"}[rule]
    (v,) = check(_body(source))
    assert v.rule == rule and v.warning
    (e,) = check(_body("import os\nreturn self"))
    assert e.rule == "import" and not e.warning


def test_function_forms_of_views_and_harmless_modules_pass() -> None:
    src = ("import logging\nimport math\nimport functools\nimport itertools\nimport typing\n"
           "import dataclasses\nimport enum\nimport operator\nimport collections\n"
           "import torch\nlog = logging.getLogger(__name__)\n\n\n"
           "def f(t, shape):\n    log.debug('f %s', shape)\n"
           "    a = torch.squeeze(t, 0)\n    b = torch.reshape(a, shape)\n"
           "    return torch.flatten(torch.transpose(torch.unsqueeze(b, 0), 0, 1))\n")
    assert all(check(src, k) == [] for k in Kind)


@pytest.mark.parametrize("source", ["import logging.config\n", "from logging import handlers\n",
                                    "from logging.config import listen\n",
                                    "import logging\nlogging.config.fileConfig('x')\n"])
def test_logging_parts_that_load_code_are_refused(source: str) -> None:
    assert "library-internals" in rules(source)


def test_kind_specific_rules() -> None:
    zeros = _body("return torch.zeros(self.shape)")
    assert check(zeros, Kind.COMPUTE) == []
    assert {v.rule for v in check(zeros, Kind.ALLOC)} == {"torch-call"}
    view = _body("return torch.expand_copy(self, (2, 2))")
    assert check(view, Kind.VIEW) == [] and check(view, Kind.COMPUTE)
    # how an honest kernel reaches complex data, in any kind
    pairs = _body("r = torch.view_as_real(self)\nreturn torch.view_as_complex(r)")
    assert all(check(pairs, k) == [] for k in Kind)


def test_triton_code_is_left_to_the_compiler_but_not_its_escapes() -> None:
    src = ("import triton\nimport triton.language as tl\n\n@triton.jit\n"
           "def k(x_ptr, BLOCK: tl.constexpr):\n    v = tl.load(x_ptr + tl.arange(0, BLOCK))\n"
           "    s = tl.sum(v, axis=0) + v.sum(0) + (v @ v).max()\n"
           "    tl.store(x_ptr, s.to(tl.float32))\n")
    assert check(src) == []
    assert rules(src.replace("    tl.store", "    x_ptr.__globals__\n    tl.store")) \
        == {"introspection"}


@pytest.fixture(scope="module")
def static_agent(agent_secret_env: None) -> Iterator[str]:
    with running_agent() as address:
        yield address


def test_agent_rejects_with_rule_and_line(static_agent: str) -> None:
    """An escape rule rejects; a warning-level rule in code nobody calls (an extra overload)
    leaves an honest candidate PASSED, the warning recorded in its findings."""
    cheat = _body("import subprocess\nreturn self") + "\n\nadd_Scalar = add_out = add_Tensor\n"
    spec = operators.get("aten::add")
    unreached = spec.solution + ("\n\ndef _same(a, b):\n    return torch.equal(a, b)\n"
                                 if "import torch" in spec.solution else "")

    async def go() -> None:
        async with AgentClient(static_agent) as c:
            v = await c.evaluate(EvalRequest(uuid.uuid4().hex, spec.id, cheat.encode()), timeout=60)
            assert v.status is Status.REJECTED
            assert v.findings and v.findings[0].layer == "static"
            assert v.findings[0].rule == "import" and "line 7" in v.findings[0].evidence
            assert not v.findings[0].warning and "subprocess" in v.message
            ok = await c.evaluate(EvalRequest(uuid.uuid4().hex, spec.id, unreached.encode()),
                                  timeout=120)
            assert ok.status is Status.PASSED, ok.message
            (w,) = ok.findings
            assert (w.layer, w.rule, w.severity) == ("static", "torch-call", "warning")
            assert "torch.equal" in w.evidence

    asyncio.run(go())
