"""An endpoint's configuration, as a sweep spec or a script gives it, validated when made."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from generators.providers.options import OptionError, RequestOptions

ProviderKind = Literal["openai", "anthropic"]
_NO_OPTIONS = RequestOptions()


class ProviderConfigError(ValueError):
    """An endpoint is configured wrongly (bad field, key variable unset): a user error.
    ``field`` names the offending :class:`EndpointConfig` field, when there is one."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


_HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")


@dataclass(frozen=True)
class EndpointConfig:
    """One model endpoint as a sweep spec names it; holds the key's variable name, never the key."""

    name: str                      # e.g. "local-vllm"; recorded as LLMCall.provider
    kind: ProviderKind
    base_url: str                  # OpenAI: ".../v1"; Anthropic: "https://api.anthropic.com"
    api_key_env: str = ""          # environment variable holding the key; "" sends none
    timeout_s: float = 600.0       # per attempt
    max_retries: int = 5
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 60.0
    max_concurrency: int = 16
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    burst_s: float = 1.0           # the rate buckets hold this many seconds of their rate
    # OpenAI kind only: newer OpenAI models take "max_completion_tokens"; vLLM, SGLang and
    # DeepSeek take "max_tokens".
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    # The header that carries a call's idempotency key ("" sends none); see base's module doc.
    idempotency_header: str = "Idempotency-Key"
    # Ask for replies as server-sent events (long generations; billing of a cut stream: base).
    stream: bool = False
    # Request fields per model id (reasoning effort, thinking budget ...): see options.py.
    model_options: tuple[tuple[str, RequestOptions], ...] = ()

    def __post_init__(self) -> None:
        if not self.name:
            raise ProviderConfigError("endpoint needs a name", "name")
        if self.kind not in ("openai", "anthropic"):
            raise ProviderConfigError(f"endpoint {self.name!r}: kind must be 'openai' or 'anthropic', "
                                      f"got {self.kind!r}", "kind")
        if not self.base_url.startswith(("http://", "https://")):
            raise ProviderConfigError(f"endpoint {self.name!r}: base_url must start with http:// or "
                                      f"https://, got {self.base_url!r}", "base_url")
        positive = {"timeout_s": self.timeout_s, "max_concurrency": self.max_concurrency,
                    "burst_s": self.burst_s, "backoff_cap_s": self.backoff_cap_s,
                    "requests_per_minute": self.requests_per_minute,
                    "tokens_per_minute": self.tokens_per_minute}
        for key, value in positive.items():
            if value is not None and not value > 0:
                raise ProviderConfigError(f"endpoint {self.name!r}: {key} must be > 0, got {value!r}",
                                          key)
        if self.idempotency_header and not _HEADER_NAME.fullmatch(self.idempotency_header):
            raise ProviderConfigError(f"endpoint {self.name!r}: idempotency_header must be an HTTP "
                                      f"header name (letters, digits, '-') or \"\", got "
                                      f"{self.idempotency_header!r}", "idempotency_header")
        for key, number in (("max_retries", self.max_retries), ("backoff_base_s", self.backoff_base_s)):
            if number < 0:
                raise ProviderConfigError(f"endpoint {self.name!r}: {key} must be >= 0, got "
                                          f"{number!r}", key)
        self._check_model_options()

    def _check_model_options(self) -> None:
        seen: set[str] = set()
        for model, options in self.model_options:
            if model in seen:
                raise ProviderConfigError(f"endpoint {self.name!r}: model {model!r} has two sets of "
                                          "request options", "model_options")
            seen.add(model)
            try:
                options.check_kind(self.kind)
            except OptionError as exc:
                raise ProviderConfigError(f"endpoint {self.name!r}, model {model!r}: {exc}",
                                          exc.field) from None

    def options_for(self, model: str) -> RequestOptions:
        """The request fields sent with every call for ``model`` (none set: nothing extra)."""
        for name, options in self.model_options:
            if name == model:
                return options
        return _NO_OPTIONS
