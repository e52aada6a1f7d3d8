"""The sweep spec's sections, parsed and validated by the code that will use them.

Endpoints are built as :class:`generators.providers.base.EndpointConfig`, methods are
instantiated through :func:`generators.create` / :func:`generators.create_trajectory`, operator
ids and suites resolve against the operator registry, agents' credential files must exist.
Things allowed but probably not meant become warnings (:attr:`SweepSpec.warnings`)."""

from __future__ import annotations

import difflib
import inspect
import re
from pathlib import Path
from typing import Any

import operators
from coordinator.spec_fields import _ENV_RE, FieldParser, _looks_like_secret, _plural, _type_name
from coordinator.spec_models import check_methods, parse_models
from coordinator.spec_records import (
    AGENT_AUTH_KEYS,
    GENERATION_MODES,
    MAX_RUNNERS_PER_ENDPOINT,
    PER_PLATFORM,
    SHARED,
    SUITES,
    AgentSpec,
    Budgets,
    Concurrency,
    FleetSettings,
    MethodEntry,
    SweepSpec,
    SweepSpecError,
)
from generators import Method, MethodError, TrajectoryMethod, create, create_trajectory, method_kind
from generators.providers.base import EndpointConfig, ProviderConfigError
from generators.registry import MethodKind
from operators.spec import PLATFORMS
from protos.security import AuthConfigError, ClientAuthFiles

_TOP_KEYS = ("sweep", "suites", "operators", "samples", "platforms", "endpoints", "models",
             "methods", "agents", "budgets", "concurrency", "fleet")
_TOP_LEVEL_SCALARS = ("suites", "operators", "samples", "platforms")


class SpecParser(FieldParser):
    """The sections of a spec, on :class:`FieldParser`'s primitives."""

    def spec(self, data: dict[str, Any]) -> SweepSpec:
        self.keys(data, "", _TOP_KEYS, required=("sweep",))
        sweep = self.table(data["sweep"], "sweep")
        for key in _TOP_LEVEL_SCALARS:
            if key in sweep:
                raise self.fail(f"sweep.{key}", f"unknown key; {key!r} is a top-level key: in TOML it "
                                "must come before the first [table] header (move it above [sweep])")
        self.keys(sweep, "sweep", ("name", "store", "seed", "generation"), required=("name",))
        name = self.name(sweep["name"], "sweep.name")
        store = self.resolve(self.string(sweep["store"], "sweep.store")) if "store" in sweep \
            else self.resolve(f"runs/{name}")
        seed = self.integer(sweep.get("seed", 0), "sweep.seed", minimum=0)
        generation = self.string(sweep.get("generation", PER_PLATFORM), "sweep.generation")
        if generation not in GENERATION_MODES:
            raise self.fail("sweep.generation", f"must be \"{PER_PLATFORM}\" (a trajectory per "
                            f"platform) or \"{SHARED}\" (one candidate judged on every platform), "
                            f"got {generation!r}")

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
                         warnings=tuple(self.warnings), generation=generation)

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
                instance = self._with_samples(name, kind, options, samples, path)
            out.append(MethodEntry(name, label, kind, tuple(sorted(options.items())), instance))
        labels = [m.label for m in out]
        for i, label in enumerate(labels):
            if label in labels[:i]:
                key = "label" if "label" in tables[i] else "name"
                raise self.fail(f"methods[{i}].{key}", f"duplicate method label {label!r}; give "
                                "each use of a method its own label = \"...\"")
        return out

    def _with_samples(self, name: str, kind: MethodKind, options: dict[str, Any], samples: int,
                      path: str) -> Method | TrajectoryMethod:
        """The method with the top-level ``samples`` as its ``n``; an error then says where that
        n came from (the user never wrote it on the method)."""
        options["n"] = samples
        try:
            return self.instantiate(name, kind, options, path)
        except SweepSpecError as exc:
            raise self.fail(exc.path, f"{exc.message} (n = {samples} is the top-level samples; "
                            "set n on this method to override it)") from None

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
