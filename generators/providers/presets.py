"""Model presets: ``provider/model`` strings that name a hosted API (or a server of your own)
and a model id, as a short form for an endpoint and a model.

:data:`PRESETS` says what each prefix fills in (docs/sweep-spec.md has them as a table):
``openai/``, ``anthropic/``, ``openrouter/`` and ``deepseek/`` name a hosted API and the variable
that holds its key; ``vllm/`` a server of your own, whose URL comes with the model.

Everything after the first ``/`` is the model id, slashes included (``openrouter/anthropic/
claude-sonnet-4.5`` asks OpenRouter for ``anthropic/claude-sonnet-4.5``; ``vllm/Qwen/Qwen3-32B``
asks the vLLM server for the model it serves as ``Qwen/Qwen3-32B``). OpenAI's newer models refuse
``max_tokens`` and all of its chat models take ``max_completion_tokens``, so that preset sends the
latter. The endpoint a preset makes is named after the prefix (``openai``), or for ``vllm/``
after the server (``vllm-127.0.0.1-8000``), and has :class:`EndpointConfig`'s other defaults.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from generators.providers.config import EndpointConfig, ProviderKind

_NOT_IN_LABELS = re.compile(r"[^A-Za-z0-9._]+")


@dataclass(frozen=True)
class Preset:
    kind: ProviderKind
    base_url: str                  # "": the model entry gives it (a server of your own)
    api_key_env: str
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"


PRESETS: Mapping[str, Preset] = {
    "openai": Preset("openai", "https://api.openai.com/v1", "OPENAI_API_KEY",
                     "max_completion_tokens"),
    "anthropic": Preset("anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
    "openrouter": Preset("openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "deepseek": Preset("openai", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "vllm": Preset("openai", "", ""),
}


class PresetError(ValueError):
    """A short form that names no preset, or lacks (or should not have) a base URL; ``field``
    is ``"model"`` or ``"base_url"``."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def split_model(short: str) -> tuple[str, str]:
    """``("openai", "gpt-5")`` from ``"openai/gpt-5"``."""
    prefix, slash, model = short.partition("/")
    known = ", ".join(sorted(PRESETS))
    if not slash:
        raise PresetError(f"{short!r} names no provider: write it as provider/model (e.g. "
                          f"\"openai/{short}\"; providers: {known}), or give the endpoint "
                          "it is served by", "model")
    if prefix not in PRESETS:
        close = difflib.get_close_matches(prefix.lower(), PRESETS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise PresetError(f"unknown provider {prefix!r} in {short!r}; {hint}providers: {known} "
                          "(or give the endpoint it is served by)", "model")
    if not model.strip():
        raise PresetError(f"{short!r} has no model id after {prefix + '/'!r}", "model")
    return prefix, model


def preset_endpoint(short: str, base_url: str | None) -> tuple[EndpointConfig, str]:
    """The endpoint and the model id a short form names; ``base_url`` is for ``vllm/`` only."""
    prefix, model = split_model(short)
    preset = PRESETS[prefix]
    if preset.base_url and base_url is not None:
        raise PresetError(f"base_url is for vllm/ models (a server of your own); {prefix}/ talks "
                          f"to {preset.base_url} (for another server of kind {preset.kind!r}, "
                          "declare an [[endpoints]] entry)", "base_url")
    if not preset.base_url and base_url is None:
        raise PresetError(f"{prefix}/ models need base_url = the server's OpenAI-compatible URL "
                          "(e.g. \"http://127.0.0.1:8000/v1\")", "base_url")
    url = base_url or preset.base_url
    name = prefix
    if not preset.base_url:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        name = label(f"{prefix}-{parts.hostname}-{port}")
    return EndpointConfig(name=name, kind=preset.kind, base_url=url,
                          api_key_env=preset.api_key_env,
                          max_tokens_param=preset.max_tokens_param), model


def label(text: str) -> str:
    """``text`` in the label alphabet (letters, digits, ``.``, ``_``, ``-``, starting with a
    letter or digit): each run of other characters becomes one ``-``."""
    return _NOT_IN_LABELS.sub("-", text).strip("-._")
