"""The static policy layer: what a candidate's source may contain, checked before it runs.

An AST walk that follows aliases (``import torch as T``, ``from torch import matmul as mm``,
``F = torch.nn.functional``) and literal ``getattr``. It rejects, with the rule and the line:

- imports outside an allow-list (no os, sys, subprocess, ctypes, numpy, threading, importlib …);
- torch functions outside the kind's allow-list, ``torch.ops``, streams, CUDA graphs,
  ``torch.compile``;
- tensor methods that compute (``x.sum()``, ``x.matmul(y)`` …) and the ``@`` operator;
- CPU round trips (``.cpu()``, ``.numpy()``, ``.tolist()``; ``.item()`` except for scalar problems);
- dynamic code and introspection (``exec``, ``eval``, ``__import__``, ``globals`` …, a
  ``getattr`` whose name is not a literal);
- monkeypatching (assigning to, or ``setattr`` on, an imported module).

Code inside ``@triton.jit`` functions is Triton and is left to the compiler. What a static check
cannot see (``a + b`` on tensors, disguised calls) is the runtime layer's job.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from operators.spec import Kind

ALLOWED_IMPORT_ROOTS = frozenset({
    "torch", "triton", "math", "cmath", "functools", "typing", "itertools", "operator",
    "dataclasses", "collections", "numbers", "enum", "abc", "__future__", "warnings", "copy",
})
# torch.* callables a compute problem's wrappers may use: allocation, views, metadata.
_TORCH_ALLOWED = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "broadcast_tensors", "broadcast_shapes", "broadcast_to", "is_tensor",
    "is_floating_point", "is_complex", "result_type", "promote_types", "can_cast",
    "get_default_dtype", "finfo", "iinfo", "device", "dtype", "Size", "Generator",
    "cuda.is_available", "cuda.current_device", "cuda.device_count", "cuda.get_device_properties",
    "cuda.get_device_capability", "cuda.get_device_name", "cuda.device", "cuda.set_device",
    "cuda.synchronize", "version.hip", "no_grad", "inference_mode",
    "tensor",  # a small tensor of Python values (shapes, strides) for a kernel to read
    "view_as_real", "view_as_complex",  # views: how a kernel reaches complex data
})
_TORCH_ALLOWED_BY_KIND: dict[Kind, frozenset[str]] = {
    # a random op seeds its kernels from torch's seed (plus its own call counter)
    Kind.RANDOM: frozenset({"initial_seed"}),
    Kind.VIEW: frozenset({"as_strided", "narrow", "select", "t", "reshape", "unsqueeze",
                          "squeeze", "permute", "transpose", "flatten", "expand_copy"}),
}
_TORCH_DENIED_BY_KIND: dict[Kind, frozenset[str]] = {
    # An allocation problem may not call the allocator that *is* the answer (issue #7 refines).
    Kind.ALLOC: frozenset({"zeros", "zeros_like", "ones", "ones_like", "full", "full_like"}),
}
# Tensor methods that compute an answer, and their in-place ``_`` forms. Names shared with
# Python's own containers and strings (add, sort, split, index, count, copy …) are left to the
# runtime layer to avoid flagging honest code such as ``seen.add(key)``.
_COMPUTE_NAMES = frozenset({
    "abs", "abs_", "acos", "acosh", "add_", "addcdiv", "addcmul", "addmm", "addmv",
    "all", "amax", "amin", "any", "argmax", "argmin", "argsort", "asin", "atan", "atan2", "baddbmm",
    "bernoulli", "bernoulli_", "bmm", "ceil", "clamp", "clamp_", "clip", "cos", "cosh", "cross",
    "cummax", "cummin", "cumprod", "cumsum", "cumsum_", "diff", "digamma", "div", "div_", "dot",
    "eq", "erf", "erfc", "erfinv", "exp", "exp_", "exp2", "expm1", "exponential_", "fmax", "fmin",
    "floor", "floor_divide", "fmod", "frac", "gather", "ge", "gt", "heaviside", "hypot", "i0",
    "index_add", "index_add_", "index_copy", "index_fill", "index_put", "index_put_",
    "index_select", "kthvalue", "le", "lerp", "lgamma", "log", "log10", "log1p", "log2",
    "log_softmax", "logaddexp", "logaddexp2", "logcumsumexp", "logical_and", "logical_not",
    "logical_or", "logit", "logsumexp", "lt", "masked_fill", "masked_fill_", "masked_scatter",
    "masked_select", "matmul", "max", "maximum", "mean", "median", "min", "minimum", "mm", "mul",
    "mul_", "mv", "nan_to_num", "nanmean", "nansum", "ne", "neg", "neg_", "norm", "normal_",
    "outer", "polygamma", "pow", "pow_", "prod", "reciprocal", "relu", "remainder", "renorm",
    "repeat", "repeat_interleave", "roll", "rot90", "round", "rsqrt", "scatter", "scatter_",
    "scatter_add", "scatter_add_", "sigmoid", "sign", "sgn", "sin", "sinh", "softmax", "sqrt",
    "square", "std", "sub", "sub_", "sum", "tan", "tanh", "tensordot", "topk", "trace", "tril",
    "triu", "true_divide", "trunc", "uniform_", "var", "where", "xlogy", "msort", "unique",
    "bincount", "histc", "flip", "fliplr", "flipud", "take", "take_along_dim", "einsum",
    "addbmm", "addr", "cumulative_trapezoid", "logical_xor", "sinc", "softplus",
    "rsub", "float_power", "copysign", "nextafter", "ldexp", "frexp", "kron",
    "chain_matmul", "inner", "vdot", "cov", "corrcoef", "cdist", "dist",
})
COMPUTE_METHODS = _COMPUTE_NAMES | {n + "_" for n in _COMPUTE_NAMES if not n.endswith("_")}
# Arithmetic dunders: ``a.__matmul__(b)`` is ``a @ b`` spelled so the operator is not visible.
DUNDER_ARITHMETIC = frozenset(
    f"__{r}{op}__" for op in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow",
                              "neg", "abs", "and", "or", "xor", "lshift", "rshift")
    for r in ("", "r", "i"))
# operator-module spellings of torch compute and of dynamic method calls.
_OPERATOR_DENIED = frozenset({"operator.matmul", "operator.imatmul", "operator.methodcaller"})
# Attributes that reach a module's or function's internals.
_INTROSPECTION_ATTRS = frozenset({"__dict__", "__globals__", "__builtins__", "__code__",
                                  "__closure__", "__getattribute__", "__subclasses__"})
CPU_ROUND_TRIPS = frozenset({"cpu", "numpy", "tolist", "item"})
_DYNAMIC_BUILTINS = frozenset({"exec", "eval", "compile", "__import__", "globals", "locals",
                               "vars", "breakpoint", "input", "open", "delattr"})
_JIT_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics",
                             "triton.language.core.builtin"})


@dataclass(frozen=True)
class Violation:
    rule: str
    line: int
    evidence: str
    explanation: str

    def describe(self) -> str:
        return f"line {self.line}: {self.explanation} (`{self.evidence}`)"


class _Checker(ast.NodeVisitor):
    def __init__(self, source: str, kind: Kind) -> None:
        self.lines = source.splitlines()
        self.kind = kind
        self.aliases: dict[str, str] = {}  # local name -> qualified module/object name
        self.violations: list[Violation] = []
        allowed = set(_TORCH_ALLOWED) | set(_TORCH_ALLOWED_BY_KIND.get(kind, frozenset()))
        self.torch_allowed = frozenset(allowed - _TORCH_DENIED_BY_KIND.get(kind, frozenset()))

    # ---- helpers ------------------------------------------------------------------------------
    def flag(self, node: ast.AST, rule: str, explanation: str) -> None:
        line = getattr(node, "lineno", 0)
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.violations.append(Violation(rule, line, text[:160], explanation))

    def qualname(self, node: ast.AST) -> str | None:
        """``torch.nn.functional.relu`` for an attribute chain rooted at a known alias."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            root = self.aliases.get(node.id)
            if root is None:
                return None
            return ".".join([root, *reversed(parts)])
        return None

    def _is_jit(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        for d in fn.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            q = self.qualname(target)
            if q in _JIT_DECORATORS or (q or "").startswith("triton.language"):
                return True
        return False

    # ---- imports and aliases -----------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            root = a.name.split(".")[0]
            if root not in ALLOWED_IMPORT_ROOTS:
                self.flag(node, "import", f"import of `{a.name}` is not allowed")
            if a.asname:
                self.aliases[a.asname] = a.name
            else:
                self.aliases[root] = root

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        if node.level or mod.split(".")[0] not in ALLOWED_IMPORT_ROOTS:
            self.flag(node, "import", f"import from `{'.' * node.level}{mod}` is not allowed")
        for a in node.names:
            if a.name == "*":
                self.flag(node, "import", "star imports hide what is used")
                continue
            self.aliases[a.asname or a.name] = f"{mod}.{a.name}"

    def visit_Assign(self, node: ast.Assign) -> None:
        q = self.qualname(node.value)
        for t in node.targets:
            if isinstance(t, ast.Name) and q is not None:
                self.aliases[t.id] = q  # F = torch.nn.functional; mm = torch.matmul
            if isinstance(t, ast.Attribute) and self.qualname(t.value) is not None:
                self.flag(node, "monkeypatch",
                          f"assigning to `{self.qualname(t)}` changes a library or the harness")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Attribute) and self.qualname(node.target.value) is not None:
            self.flag(node, "monkeypatch", "modifying an imported module's attribute")
        self.generic_visit(node)

    # ---- functions ---------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        if self._is_jit(node):
            return  # Triton code: the compiler decides what is valid in there
        for stmt in node.body:
            self.visit(stmt)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    # ---- expressions -------------------------------------------------------------------------
    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self.flag(node, "matmul-operator", "`@` computes a matrix product with torch")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        q = self.qualname(func)
        if isinstance(func, ast.Name) and func.id in _DYNAMIC_BUILTINS and func.id not in self.aliases:
            self.flag(node, "dynamic-code", f"`{func.id}` is not allowed")
        elif isinstance(func, ast.Name) and func.id in ("getattr", "setattr"):
            self._check_getattr(node, func.id)
        elif q is not None:
            self._check_qualified(node, q)
        elif isinstance(func, ast.Attribute):
            self._check_method(node, func.attr)
        self.generic_visit(node)

    def _check_getattr(self, node: ast.Call, which: str) -> None:
        if len(node.args) < 2 or not (isinstance(node.args[1], ast.Constant)
                                      and isinstance(node.args[1].value, str)):
            self.flag(node, "dynamic-attribute", f"`{which}` with a computed name hides what is used")
            return
        name = node.args[1].value
        base = self.qualname(node.args[0])
        if which == "setattr" and base is not None:
            self.flag(node, "monkeypatch", f"`setattr` on `{base}` changes a library or the harness")
        elif base is not None:
            self._check_qualified(node, f"{base}.{name}")
        elif name in COMPUTE_METHODS or name in CPU_ROUND_TRIPS:
            self._check_method(node, name)

    def _check_qualified(self, node: ast.AST, q: str) -> None:
        if q.startswith("torch."):
            name = q[len("torch."):]
            if name.startswith("ops."):
                self.flag(node, "torch-ops", f"`{q}` calls a library kernel directly")
            elif name in ("compile", "cuda.graph", "cuda.graphs", "cuda.CUDAGraph",
                          "cuda.make_graphed_callables") or name.startswith("cuda.graphs."):
                self.flag(node, "cuda-graph", f"`{q}` is not allowed (replay and compilation)")
            elif name in ("cuda.Stream", "cuda.stream", "cuda.set_stream", "cuda.Event",
                          "cuda.ExternalStream"):
                self.flag(node, "stream", f"`{q}`: work must run on the default stream")
            elif name.split(".")[-1] in ("float32", "float16", "bfloat16", "float64", "int32",
                                         "int64", "int8", "int16", "uint8", "bool", "complex64",
                                         "complex128", "float8_e4m3fn", "float8_e5m2"):
                return
            elif name not in self.torch_allowed:
                self.flag(node, "torch-call",
                          f"`{q}` computes with torch; compute in your own Triton kernels")
        elif q in _OPERATOR_DENIED:
            self.flag(node, "dynamic-attribute" if q.endswith("methodcaller") else "matmul-operator",
                      f"`{q}` computes with torch or calls a method by name")
        elif q.startswith("triton.") or q.split(".")[0] in ALLOWED_IMPORT_ROOTS - {"torch"}:
            return

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _INTROSPECTION_ATTRS:
            self.flag(node, "introspection",
                      f"`.{node.attr}` reaches into a module's or function's internals")
        self.generic_visit(node)

    def _check_method(self, node: ast.AST, name: str) -> None:
        if name in DUNDER_ARITHMETIC or name in COMPUTE_METHODS:
            self.flag(node, "tensor-method", f"`.{name}()` computes with torch; use a Triton kernel")
        elif name in CPU_ROUND_TRIPS and not (name == "item" and self.kind is Kind.SCALAR):
            self.flag(node, "cpu-roundtrip", f"`.{name}()` moves data to the host")


def check(source: str, kind: Kind | str = Kind.COMPUTE) -> list[Violation]:
    """Every policy violation in ``source`` (which must parse), in line order."""
    tree = ast.parse(source)
    checker = _Checker(source, Kind(kind))
    checker.visit(tree)
    return sorted(checker.violations, key=lambda v: v.line)
