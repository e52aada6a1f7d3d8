"""Names for the static policy: private names, the triton allow-list, modules reached through
allowed modules, attribute names spelled in strings."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from types import ModuleType

from device_agent.static_tables import ALLOWED_IMPORT_ROOTS, TRITON_ALLOWED


def is_private(segment: str) -> bool:
    return segment.startswith("_") and not (segment.startswith("__") and segment.endswith("__"))


def triton_allowed(rest: str, imported: bool = False) -> bool:
    """Whether ``triton.<rest>`` is an allowed entry or under one; an import may also name the
    path to one (``from triton.runtime import driver``: what follows is checked by its alias)."""
    return any(rest == a or rest.startswith(a + ".") or (imported and a.startswith(rest + "."))
               for a in TRITON_ALLOWED)


def module_allowed(name: str) -> bool:
    """Whether a chain may pass through module ``name``: an allowed root, any torch module, the
    allowed triton modules and the packages that hold them (``triton.tools``)."""
    root, _, rest = name.partition(".")
    if root != "triton":
        return root in ALLOWED_IMPORT_ROOTS
    return not rest or triton_allowed(rest, imported=True)


def escaped_module(qualified: str) -> str | None:
    """The prefix of ``qualified`` that reaches a module outside the allow-list through allowed
    modules (``typing.sys``), read from the modules' own namespaces: nothing is imported but the
    allowed root, and no ``__getattr__`` runs."""
    parts = qualified.split(".")
    if parts[0] not in ALLOWED_IMPORT_ROOTS:
        return None
    try:
        obj: object = sys.modules.get(parts[0]) or importlib.import_module(parts[0])
    except ImportError:
        return None
    for i, part in enumerate(parts[1:], start=2):
        if not isinstance(obj, ModuleType):
            return None
        obj = vars(obj).get(part)
        if isinstance(obj, ModuleType) and not module_allowed(obj.__name__):
            return ".".join(parts[:i])
    return None


def names_in_string(text: str) -> Iterator[str]:
    """The dotted components of a string that reads as an attribute path (``"a.__globals__"``)."""
    parts = text.split(".")
    if all(p.isidentifier() for p in parts):
        yield from parts
