"""Readers of an agent CLI's own log (its stdout), for the cross-check of the proxy's ledger.

The proxy is the ledger; the CLI's log is what the CLI says it used. Each format is one JSON
object a line:

* ``claude-stream-json`` (``claude -p --output-format stream-json --verbose``): the ``result``
  line's ``usage`` (the session's totals; Anthropic fields), else the sum of the ``assistant``
  messages' usage, once per message id;
* ``codex-json`` (``codex exec --json``): the sum of ``turn.completed`` usages
  (``input_tokens`` with ``cached_input_tokens`` inside it, ``output_tokens``);
* ``opencode-json`` (``opencode run --format json``): the sum of ``step_finish`` parts' tokens
  (``input``, ``output``, ``reasoning``, ``cache.read``, ``cache.write``).

A line that is not a JSON object is counted as malformed (a CLI that prints malformed JSON is
an ``AGENT_ERROR``; its kernel is still scored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from generators.llm import Usage

LOG_FORMATS = ("claude-stream-json", "codex-json", "opencode-json")


@dataclass(frozen=True)
class LogSummary:
    lines: int
    malformed: int
    usage: Usage | None          # None: the log reported no usage
    first_malformed: str = ""


def _int(obj: Any, *path: str) -> int:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj if isinstance(obj, int) and not isinstance(obj, bool) else 0


def _anthropic(u: Any) -> Usage:
    read, write = _int(u, "cache_read_input_tokens"), _int(u, "cache_creation_input_tokens")
    return Usage(_int(u, "input_tokens") + read + write, _int(u, "output_tokens"), read, 0, write)


def _claude(events: list[dict[str, Any]]) -> Usage | None:
    results = [e for e in events if e.get("type") == "result" and isinstance(e.get("usage"), dict)]
    if results:
        return _anthropic(results[-1]["usage"])
    per_message: dict[str, Usage] = {}
    for e in events:
        msg = e.get("message")
        if e.get("type") == "assistant" and isinstance(msg, dict) and isinstance(msg.get("usage"), dict):
            per_message[str(msg.get("id", len(per_message)))] = _anthropic(msg["usage"])
    return sum(per_message.values(), Usage()) if per_message else None


def _codex(events: list[dict[str, Any]]) -> Usage | None:
    turns = [e["usage"] for e in events
             if e.get("type") == "turn.completed" and isinstance(e.get("usage"), dict)]
    if not turns:
        return None
    return sum((Usage(_int(u, "input_tokens"), _int(u, "output_tokens"),
                      _int(u, "cached_input_tokens"), _int(u, "reasoning_output_tokens"))
                for u in turns), Usage())


def _opencode(events: list[dict[str, Any]]) -> Usage | None:
    steps = [e["part"]["tokens"] for e in events if e.get("type") == "step_finish"
             and isinstance(e.get("part"), dict) and isinstance(e["part"].get("tokens"), dict)]
    if not steps:
        return None
    total = Usage()
    for t in steps:
        read, write = _int(t, "cache", "read"), _int(t, "cache", "write")
        total = total + Usage(_int(t, "input") + read + write,
                              _int(t, "output") + _int(t, "reasoning"), read, _int(t, "reasoning"),
                              write)
    return total


_READERS = {"claude-stream-json": _claude, "codex-json": _codex, "opencode-json": _opencode}


def summarize(log_format: str, text: str) -> LogSummary:
    events: list[dict[str, Any]] = []
    malformed, first, lines = 0, "", 0
    for line in text.splitlines():
        if not line.strip():
            continue
        lines += 1
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):
            malformed += 1
            first = first or line[:200]
            continue
        events.append(obj)
    return LogSummary(lines, malformed, _READERS[log_format](events), first)


def disagreement(metered: Usage, logged: Usage | None) -> str:
    """"" when the CLI's log agrees with the proxy's ledger (or reports nothing), else what
    differs, for people."""
    if logged is None:
        return ""
    fields = ("prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens")
    diffs = [f"{f} metered {getattr(metered, f)}, logged {getattr(logged, f)}"
             for f in fields if getattr(metered, f) != getattr(logged, f)]
    return "; ".join(diffs)
