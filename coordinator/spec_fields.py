"""The sweep spec parser's primitives: typed values with exact key paths in every error.

:class:`FieldParser` checks one value at a time (a string, a name, a bounded integer, a table,
unknown keys with a "did you mean"); :class:`coordinator.spec_parser.SpecParser` builds the
sections on it."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coordinator.spec_records import NAME_RE, SweepSpecError

_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Prefixes of real API keys (OpenAI, Anthropic, Groq, xAI, Hugging Face, GitHub, Google, Stripe-like).
_KEY_PREFIXES = ("sk-", "sk_", "pk-", "gsk_", "xai-", "hf_", "ghp_", "github_pat_", "AIza", "key-",
                 "Bearer ")


def _plural(items: Any) -> str:
    names = sorted(str(i) for i in items)
    return ", ".join(names) if names else "(none)"


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def _looks_like_secret(value: str) -> bool:
    if value.startswith(_KEY_PREFIXES):
        return True
    if not _ENV_RE.match(value):
        return len(value) >= 20  # long and not a variable name: a key with "-" or "." in it
    # a valid identifier, but long and lower/mixed-case with digits: a token, not a variable name
    return len(value) >= 32 and any(c.isdigit() for c in value) and any(c.islower() for c in value)


class FieldParser:
    def __init__(self, source: str, base_dir: Path | None) -> None:
        self.source = source
        self.base_dir = base_dir
        self.warnings: list[str] = []

    # -- primitives --

    def fail(self, path: str, message: str) -> SweepSpecError:
        return SweepSpecError(self.source, path, message)

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(f"{path}: {message}" if path else message)

    def table(self, value: Any, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a table, got {_type_name(value)}")
        return value

    def array_of_tables(self, value: Any, path: str) -> list[dict[str, Any]]:
        if not isinstance(value, list):
            raise self.fail(path, f"expected an array of tables ([[{path}]]), got {_type_name(value)}")
        return [self.table(v, f"{path}[{i}]") for i, v in enumerate(value)]

    def keys(self, table: Mapping[str, Any], path: str, allowed: tuple[str, ...],
             required: tuple[str, ...] = ()) -> None:
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(allowed)}"
                if key == "api_key":
                    hint = ("; a spec never holds keys: put the key in an environment variable and "
                            "name it with api_key_env")
                raise self.fail(f"{path}.{key}" if path else key, f"unknown key{hint}")
        for key in required:
            if key not in table:
                raise self.fail(f"{path}.{key}" if path else key, "required key is missing")

    def string(self, value: Any, path: str, *, empty: bool = False) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {_type_name(value)}")
        if not empty and not value.strip():
            raise self.fail(path, "must not be empty")
        return value

    def name(self, value: Any, path: str) -> str:
        s = self.string(value, path)
        if not NAME_RE.match(s):
            raise self.fail(path, f"{s!r} is not a valid name (letters, digits, '.', '_', '-'; "
                                  "starting with a letter or digit)")
        return s

    def integer(self, value: Any, path: str, *, minimum: int | None = None,
                maximum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {_type_name(value)}")
        if minimum is not None and value < minimum:
            raise self.fail(path, f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise self.fail(path, f"must be <= {maximum}, got {value}")
        return value

    def number(self, value: Any, path: str, *, minimum: float | None = None,
               positive: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(path, f"expected a number, got {_type_name(value)}")
        f = float(value)
        if not math.isfinite(f):
            raise self.fail(path, f"must be finite, got {value}")
        if positive and not f > 0:
            raise self.fail(path, f"must be > 0, got {value}")
        if minimum is not None and f < minimum:
            raise self.fail(path, f"must be >= {minimum:g}, got {value}")
        return f

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {_type_name(value)}")
        return value

    def strings(self, value: Any, path: str) -> list[str]:
        if not isinstance(value, list):
            raise self.fail(path, f"expected an array of strings, got {_type_name(value)}")
        return [self.string(v, f"{path}[{i}]") for i, v in enumerate(value)]

    def resolve(self, raw: str) -> Path:
        p = Path(raw).expanduser()
        if self.base_dir is not None and not p.is_absolute():
            p = self.base_dir / p
        return p

    def unique(self, names: list[str], path: str, what: str) -> None:
        seen: set[str] = set()
        for i, n in enumerate(names):
            if n in seen:
                raise self.fail(f"{path}[{i}].{what}", f"duplicate {what} {n!r}")
            seen.add(n)
