"""What the provider tests share: a key, a model with prices, a prompt, usage in each wire format
and an endpoint on the scripted server (tests/generators/fake_llm_server.py)."""

from __future__ import annotations

from typing import Any

from generators.llm import Message, Prompt, Role, Usage
from generators.providers import EndpointConfig, ModelPrice, PriceTable
from tests.generators.fake_llm_server import FakeServer

KEY_ENV = "KGB_TEST_FAKE_LLM_KEY"
KEY = "sk-kgb-test-7f3a9c1e5b2d4f60"
MODEL = "fake-model-1"
PRICES = PriceTable({MODEL: ModelPrice(prompt=1.0, completion=4.0, cached_prompt=0.25)})
PROMPT = Prompt(messages=(Message(Role.SYSTEM, "You write Triton kernels."),
                          Message(Role.USER, "Write softmax.")),
                template="test/v1", operator_id="aten::softmax")


def wire_usage(wire: str, prompt: int, completion: int, cached: int = 0, reasoning: int = 0,
               cache_write: int = 0) -> dict[str, Any]:
    """Usage as the server sends it, in the wire format (Anthropic: input excludes the cache)."""
    if wire == "openai":
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": cache_write},
                "completion_tokens_details": {"reasoning_tokens": reasoning}}
    return {"input_tokens": prompt - cached - cache_write, "output_tokens": completion,
            "cache_read_input_tokens": cached, "cache_creation_input_tokens": cache_write}


def server_usage(wire: str, usage: dict[str, Any] | None) -> Usage | None:
    """What the server billed, in the project's terms (the documented mapping, restated)."""
    if usage is None:
        return None
    if wire == "openai":
        return Usage(usage["prompt_tokens"], usage["completion_tokens"],
                     usage["prompt_tokens_details"]["cached_tokens"],
                     usage["completion_tokens_details"]["reasoning_tokens"],
                     usage["prompt_tokens_details"].get("cache_write_tokens", 0))
    return Usage(usage["input_tokens"] + usage["cache_read_input_tokens"]
                 + usage["cache_creation_input_tokens"],
                 usage["output_tokens"], usage["cache_read_input_tokens"], 0,
                 usage["cache_creation_input_tokens"])


def endpoint(server: FakeServer, wire: str, name: str, **kw: Any) -> EndpointConfig:
    """An endpoint on ``server``'s scripted endpoint ``name``, with quick retries."""
    opts: dict[str, Any] = {"api_key_env": KEY_ENV, "timeout_s": 0.5, "max_retries": 2,
                            "backoff_base_s": 0.01, "backoff_cap_s": 0.05}
    opts.update(kw)
    return EndpointConfig(name=f"{name}-{wire}", kind=wire,  # type: ignore[arg-type]
                          base_url=server.url(name, wire), **opts)
