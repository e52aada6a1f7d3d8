"""Records shared by prompts, providers and methods: what is sent to a model and what came back.

Every call to a model becomes one :class:`LLMCall` — persisted before its text is used, so a
crash or a resume never pays for the same tokens twice. Billing rule: every response that
carries usage is counted, truncated and malformed ones included; an error response without
usage is not.

Tools (the ``agent`` method): a :class:`Prompt` may offer :class:`ToolSpec` definitions; a reply
may ask for :class:`ToolCall` s (``LLMCall.tool_calls``), which the conversation keeps on the
assistant's :class:`Message`; each result goes back as a ``Role.TOOL`` message naming the call it
answers. These records are the same for every wire format: how each format spells them is the
providers' business (``generators/providers/openai_compat.py`` and ``anthropic.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Role(str, enum.Enum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"          # the result of one tool call (``Message.tool_call_id`` names it)


@dataclass(frozen=True)
class ToolCall:
    """A model's request to run one tool. ``arguments`` is the JSON text exactly as the model
    wrote it (it may not parse: the caller says so to the model, it is not a transport error)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: its name, what it does, and a JSON Schema of its
    arguments (an object schema)."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Message:
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()  # an assistant message's requests
    tool_call_id: str = ""                 # a TOOL message: the call it answers


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: the exact messages, and the template that made them; ``tools`` are
    offered with it (none for a plain prompt)."""

    messages: tuple[Message, ...]
    template: str          # e.g. "aten/v1"
    operator_id: str
    tools: tuple[ToolSpec, ...] = ()


class CallStatus(str, enum.Enum):
    """How one model call ended (closed set; bare names in JSON)."""

    OK = "OK"                  # a complete reply
    TRUNCATED = "TRUNCATED"    # stopped by the token limit (billed)
    MALFORMED = "MALFORMED"    # a 2xx reply that does not parse as the wire format
    RATE_LIMITED = "RATE_LIMITED"  # 429 after every retry
    SERVER_ERROR = "SERVER_ERROR"  # 5xx after every retry
    CLIENT_ERROR = "CLIENT_ERROR"  # other 4xx: bad key, bad model, bad request (not retried)
    TIMEOUT = "TIMEOUT"        # no reply within the deadline after every retry
    BUDGET = "BUDGET"          # not sent: the trajectory's or sweep's budget was spent


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0     # part of prompt_tokens served from the provider's cache
    reasoning_tokens: int = 0  # part of completion_tokens spent on hidden reasoning
    cache_write_tokens: int = 0  # part of prompt_tokens written to the provider's cache

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens + other.prompt_tokens,
                     self.completion_tokens + other.completion_tokens,
                     self.cached_tokens + other.cached_tokens,
                     self.reasoning_tokens + other.reasoning_tokens,
                     self.cache_write_tokens + other.cache_write_tokens)


@dataclass(frozen=True)
class LLMCall:
    """One request to a model and its outcome, as stored."""

    provider: str              # endpoint name from the sweep spec, e.g. "local-vllm"
    model: str
    prompt: Prompt
    status: CallStatus
    text: str = ""             # the reply's text ("" when none)
    usage: Usage | None = None  # None: the response carried no usage (not billed)
    cost_usd: float = 0.0
    latency_s: float = 0.0
    attempts: int = 1
    finish_reason: str = ""
    error: str = ""            # what went wrong, for people (never contains the API key)
    response_id: str = ""
    temperature: float | None = None
    max_tokens: int | None = None
    extra: dict[str, str] = field(default_factory=dict)
    tool_calls: tuple[ToolCall, ...] = ()  # what the reply asked to run, in order

    @property
    def billed(self) -> bool:
        return self.usage is not None
