"""Price table: what a call's usage cost, in USD, from prices a sweep configures.

Prices are per million tokens and split three ways, because providers bill them differently:
uncached prompt tokens, prompt tokens served from the provider's cache, and completion tokens
(reasoning tokens are part of completion tokens and billed at the completion price)::

    cost = ((prompt - cached) * prompt + cached * cached_prompt + completion * completion) / 1e6

A model missing from the table costs 0 and the result says it was not priced, so a report can
show "cost unknown" instead of a silent zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generators.llm import Usage


class PriceError(ValueError):
    """A price table entry is missing a field or holds a value that is not a price."""


@dataclass(frozen=True)
class ModelPrice:
    """USD per one million tokens of each billed kind."""

    prompt: float
    completion: float
    cached_prompt: float | None = None  # None: cached tokens cost the same as the others

    def __post_init__(self) -> None:
        for name in ("prompt", "completion", "cached_prompt"):
            value = getattr(self, name)
            if value is None and name == "cached_prompt":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0:
                raise PriceError(f"price {name!r} must be a finite number >= 0, got {value!r}")

    def cost(self, usage: Usage) -> float:
        cached_price = self.prompt if self.cached_prompt is None else self.cached_prompt
        uncached = max(usage.prompt_tokens - usage.cached_tokens, 0)
        return (uncached * self.prompt + usage.cached_tokens * cached_price
                + usage.completion_tokens * self.completion) / 1e6


@dataclass(frozen=True)
class Cost:
    usd: float
    priced: bool  # False: the model is not in the table, so ``usd`` is 0 and means "unknown"


@dataclass(frozen=True)
class PriceTable:
    """Prices by model name (exactly as sent to the endpoint)."""

    models: Mapping[str, ModelPrice] = field(default_factory=dict)

    def cost(self, model: str, usage: Usage | None) -> Cost:
        """The cost of one response; a response without usage costs nothing and is priced."""
        if usage is None:
            return Cost(0.0, True)
        price = self.models.get(model)
        if price is None:
            return Cost(0.0, False)
        return Cost(price.cost(usage), True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PriceTable:
        """``{"model": {"prompt": 2.5, "completion": 10, "cached_prompt": 1.25}, ...}``.

        A top-level ``models`` table is accepted as well, so one TOML file can hold other keys.
        """
        models = data.get("models", data) if isinstance(data.get("models"), Mapping) else data
        out: dict[str, ModelPrice] = {}
        for name, entry in models.items():
            if not isinstance(entry, Mapping):
                raise PriceError(f"price table: entry for {name!r} must be a table of prices")
            unknown = set(entry) - {"prompt", "completion", "cached_prompt"}
            if unknown:
                raise PriceError(f"price table: {name!r} has unknown fields {sorted(unknown)} "
                                 "(known: prompt, completion, cached_prompt)")
            missing = {"prompt", "completion"} - set(entry)
            if missing:
                raise PriceError(f"price table: {name!r} lacks {sorted(missing)}")
            try:
                out[str(name)] = ModelPrice(prompt=entry["prompt"], completion=entry["completion"],
                                            cached_prompt=entry.get("cached_prompt"))
            except PriceError as exc:
                raise PriceError(f"price table: {name!r}: {exc}") from None
        return cls(out)

    @classmethod
    def from_toml(cls, source: str | Path) -> PriceTable:
        """Load from a TOML file path, or from TOML text when given a ``str`` with a newline."""
        import tomllib  # Python 3.11+, where the generators run

        if isinstance(source, Path) or "\n" not in source:
            try:
                text = Path(source).read_text(encoding="utf-8")
            except OSError as exc:
                raise PriceError(f"price table: cannot read {source}: {exc.strerror}") from None
        else:
            text = source
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise PriceError(f"price table: not TOML ({exc})") from None
        return cls.from_dict(data)
