"""Extract the candidate source file from a model's reply.

:func:`extract_code` never raises on any reply: what it found is an :class:`Extraction` with a
closed :class:`ExtractStatus`, so a failure to extract is recorded like any other outcome.

Statuses (bare names in JSON):

``OK``
    A candidate was chosen (``Extraction.candidate``). It may still lack an entry point
    (``missing``): the device agent judges that (``COMPILE_ERROR``), not extraction.
``NO_CODE``
    No Python code: an empty reply, prose only, or only blocks in other languages (```bash …).
``TRUNCATED``
    The reply was cut off before a complete candidate: the code sits in a fence that never closes
    (and the caller did not say the reply was complete), or the caller says the reply was cut
    (``truncated=True``, e.g. ``finish_reason == "length"``) and no complete block defines every
    entry point. ``source`` holds the cut-off code, for logs and feedback only.
``SPLIT``
    The entry points are spread over several blocks, none of which defines them all (the model
    was told to send one complete file; blocks are never stitched together). ``source`` holds the
    last Python block, for logs and feedback only.

Block-selection rule (``entry_points`` are the names the problem requires):

1. Text is normalised first: a BOM dropped, Windows and old-Mac newlines made ``\\n``, closed
   ``<think>...</think>`` spans removed.
2. Fences are lines opening with three or more backticks or tildes (any indentation, which is
   removed from the block's lines), closed by a line of at least as many of the same character.
   A block is Python when its info string is ``python``, ``py``, ``python3``, ``py3``,
   ``triton`` (any case) or empty (a bare fence); other languages are ignored.
3. A block left open at the end of the reply is *cut off*, unless the caller says the reply was
   complete (``truncated=False``): then it is a normal (complete) block.
4. Among complete Python blocks, those defining every entry point (a top-level ``def``,
   assignment or import binding the name; a regex on ``def name(`` when the block does not
   parse) are eligible, and the **last** of them is chosen: models revise, and the final
   version comes last. -> ``OK``.
5. Otherwise, if the reply was cut off — a cut-off Python block (``source``: that block), or
   ``truncated=True`` (``source``: the last complete block) — the answer was still being written
   -> ``TRUNCATED``. (A cut reply whose earlier block already defines every entry point is
   ``OK`` by step 4: that code is complete.)
6. Otherwise, if no complete block defines every entry point but the blocks together do ->
   ``SPLIT``.
7. Otherwise the **last** complete non-empty Python block is chosen -> ``OK`` (with ``missing``
   entry points, if any). Without ``entry_points``, steps 4 and 6 are skipped.
8. No fences at all: the whole reply is the candidate when it parses as Python and contains a
   ``def`` or an import (a reply that is just code); failing that, the text from the first line
   that starts like code (``import``, ``from … import``, ``@triton``, ``def``) to the end, if
   that parses (leading prose). -> ``OK``. If the caller says the reply was cut -> ``TRUNCATED``.
   Else ``NO_CODE``.
"""

from __future__ import annotations

import ast
import enum
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3", "triton"})

_FENCE_RE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL)
_CODE_START_RE = re.compile(r"^(import \w|from [\w.]+ import |@triton|def \w)")


class ExtractStatus(str, enum.Enum):
    """How extraction ended (closed set; see the module docstring)."""

    OK = "OK"
    NO_CODE = "NO_CODE"
    TRUNCATED = "TRUNCATED"
    SPLIT = "SPLIT"


@dataclass(frozen=True)
class Extraction:
    """What :func:`extract_code` found in one reply.

    ``source`` is the candidate when ``status`` is ``OK``; for other statuses it is the best
    partial code found (for logs and feedback, never to be evaluated), or ``""``. ``blocks`` counts
    the reply's Python code blocks; ``chosen`` is the index (among them) of the block ``source``
    came from, None when it came from unfenced text or nowhere. ``note`` says, for people, why
    this outcome. ``required`` are the entry points :attr:`missing` checks ``source`` for (empty
    when there is nothing to check: no code, or no names given).
    """

    status: ExtractStatus
    source: str = ""
    blocks: int = 0
    chosen: int | None = None
    note: str = ""
    required: tuple[str, ...] = ()

    @functools.cached_property
    def missing(self) -> tuple[str, ...]:
        """The ``required`` entry points ``source`` does not define. Worked out on first use:
        parsing a candidate costs milliseconds, and a sweep's generator extracts thousands a
        minute whose ``missing`` only feedback on a failure reads."""
        return _missing(self.source, self.required) if self.required else ()

    @property
    def ok(self) -> bool:
        return self.status is ExtractStatus.OK

    @property
    def candidate(self) -> str | None:
        """The source to evaluate, or None when extraction failed."""
        return self.source if self.ok else None


@dataclass(frozen=True)
class _Block:
    info: str
    text: str
    closed: bool

    @property
    def python(self) -> bool:
        tag = self.info.split()[0].lower() if self.info.split() else ""
        return tag in PYTHON_TAGS


def normalise(reply: str) -> str:
    """BOM dropped, newlines made ``\\n``, closed ``<think>`` spans removed."""
    text = reply.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    return _THINK_RE.sub("", text)


def _blocks(text: str) -> list[_Block]:
    lines = text.split("\n")
    out: list[_Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE_RE.match(lines[i])
        if m is None or (m.group("fence")[0] == "`" and "`" in m.group("info")):
            i += 1  # not a fence opener (an inline ```code``` span is not a block)
            continue
        fence, indent, info = m.group("fence"), len(m.group("indent")), m.group("info").strip()
        body: list[str] = []
        i += 1
        closed = False
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if (stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0])):
                closed = True
                i += 1
                break
            body.append(_dedent(line, indent))
            i += 1
        out.append(_Block(info, _tidy("\n".join(body)), closed))
    return out


def _dedent(line: str, indent: int) -> str:
    n = 0
    while n < indent and n < len(line) and line[n] in " \t":
        n += 1
    return line[n:]


def _tidy(code: str) -> str:
    code = code.strip("\n")
    return code.rstrip() + "\n" if code.strip() else ""


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _bound_names(body: Iterable[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.If | ast.Try | ast.With):
            names |= _bound_names(node.body)
            names |= _bound_names(getattr(node, "orelse", []))
            for handler in getattr(node, "handlers", []):
                names |= _bound_names(handler.body)
            names |= _bound_names(getattr(node, "finalbody", []))
    return names


def defined_names(code: str, wanted: Iterable[str]) -> set[str]:
    """Which of ``wanted`` the code binds at module level (regex on ``def`` if it won't parse)."""
    wanted = set(wanted)
    tree = _parse(code)
    if tree is not None:
        return wanted & _bound_names(tree.body)
    return {w for w in wanted
            if re.search(rf"^(async\s+)?def\s+{re.escape(w)}\s*\(", code, re.MULTILINE)}


def _looks_like_code(code: str) -> bool:
    tree = _parse(code)
    return tree is not None and any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Import | ast.ImportFrom)
        for n in ast.walk(tree))


def _unfenced(text: str) -> tuple[str, str] | None:
    """``(code, note)`` when unfenced text is code, possibly after leading prose."""
    whole = _tidy(text)
    if whole and _looks_like_code(whole):
        return whole, "reply is unfenced code"
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if _CODE_START_RE.match(line):
            tail = _tidy("\n".join(lines[i:]))
            if _looks_like_code(tail):
                return tail, f"unfenced code after {i} line(s) of prose"
            break
    return None


def extract_code(reply: str, entry_points: Iterable[str] = (), *,
                 truncated: bool | None = None) -> Extraction:
    """The candidate in ``reply`` by the module's block-selection rule; never raises.

    ``entry_points``: names the problem requires (``[e.name for e in spec.entry_points]``).
    ``truncated``: True when the provider says the reply was cut off (token limit), False when it
    says the reply is complete, None when unknown (an unclosed final fence then means cut off).
    """
    names = tuple(dict.fromkeys(entry_points))
    try:
        return _extract(reply, names, truncated)
    except Exception as exc:  # noqa: BLE001 - extraction records failure, never raises
        return Extraction(ExtractStatus.NO_CODE, note=f"extraction failed: {type(exc).__name__}")


def _missing(code: str, names: tuple[str, ...]) -> tuple[str, ...]:
    found = defined_names(code, names)
    return tuple(n for n in names if n not in found)


def _extract_unfenced(text: str, names: tuple[str, ...], truncated: bool | None) -> Extraction:
    """Step 8: a reply without fences."""
    found = _unfenced(text)
    if truncated:
        code = found[0] if found else ""
        return Extraction(ExtractStatus.TRUNCATED, code, 0, None,
                          "reply cut off (caller) before a fenced code block closed", names)
    if found is not None:
        code, note = found
        return Extraction(ExtractStatus.OK, code, 0, None, note, names)
    note = "empty reply" if not text.strip() else "no code block and no code in the reply"
    return Extraction(ExtractStatus.NO_CODE, note=note)


def _no_python(blocks: list[_Block], truncated: bool | None) -> Extraction:
    """Fences, but no non-empty Python block among them: cut off, or no code."""
    if truncated or (truncated is None and any(not b.closed for b in blocks)):
        return Extraction(ExtractStatus.TRUNCATED, note="reply cut off before any Python code")
    langs = sorted({b.info.split()[0] for b in blocks if b.info.split()})
    what = f"only non-Python blocks ({', '.join(langs)})" if langs else "only empty blocks"
    return Extraction(ExtractStatus.NO_CODE, note=what)


def _extract(reply: str, names: tuple[str, ...], truncated: bool | None) -> Extraction:
    text = normalise(reply if isinstance(reply, str) else "")
    blocks = _blocks(text)
    py = [b for b in blocks if b.python and b.text]
    n = len(py)
    if not blocks:
        return _extract_unfenced(text, names, truncated)
    if not py:
        return _no_python(blocks, truncated)

    def complete(b: _Block) -> bool:
        return b.closed or truncated is False

    full = [i for i, b in enumerate(py) if complete(b)]
    cut = [i for i, b in enumerate(py) if not complete(b)]
    if n == 1 and not cut and not truncated:
        # One complete block, a reply not cut off: steps 4 and 7 both choose it, so which one
        # applies (whether it defines every entry point) needs no parse here.
        return Extraction(ExtractStatus.OK, py[0].text, 1, 0, "one code block", names)
    extra = f"; {n} Python blocks" if n > 1 else ""
    if names:
        eligible = [i for i in full if not _missing(py[i].text, names)]
        if eligible:
            i = eligible[-1]
            note = "the last block defining every entry point" if n > 1 else "one code block"
            if cut:
                note += "; a later block was cut off"
            return Extraction(ExtractStatus.OK, py[i].text, n, i, note + extra, names)
    if cut:
        i = cut[-1]
        return Extraction(ExtractStatus.TRUNCATED, py[i].text, n, i,
                          "the code block never closes: reply cut off" + extra, names)
    last = full[-1]
    if truncated:
        return Extraction(ExtractStatus.TRUNCATED, py[last].text, n, last,
                          "reply cut off (caller) with no block defining every entry point" + extra,
                          names)
    if names and len(full) > 1:
        union: set[str] = set()
        partial = 0
        for i in full:
            got = defined_names(py[i].text, names)
            partial += bool(got)
            union |= got
        if partial > 1 and union >= set(names):
            return Extraction(ExtractStatus.SPLIT, py[last].text, n, last,
                              "entry points spread over several blocks; none defines them all"
                              + extra, names)
    note = "the last Python block" if n > 1 else "one code block"
    return Extraction(ExtractStatus.OK, py[last].text, n, last, note + extra, names)
