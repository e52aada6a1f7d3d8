"""ATen prompt templates: the operator's schemas and docstring, read from torch at render time.

Entry points of an ATen problem are named ``<op>_<overload>`` (``add_Tensor``, ``add_out``,
``softmax_int_out``), the default overload taking the bare name (``mm``). For each one the
template prints the spec's Python signature and PyTorch's own schema
(``torch.ops.aten.<op>.<overload>._schema``), then the operator's docstring (``torch.<op>``,
``torch.Tensor.<op>``, ``torch.nn.functional.<op>`` or ``torch.special.<op>``, trimmed before its
examples). When torch lacks a schema or a docstring, the prompt says so and falls back on the
spec's signature and description. The rendered text therefore depends on the torch version: an
exact re-render of a stored ``aten/v1`` prompt needs the same torch.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable

import torch

from generators.llm import Message, Role
from generators.prompts.common import closing_v1, closing_v2, system_message_v1, system_message_v2
from generators.prompts.registry import REGISTRY
from operators.spec import EntryPoint, OperatorSpec, Source

DOC_LIMIT_V1 = 2500  # characters of docstring kept, cut at a line boundary

_EXAMPLES_RE = re.compile(r"^\s*(Examples?::?|>>>)")
_BLANKS_RE = re.compile(r"\n{3,}")


def op_name(spec: OperatorSpec) -> str:
    """``aten::add`` -> ``add``."""
    return spec.id.split("::", 1)[1]


def overload_name(op: str, entry: str) -> str | None:
    """The ATen overload an entry point stands for, by the naming rule (not checked in torch):
    ``add_Tensor`` of ``add`` -> ``Tensor``; ``mm`` of ``mm`` -> ``default``."""
    if entry == op:
        return "default"
    if entry.startswith(op + "_") and len(entry) > len(op) + 1:
        return entry[len(op) + 1:]
    return None


def torch_schema(op: str, entry: str) -> str | None:
    """PyTorch's schema text for the entry point's overload, or None when torch has none."""
    overload = overload_name(op, entry)
    if overload is None:
        return None
    try:
        packet = getattr(torch.ops.aten, op)
        if overload not in packet.overloads():
            return None
        return str(getattr(packet, overload)._schema)
    except (AttributeError, RuntimeError):
        return None


def torch_doc(op: str) -> tuple[str, str] | None:
    """``(where, trimmed docstring)`` of the operator's Python API, or None when torch has none."""
    places: list[tuple[str, object, str]] = [
        (f"torch.{op}", torch, op),
        (f"torch.Tensor.{op}", torch.Tensor, op),
        (f"torch.nn.functional.{op}", torch.nn.functional, op),
    ]
    if op.startswith("special_"):
        short = op.removeprefix("special_")
        places.append((f"torch.special.{short}", torch.special, short))
    for where, owner, name in places:
        obj = getattr(owner, name, None)
        doc = getattr(obj, "__doc__", None) if obj is not None else None
        if isinstance(doc, str) and doc.strip():
            trimmed = trim_doc(doc)
            if trimmed:
                return where, trimmed
    return None


def trim_doc(doc: str, limit: int = DOC_LIMIT_V1) -> str:
    """Clean a docstring's indentation, drop everything from its examples on, squeeze blank
    runs, and cut it to ``limit`` characters at a line boundary (marked ``[...]``)."""
    lines = inspect.cleandoc(doc.replace("\r\n", "\n")).split("\n")
    kept: list[str] = []
    for line in lines:
        if _EXAMPLES_RE.match(line):
            break
        kept.append(line.rstrip())
    text = _BLANKS_RE.sub("\n\n", "\n".join(kept)).strip()
    if len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        text = text[: cut if cut > 0 else limit].rstrip() + "\n[...]"
    return text


def _entry_v1(op: str, e: EntryPoint) -> str:
    schema = torch_schema(op, e.name)
    schema_line = (f"ATen schema: `{schema}`" if schema is not None else
                   "ATen schema: not found in this PyTorch build; the signature above and the "
                   "problem statement define this entry point.")
    doc = f"\n  {e.doc}" if e.doc else ""
    return f"- `{e.signature}`\n  {schema_line}{doc}"


def _indent(text: str) -> str:
    return "\n".join(("    " + line) if line else "" for line in text.split("\n"))


def _render(spec: OperatorSpec, platform: str, system: Message,
            closing: Callable[[OperatorSpec, str], str]) -> tuple[Message, ...]:
    op = op_name(spec)
    entries = "\n".join(_entry_v1(op, e) for e in spec.entry_points)
    found = torch_doc(op)
    if found is None:
        doc = (f"PyTorch has no Python docstring for `{op}`; the schemas and the problem statement "
               "define the operator.")
    else:
        where, text = found
        doc = f"PyTorch's documentation of `{where}` (examples omitted):\n\n{_indent(text)}"
    user = (
        f"Problem `{spec.id}` (version {spec.version}, kind `{spec.kind.value}`): the PyTorch "
        f"ATen operator `{op}`. Implement every overload listed below in one file. Each entry "
        "point is named `<operator>_<overload>` (the default overload takes the bare operator "
        "name) and is called with the Python signature shown; the ATen schema under it is "
        "PyTorch's own declaration, where `Tensor(a!)` marks an argument the overload writes.\n\n"
        f"Entry points:\n{entries}\n\n"
        f"{doc}\n\n"
        "Problem statement (where it is more specific than PyTorch's documentation, it decides):\n"
        f"{spec.description}\n\n"
        f"{closing(spec, platform)}"
    )
    return (system, Message(Role.USER, user))


@REGISTRY.template(Source.ATEN, "v1")
def render_v1(spec: OperatorSpec, platform: str) -> tuple[Message, ...]:
    return _render(spec, platform, system_message_v1(), closing_v1)


@REGISTRY.template(Source.ATEN, "v2")
def render_v2(spec: OperatorSpec, platform: str) -> tuple[Message, ...]:
    """v1 with the rules of issue #22: imports (`logging`) and `.item()` by provenance."""
    return _render(spec, platform, system_message_v2(), closing_v2)

