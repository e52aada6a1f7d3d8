"""Per-model request fields passed through to the endpoint: reasoning effort, thinking budget,
top_p, seed and stop sequences.

A sweep spec sets them on a ``[[models]]`` entry; the endpoint's provider sends them with every
call for that model id (``EndpointConfig.model_options``) and records what it sent in the call's
``extra["request_options"]``. Each field is sent only where the wire format has it:

=================== ====================================== ==================================
field               OpenAI kind (Chat Completions)         Anthropic kind (Messages)
=================== ====================================== ==================================
``reasoning_effort`` ``reasoning_effort``                   —
``thinking_budget`` —                                      ``thinking = {type: "enabled",
                                                           budget_tokens: N}``
``top_p``           ``top_p``                              ``top_p``
``seed``            ``seed``                               —
``stop``            ``stop``                               ``stop_sequences``
=================== ====================================== ==================================

A field the endpoint's kind does not have is a configuration error, not silently dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
MIN_THINKING_BUDGET = 1024       # Anthropic's minimum budget_tokens
KIND_FIELDS = {
    "openai": ("reasoning_effort", "top_p", "seed", "stop"),
    "anthropic": ("thinking_budget", "top_p", "stop"),
}


class OptionError(ValueError):
    """A request field has a bad value or does not apply; ``field`` names it."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class RequestOptions:
    """The request fields of one model; None (or no stop sequences) sends nothing."""

    reasoning_effort: str | None = None
    thinking_budget: int | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        effort = self.reasoning_effort
        if effort is not None and effort not in REASONING_EFFORTS:
            raise OptionError(f"reasoning_effort must be one of {', '.join(REASONING_EFFORTS)}, "
                              f"got {effort!r}", "reasoning_effort")
        budget = self.thinking_budget
        if budget is not None and (not _is_int(budget) or budget < MIN_THINKING_BUDGET):
            raise OptionError(f"thinking_budget must be an integer >= {MIN_THINKING_BUDGET}, got "
                              f"{budget!r}", "thinking_budget")
        top_p = self.top_p
        if top_p is not None and (not _is_number(top_p) or not 0 < top_p <= 1):
            raise OptionError(f"top_p must be a number in (0, 1], got {top_p!r}", "top_p")
        if self.seed is not None and not _is_int(self.seed):
            raise OptionError(f"seed must be an integer, got {self.seed!r}", "seed")
        if not isinstance(self.stop, tuple) or not all(isinstance(s, str) and s for s in self.stop):
            raise OptionError(f"stop must be non-empty strings, got {self.stop!r}", "stop")

    def set_fields(self) -> list[str]:
        """The names of the fields that send something."""
        return [f.name for f in fields(self) if getattr(self, f.name) not in (None, ())]

    def check_kind(self, kind: str) -> None:
        """:class:`OptionError` for a field that endpoints of ``kind`` do not take."""
        allowed = KIND_FIELDS[kind]
        for name in self.set_fields():
            if name not in allowed:
                other = "anthropic" if kind == "openai" else "openai"
                raise OptionError(f"{name} is not a field of kind {kind!r} endpoints (it applies "
                                  f"to kind {other!r}); kind {kind!r} takes {', '.join(allowed)}",
                                  name)

    def to_json(self) -> dict[str, Any]:
        """The fields that are set, as recorded in a call's ``extra["request_options"]``."""
        return {name: list(self.stop) if name == "stop" else getattr(self, name)
                for name in self.set_fields()}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))
