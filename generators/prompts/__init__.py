"""Prompt building: versioned per-source templates (``aten``, ``vllm``, ``cublas``) over shared
rules, kind policies, platform notes and one worked example (``common``).

``build_prompt(spec, platform)`` renders a problem with the latest template of its source;
``template_version="v1"`` (or a stored id such as ``"aten/v1"``) re-renders an old one exactly.
Released template versions are never edited; a change is a new version (see ``registry``).
"""

from __future__ import annotations

from generators.llm import Prompt

# Importing the source modules registers their templates.
from generators.prompts import aten, cublas, vllm  # noqa: F401
from generators.prompts.registry import (
    REGISTRY,
    PromptError,
    Template,
    TemplateRegistry,
    UnknownTemplateError,
)
from operators.spec import OperatorSpec, Source


def build_prompt(spec: OperatorSpec, platform: str, *, template_version: str | None = None) -> Prompt:
    """The prompt for ``spec`` on ``platform`` (``"cuda"`` or ``"cpu"``).

    ``template_version`` is ``"vN"`` or a full id ``"<source>/vN"`` (as stored in
    ``Prompt.template``); None takes the latest version of the problem's source. Raises
    :class:`PromptError` for a platform the problem or the template does not support and
    :class:`UnknownTemplateError` for a version that does not exist.
    """
    return REGISTRY.build(spec, platform, template_version)


def template_ids() -> list[str]:
    """Every registered template id, e.g. ``["aten/v1", "aten/v2", "vllm/v1", ...]``."""
    return REGISTRY.ids()


def latest_template(source: Source | str) -> str:
    """The id of the template ``build_prompt`` uses for ``source`` when no version is given."""
    return REGISTRY.get(source).id


__all__ = [
    "REGISTRY", "PromptError", "Template", "TemplateRegistry", "UnknownTemplateError",
    "build_prompt", "latest_template", "template_ids",
]
