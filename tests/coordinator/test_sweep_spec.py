"""Sweep specs: a full spec parses, the docs' example parses, every class of error names its key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import operators
from coordinator.sweep_spec import SUITES, SweepSpec, SweepSpecError, load_spec, parse_spec
from generators import TrajectoryMethod
from generators.llm import Usage
from operators.spec import Source

DOC = Path(__file__).resolve().parents[2] / "docs" / "sweep-spec.md"

BASE = """
operators = ["aten::add", "aten::mm", "vllm::rms_norm"]
platforms = ["cuda"]

[sweep]
name = "t"

[[endpoints]]
name = "local-vllm"
kind = "openai"
base_url = "http://127.0.0.1:8000/v1"

[[endpoints]]
name = "openai"
kind = "openai"
base_url = "https://api.openai.com/v1"
api_key_env = "OPENAI_API_KEY"

[[models]]
name = "m1"
endpoint = "local-vllm"
model = "qwen"
prices = { prompt = 0, completion = 0 }

[[models]]
name = "m2"
endpoint = "openai"
model = "gpt-4.1"
prices = { prompt = 2.0, completion = 8.0, cached_prompt = 0.5 }

[[methods]]
name = "reference"

[[methods]]
name = "sample"
n = 4

[[methods]]
name = "refine"
turns = 3
n = 2
"""


def parse(text: str) -> SweepSpec:
    return parse_spec(text, "sweep.toml")


def error(text: str) -> SweepSpecError:
    with pytest.raises(SweepSpecError) as info:
        parse(text)
    return info.value


def test_docs_example_parses_and_plans() -> None:
    blocks = re.findall(r"```toml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    complete = [b for b in blocks if 'name = "example-pass-at-4"' in b]
    assert len(complete) == 1, "docs/sweep-spec.md should hold one complete TOML example"
    spec = parse_spec(complete[0], "docs/sweep-spec.md")
    assert {e.name: e.kind for e in spec.endpoints} == {
        "local-vllm": "openai", "local-sglang": "openai", "openai": "openai", "anthropic": "anthropic"}
    assert spec.endpoint("local-sglang").base_url == "http://127.0.0.1:30000/v1"
    assert spec.endpoint("openai").api_key_env == "OPENAI_API_KEY"
    assert spec.endpoint("anthropic").api_key_env == "ANTHROPIC_API_KEY"
    assert {m.name for m in spec.methods} >= {"sample", "refine"}
    assert spec.agents and spec.budgets.trajectory_max_tokens and spec.budgets.sweep_max_cost_usd
    ops = len(set(s.id for s in operators.all_specs(Source.ATEN))
              | {"vllm::rms_norm", "cublas::cublasSgemm_v2"})
    per_op = sum(m.instance.samples(operators.get("aten::add")) *  # type: ignore[union-attr]
                 (len(spec.models) if m.kind == "trajectory" else 1) for m in spec.methods)
    assert len(spec.plan()) == len(spec.platforms) * ops * per_op


def test_complete_spec_parses_into_typed_records(tmp_path: Path) -> None:
    path = tmp_path / "sweep.toml"
    path.write_text(BASE + """
[[agents]]
address = "127.0.0.1:50051"
platform = "cuda"
device = "NVIDIA H200"

[budgets]
trajectory_max_tokens = 1000
trajectory_max_cost_usd = 0.5
sweep_max_tokens = 1000000
sweep_max_cost_usd = 100

[concurrency]
generation_per_endpoint = 8
evaluations_in_flight = 4
""")
    spec = load_spec(path)
    assert spec.name == "t" and spec.seed == 0 and spec.store == tmp_path / "runs" / "t"
    assert spec.operators == ("aten::add", "aten::mm", "vllm::rms_norm")
    assert spec.model("m2").endpoint == "openai" and spec.model("m2").model == "gpt-4.1"
    assert spec.method("refine").options_dict() == {"turns": 3, "n": 2}
    assert isinstance(spec.method("refine").instance, TrajectoryMethod)
    assert spec.agents[0].device == "NVIDIA H200"
    assert spec.budgets.sweep_max_cost_usd == 100.0 and spec.budgets.trajectory_max_tokens == 1000
    assert spec.concurrency.generation_per_endpoint == 8
    assert spec.concurrency.evaluations_in_flight == 4
    cost = spec.price_table("openai").cost("gpt-4.1", Usage(prompt_tokens=1_000_000,
                                                            completion_tokens=1_000_000))
    assert cost.priced and cost.usd == pytest.approx(10.0)
    assert spec.warnings == ()


def test_plan_size_arithmetic() -> None:
    spec = parse(BASE)
    plan = spec.plan()
    # 3 problems x (reference 1 + sample 4 x 2 models + refine 2 x 2 models)
    assert len(plan) == 3 * (1 + 4 * 2 + 2 * 2) == 39
    assert len(set(plan)) == len(plan)
    assert {t.model for t in plan if t.method == "reference"} == {""}
    assert sum(1 for t in plan if t.method == "sample" and t.model == "m1") == 3 * 4
    two = parse(BASE.replace('platforms = ["cuda"]', 'platforms = ["cuda", "cpu"]'))
    assert len(two.plan()) == 2 * 39
    assert sorted(two.dispatch_order()) == sorted(two.plan())
    assert two.dispatch_order() == two.dispatch_order()


def test_samples_is_the_default_n() -> None:
    spec = parse("samples = 5\n" + BASE)
    assert spec.method("sample").options_dict()["n"] == 4        # its own n wins
    assert spec.method("refine").options_dict()["n"] == 2
    bare = parse("samples = 5\n" + BASE.replace("n = 4\n", "").replace("n = 2\n", ""))
    assert bare.method("sample").options_dict()["n"] == 5
    assert len(bare.plan()) == 3 * (1 + 5 * 2 + 5 * 2)


def test_same_method_twice_needs_labels() -> None:
    twice = BASE + '\n[[methods]]\nname = "sample"\ntemperature = 0.2\n'
    assert error(twice).path == "methods[3].name"
    spec = parse(twice + 'label = "sample-cold"\n')
    assert spec.method("sample-cold").options_dict() == {"temperature": 0.2}


def test_suite_resolution() -> None:
    spec = parse(BASE.replace('operators = ["aten::add", "aten::mm", "vllm::rms_norm"]',
                              'suites = ["ms"]\noperators = ["aten::add"]'))
    assert spec.operators == tuple(operators.ids())          # union, deduplicated, registry order
    assert not any("of its 210" in w for w in spec.warnings)  # every problem is registered
    for suite, (sources, _) in SUITES.items():
        s = parse(BASE.replace('operators = ["aten::add", "aten::mm", "vllm::rms_norm"]',
                               f'suites = ["{suite}"]'))
        assert s.operators == tuple(x.id for src in sources for x in operators.all_specs(src))
    e = error(BASE.replace('operators = ["aten::add", "aten::mm", "vllm::rms_norm"]',
                           'suites = ["ms", "atne"]'))
    assert e.path == "suites[1]" and "did you mean 'aten'" in str(e)
    e = error(BASE.replace('operators = ["aten::add", "aten::mm", "vllm::rms_norm"]', ""))
    assert e.path == "suites" and "selects no problems" in str(e)


def test_a_suite_with_problems_missing_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    real = operators.all_specs
    monkeypatch.setattr(operators, "all_specs",
                        lambda source=None: [] if source == Source.CUBLAS else real(source))
    spec = parse(BASE.replace('operators = ["aten::add", "aten::mm", "vllm::rms_norm"]',
                              'suites = ["ms"]'))
    assert any(w.startswith("suites[0]: suite 'ms'") and "160 of its 210" in w
               for w in spec.warnings), spec.warnings


def test_suite_without_registered_problems_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = operators.all_specs
    monkeypatch.setattr(operators, "all_specs",
                        lambda source=None: [] if source == Source.CUBLAS else real(source))
    e = error(BASE.replace('operators = ["aten::add", "aten::mm", "vllm::rms_norm"]',
                           'suites = ["aten", "cublas"]'))
    assert e.path == "suites[1]" and "no registered problems" in str(e)


def test_unknown_operator_suggests() -> None:
    e = error(BASE.replace('"aten::mm"', '"aten::ad"'))
    assert e.path == "operators[1]" and "did you mean" in e.message and "aten::add" in e.message
    assert str(e).startswith("sweep.toml: operators[1]: unknown operator 'aten::ad'")
    e = error(BASE.replace('"aten::mm"', '"rms_norm"'))
    assert e.path == "operators[1]" and "vllm::rms_norm" in e.message


@pytest.mark.parametrize(("edit", "path", "words"), [
    # unknown keys, anywhere
    (("[sweep]\n", "[sweep]\nseeed = 1\n"), "sweep.seeed", "did you mean 'seed'"),
    (('model = "qwen"', 'model = "qwen"\ntemprature = 0.5'), "models[0].temprature",
     "did you mean 'temperature'"),
    (("[[methods]]\nname = \"reference\"", "[budgets]\nmax_tokens = 5\n\n[[methods]]\nname = \"reference\""),
     "budgets.max_tokens", "unknown key"),
    (("prompt = 0, completion = 0", "prompt = 0, completion = 0, output = 1"),
     "models[0].prices.output", "unknown key"),
    (("[sweep]\nname = \"t\"", "[sweep]\nname = \"t\"\nsamples = 3"), "sweep.samples",
     "top-level key"),
    # wrong types
    (('name = "t"', "name = 3"), "sweep.name", "expected a string, got an integer"),
    (("n = 4", 'n = "4"'), "methods[1].n", "int >= 1"),
    (('model = "qwen"', 'model = "qwen"\nmax_tokens = 1.5'), "models[0].max_tokens",
     "expected an integer"),
    (('platforms = ["cuda"]', 'platforms = "cuda"'), "platforms", "expected an array"),
    (('platforms = ["cuda"]', 'platforms = ["cuda", "tpu"]'), "platforms[1]", "unknown platform"),
    (("prompt = 2.0,", "prompt = -2.0,"), "models[1].prices.prompt", "must be >= 0"),
    # references
    (('endpoint = "openai"', 'endpoint = "vlm"'), "models[1].endpoint",
     'no endpoint named "vlm"; known: local-vllm, openai'),
    (('name = "m2"', 'name = "m1"'), "models[1].name", "duplicate name"),
    # endpoint validation
    (('"http://127.0.0.1:8000/v1"', '"127.0.0.1:8000/v1"'), "endpoints[0].base_url",
     "not an http:// or https:// URL"),
    (('"http://127.0.0.1:8000/v1"', '"http://:8000/v1"'), "endpoints[0].base_url", "with a host"),
    (('kind = "openai"\nbase_url = "https', 'kind = "gemini"\nbase_url = "https'), "endpoints[1].kind",
     'must be "openai" or "anthropic"'),
    (('api_key_env = "OPENAI_API_KEY"', 'api_key_env = "OPENAI_API_KEY"\nmax_concurrency = 0'),
     "endpoints[1].max_concurrency", "must be >= 1"),
    (('api_key_env = "OPENAI_API_KEY"', 'api_key_env = "OPENAI API KEY"'), "endpoints[1].api_key_env",
     "name of an environment variable"),
    (('api_key_env = "OPENAI_API_KEY"', 'api_key_env = "OPENAI_API_KEY"\nidempotency_header = "X: y"'),
     "endpoints[1].idempotency_header", "must be an HTTP header name"),
    (("n = 4", "n = 4\n\n[concurrency]\nrunners_per_endpoint = 65"),
     "concurrency.runners_per_endpoint", "must be <= 64"),
    (("n = 4", "n = 4\n\n[concurrency]\ngenerators_per_endpoint = 65"),
     "concurrency.generators_per_endpoint", "must be <= 64"),
    (("n = 4", "n = 4\n\n[concurrency]\nrunners_per_endpoint = 2\ngenerators_per_endpoint = 2"),
     "concurrency.generators_per_endpoint", "old name of runners_per_endpoint"),
    # methods
    (("turns = 3", "turnz = 3"), "methods[2].turnz", "unknown option for method 'refine'"),
    (("turns = 3", "turns = 0"), "methods[2].turns", "turns must be an int >= 1"),
    (('name = "reference"', 'name = "referance"'), "methods[0].name", "did you mean reference"),
    (('name = "reference"', 'name = "replay"'), "methods[0].path", "requires option 'path'"),
    # agents
    (("[[methods]]\nname = \"reference\"",
      "[[agents]]\naddress = \"http://10.0.0.1:50051\"\nplatform = \"cuda\"\n\n"
      "[[methods]]\nname = \"reference\""),
     "agents[0].address", "is not host:port"),
])
def test_errors_name_the_key_path(edit: tuple[str, str], path: str, words: str) -> None:
    old, new = edit
    assert old in BASE, old
    e = error(BASE.replace(old, new, 1))
    assert e.path == path, str(e)
    assert words in str(e), str(e)
    assert str(e).startswith(f"sweep.toml: {path}: ")


def test_unknown_top_level_key_and_bad_toml() -> None:
    e = error("suite = [\"ms\"]\n" + BASE)
    assert e.path == "suite" and "did you mean 'suites'" in str(e)
    e = error(BASE + "\n[sweep\n")
    assert e.path == "" and "not valid TOML" in str(e)
    e = error(BASE.replace("[sweep]\nname = \"t\"\n", ""))
    assert e.path == "sweep" and "required" in str(e)


@pytest.mark.parametrize("secret", [
    "sk-proj-AbCdEf0123456789AbCdEf0123456789",
    "sk-ant-api03-AbCdEf0123456789",
    "hf_AbCdEf0123456789AbCdEf0123456789ab",
    "a8f3c2d1e4b5a6978f0e1d2c3b4a5968a7b6c5d4",
])
def test_literal_secret_is_refused_and_not_echoed(secret: str) -> None:
    e = error(BASE.replace('api_key_env = "OPENAI_API_KEY"', f'api_key_env = "{secret}"'))
    assert e.path == "endpoints[1].api_key_env"
    assert "literal API key" in str(e)
    assert secret not in str(e)
    e = error(BASE.replace('api_key_env = "OPENAI_API_KEY"', f'api_key = "{secret}"'))
    assert e.path == "endpoints[1].api_key" and "api_key_env" in str(e) and secret not in str(e)


def test_trajectory_method_needs_a_model_and_warnings() -> None:
    no_models = re.sub(r"\[\[models\]\].*?(?=\[\[methods\]\])", "", BASE, flags=re.S)
    e = error(no_models)
    assert e.path == "methods[1]" and "no [[models]]" in str(e)
    only_ref = BASE.split("[[methods]]\nname = \"sample\"")[0]
    spec = parse(only_ref.replace("prices = { prompt = 0, completion = 0 }\n", ""))
    assert any(w.startswith("models:") for w in spec.warnings)
    assert any(w.startswith("models[0]: no prices") for w in spec.warnings)
    assert len(spec.plan()) == 3


def test_replay_path_is_relative_to_the_spec(tmp_path: Path) -> None:
    (tmp_path / "cands.jsonl").write_text('{"operator": "aten::add", "source": "x"}\n'
                                          '{"operator": "aten::add", "source": "y"}\n')
    path = tmp_path / "sweep.toml"
    path.write_text('operators = ["aten::add", "aten::mm"]\n[sweep]\nname = "r"\n'
                    '[[methods]]\nname = "replay"\npath = "cands.jsonl"\n')
    spec = load_spec(path)
    assert spec.method("replay").options_dict()["path"] == str(tmp_path / "cands.jsonl")
    assert len(spec.plan()) == 2
    with pytest.raises(SweepSpecError) as info:
        load_spec(tmp_path / "missing.toml")
    assert "cannot read" in str(info.value)


def test_fleet_spot_check_is_a_fraction_and_off_unless_given() -> None:
    assert parse(BASE).fleet.spot_check is None
    assert parse(BASE + "\n[fleet]\nspot_check = 0.05\n").fleet.spot_check == 0.05
    assert parse(BASE + "\n[fleet]\nspot_check = 1\n").fleet.spot_check == 1.0
    assert "fleet.spot_check: is a fraction" in str(error(BASE + "\n[fleet]\nspot_check = 1.5\n"))
    assert "fleet.spot_check: must be >= 0" in str(error(BASE + "\n[fleet]\nspot_check = -0.1\n"))
    assert "fleet.spot_chek: unknown key; did you mean 'spot_check'" in str(
        error(BASE + "\n[fleet]\nspot_chek = 0.1\n"))
