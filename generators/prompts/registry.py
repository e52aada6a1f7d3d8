"""The registry of prompt template versions.

A template is a pure function ``(spec, platform) -> messages`` registered under its source and a
version ``vN``; its id is ``"<source>/vN"`` (``"aten/v1"``), recorded in ``Prompt.template``.
Released versions are never edited: a changed template is a new version, so a stored prompt's id
always re-renders the same text (for ATen, given the same torch, whose schemas and docstrings the
template reads). Without an explicit version the highest registered one is used.
"""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from generators.llm import Message, Prompt
from operators.spec import OperatorSpec, Source

Render = Callable[[OperatorSpec, str], tuple[Message, ...]]

_VERSION_RE = re.compile(r"^v([1-9][0-9]*)$")


class PromptError(ValueError):
    """A prompt cannot be built: unknown platform, a platform the problem does not run on, or a
    template version that does not exist."""


class UnknownTemplateError(PromptError):
    """No template is registered under that source and version."""


@dataclass(frozen=True)
class Template:
    """One released template version."""

    source: Source
    version: str
    render: Render

    @property
    def id(self) -> str:
        return f"{self.source.value}/{self.version}"


def _number(version: str) -> int:
    m = _VERSION_RE.match(version)
    if m is None:
        raise PromptError(f"invalid template version {version!r} (want v1, v2, ...)")
    return int(m.group(1))


class TemplateRegistry:
    """Template versions per source. Registration is by decorator only; duplicates raise."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._templates: dict[tuple[Source, str], Template] = {}

    def template(self, source: Source | str, version: str) -> Callable[[Render], Render]:
        """Register the decorated render function as ``source/version``."""
        src = Source(source)
        _number(version)

        def deco(render: Render) -> Render:
            with self._lock:
                key = (src, version)
                if key in self._templates:
                    raise ValueError(f"duplicate prompt template {src.value}/{version}")
                self._templates[key] = Template(src, version, render)
            return render

        return deco

    def versions(self, source: Source | str) -> list[str]:
        """Registered versions of ``source``, oldest first."""
        src = Source(source)
        return sorted((v for s, v in self._templates if s is src), key=_number)

    def ids(self) -> list[str]:
        """Every registered template id, by source then version."""
        return [f"{s.value}/{v}" for s in Source for v in self.versions(s)]

    def get(self, source: Source | str, version: str | None = None) -> Template:
        """The template ``version`` of ``source`` (``"v1"`` or a full id ``"aten/v1"``), or the
        latest when ``version`` is None."""
        src = Source(source)
        known = self.versions(src)
        if version is None:
            if not known:
                raise UnknownTemplateError(f"no prompt template registered for source {src.value!r}")
            version = known[-1]
        elif "/" in version:
            prefix, _, version = version.partition("/")
            if prefix != src.value:
                raise UnknownTemplateError(
                    f"template {prefix}/{version} is for source {prefix!r}, "
                    f"but the problem is from {src.value!r} (known: {', '.join(known)})")
        _number(version)
        try:
            return self._templates[(src, version)]
        except KeyError:
            ids = [f"{src.value}/{v}" for v in known]
            close = difflib.get_close_matches(f"{src.value}/{version}", ids, n=2)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownTemplateError(
                f"unknown prompt template {src.value}/{version}{hint} "
                f"(known: {', '.join(ids) or 'none'})") from None

    def build(self, spec: OperatorSpec, platform: str, version: str | None = None) -> Prompt:
        """Render ``spec`` for ``platform`` with the chosen template version. A platform the
        problem does not run on, or one the template has no notes for, is a :class:`PromptError`."""
        if platform not in spec.platforms:
            raise PromptError(f"{spec.id} does not run on platform {platform!r} "
                              f"(it runs on {', '.join(sorted(spec.platforms))})")
        tpl = self.get(spec.source, version)
        return Prompt(messages=tpl.render(spec, platform), template=tpl.id, operator_id=spec.id)


REGISTRY = TemplateRegistry()
"""The project's templates (``generators.prompts`` imports every source module to fill it)."""
