"""``[[models]]``: the ``provider/model`` short form (each preset), per-model request fields, and
the errors that name their key (docs/sweep-spec.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coordinator.sweep_spec import SweepSpec, SweepSpecError, parse_spec
from generators.providers.options import RequestOptions

DOC = Path(__file__).resolve().parents[2] / "docs" / "sweep-spec.md"

HEAD = """
operators = ["aten::add"]
platforms = ["cpu"]

[sweep]
name = "t"

[[methods]]
name = "sample"
"""


def parse(models: str, head: str = HEAD) -> SweepSpec:
    return parse_spec(head + models, "sweep.toml")


def error(models: str, head: str = HEAD) -> SweepSpecError:
    with pytest.raises(SweepSpecError) as info:
        parse(models, head)
    return info.value


SHORT = """
[[models]]
model = "openai/gpt-5"
reasoning_effort = "high"
seed = 7

[[models]]
model = "openai/gpt-4.1-mini"

[[models]]
model = "anthropic/claude-sonnet-4-5"
max_tokens = 16000
thinking_budget = 8000
top_p = 0.95
stop = ["</kernel>"]

[[models]]
model = "openrouter/anthropic/claude-sonnet-4.5"
stop = "```\\n\\n"

[[models]]
model = "deepseek/deepseek-reasoner"

[[models]]
model = "vllm/Qwen/Qwen3-32B"
base_url = "http://127.0.0.1:8000/v1"
top_p = 0.8

[[models]]
name = "qwen-again"
model = "vllm/Qwen/Qwen3-32B"
base_url = "http://127.0.0.1:8000/v1"
top_p = 0.8
temperature = 0.2
"""


def test_each_preset_fills_the_endpoint_and_the_model_id() -> None:
    spec = parse(SHORT)
    endpoints = {e.name: e for e in spec.endpoints}
    assert list(endpoints) == ["openai", "anthropic", "openrouter", "deepseek", "vllm-127.0.0.1-8000"]
    got = {n: (e.kind, e.base_url, e.api_key_env, e.max_tokens_param) for n, e in endpoints.items()}
    assert got == {
        "openai": ("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "max_completion_tokens"),
        "anthropic": ("anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY", "max_tokens"),
        "openrouter": ("openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", "max_tokens"),
        "deepseek": ("openai", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", "max_tokens"),
        "vllm-127.0.0.1-8000": ("openai", "http://127.0.0.1:8000/v1", "", "max_tokens"),
    }
    models = [(m.name, m.endpoint, m.model) for m in spec.models]
    assert models == [
        ("openai-gpt-5", "openai", "gpt-5"),
        ("openai-gpt-4.1-mini", "openai", "gpt-4.1-mini"),  # one endpoint for both: shared limits
        ("anthropic-claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
        ("openrouter-anthropic-claude-sonnet-4.5", "openrouter", "anthropic/claude-sonnet-4.5"),
        ("deepseek-deepseek-reasoner", "deepseek", "deepseek-reasoner"),
        ("vllm-Qwen-Qwen3-32B", "vllm-127.0.0.1-8000", "Qwen/Qwen3-32B"),
        ("qwen-again", "vllm-127.0.0.1-8000", "Qwen/Qwen3-32B"),  # a label given explicitly
    ]
    assert {p.model for p in spec.plan()} == {m[0] for m in models}
    assert not [w for w in spec.warnings if "no model uses endpoint" in w]


def test_request_fields_are_typed_and_reach_the_endpoint_of_their_model() -> None:
    spec = parse(SHORT)
    gpt5, mini, claude, router, _, qwen, again = spec.models
    assert gpt5.options == RequestOptions(reasoning_effort="high", seed=7)
    assert mini.options == RequestOptions()
    assert claude.options == RequestOptions(thinking_budget=8000, top_p=0.95, stop=("</kernel>",))
    assert router.options == RequestOptions(stop=("```\n\n",))  # one string: one stop sequence
    assert qwen.options == again.options == RequestOptions(top_p=0.8)
    openai = spec.endpoint("openai")
    assert openai.model_options == (("gpt-5", gpt5.options),)
    assert openai.options_for("gpt-5") == gpt5.options and openai.options_for("gpt-4.1-mini") == mini.options
    assert spec.endpoint("anthropic").options_for("claude-sonnet-4-5").thinking_budget == 8000
    assert spec.endpoint("vllm-127.0.0.1-8000").model_options == (("Qwen/Qwen3-32B", qwen.options),)


def test_explicit_endpoints_take_request_fields_and_stream() -> None:
    head = HEAD + """
[[endpoints]]
name = "gw"
kind = "anthropic"
base_url = "https://gateway.example"
api_key_env = "GW_KEY"
stream = true
"""
    spec = parse('[[models]]\nname = "c"\nendpoint = "gw"\nmodel = "claude"\nthinking_budget = 2048\n',
                 head)
    assert spec.endpoint("gw").stream and spec.endpoint("gw").options_for("claude").thinking_budget == 2048
    e = error('[[models]]\nname = "c"\nendpoint = "gw"\nmodel = "claude"\n',
              head.replace("stream = true", 'stream = "yes"'))
    assert e.path == "endpoints[0].stream" and "expected true or false" in e.message


_E = '[[endpoints]]\nname = "openai"\nkind = "openai"\nbase_url = "https://api.openai.com/v1"\n'


@pytest.mark.parametrize(("models", "path", "words"), [
    # the short form
    ('model = "opnai/gpt-5"', "models[0].model", "unknown provider 'opnai'"),
    ('model = "opnai/gpt-5"', "models[0].model", "did you mean 'openai'"),
    ('model = "gpt-5"', "models[0].model", "names no provider"),
    ('model = "openai/"', "models[0].model", "no model id"),
    ('model = "vllm/Qwen/Qwen3-32B"', "models[0].base_url", "need base_url"),
    ('model = "vllm/q"\nbase_url = "127.0.0.1:8000"', "models[0].base_url", "not an http://"),
    ('model = "openai/gpt-5"\nbase_url = "http://127.0.0.1:8000/v1"', "models[0].base_url",
     "base_url is for vllm/ models"),
    ('model = "vllm/q"\nbase_url = "http://h:8000/v1"\n\n[[models]]\nmodel = "vllm/r"\n'
     'base_url = "http://h:8000/other"', "models[1].base_url", "one server, one base_url"),
    ('model = "openai/gpt-5"\n\n[[models]]\nmodel = "openai/gpt-5"', "models[1].name",
     "duplicate name 'openai-gpt-5'"),
    # the explicit form
    (_E + '\n[[models]]\nendpoint = "openai"\nmodel = "gpt-5"', "models[0].name", "required key"),
    (_E + '\n[[models]]\nname = "g"\nendpoint = "openai"\nmodel = "gpt-5"\nbase_url = "http://h/v1"',
     "models[0].base_url", "is for the short form"),
    (_E + '\n[[models]]\nmodel = "openai/gpt-5"', "models[0].model",
     "makes an endpoint named 'openai', but [[endpoints]] declares one"),
    # request fields: types
    ('model = "openai/gpt-5"\nreasoning_effort = 3', "models[0].reasoning_effort",
     "expected a string, got an integer"),
    ('model = "anthropic/c"\nthinking_budget = "big"', "models[0].thinking_budget",
     "expected an integer, got a string"),
    ('model = "openai/gpt-5"\ntop_p = "high"', "models[0].top_p", "expected a number"),
    ('model = "openai/gpt-5"\nseed = 1.5', "models[0].seed", "expected an integer, got a float"),
    ('model = "openai/gpt-5"\nstop = [1]', "models[0].stop[0]", "expected a string"),
    ('model = "openai/gpt-5"\nstop = 1', "models[0].stop", "expected an array of strings"),
    # request fields: values
    ('model = "openai/gpt-5"\nreasoning_effort = "hihg"', "models[0].reasoning_effort",
     "must be one of none, minimal, low, medium, high, xhigh, max"),
    ('model = "openai/gpt-5"\ntop_p = 1.5', "models[0].top_p", "(0, 1]"),
    ('model = "openai/gpt-5"\nstop = [""]', "models[0].stop[0]", "must not be empty"),
    ('model = "anthropic/c"\nthinking_budget = 100', "models[0].thinking_budget", ">= 1024"),
    ('model = "anthropic/c"\nthinking_budget = 8192', "models[0].thinking_budget",
     "less than the default max_tokens (8192)"),
    ('model = "anthropic/c"\nmax_tokens = 4000\nthinking_budget = 4000',
     "models[0].thinking_budget", "less than max_tokens (4000)"),
    ('model = "anthropic/c"\nthinking_budget = 2048\ntemperature = 0.5', "models[0].temperature",
     "no temperature but 1"),
    ('model = "anthropic/c"\nthinking_budget = 2048\ntop_p = 0.5', "models[0].top_p",
     "between 0.95 and 1"),
    # request fields: the endpoint's kind
    ('model = "openai/gpt-5"\nthinking_budget = 2048', "models[0].thinking_budget",
     "not a field of kind 'openai' endpoints (it applies to kind 'anthropic')"),
    ('model = "anthropic/c"\nreasoning_effort = "low"', "models[0].reasoning_effort",
     "not a field of kind 'anthropic' endpoints"),
    ('model = "anthropic/c"\nseed = 1', "models[0].seed", "kind 'anthropic' takes thinking_budget"),
    # one model id, one set of request fields per endpoint
    ('model = "openai/gpt-5"\nreasoning_effort = "low"\n\n[[models]]\nname = "hi"\n'
     'model = "openai/gpt-5"\nreasoning_effort = "high"', "models[1]",
     "has other request fields (reasoning_effort) in models[0]"),
])
def test_model_errors_name_the_key(models: str, path: str, words: str) -> None:
    text = models if models.startswith("[[endpoints]]") else "[[models]]\n" + models
    e = error(text)
    assert e.path == path, str(e)
    assert words in str(e), str(e)
    assert str(e).startswith(f"sweep.toml: {path}: ")


def test_a_method_temperature_is_refused_for_a_thinking_model() -> None:
    models = '[[models]]\nmodel = "anthropic/c"\nthinking_budget = 2048\n'
    e = error(models, HEAD.replace('name = "sample"', 'name = "sample"\ntemperature = 0.7'))
    assert e.path == "methods[0].temperature" and "models[0]" in e.message
    parse(models, HEAD.replace('name = "sample"', 'name = "sample"\ntemperature = 1.0'))


def test_the_short_form_example_in_the_docs_parses() -> None:
    blocks = re.findall(r"```toml\n(.*?)```", DOC.read_text(), flags=re.S)
    (short,) = [b for b in blocks if 'model = "openai/' in b]
    spec = parse_spec(short, "docs/sweep-spec.md")
    assert [m.name for m in spec.models] == ["gpt-5-high", "openai-gpt-5-mini",
                                             "anthropic-claude-sonnet-4-5", "vllm-Qwen-Qwen3-32B"]
    assert spec.endpoint("openai").options_for("gpt-5").reasoning_effort == "high"
