"""Scopes for the static policy: which names a scope binds, and whether a name can reach the
builtins (``open`` as a parameter is the candidate's own; ``open`` at module level is the builtin)."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
Comprehension = ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp


@dataclass
class Scope:
    """The names one scope binds. A name bound in a function can never reach the builtins; one
    bound at module or class level can (before its binding runs, or after ``del``)."""

    kind: str  # "module", "class" or "function"
    bound: set[str] = field(default_factory=set)
    declared_global: set[str] = field(default_factory=set)


def own_nodes(roots: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Nodes that belong to the scope ``roots`` are in: nested functions, lambdas, classes and
    comprehensions contribute their name and what their header evaluates, not their body."""
    stack = list(roots)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack += [*getattr(node, "decorator_list", []), *node.args.defaults,
                      *(d for d in node.args.kw_defaults if d is not None)]
        elif isinstance(node, ast.ClassDef):
            stack += [*node.decorator_list, *node.bases, *node.keywords]
        elif isinstance(node, COMPREHENSIONS):
            stack.append(node.generators[0].iter)
        else:
            stack += ast.iter_child_nodes(node)


def scope_of(kind: str, body: Iterable[ast.AST], params: ast.arguments | None = None) -> Scope:
    scope = Scope(kind)
    if params is not None:
        args = [*params.posonlyargs, *params.args, *params.kwonlyargs, params.vararg, params.kwarg]
        scope.bound.update(a.arg for a in args if a is not None)
    for node in own_nodes(body):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            scope.bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope.bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            scope.bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            scope.bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            scope.bound.add(node.rest)
        elif isinstance(node, ast.Nonlocal):
            scope.bound.update(node.names)
        elif isinstance(node, ast.Global):
            scope.declared_global.update(node.names)
    scope.bound -= scope.declared_global
    return scope


def comprehension_scope(node: Comprehension) -> Scope:
    scope = Scope("function")
    for gen in node.generators:
        scope.bound.update(n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name))
    return scope


def reaches_builtin(scopes: list[Scope], name: str) -> bool:
    """Whether ``name``, loaded in the innermost of ``scopes``, can resolve to the builtin."""
    for depth, scope in enumerate(reversed(scopes)):
        if scope.kind == "module":
            return True
        if scope.kind == "class":
            if depth == 0 and name in scope.bound:
                return True  # a class body looks its own names up, then globals, builtins
            continue
        if name in scope.declared_global:
            return True
        if name in scope.bound:
            return False
    return True
