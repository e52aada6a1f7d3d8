"""Sweep specs: one TOML file that says what a sweep runs, parsed and validated up front.

A spec names the problems (suites and explicit ids), the platforms, the model endpoints and
models (``[[models]]``, with the ``provider/model`` short form: :mod:`coordinator.spec_models`),
the generation methods with their options, the agents, the budgets and the concurrency.
Every key is documented in ``docs/sweep-spec.md``. :func:`load_spec` reads a file and
:func:`parse_spec` reads text; both return a frozen :class:`SweepSpec` or raise
:class:`SweepSpecError`, whose message names the file and the exact key path::

    sweep.toml: models[1].endpoint: no endpoint named "vlm"; known: local-vllm, openai

Key paths count array entries from 0 in file order (``models[1]`` is the second ``[[models]]``).

Validation is done by the code that will use the values, so the spec cannot drift from it:
endpoints are built as :class:`generators.providers.base.EndpointConfig`, prices as a
:class:`generators.providers.pricing.PriceTable`, methods are instantiated through
:func:`generators.create` / :func:`generators.create_trajectory` (an unknown or invalid option fails
here, not hours into a sweep), and operator ids and suites resolve against the operator registry.
Unknown keys are errors: a typo is never silently ignored. Secrets never appear in a spec: an
endpoint names the environment variable that holds its key (``api_key_env``), and a value there
that looks like a literal key is refused (without echoing it).

Things that are allowed but probably not meant are returned as :attr:`SweepSpec.warnings`
(a suite only partly registered so far, a model no method uses, an endpoint no model uses ...).

:meth:`SweepSpec.plan` enumerates the trajectories: platform x operator x method x model x
sample, where candidate methods (``reference``, ``replay``) take no model, and a problem is
planned only on the platforms it declares.
"""

from __future__ import annotations

import difflib
import inspect
import math
import random
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import operators
from coordinator.spec_models import ModelSpec, check_methods, parse_models
from generators import Method, MethodError, TrajectoryMethod, create, create_trajectory, method_kind
from generators.providers.base import EndpointConfig, ProviderConfigError
from generators.providers.pricing import PriceTable
from generators.registry import MethodKind
from operators.spec import PLATFORMS, Source
from protos.security import AuthConfigError, ClientAuthFiles

# The published sizes of each suite (shared/reference/operators.md): MS = 110 ATen + 50 vLLM +
# 50 cuBLAS on NVIDIA; MC = the 110 ATen problems on every platform.
SUITES: Mapping[str, tuple[tuple[Source, ...], int]] = {
    "ms": ((Source.ATEN, Source.VLLM, Source.CUBLAS), 210),
    "mc": ((Source.ATEN,), 110),
    "aten": ((Source.ATEN,), 110),
    "vllm": ((Source.VLLM,), 50),
    "cublas": ((Source.CUBLAS,), 50),
}

_TOP_KEYS = ("sweep", "suites", "operators", "samples", "platforms", "endpoints", "models",
             "methods", "agents", "budgets", "concurrency", "fleet")
_TOP_LEVEL_SCALARS = ("suites", "operators", "samples", "platforms")
# An [[agents]] entry's own credentials: ClientAuthFiles' fields (docs/auth.md).
AGENT_AUTH_KEYS = ("ca", "cert", "key", "token_file")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Prefixes of real API keys (OpenAI, Anthropic, Groq, xAI, Hugging Face, GitHub, Google, Stripe-like).
_KEY_PREFIXES = ("sk-", "sk_", "pk-", "gsk_", "xai-", "hf_", "ghp_", "github_pat_", "AIza", "key-",
                 "Bearer ")


class SweepSpecError(ValueError):
    """A sweep spec is invalid; ``str()`` is ``"<source>: <key path>: <message>"``."""

    def __init__(self, source: str, path: str, message: str) -> None:
        self.source = source
        self.path = path
        self.message = message
        where = f"{source}: {path}: " if path else f"{source}: "
        super().__init__(where + message)


# -- the records -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodEntry:
    """One ``[[methods]]`` entry: a registered method, its options, and the built instance."""

    name: str                       # the registered method name ("sample", "refine", ...)
    label: str                      # unique within the spec; defaults to ``name``
    kind: MethodKind                # "candidate" (no model) or "trajectory" (needs a model)
    options: tuple[tuple[str, Any], ...] = ()
    instance: Method | TrajectoryMethod | None = field(default=None, compare=False, repr=False,
                                                       hash=False)

    def options_dict(self) -> dict[str, Any]:
        return dict(self.options)

    def build(self) -> Method | TrajectoryMethod:
        """A fresh instance with the spec's options."""
        if self.kind == "candidate":
            return create(self.name, **self.options_dict())
        return create_trajectory(self.name, **self.options_dict())


@dataclass(frozen=True)
class AgentSpec:
    """One ``[[agents]]`` entry: a device agent the coordinator routes to."""

    address: str                    # host:port of its gRPC server
    platform: str                   # cuda, rocm or cpu
    device: str | None = None       # the device model it must report, e.g. "NVIDIA H200"
    auth: ClientAuthFiles | None = None  # TLS and token for this agent (else the sweep's default)


@dataclass(frozen=True)
class Budgets:
    """``[budgets]``: None means no limit. Per trajectory limits make a fresh budget for each
    trajectory; sweep limits are one budget shared by the whole sweep."""

    trajectory_max_tokens: int | None = None
    trajectory_max_cost_usd: float | None = None
    sweep_max_tokens: int | None = None
    sweep_max_cost_usd: float | None = None


MAX_RUNNERS_PER_ENDPOINT = 64


@dataclass(frozen=True)
class Concurrency:
    """``[concurrency]``: how much work is in flight."""

    generation_per_endpoint: int = 64  # trajectories in flight per endpoint
    evaluations_in_flight: int = 0     # candidates being evaluated; 0: twice the fleet's capacity
    runners_per_endpoint: int = 0      # trajectory runner actors per endpoint; 0: the engine's choice


@dataclass(frozen=True)
class FleetSettings:
    """``[fleet]``: how far the coordinator trusts its agents' verdicts."""

    spot_check: float | None = None  # fraction of PASSED verdicts judged again; None: not set


class PlannedTrajectory(NamedTuple):
    """One trajectory of the plan (``model`` is "" for candidate methods)."""

    platform: str
    operator_id: str
    method: str                     # the method entry's label
    model: str                      # the model entry's name, or ""
    sample: int


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep spec. ``operators`` is resolved (suites expanded, duplicates removed,
    in registry order); ``store`` is resolved against the spec file's directory."""

    name: str
    store: Path
    seed: int
    suites: tuple[str, ...]
    operators: tuple[str, ...]
    samples: int
    platforms: tuple[str, ...]
    endpoints: tuple[EndpointConfig, ...]
    models: tuple[ModelSpec, ...]
    methods: tuple[MethodEntry, ...]
    agents: tuple[AgentSpec, ...]
    budgets: Budgets
    concurrency: Concurrency
    fleet: FleetSettings = FleetSettings()
    source: str = "<spec>"
    warnings: tuple[str, ...] = ()

    def endpoint(self, name: str) -> EndpointConfig:
        for e in self.endpoints:
            if e.name == name:
                return e
        raise KeyError(name)

    def model(self, name: str) -> ModelSpec:
        for m in self.models:
            if m.name == name:
                return m
        raise KeyError(name)

    def method(self, label: str) -> MethodEntry:
        for m in self.methods:
            if m.label == label:
                return m
        raise KeyError(label)

    def price_table(self, endpoint: str) -> PriceTable:
        """The prices of the models served by ``endpoint``, keyed by model id (what a provider
        for that endpoint is given)."""
        return PriceTable({m.model: m.price for m in self.models
                           if m.endpoint == endpoint and m.price is not None})

    def plan(self) -> list[PlannedTrajectory]:
        """Every trajectory, in a stable order: platform, operator, method, model, sample.

        A problem is planned on each listed platform it declares; a candidate method runs once per
        (platform, problem, sample) with model ""; a trajectory method runs for every model. The
        number of samples is what the method says for that problem (``n`` for ``sample`` and
        ``refine``, the recorded count for ``replay``, 1 for ``reference``).
        """
        out: list[PlannedTrajectory] = []
        specs = [operators.get(op_id) for op_id in self.operators]
        for platform in self.platforms:
            for spec in specs:
                if platform not in spec.platforms:
                    continue
                for entry in self.methods:
                    method = entry.instance if entry.instance is not None else entry.build()
                    n = method.samples(spec)
                    models = [""] if entry.kind == "candidate" else [m.name for m in self.models]
                    for model in models:
                        out += [PlannedTrajectory(platform, spec.id, entry.label, model, s)
                                for s in range(n)]
        return out

    def dispatch_order(self) -> list[PlannedTrajectory]:
        """The plan shuffled with the sweep's ``seed``: the order work is handed out, so no
        endpoint, problem or agent is served in one long block. Same spec and seed, same order."""
        order = self.plan()
        random.Random(self.seed).shuffle(order)
        return order


# -- loading -----------------------------------------------------------------------------------


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate the spec at ``path``; relative paths in it are relative to its folder."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SweepSpecError(str(path), "", f"cannot read the spec: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SweepSpecError(str(path), "", "the spec is not UTF-8 text") from None
    return parse_spec(text, str(path), base_dir=p.parent)


def parse_spec(text: str, source_name: str = "<spec>", *, base_dir: str | Path | None = None) -> SweepSpec:
    """Validate spec ``text``; ``source_name`` starts every error message. Relative paths (the
    store, a method's ``path`` option) are resolved against ``base_dir`` when given."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SweepSpecError(source_name, "", f"not valid TOML: {exc}") from None
    return _Parser(source_name, None if base_dir is None else Path(base_dir)).spec(data)


# -- the parser --------------------------------------------------------------------------------


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


class _Parser:
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

    # -- sections --

    def spec(self, data: dict[str, Any]) -> SweepSpec:
        self.keys(data, "", _TOP_KEYS, required=("sweep",))
        sweep = self.table(data["sweep"], "sweep")
        for key in _TOP_LEVEL_SCALARS:
            if key in sweep:
                raise self.fail(f"sweep.{key}", f"unknown key; {key!r} is a top-level key: in TOML it "
                                "must come before the first [table] header (move it above [sweep])")
        self.keys(sweep, "sweep", ("name", "store", "seed"), required=("name",))
        name = self.name(sweep["name"], "sweep.name")
        store = self.resolve(self.string(sweep["store"], "sweep.store")) if "store" in sweep \
            else self.resolve(f"runs/{name}")
        seed = self.integer(sweep.get("seed", 0), "sweep.seed", minimum=0)

        platforms = self.platforms(data.get("platforms", ["cuda"]))
        suites, ops = self.operators(data, platforms)
        samples = self.integer(data.get("samples", 1), "samples", minimum=1)
        models, endpoints = parse_models(self, data.get("models", []),
                                         self.endpoints(data.get("endpoints", [])))
        methods = self.methods(data.get("methods", []), samples)
        check_methods(self, models, methods)
        agents = self.agents(data.get("agents", []), platforms)
        budgets = self.budgets(data.get("budgets", {}))
        concurrency = self.concurrency(data.get("concurrency", {}))
        fleet = self.fleet(data.get("fleet", {}))

        trajectory_methods = [m for m in methods if m.kind == "trajectory"]
        if trajectory_methods and not models:
            i = methods.index(trajectory_methods[0])
            raise self.fail(f"methods[{i}]", f"method {trajectory_methods[0].name!r} calls a model, "
                            "but the spec has no [[models]]")
        if models and not trajectory_methods:
            self.warn("models", "no method calls a model (only candidate methods are listed); "
                      "the models are unused")
        used = {m.endpoint for m in models}
        for i, e in enumerate(endpoints):
            if e.name not in used:
                self.warn(f"endpoints[{i}]", f"no model uses endpoint {e.name!r}")
        if samples != 1 and not any("n" in m.options_dict() or _takes_n(m) for m in methods):
            self.warn("samples", "no listed method takes a sample count (n); it has no effect")
        return SweepSpec(name=name, store=store, seed=seed, suites=suites, operators=ops,
                         samples=samples, platforms=platforms, endpoints=tuple(endpoints),
                         models=tuple(models), methods=tuple(methods), agents=tuple(agents),
                         budgets=budgets, concurrency=concurrency, fleet=fleet, source=self.source,
                         warnings=tuple(self.warnings))

    def platforms(self, value: Any) -> tuple[str, ...]:
        names = self.strings(value, "platforms")
        if not names:
            raise self.fail("platforms", "must list at least one platform")
        for i, p in enumerate(names):
            if p not in PLATFORMS:
                raise self.fail(f"platforms[{i}]", f"unknown platform {p!r}; known: {_plural(PLATFORMS)}")
        for i, p in enumerate(names):
            if p in names[:i]:
                raise self.fail(f"platforms[{i}]", f"duplicate platform {p!r}")
        return tuple(names)

    def operators(self, data: dict[str, Any], platforms: tuple[str, ...]) -> tuple[tuple[str, ...],
                                                                                   tuple[str, ...]]:
        suites = self.strings(data.get("suites", []), "suites")
        explicit = self.strings(data.get("operators", []), "operators")
        if not suites and not explicit:
            raise self.fail("suites", "the spec selects no problems: give suites (ms, mc, aten, vllm, "
                            "cublas) or operators (ids like \"aten::add\")")
        chosen: set[str] = set()
        for i, suite in enumerate(suites):
            path = f"suites[{i}]"
            if suite not in SUITES:
                close = difflib.get_close_matches(suite.lower(), SUITES, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise self.fail(path, f"unknown suite {suite!r}; {hint}known: {', '.join(SUITES)}")
            sources, published = SUITES[suite]
            ids = [s.id for src in sources for s in operators.all_specs(src)]
            if not ids:
                raise self.fail(path, f"suite {suite!r} has no registered problems yet "
                                f"(0 of {published}); list operators explicitly instead")
            if len(ids) < published:
                self.warn(path, f"suite {suite!r}: {len(ids)} of its {published} problems are "
                          "registered so far; the sweep runs those")
            if suite == "mc" and platforms == ("cuda",):
                self.warn(path, "suite 'mc' is meant for several platforms, but only cuda is listed")
            chosen.update(ids)
        known = operators.ids()
        for i, op_id in enumerate(explicit):
            path = f"operators[{i}]"
            try:
                chosen.add(operators.get(op_id).id)
            except operators.UnknownOperatorError as exc:
                hint = ""
                if "::" not in op_id:
                    same = [k for k in known if k.split("::", 1)[1] == op_id]
                    if same:
                        hint = f"; did you mean {', '.join(same)}? (ids carry their source prefix)"
                msg = f"unknown operator {op_id!r}{hint}" if hint else str(exc)
                raise self.fail(path, msg) from None
        ordered = tuple(k for k in known if k in chosen)
        for platform in platforms:
            left_out = [k for k in ordered if platform not in operators.get(k).platforms]
            if left_out:
                self.warn("platforms", f"{len(left_out)} selected problems do not apply to "
                          f"{platform!r} and are not planned there: {', '.join(left_out)}")
        return tuple(suites), ordered

    def endpoints(self, value: Any) -> list[EndpointConfig]:
        fields = ("name", "kind", "base_url", "api_key_env", "timeout_s", "max_retries",
                  "backoff_base_s", "backoff_cap_s", "max_concurrency", "requests_per_minute",
                  "tokens_per_minute", "burst_s", "max_tokens_param", "idempotency_header", "stream")
        out: list[EndpointConfig] = []
        for i, t in enumerate(self.array_of_tables(value, "endpoints")):
            path = f"endpoints[{i}]"
            self.keys(t, path, fields, required=("name", "kind", "base_url"))
            kw: dict[str, Any] = {"name": self.name(t["name"], f"{path}.name")}
            kind = self.string(t["kind"], f"{path}.kind")
            if kind not in ("openai", "anthropic"):
                raise self.fail(f"{path}.kind", f"must be \"openai\" or \"anthropic\", got {kind!r}")
            kw["kind"] = kind
            kw["base_url"] = self.base_url(t["base_url"], f"{path}.base_url")
            kw["api_key_env"] = self.api_key_env(t.get("api_key_env", ""), f"{path}.api_key_env")
            for key in ("timeout_s", "backoff_cap_s", "burst_s", "requests_per_minute",
                        "tokens_per_minute"):
                if key in t:
                    kw[key] = self.number(t[key], f"{path}.{key}", positive=True)
            if "backoff_base_s" in t:
                kw["backoff_base_s"] = self.number(t["backoff_base_s"], f"{path}.backoff_base_s",
                                                   minimum=0)
            if "max_retries" in t:
                kw["max_retries"] = self.integer(t["max_retries"], f"{path}.max_retries", minimum=0)
            if "max_concurrency" in t:
                kw["max_concurrency"] = self.integer(t["max_concurrency"], f"{path}.max_concurrency",
                                                     minimum=1)
            if "max_tokens_param" in t:
                param = self.string(t["max_tokens_param"], f"{path}.max_tokens_param")
                if param not in ("max_tokens", "max_completion_tokens"):
                    raise self.fail(f"{path}.max_tokens_param", "must be \"max_tokens\" or "
                                    f"\"max_completion_tokens\", got {param!r}")
                if kind != "openai":
                    raise self.fail(f"{path}.max_tokens_param", "applies to kind \"openai\" only")
                kw["max_tokens_param"] = param
            if "idempotency_header" in t:
                kw["idempotency_header"] = self.string(t["idempotency_header"],
                                                       f"{path}.idempotency_header", empty=True)
            if "stream" in t:
                kw["stream"] = self.boolean(t["stream"], f"{path}.stream")
            try:
                out.append(EndpointConfig(**kw))
            except ProviderConfigError as exc:
                raise self.fail(f"{path}.{exc.field}" if exc.field else path, str(exc)) from None
        self.unique([e.name for e in out], "endpoints", "name")
        return out

    def base_url(self, value: Any, path: str) -> str:
        from urllib.parse import urlsplit

        url = self.string(value, path)
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise self.fail(path, f"{url!r} is not a valid URL ({exc})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise self.fail(path, f"{url!r} is not an http:// or https:// URL with a host "
                            "(e.g. \"http://127.0.0.1:8000/v1\")")
        if port == 0 or parts.query or parts.fragment or parts.username or parts.password:
            raise self.fail(path, "must be a plain base URL: a port other than 0, no query, "
                            "fragment or credentials")
        return url

    def api_key_env(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"expected the name of an environment variable (a string), got "
                            f"{_type_name(value)}")
        if value == "":
            return value
        if _looks_like_secret(value):  # never echo the value: it may be a real key
            raise self.fail(path, "looks like a literal API key, not the name of an environment "
                            "variable; a spec never holds keys: put the key in the environment "
                            "(e.g. export OPENAI_API_KEY=...) and name the variable here")
        if not _ENV_RE.match(value):
            raise self.fail(path, "must be the name of an environment variable (letters, digits "
                            "and '_', not starting with a digit), or \"\" for no key")
        return value

    def methods(self, value: Any, samples: int) -> list[MethodEntry]:
        tables = self.array_of_tables(value, "methods")
        if not tables:
            raise self.fail("methods", "the spec lists no [[methods]] (e.g. name = \"sample\")")
        out: list[MethodEntry] = []
        for i, t in enumerate(tables):
            path = f"methods[{i}]"
            if "name" not in t:
                raise self.fail(f"{path}.name", "required key is missing")
            name = self.string(t["name"], f"{path}.name")
            try:
                kind = method_kind(name)
            except MethodError as exc:
                raise self.fail(f"{path}.name", str(exc)) from None
            label = self.name(t["label"], f"{path}.label") if "label" in t else name
            options = {k: v for k, v in t.items() if k not in ("name", "label")}
            if isinstance(options.get("path"), str):
                options["path"] = str(self.resolve(options["path"]))
            instance = self.instantiate(name, kind, options, path)
            if "n" not in options and samples != 1 and "n" in _init_params(instance):
                options["n"] = samples
                instance = self.instantiate(name, kind, options, path)
            out.append(MethodEntry(name, label, kind, tuple(sorted(options.items())), instance))
        labels = [m.label for m in out]
        for i, label in enumerate(labels):
            if label in labels[:i]:
                key = "label" if "label" in tables[i] else "name"
                raise self.fail(f"methods[{i}].{key}", f"duplicate method label {label!r}; give "
                                "each use of a method its own label = \"...\"")
        return out

    def instantiate(self, name: str, kind: MethodKind, options: dict[str, Any],
                    path: str) -> Method | TrajectoryMethod:
        try:
            if kind == "candidate":
                return create(name, **options)
            return create_trajectory(name, **options)
        except MethodError as exc:
            msg = str(exc)
            m = re.search(r"unexpected keyword argument '(\w+)'", msg)
            if m:
                known = _method_options(name)
                raise self.fail(f"{path}.{m.group(1)}", f"unknown option for method {name!r}; "
                                f"known: {_plural(known + ['label', 'name'])}") from None
            m = re.search(r"missing \d+ required positional arguments?: (.+)$", msg)
            if m:
                first = re.findall(r"'(\w+)'", m.group(1))[0]
                raise self.fail(f"{path}.{first}", f"method {name!r} requires option {first!r}") from None
            named = [k for k in options if re.search(rf"\b{re.escape(k)}\b", msg)]
            where = f"{path}.{named[0]}" if len(named) == 1 else path
            raise self.fail(where, msg) from None

    def agents(self, value: Any, platforms: tuple[str, ...]) -> list[AgentSpec]:
        out: list[AgentSpec] = []
        for i, t in enumerate(self.array_of_tables(value, "agents")):
            path = f"agents[{i}]"
            self.keys(t, path, ("address", "platform", "device") + AGENT_AUTH_KEYS,
                      required=("address", "platform"))
            address = self.address(t["address"], f"{path}.address")
            platform = self.string(t["platform"], f"{path}.platform")
            if platform not in PLATFORMS:
                raise self.fail(f"{path}.platform", f"unknown platform {platform!r}; known: "
                                f"{_plural(PLATFORMS)}")
            if platform not in platforms:
                self.warn(f"{path}.platform", f"platform {platform!r} is not in the spec's platforms "
                          "list; this agent gets no work")
            device = self.string(t["device"], f"{path}.device") if "device" in t else None
            out.append(AgentSpec(address, platform, device, self.agent_auth(t, path)))
        self.unique([a.address for a in out], "agents", "address")
        return out

    def agent_auth(self, t: dict[str, Any], path: str) -> ClientAuthFiles | None:
        """An agent's own credentials (paths: files checked here, read by the fleet)."""
        if not any(k in t for k in AGENT_AUTH_KEYS):
            return None
        files: dict[str, Path] = {}
        for k in AGENT_AUTH_KEYS:
            if k in t:
                files[k] = self.resolve(self.string(t[k], f"{path}.{k}"))
                if not files[k].is_file():
                    raise self.fail(f"{path}.{k}", f"no such file: {files[k]}")
        try:
            return ClientAuthFiles(ca=files.get("ca"), cert=files.get("cert"), key=files.get("key"),
                                   token_file=files.get("token_file"))
        except AuthConfigError as exc:
            raise self.fail(path, str(exc)) from None

    def address(self, value: Any, path: str) -> str:
        s = self.string(value, path)
        m = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})", s)
        if not m or not 0 < int(m.group(2)) < 65536:
            raise self.fail(path, f"{s!r} is not host:port (e.g. \"10.0.0.7:50051\" or "
                            "\"[::1]:50051\"; no scheme)")
        return s

    def budgets(self, value: Any) -> Budgets:
        t = self.table(value, "budgets")
        keys = ("trajectory_max_tokens", "trajectory_max_cost_usd", "sweep_max_tokens",
                "sweep_max_cost_usd")
        self.keys(t, "budgets", keys)

        def tokens(key: str) -> int | None:
            return self.integer(t[key], f"budgets.{key}", minimum=1) if key in t else None

        def usd(key: str) -> float | None:
            return self.number(t[key], f"budgets.{key}", positive=True) if key in t else None

        return Budgets(trajectory_max_tokens=tokens("trajectory_max_tokens"),
                       trajectory_max_cost_usd=usd("trajectory_max_cost_usd"),
                       sweep_max_tokens=tokens("sweep_max_tokens"),
                       sweep_max_cost_usd=usd("sweep_max_cost_usd"))

    def concurrency(self, value: Any) -> Concurrency:
        t = self.table(value, "concurrency")
        self.keys(t, "concurrency", ("generation_per_endpoint", "evaluations_in_flight",
                                     "runners_per_endpoint", "generators_per_endpoint"))
        kw: dict[str, int] = {}
        if "generation_per_endpoint" in t:
            kw["generation_per_endpoint"] = self.integer(t["generation_per_endpoint"],
                                                         "concurrency.generation_per_endpoint", minimum=1)
        if "evaluations_in_flight" in t:
            kw["evaluations_in_flight"] = self.integer(t["evaluations_in_flight"],
                                                       "concurrency.evaluations_in_flight", minimum=0)
        # generators_per_endpoint: the key's name before the runner actors were renamed
        given = [k for k in ("runners_per_endpoint", "generators_per_endpoint") if k in t]
        if len(given) > 1:
            raise self.fail("concurrency.generators_per_endpoint", "is the old name of "
                            "runners_per_endpoint; give only runners_per_endpoint")
        for key in given:
            kw["runners_per_endpoint"] = self.integer(
                t[key], f"concurrency.{key}", minimum=0, maximum=MAX_RUNNERS_PER_ENDPOINT)
        return Concurrency(**kw)

    def fleet(self, value: Any) -> FleetSettings:
        t = self.table(value, "fleet")
        self.keys(t, "fleet", ("spot_check",))
        if "spot_check" not in t:
            return FleetSettings()
        fraction = self.number(t["spot_check"], "fleet.spot_check", minimum=0)
        if fraction > 1:
            raise self.fail("fleet.spot_check", f"is a fraction of PASSED verdicts: at most 1, "
                            f"got {t['spot_check']}")
        return FleetSettings(spot_check=fraction)


def _init_params(instance: object) -> list[str]:
    params = inspect.signature(type(instance).__init__).parameters
    return [p for p in params if p != "self"]


def _method_options(name: str) -> list[str]:
    """The options a registered method's constructor takes."""
    from generators.registry import method_options

    return method_options(name)


def _takes_n(entry: MethodEntry) -> bool:
    return entry.instance is not None and "n" in _init_params(entry.instance)
