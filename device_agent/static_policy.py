"""The static policy layer: what a candidate's source may contain, checked before it runs.

An AST walk over the whole file (the tables are in ``static_tables.py``). It follows aliases
(``import torch as T``, ``from torch import matmul as mm``, ``F = torch.nn.functional``,
``(F := torch.nn.functional)``, a literal ``getattr`` and match class patterns) and rejects, with
the rule and the line:

- ``import``: imports outside an allow-list (no os, sys, subprocess, ctypes, importlib, inspect …);
- ``encoding``: a coding declaration other than UTF-8 (the worker would decode the file differently
  from what was checked); ``nesting``: expressions nested too deeply to walk (fail closed);
- ``torch-call``: torch functions outside the kind's allow-list; ``torch-ops``, ``cuda-graph``,
  ``stream``, ``library-internals``: ``torch.ops``, graphs and ``torch.compile``, streams and events,
  private torch and its native-code loaders (cpp_extension, hub, load, jiterator …), wherever they
  are named, called or not;
- ``triton-internals``: ``triton.`` outside what honest wrappers use (jit, autotune, heuristics,
  Config, cdiv, next_power_of_2, language, exceptions, tensor descriptors, the tutorials' device
  queries): no other triton.runtime (the launcher, binaries), triton.compiler, triton.knobs,
  triton.testing;
- ``module-escape``: a module outside the allow-list reached through an allowed one
  (``typing.sys``, ``torch.os``, ``tl.core.builtins``), and attributes named after escape modules
  (``.os``, ``.sys``, ``.builtins`` …) on any object; ``library-internals`` also covers private names
  (``_x``) of allowed modules;
- ``introspection``: attributes that walk the type graph or reach namespaces, frames and code
  (``__class__``, ``__subclasses__``, ``__globals__``, ``__dict__``, ``__self__``, ``tb_frame`` …),
  whether written as an attribute, named by a string (``getattr(f, "__globals__")``,
  ``attrgetter("__globals__")``) or by a match class pattern; the names ``__builtins__``,
  ``__loader__``, ``__spec__``;
- ``dynamic-code``: ``exec``, ``eval``, ``compile``, ``__import__``, ``globals``, ``locals``, ``vars``,
  ``open`` … wherever the name can reach the builtin (``o = open``, ``partial(open, …)``), and
  typing's string evaluators; ``dynamic-attribute``: ``getattr``/``setattr`` with a computed name
  or passed around, ``operator.methodcaller``, ``operator.attrgetter`` with a computed name;
- ``monkeypatch``: assigning to, deleting or ``setattr`` on an attribute of an imported name, in any
  target position (tuple unpacking, ``for``/``with`` targets, annotated assignments);
- ``tensor-method``, ``matmul-operator``, ``cpu-roundtrip``: tensor methods that compute, ``@`` and
  ``operator.matmul``, ``.cpu()``/``.numpy()``/``.tolist()`` (``.item()`` reaches the dispatch
  guard, which judges what it reads: allowed on the candidate's own kernel results).

Every expression is inspected: default values and annotations (string annotations are parsed and
inspected too, since ``typing.get_type_hints`` and ``functools.singledispatch`` evaluate them),
decorators and their arguments, class bodies, lambdas, comprehensions, match patterns. Bodies of
``@triton.jit`` functions are Triton: the compiler (or, on ``cpu``, the interpreter, which runs
them as Python) decides what computes there, so only the escape rules apply inside them, not the
compute rules (tensor methods, torch calls, ``@``, CPU round trips).

Left to the sandbox and the runtime layers, deliberately: anything spelled out of sight of a
syntax tree. Names built at run time (``"__glo" + "bals__"`` given to a library that takes
attribute names, ``str.format`` field lookups), values passed through containers, returns or
object attributes (``[typing][0].re``: the alias is lost, only the escape module names above are
caught there), modules reached through torch submodules that torch imports lazily (the modules'
namespaces are read, nothing is imported), library helpers acting on the names or objects they
are given, a candidate's own ``jit`` shadowing ``triton.jit`` (its body then skips only the compute
rules), and every torch computation not spelled as a call (``a + b``,
``functools.reduce(torch.add, …)``), which the dispatch guard sees. The sandbox (private uid, no
network, nothing writable on ``sys.path``, seccomp, cgroups) must hold against all of it; this
layer only turns the easy spellings into ``REJECTED`` early, with a message a model can act on.
"""

from __future__ import annotations

import ast
import codecs
import io
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from device_agent.static_names import (
    escaped_module,
    is_private,
    names_in_string,
    triton_allowed,
)
from device_agent.static_scopes import (
    Comprehension,
    Scope,
    comprehension_scope,
    reaches_builtin,
    scope_of,
)
from device_agent.static_tables import (
    ALLOWED_IMPORT_ROOTS,
    COMPUTE_METHODS,
    CPU_ROUND_TRIPS,
    DENIED_BUILTINS,
    DUNDER_ARITHMETIC,
    ESCAPE_ATTRIBUTES,
    ESCAPE_MODULE_ATTRIBUTES,
    ESCAPE_NAMES,
    EVALUATING_NAMES,
    JIT_DECORATORS,
    MODULES_REFUSED,
    NAME_TAKING_BUILTINS,
    OPERATOR_REFUSED,
    TORCH_ALLOWED,
    TORCH_ALLOWED_BY_KIND,
    TORCH_DENIED_BY_KIND,
    TORCH_DTYPES,
    TORCH_REFUSED,
    WARNING_RULES,
)
from operators.spec import Kind

_Func = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Violation:
    rule: str
    line: int
    evidence: str
    explanation: str

    @property
    def warning(self) -> bool:
        """Recorded, not rejected: a runtime layer catches what the rule stands for."""
        return self.rule in WARNING_RULES

    def describe(self) -> str:
        return f"line {self.line}: {self.explanation} (`{self.evidence}`)"


def _declared_encoding(source: str) -> str | None:
    """The encoding a file with these contents is read in when imported, if not UTF-8."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source.encode("utf-8")).readline)
    except SyntaxError:
        return "an unknown encoding"
    return None if codecs.lookup(encoding).name in ("utf-8", "utf-8-sig") else encoding


# ---- the walk -----------------------------------------------------------------------------------
class _Checker(ast.NodeVisitor):
    def __init__(self, source: str, kind: Kind) -> None:
        self.lines = source.splitlines()
        self.kind = kind
        self.aliases: dict[str, str] = {}  # local name -> qualified module/object name
        self.violations: list[Violation] = []
        self.scopes: list[Scope] = []
        self.in_jit = False  # inside a @triton.jit body: escape rules only
        allowed = set(TORCH_ALLOWED) | set(TORCH_ALLOWED_BY_KIND.get(kind, frozenset()))
        self.torch_allowed = frozenset(allowed - TORCH_DENIED_BY_KIND.get(kind, frozenset()))

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

    def in_scope(self, scope: Scope, nodes: Iterable[ast.AST], jit: bool | None = None) -> None:
        saved = self.in_jit
        self.scopes.append(scope)
        self.in_jit = saved if jit is None else jit
        for n in nodes:
            self.visit(n)
        self.scopes.pop()
        self.in_jit = saved

    def bound(self, node: ast.AST, *names: str | None) -> None:
        """A name bound without a Name node (import, def, class, parameter, except, match)."""
        for name in names:
            if name in ESCAPE_NAMES:
                self.flag(node, "introspection",
                          f"binding `{name}` changes where the file's names resolve")

    def _is_jit(self, fn: _Func) -> bool:
        for d in fn.decorator_list:
            q = self.qualname(d.func if isinstance(d, ast.Call) else d)
            if q in JIT_DECORATORS or (q or "").startswith("triton.language"):
                return True
        return False

    # ---- scopes -------------------------------------------------------------------------------
    def visit_Module(self, node: ast.Module) -> None:
        self.in_scope(Scope("module"), node.body)

    def visit_FunctionDef(self, node: _Func) -> None:
        self.bound(node, node.name)
        for d in node.decorator_list:
            self.visit(d)
        self.visit_arguments(node.args)
        self.visit_annotation(node.returns)
        self.in_scope(scope_of("function", node.body, node.args), node.body,
                      jit=True if self._is_jit(node) else None)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit_arguments(node.args)
        self.in_scope(scope_of("function", [node.body], node.args), [node.body])

    def visit_arguments(self, node: ast.arguments) -> None:
        """Defaults and annotations run when the ``def`` runs, in the enclosing scope."""
        for d in [*node.defaults, *node.kw_defaults]:
            if d is not None:
                self.visit(d)
        for a in [*node.posonlyargs, *node.args, *node.kwonlyargs, node.vararg, node.kwarg]:
            if a is not None:
                self.bound(a, a.arg)
                self.visit_annotation(a.annotation)

    def visit_annotation(self, node: ast.expr | None) -> None:
        """An annotation, and the code in its strings (``get_type_hints`` evaluates them)."""
        if node is None:
            return
        self.visit(node)
        for text, line in self._annotation_strings(node):
            try:
                code = ast.parse(text.strip(), mode="eval")
            except SyntaxError:
                continue  # not code (``"*fp32"``): nothing can evaluate it
            ast.increment_lineno(code, line - 1)
            self.visit_annotation(code.body)

    def _annotation_strings(self, node: ast.AST) -> Iterator[tuple[str, int]]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value, node.lineno
        elif not (isinstance(node, ast.Subscript)
                  and (self.qualname(node.value) or "").endswith("Literal")):
            for child in ast.iter_child_nodes(node):  # Literal["open"] is a value, not code
                yield from self._annotation_strings(child)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.visit_annotation(node.annotation)
        self.visit(node.target)
        if node.value is not None:
            self.visit(node.value)
            self._alias(node.target, node.value)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.bound(node, node.name)
        for n in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(n)
        self.in_scope(scope_of("class", node.body), node.body)

    def _visit_comprehension(self, node: Comprehension) -> None:
        first, *rest = node.generators
        self.visit(first.iter)  # evaluated in the enclosing scope
        inner: list[ast.AST] = [first.target, *first.ifs]
        for gen in rest:
            inner += [gen.target, gen.iter, *gen.ifs]
        if isinstance(node, ast.DictComp):
            inner += [node.key, node.value]
        else:
            inner.append(node.elt)
        self.in_scope(comprehension_scope(node), inner)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _visit_comprehension

    # ---- imports and aliases ------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            root = a.name.split(".")[0]
            if root not in ALLOWED_IMPORT_ROOTS:
                self.flag(node, "import", f"import of `{a.name}` is not allowed")
            elif "." in a.name:
                self.reference(node, a.name, imported=True)
            self.bound(node, a.asname or root)
            self.aliases[a.asname or root] = a.name if a.asname else root

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        if node.level or mod.split(".")[0] not in ALLOWED_IMPORT_ROOTS:
            self.flag(node, "import", f"import from `{'.' * node.level}{mod}` is not allowed")
            return
        for a in node.names:
            if a.name == "*":
                self.flag(node, "import", "star imports hide what is used")
                continue
            self.reference(node, f"{mod}.{a.name}", imported=True)
            self.bound(node, a.asname or a.name)
            self.aliases[a.asname or a.name] = f"{mod}.{a.name}"

    def _alias(self, target: ast.AST, value: ast.AST) -> None:
        q = self.qualname(value)
        if isinstance(target, ast.Name) and q is not None:
            self.aliases[target.id] = q  # F = torch.nn.functional; mm = torch.matmul

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for t in node.targets:
            self._alias(t, node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.generic_visit(node)
        self._alias(node.target, node.value)

    # ---- names and attributes -----------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in ESCAPE_NAMES:
            self.flag(node, "introspection", f"`{node.id}` reaches into the interpreter's internals")
        elif isinstance(node.ctx, ast.Load) and reaches_builtin(self.scopes, node.id):
            if node.id in DENIED_BUILTINS:
                self.flag(node, "dynamic-code", f"`{node.id}` is not allowed")
            elif node.id in NAME_TAKING_BUILTINS:
                self.flag(node, "dynamic-attribute",
                          f"`{node.id}` passed around hides the attribute it reaches")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        q = self.qualname(node)
        if q is None:
            self.attribute_name(node, node.attr)
            self.generic_visit(node)
            return
        if not isinstance(node.ctx, ast.Load):
            self.flag(node, "monkeypatch", f"changing `{q}` changes a library or the harness")
        self.reference(node, q)

    def attribute_name(self, node: ast.AST, name: str) -> bool:
        """Rules on an attribute's name alone, whatever object it is looked up on."""
        if name in ESCAPE_ATTRIBUTES:
            self.flag(node, "introspection", f"`.{name}` reaches into the interpreter's internals")
        elif name in ESCAPE_MODULE_ATTRIBUTES:
            self.flag(node, "module-escape", f"`.{name}` reaches a module that is not allowed")
        else:
            return False
        return True

    def reference(self, node: ast.AST, q: str, imported: bool = False) -> None:
        """Rules on a qualified name, whether it is called, passed, imported or assigned."""
        root, _, rest = q.partition(".")
        if root not in ALLOWED_IMPORT_ROOTS or not rest:
            return  # an import that is refused already, or a bare module
        rule = self._reference_rule(root, rest, q, imported)
        if rule is not None:
            self.flag(node, *rule)
        elif any(self.attribute_name(node, part) for part in rest.split(".")):
            return
        elif (escaped := escaped_module(q)) is not None:
            self.flag(node, "module-escape", f"`{escaped}` is a module that is not allowed")

    @staticmethod
    def _reference_rule(root: str, rest: str, q: str, imported: bool = False
                        ) -> tuple[str, str] | None:
        if root == "triton":
            if triton_allowed(rest, imported):
                return None
            return "triton-internals", f"`{q}` is a Triton internal; wrappers may use jit, " \
                "autotune, heuristics, Config, cdiv, next_power_of_2 and triton.language " \
                "(device limits: torch.cuda.get_device_properties)"
        if any(is_private(p) for p in rest.split(".")):
            return "library-internals", f"`{q}` is a private name of a library"
        if any(q == m or q.startswith(m + ".") for m in MODULES_REFUSED):
            return "library-internals", f"`{q}` loads code or configuration from files or sockets"
        if root == "torch":
            for rule, names in TORCH_REFUSED.items():
                if any(rest == n or rest.startswith(n + ".") for n in names):
                    return rule, f"`{q}` is not allowed (library kernels, replay, streams, " \
                        "native code)"
        if q in EVALUATING_NAMES:
            return "dynamic-code", f"`{q}` evaluates strings as code"
        if q in OPERATOR_REFUSED:
            return OPERATOR_REFUSED[q], f"`{q}` computes with torch or calls a method by name"
        return None

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and any(
                n in ESCAPE_ATTRIBUTES for n in names_in_string(node.value)):
            self.flag(node, "introspection",
                      f"`{node.value[:60]}` names an attribute that reaches the interpreter's "
                      "internals")

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        self.bound(node, node.name)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        self.bound(node, node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        self.bound(node, node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        self.bound(node, node.rest)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.bound(node, *node.names)

    visit_Nonlocal = visit_Global  # type: ignore[assignment]

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        """``case object(__globals__=g)`` reads that attribute off the subject."""
        for attr in node.kwd_attrs:
            self.attribute_name(node, attr)
        self.generic_visit(node)

    def visit_Match(self, node: ast.Match) -> None:
        q = self.qualname(node.subject)
        for case in node.cases if q is not None else []:
            if isinstance(case.pattern, ast.MatchClass):
                for attr, sub in zip(case.pattern.kwd_attrs, case.pattern.kwd_patterns, strict=True):
                    self.reference(sub, f"{q}.{attr}")
                    if isinstance(sub, ast.MatchAs) and sub.name and sub.pattern is None:
                        self.aliases[sub.name] = f"{q}.{attr}"
        self.generic_visit(node)

    # ---- compute ------------------------------------------------------------------------------
    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and not self.in_jit:
            self.flag(node, "matmul-operator", "`@` computes a matrix product with torch")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in NAME_TAKING_BUILTINS \
                and reaches_builtin(self.scopes, func.id):
            self._check_getattr(node, func.id)
            for n in [*node.args, *node.keywords]:
                self.visit(n)
            return
        q = self.qualname(func)
        if q == "operator.attrgetter":
            self._check_attrgetter(node)
        elif q is not None:
            self._check_torch_call(node, q)
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
            self.reference(node, f"{base}.{name}")
            self._check_torch_call(node, f"{base}.{name}")
        elif not self.attribute_name(node, name):
            self._check_method(node, name)

    def _check_attrgetter(self, node: ast.Call) -> None:
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                self.flag(node, "dynamic-attribute",
                          "`operator.attrgetter` with a computed name hides what is used")
                return
            for name in names_in_string(arg.value):
                if name in COMPUTE_METHODS:
                    self._check_method(node, name)
                else:
                    self.attribute_name(node, name)

    def _check_torch_call(self, node: ast.AST, q: str) -> None:
        if self.in_jit or not q.startswith("torch."):
            return
        name = q[len("torch."):]
        root = q.partition(".")[0]
        if name.split(".")[-1] in TORCH_DTYPES or self._reference_rule(root, name, q) is not None:
            return  # dtypes are fine; refused names are flagged as references
        if name not in self.torch_allowed:
            self.flag(node, "torch-call",
                      f"`{q}` computes with torch; compute in your own Triton kernels")

    def _check_method(self, node: ast.AST, name: str) -> None:
        if self.in_jit:
            return
        if name in DUNDER_ARITHMETIC or name in COMPUTE_METHODS:
            self.flag(node, "tensor-method", f"`.{name}()` computes with torch; use a Triton kernel")
        elif name in CPU_ROUND_TRIPS:
            self.flag(node, "cpu-roundtrip", f"`.{name}()` moves data to the host")


def check(source: str, kind: Kind | str = Kind.COMPUTE) -> list[Violation]:
    """Every policy violation in ``source`` (which must parse), in line order."""
    checker = _Checker(source, Kind(kind))
    encoding = _declared_encoding(source)
    if encoding is not None:
        checker.violations.append(Violation(
            "encoding", 1, f"coding: {encoding}",
            f"the file declares {encoding}; candidates are UTF-8 and are checked as UTF-8"))
    try:
        checker.visit(ast.parse(source))
    except RecursionError:  # fail closed: what cannot be walked is not accepted
        checker.violations.append(Violation(
            "nesting", 1, "nesting deeper than the policy walks",
            "an expression nests too deeply to be checked (hundreds of levels); split it"))
    return sorted(dict.fromkeys(checker.violations), key=lambda v: v.line)
