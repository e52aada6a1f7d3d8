"""A sweep spec's ``[[models]]``: which model, on which endpoint, with which request fields.

Two forms (docs/sweep-spec.md, ``[[models]]``):

* explicit: ``endpoint`` names an ``[[endpoints]]`` entry and ``model`` is the id sent to it;
  ``name`` (the label reports and trajectories use) is required;
* short: no ``endpoint``, and ``model = "provider/model"`` (:mod:`generators.providers.presets`:
  ``openai/``, ``anthropic/``, ``openrouter/``, ``deepseek/``, ``vllm/`` with ``base_url``) makes
  the endpoint (one per provider, or per server for ``vllm/``; shared by every model that names
  it) and the model id; ``name`` defaults to the string in the label alphabet
  (``openai/gpt-5`` → ``openai-gpt-5``).

Either form may set request fields (:class:`~generators.providers.options.RequestOptions`:
``reasoning_effort``, ``thinking_budget``, ``top_p``, ``seed``, ``stop``), checked against the
endpoint's kind here. A provider serves one endpoint and sees model ids, not labels, so one
model id on one endpoint has one set of request fields (as it has one price); the fields are
attached to the endpoint (``EndpointConfig.model_options``), which is how they reach the
provider of every generator.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from generators.providers.anthropic import DEFAULT_MAX_TOKENS as ANTHROPIC_MAX_TOKENS
from generators.providers.config import EndpointConfig
from generators.providers.options import OptionError, RequestOptions
from generators.providers.presets import PresetError, label, preset_endpoint
from generators.providers.pricing import ModelPrice, PriceError, PriceTable

if TYPE_CHECKING:
    from coordinator.spec_parser import SpecParser
    from coordinator.spec_records import MethodEntry

OPTION_KEYS = ("reasoning_effort", "thinking_budget", "top_p", "seed", "stop")
MODEL_KEYS = ("name", "endpoint", "model", "base_url", "temperature", "max_tokens", "prices",
              *OPTION_KEYS)


@dataclass(frozen=True)
class ModelSpec:
    """One ``[[models]]`` entry: a model id served by an endpoint, with sampling settings."""

    name: str                       # the spec's label for it, unique; what reports show
    endpoint: str                   # an endpoint's name (declared, or made by the short form)
    model: str                      # the id sent to the endpoint (e.g. "gpt-5", the vLLM served name)
    temperature: float | None = None  # None: the endpoint's default (a method's option overrides)
    max_tokens: int | None = None   # per call; None: the endpoint's default
    price: ModelPrice | None = None  # USD per 1M tokens; None: cost is reported as unknown
    options: RequestOptions = RequestOptions()  # request fields sent with every call


def parse_models(p: SpecParser, value: Any, declared: list[EndpointConfig]
                 ) -> tuple[list[ModelSpec], list[EndpointConfig]]:
    """The models, and the endpoints: the declared ones, then those the short form made, each
    with its models' request fields attached."""
    endpoints = {e.name: e for e in declared}
    out: list[ModelSpec] = []
    priced: dict[tuple[str, str], tuple[ModelPrice, str]] = {}
    optioned: dict[tuple[str, str], tuple[RequestOptions, str]] = {}
    for i, t in enumerate(p.array_of_tables(value, "models")):
        path = f"models[{i}]"
        p.keys(t, path, MODEL_KEYS, required=("model",))
        endpoint, model, derived = _endpoint_and_id(p, t, path, endpoints, len(declared))
        name = p.name(t["name"], f"{path}.name") if "name" in t else derived
        temperature = (p.number(t["temperature"], f"{path}.temperature", minimum=0)
                       if "temperature" in t else None)
        max_tokens = (p.integer(t["max_tokens"], f"{path}.max_tokens", minimum=1)
                      if "max_tokens" in t else None)
        options = _options(p, t, path, endpoints[endpoint], temperature, max_tokens)
        _one_per_model(p, optioned, (endpoint, model), options, path, "request fields",
                       ", ".join(k for k in OPTION_KEYS if k in t) or "none")
        price = None
        if "prices" in t:
            price = _prices(p, t["prices"], f"{path}.prices", model)
            _one_per_model(p, priced, (endpoint, model), price, f"{path}.prices", "prices", "")
        else:
            p.warn(path, f"no prices for {name!r}: its cost is reported as unknown (give "
                   "prices = {prompt = 0, completion = 0} for a free local server)")
        out.append(ModelSpec(name, endpoint, model, temperature, max_tokens, price, options))
    p.unique([m.name for m in out], "models", "name")
    with_options = [_attach(e, optioned) for e in endpoints.values()]
    return out, with_options


def _endpoint_and_id(p: SpecParser, t: dict[str, Any], path: str, endpoints: dict[str, EndpointConfig],
                     declared: int) -> tuple[str, str, str]:
    """(endpoint name, model id, default label) of an entry; the short form adds its endpoint
    to ``endpoints`` (whose first ``declared`` entries are the spec's own)."""
    model = p.string(t["model"], f"{path}.model")
    names = list(endpoints)[:declared]
    if "endpoint" in t:
        if "base_url" in t:
            raise p.fail(f"{path}.base_url", "is for the short form (model = \"vllm/MODEL\" without "
                         "endpoint); a declared endpoint has its own base_url")
        endpoint = p.string(t["endpoint"], f"{path}.endpoint")
        if endpoint not in names:
            close = difflib.get_close_matches(endpoint, names, n=1)
            hint = f"did you mean \"{close[0]}\"? " if close else ""
            known = ", ".join(sorted(names)) or "(none)"
            raise p.fail(f"{path}.endpoint", f"no endpoint named \"{endpoint}\"; {hint}"
                         f"known: {known}")
        if "name" not in t:
            raise p.fail(f"{path}.name", "required key is missing (it may be left out only with "
                         "the short form, model = \"provider/model\" without endpoint)")
        return endpoint, model, ""
    base_url = p.base_url(t["base_url"], f"{path}.base_url") if "base_url" in t else None
    try:
        config, model_id = preset_endpoint(model, base_url)
    except PresetError as exc:
        raise p.fail(f"{path}.{exc.field}", str(exc)) from None
    if config.name in names:
        raise p.fail(f"{path}.model", f"the short form makes an endpoint named {config.name!r}, "
                     f"but [[endpoints]] declares one: write endpoint = \"{config.name}\" and "
                     f"model = \"{model_id}\", or rename that entry")
    earlier = endpoints.setdefault(config.name, config)
    if earlier.base_url != config.base_url:
        raise p.fail(f"{path}.base_url", f"endpoint {config.name!r} is already made with base_url "
                     f"{earlier.base_url!r} by an earlier model; one server, one base_url")
    return config.name, model_id, label(model)  # never empty: it starts with the prefix


def _options(p: SpecParser, t: dict[str, Any], path: str, endpoint: EndpointConfig,
             temperature: float | None, max_tokens: int | None) -> RequestOptions:
    """The entry's request fields, typed, checked against the endpoint's kind and Anthropic's
    rules for extended thinking."""
    kw: dict[str, Any] = {}
    if "reasoning_effort" in t:
        kw["reasoning_effort"] = p.string(t["reasoning_effort"], f"{path}.reasoning_effort")
    if "thinking_budget" in t:
        kw["thinking_budget"] = p.integer(t["thinking_budget"], f"{path}.thinking_budget")
    if "top_p" in t:
        kw["top_p"] = p.number(t["top_p"], f"{path}.top_p", positive=True)
    if "seed" in t:
        kw["seed"] = p.integer(t["seed"], f"{path}.seed")
    if "stop" in t:
        stop = t["stop"]
        kw["stop"] = (p.string(stop, f"{path}.stop"),) if isinstance(stop, str) else \
            tuple(p.strings(stop, f"{path}.stop"))
    try:
        options = RequestOptions(**kw)
        options.check_kind(endpoint.kind)
    except OptionError as exc:
        raise p.fail(f"{path}.{exc.field}", f"{exc} (endpoint {endpoint.name!r})") from None
    budget = options.thinking_budget
    if budget is not None:
        limit = max_tokens if max_tokens is not None else ANTHROPIC_MAX_TOKENS
        if budget >= limit:
            said = "max_tokens" if max_tokens is not None else "the default max_tokens"
            raise p.fail(f"{path}.thinking_budget", f"must be less than {said} ({limit}): "
                         "thinking is part of the completion")
        if temperature not in (None, 1.0):
            raise p.fail(f"{path}.temperature", "with thinking_budget, Anthropic takes no "
                         "temperature but 1; leave it out")
        if options.top_p is not None and options.top_p < 0.95:
            raise p.fail(f"{path}.top_p", "with thinking_budget, Anthropic takes top_p between "
                         f"0.95 and 1, got {options.top_p}")
    return options


def check_methods(p: SpecParser, models: list[ModelSpec], methods: list[MethodEntry]) -> None:
    """A trajectory method's temperatures (``temperature``, ``round_temperature``, and 0 for round 1
    of ``sample`` with ``rounds`` > 1) are sent to every model: refuse one that a model with
    Anthropic's extended thinking would refuse."""
    thinking = [(i, m) for i, m in enumerate(models) if m.options.thinking_budget is not None]
    if not thinking:
        return
    i, model = thinking[0]
    why = (f"models[{i}] ({model.name!r}) sets thinking_budget, and with extended thinking "
           "Anthropic takes no temperature but 1")
    for j, entry in enumerate(methods):
        if entry.kind != "trajectory":
            continue
        options = entry.options_dict()
        for key in ("temperature", "round_temperature"):
            if options.get(key) not in (None, 1, 1.0):
                raise p.fail(f"methods[{j}].{key}", why)
        rounds = options.get("rounds", 1)
        if isinstance(rounds, int) and rounds > 1:
            raise p.fail(f"methods[{j}].rounds", f"{why}, and round 1 of several rounds is sent "
                         "at temperature 0")


def _one_per_model(p: SpecParser, seen: dict[tuple[str, str], tuple[Any, str]], key: tuple[str, str],
                   value: Any, path: str, what: str, keys: str) -> None:
    earlier = seen.get(key)
    if earlier is not None and earlier[0] != value:
        where = f" ({keys})" if keys else ""
        raise p.fail(path, f"model {key[1]!r} on endpoint {key[0]!r} has other {what}{where} in "
                     f"{earlier[1]}; one model id has one set of {what} per endpoint (to compare "
                     "two settings of one model, declare a second [[endpoints]] entry for it)")
    seen.setdefault(key, (value, path))


def _prices(p: SpecParser, value: Any, path: str, model: str) -> ModelPrice:
    t = p.table(value, path)
    p.keys(t, path, ("prompt", "completion", "cached_prompt"), required=("prompt", "completion"))
    for key, v in t.items():
        p.number(v, f"{path}.{key}", minimum=0)
    try:
        return PriceTable.from_dict({model: t}).models[model]
    except PriceError as exc:  # pragma: no cover - the checks above catch what it checks
        raise p.fail(path, str(exc)) from None


def _attach(endpoint: EndpointConfig,
            optioned: dict[tuple[str, str], tuple[RequestOptions, str]]) -> EndpointConfig:
    fields = tuple(sorted((model, options) for (name, model), (options, _) in optioned.items()
                          if name == endpoint.name and options.set_fields()))
    return replace(endpoint, model_options=fields) if fields else endpoint
