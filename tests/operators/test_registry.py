"""The registry: lazy discovery, stable ids, loud errors on duplicates and invalid specs."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Sequence

import pytest
import torch

import operators
from operators import registry
from operators.spec import Call, Case, EntryPoint, Expected, Kind, Negative, OperatorSpec, Tier, case

FOUNDATION = {"aten::add", "aten::softmax", "aten::mm", "aten::cumsum", "vllm::rms_norm",
              "vllm::rotary_embedding", "cublas::cublasSaxpy_v2", "cublas::cublasSgemm_v2"}

GOOD_SRC = "import triton\n@triton.jit\ndef k(x):\n    pass\ndef f(x):\n    return x\n"


def _spec_class(**overrides: object) -> type[OperatorSpec]:
    attrs: dict[str, object] = {
        "entry_points": (EntryPoint("f", "f(x: Tensor) -> Tensor"),),
        "description": "identity",
        "solution": GOOD_SRC,
        "negatives": (Negative("n", "why", GOOD_SRC),),
        "cases": lambda self: [case("f", "float32", (4,), cpu=True)],
        "hidden_cases": lambda self, rng, tier: [],
        "benchmark_cases": lambda self: [case("f", "float32", (4,))],
    }
    attrs.update(overrides)
    return type("Tmp", (OperatorSpec,), attrs)


def test_foundation_problems_are_registered() -> None:
    assert set(operators.ids()) >= FOUNDATION
    for spec in operators.all_specs():
        assert spec.id.split("::")[0] == spec.source.value
        assert spec.version >= 1
        assert spec.kind in set(Kind)


def test_discovery_is_lazy() -> None:
    code = ("import sys, operators; "
            "assert not any(m.startswith('operators.aten.') for m in sys.modules); "
            "operators.get('aten::add'); "
            "assert 'operators.aten.add' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_id_suggests() -> None:
    with pytest.raises(operators.UnknownOperatorError, match="did you mean aten::add"):
        operators.get("aten::addd")


def test_the_published_vllm13_prefix_names_the_same_problem() -> None:
    assert operators.get("vllm13::rms_norm") is operators.get("vllm::rms_norm")
    assert operators.canonical_id("vllm13::rms_norm") == "vllm::rms_norm"
    assert operators.canonical_id("aten::add") == "aten::add"
    with pytest.raises(operators.UnknownOperatorError):
        operators.get("vllm13::no_such_kernel")


def test_fp8_dtypes_are_known() -> None:
    from operators.spec import dtype_from_name, dtype_name

    for name in ("float8_e4m3fn", "float8_e5m2"):
        assert dtype_name(dtype_from_name(name)) == name


def test_duplicate_id_raises() -> None:
    with pytest.raises(registry.SpecError, match="duplicate operator id"):
        registry.register("aten::add", version=1, kind="compute")(_spec_class())


@pytest.mark.parametrize("bad_id", ["add", "torch::add", "aten::", "aten::a-b"])
def test_invalid_id_raises(bad_id: str) -> None:
    with pytest.raises(registry.SpecError, match="invalid operator id"):
        registry.register(bad_id, version=1, kind="compute")(_spec_class())


@pytest.mark.parametrize("overrides, message", [
    ({"negatives": ()}, "no negative control"),
    ({"solution": "def f(:"}, "does not parse"),
    ({"solution": "def f(x): return x"}, "no @triton.jit"),
    ({"entry_points": ()}, "no entry points"),
    ({"description": " "}, "no prompt description"),
    ({"cases": lambda self: [case("f", "float32", (4,))]}, "no cpu-tier case"),
    ({"cases": lambda self: [case("g", "float32", (4,), cpu=True)]}, "unknown entry point"),
    ({"benchmark_cases": lambda self: []}, "no benchmark cases"),
])
def test_invalid_specs_raise(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(registry.SpecError, match=message):
        registry.register("aten::tmp_invalid", version=1, kind="compute")(_spec_class(**overrides))
    assert "aten::tmp_invalid" not in operators.ids()


def test_bad_version_raises() -> None:
    with pytest.raises(registry.SpecError, match="version"):
        registry.register("aten::tmp_v", version=0, kind="compute")(_spec_class())


def test_case_names_and_params() -> None:
    c = case("add_Tensor", "float16", (3, 4), alpha=2.0, other=(4,), cpu=True)
    assert c.name == "add_Tensor[float16,3x4,alpha=2.0,other=(4)]"
    assert c["alpha"] == 2.0 and c.get("missing", 7) == 7
    with pytest.raises(ValueError, match="unknown dtype"):
        case("f", "float8", (1,))


def test_integer_outputs_are_exact() -> None:
    spec = operators.get("aten::add")
    tol = spec.tolerance(spec.cases()[0], torch.int32)
    assert tol.rtol == 0 and tol.atol == 0


def test_public_cases_cpu_tier_is_a_subset() -> None:
    for spec in operators.all_specs():
        cpu = spec.public_cases(Tier.CPU)
        full = spec.public_cases(Tier.FULL)
        assert cpu and set(c.name for c in cpu) <= set(c.name for c in full)
        for c in spec.hidden_cases(random.Random(1), Tier.CPU):
            assert c.cpu, f"{spec.id}: hidden cpu-tier case {c.name} not marked cpu"


def _unused(x: Sequence[Case], y: Call, z: Expected) -> None:  # keeps imports typed
    del x, y, z
