"""Prompt templates: every problem renders, ATen prompts carry torch's own schemas, each kind's
rule and each platform's notes are present, the worked example is an honest candidate that runs,
and template versions re-render exactly."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton (see conftest)

import pytest  # noqa: E402
import torch  # noqa: E402

import operators  # noqa: E402
from device_agent import static_policy  # noqa: E402
from generators.extract import ExtractStatus, extract_code  # noqa: E402
from generators.llm import Message, Role  # noqa: E402
from generators.prompts import (  # noqa: E402
    PromptError,
    TemplateRegistry,
    UnknownTemplateError,
    build_prompt,
    common,
    latest_template,
    template_ids,
)
from generators.prompts.aten import torch_doc  # noqa: E402
from operators.spec import EntryPoint, Kind, OperatorSpec, Source  # noqa: E402

PLATFORMS = ("cuda", "cpu")
SPECS = operators.all_specs()
LATEST = {Source.ATEN: "aten/v2", Source.VLLM: "vllm/v2", Source.CUBLAS: "cublas/v3"}


def _id(spec: OperatorSpec) -> str:
    return spec.id


def fake_spec(op_id: str, kind: Kind = Kind.COMPUTE, *,
              entry_points: tuple[EntryPoint, ...] | None = None,
              description: str = "Fake problem for prompt tests: out = f(x).") -> OperatorSpec:
    """A problem that is not registered (templates only read its declarations)."""
    name = op_id.split("::", 1)[1]
    attrs: dict[str, Any] = {
        "id": op_id, "version": 3, "kind": kind, "source": Source(op_id.split("::", 1)[0]),
        "entry_points": entry_points or (
            EntryPoint(name, f"{name}(x: Tensor, alpha: float) -> Tensor", "f of x."),
            EntryPoint(f"{name}_out", f"{name}_out(x: Tensor, alpha: float, *, out: Tensor) -> Tensor",
                       "Writes f(x) into out."),
        ),
        "description": description,
    }
    return type("FakeSpec", (OperatorSpec,), attrs)()


def user_text(spec: OperatorSpec, platform: str, version: str | None = None) -> str:
    prompt = build_prompt(spec, platform, template_version=version)
    assert [m.role for m in prompt.messages] == [Role.SYSTEM, Role.USER]
    return prompt.messages[1].content


# ---- every problem renders ---------------------------------------------------------------------

@pytest.mark.parametrize("spec", SPECS, ids=_id)
@pytest.mark.parametrize("platform", PLATFORMS)
def test_every_problem_renders(spec: OperatorSpec, platform: str) -> None:
    prompt = build_prompt(spec, platform)
    assert prompt.operator_id == spec.id
    assert prompt.template == latest_template(spec.source) == LATEST[spec.source]
    text = prompt.messages[1].content
    assert spec.description in text
    for e in spec.entry_points:
        assert f"`{e.signature}`" in text
    assert common.KIND_POLICY_V2[spec.kind] in text
    assert common.PLATFORM_NOTES_V1[platform] in text


def test_registered_templates() -> None:
    assert template_ids() == ["aten/v1", "aten/v2", "vllm/v1", "vllm/v2", "cublas/v1",
                              "cublas/v2", "cublas/v3"]


def test_system_message_is_shared_by_every_problem_and_platform() -> None:
    systems = {build_prompt(s, p).messages[0] for s in SPECS for p in PLATFORMS}
    assert systems == {common.system_message_v2()}


# ---- ATen: torch's own schemas and docstrings ---------------------------------------------------

def _torch_overload(op: str, entry: str) -> str:
    return "default" if entry == op else entry.removeprefix(op + "_")


@pytest.mark.parametrize("spec", operators.all_specs(source="aten"), ids=_id)
def test_aten_prompt_has_torch_schemas(spec: OperatorSpec) -> None:
    op = spec.id.split("::", 1)[1]
    packet = getattr(torch.ops.aten, op)
    text = user_text(spec, "cuda")
    for e in spec.entry_points:
        overload = _torch_overload(op, e.name)
        assert overload in packet.overloads(), f"{e.name}: torch has no overload {op}.{overload}"
        schema = str(getattr(packet, overload)._schema)
        assert f"ATen schema: `{schema}`" in text
    # torch's docstring where torch has one (torch.X, Tensor.X, F.X …), else the prompt says so
    found = torch_doc(op)
    if found is None:
        assert f"PyTorch has no Python docstring for `{op}`" in text
    else:
        where, doc = found
        assert f"PyTorch's documentation of `{where}`" in text
        assert doc.strip().split("\n")[0] in text


def test_aten_docstring_is_trimmed_before_examples() -> None:
    text = user_text(operators.get("aten::mm"), "cpu")
    assert "Performs a matrix multiplication" in text
    assert ">>>" not in text and "Example::" not in text


def test_aten_falls_back_when_torch_lacks_the_operator() -> None:
    spec = fake_spec("aten::kgb_no_such_op")
    text = user_text(spec, "cpu")
    assert text.count("ATen schema: not found in this PyTorch build") == 2
    assert "PyTorch has no Python docstring for `kgb_no_such_op`" in text
    assert spec.description in text


def test_aten_unknown_overload_falls_back() -> None:
    spec = fake_spec("aten::add", entry_points=(
        EntryPoint("add_Tensor", "add_Tensor(self: Tensor, other: Tensor) -> Tensor"),
        EntryPoint("add_NoSuchOverload", "add_NoSuchOverload(self: Tensor) -> Tensor"),
        EntryPoint("plus", "plus(self: Tensor) -> Tensor"),
    ))
    text = user_text(spec, "cuda")
    assert str(torch.ops.aten.add.Tensor._schema) in text
    assert text.count("ATen schema: not found in this PyTorch build") == 2


# ---- v2 rules: what the anti-cheat layers accept (docs/anticheat.md, issue #22) ----------------

def test_v2_import_rule_lists_exactly_the_static_policy_imports() -> None:
    """Rule 3 names every import root the static policy accepts and no other module."""
    import re

    from device_agent.static_tables import ALLOWED_IMPORT_ROOTS, MODULES_REFUSED

    rule = next(line for line in common.RULES_V2.split("\n") if line.startswith("3. Imports"))
    allowed, _, rest = rule.partition("(but not")
    refused, _, tail = rest.partition(")")
    names = set(re.findall(r"`([a-z_.]+)`", allowed + tail)) - {"triton.language"}
    assert names == ALLOWED_IMPORT_ROOTS
    assert set(re.findall(r"`([a-z_.]+)`", refused)) == MODULES_REFUSED
    assert "No relative or star imports" in rule


def test_v2_item_rule_is_provenance_and_v1_is_kept() -> None:
    system = build_prompt(operators.get("aten::add"), "cpu").messages[0].content
    assert "`.item()` is judged when it runs" in system
    assert "your own kernel (one defined in your file) was given during the same call" in system
    assert "`.item()` of an input" in system and "`.item()` of any tensor is allowed" in system
    assert "`.item()` unless the problem is of kind `scalar`" not in system
    assert "`logging`" in system
    for op in ("aten::add", "vllm::rms_norm", "cublas::cublasSaxpy_v2"):
        old = build_prompt(operators.get(op), "cpu", template_version="v1").messages[0].content
        assert old == common.system_message_v1().content
        assert "`.item()` unless the problem is of kind `scalar`" in old and "logging" not in old


def test_worked_example_with_logging_and_own_item_passes_the_static_policy() -> None:
    """What v2 promises is true of the static layer: `import logging` and `.item()` of a kernel
    result are not findings (the dispatch guard judges `.item()` at run time)."""
    source = common.EXAMPLE_SOURCE_V1.replace(
        "import torch\n", "import logging\nimport torch\n\nlog = logging.getLogger(__name__)\n")
    source += "\n\ndef count_positive(x, flag):\n    _launch(x, flag)\n    return int(flag.item())\n"
    assert static_policy.check(source, Kind.COMPUTE) == []
    assert [v.rule for v in static_policy.check("import logging.handlers\n")] == [
        "library-internals"]  # what the rule's "but not" says


# ---- vLLM and cuBLAS: semantics and exact signatures -------------------------------------------

@pytest.mark.parametrize("spec", [s for s in SPECS if s.source is not Source.ATEN], ids=_id)
@pytest.mark.parametrize("platform", PLATFORMS)
def test_vllm_cublas_prompts_state_semantics_and_signatures(spec: OperatorSpec, platform: str) -> None:
    text = user_text(spec, platform)
    assert f"Reference semantics:\n{spec.description}" in text
    for e in spec.entry_points:
        assert f"- `{e.signature}`" in text
    assert ("vLLM v0.13.0" if spec.source is Source.VLLM else "cuBLAS v12.4") in text


@pytest.mark.parametrize("spec", operators.all_specs(source="cublas"), ids=_id)
def test_cublas_v2_states_the_suite_conventions_and_v1_still_renders(spec: OperatorSpec) -> None:
    from generators.prompts import cublas

    text = user_text(spec, "cuda")
    assert cublas.CONVENTIONS_V2 in text and cublas.CONVENTIONS_V1 not in text
    for rule in ("write `result[0]`, do not return it", "`x[(n-1)*|inc|]`",
                 "`torch.view_as_real(x)`", "`tl.load(A_array + b).to(tl.pointer_type(tl.float32))`",
                 "asum return at once when incx <= 0", "a stride of 0 shares one entry",
                 "compute indices in int64"):
        assert rule in text
    old = user_text(spec, "cuda", "v1")
    assert cublas.CONVENTIONS_V1 in old and cublas.CONVENTIONS_V2 not in old


# ---- rules, kinds, platforms --------------------------------------------------------------------

@pytest.mark.parametrize("kind", list(Kind))
@pytest.mark.parametrize("op_id", ["aten::kgb_fake", "vllm::kgb_fake", "cublas::kgb_fake"])
def test_each_kind_gets_its_rule(kind: Kind, op_id: str) -> None:
    text = user_text(fake_spec(op_id, kind), "cuda")
    assert common.KIND_POLICY_V2[kind] in text
    assert f"Kind `{kind.value}`" in text
    others = [k for k in Kind if k is not kind]
    assert not any(f"Kind `{k.value}`:" in text for k in others)


def test_kind_rules_say_what_matters() -> None:
    p = common.KIND_POLICY_V2
    assert "own Triton kernels" in p[Kind.COMPUTE]
    assert "aliasing" in p[Kind.VIEW] and "as_strided" in p[Kind.VIEW]
    assert "`torch.zeros`, `ones`, `full`" in p[Kind.ALLOC] and "forbidden" in p[Kind.ALLOC]
    assert ".item()` of any tensor is allowed" in p[Kind.SCALAR]
    assert all("resize_" in p[k] and "torch.reshape" in p[k] for k in Kind if k is not Kind.ALLOC)
    assert "distribution" in p[Kind.RANDOM]


def test_rules_are_in_every_prompt() -> None:
    system = build_prompt(SPECS[0], "cpu").messages[0].content
    assert "Triton kernels only" in system
    assert "must not compute with torch" in system
    assert "exactly one fenced code block" in system
    for kind in Kind:
        assert common.KIND_POLICY_V2[kind]  # every kind has a policy


def test_platform_notes() -> None:
    spec = operators.get("aten::mm")
    cuda, cpu = user_text(spec, "cuda"), user_text(spec, "cpu")
    assert "NVIDIA H200" in cuda and 'input_precision="ieee"' in cuda and "TF32" in cuda
    assert "interpreter" in cpu and "keep grids small" in cpu and "inline" in cpu
    assert "NVIDIA H200" not in cpu and "interpreter" not in cuda


def test_platform_errors() -> None:
    spec = operators.get("aten::add")
    with pytest.raises(PromptError, match="does not run on platform 'tpu'"):
        build_prompt(spec, "tpu")
    vendor = fake_spec("aten::kgb_fake_vendor")
    type(vendor).platforms = frozenset({"npu"})  # a platform v1 has no notes for
    with pytest.raises(PromptError, match="no notes for platform 'npu'"):
        build_prompt(vendor, "npu")
    cuda_only = fake_spec("vllm::kgb_fake")
    type(cuda_only).platforms = frozenset({"cuda"})
    with pytest.raises(PromptError, match="runs on cuda"):
        build_prompt(cuda_only, "cpu")


# ---- the worked example -------------------------------------------------------------------------

def _example_source() -> str:
    system = common.system_message_v1().content
    names = [e.name for e in common.EXAMPLE_ENTRY_POINTS_V1]
    found = extract_code(system, names)
    assert found.status is ExtractStatus.OK and found.blocks == 1
    assert found.source == common.EXAMPLE_SOURCE_V1
    return found.source


def test_worked_example_passes_the_static_policy() -> None:
    assert static_policy.check(_example_source(), Kind.COMPUTE) == []


def test_worked_example_runs_under_the_interpreter(tmp_path: Path) -> None:
    assert os.environ.get("TRITON_INTERPRET") == "1"
    from operators.testing import load_module

    module = load_module(_example_source(), tmp_path)
    gen = torch.Generator().manual_seed(0)
    x3 = torch.randn(5, 37, 29, generator=gen)
    x3[1, 2, 3] = float("nan")
    x3[0, 0, :4] = torch.tensor([float("inf"), float("-inf"), -0.0, 0.0])
    inputs = [
        x3,
        torch.randn(3000, generator=gen),                                    # several blocks
        torch.randn(33, 65, generator=gen).to(torch.float16).t(),           # transposed
        torch.randn(2, 3, 17, 9, generator=gen).to(torch.bfloat16).permute(3, 1, 0, 2),
        torch.randn(40, 24, generator=gen)[::3, 1::2],                      # strided slice
        torch.randn(0, 4, generator=gen),                                   # empty
        torch.tensor(-2.5),                                                  # 0-d
    ]
    for x in inputs:
        before = x.clone()
        got = module.relu(x)
        torch.testing.assert_close(got, torch.relu(x), rtol=0, atol=0, equal_nan=True)
        assert got.dtype == x.dtype and got.shape == x.shape
        torch.testing.assert_close(x, before, rtol=0, atol=0, equal_nan=True)  # input intact
    x = torch.randn(6, 10, generator=gen)
    out = torch.full((10, 6), float("nan")).t()  # non-contiguous out, poisoned
    ret = module.relu_out(x, out=out)
    assert ret is out
    torch.testing.assert_close(out, torch.relu(x), rtol=0, atol=0)


# ---- versioning ---------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", SPECS, ids=_id)
def test_explicit_version_renders_identically(spec: OperatorSpec) -> None:
    latest = build_prompt(spec, "cuda")
    assert build_prompt(spec, "cuda", template_version=LATEST[spec.source].split("/")[1]) == latest
    assert build_prompt(spec, "cuda", template_version=latest.template) == latest


def test_unknown_version_is_a_clear_error() -> None:
    spec = operators.get("aten::add")
    with pytest.raises(UnknownTemplateError, match=r"unknown prompt template aten/v9.*known: aten/v1"):
        build_prompt(spec, "cuda", template_version="v9")
    with pytest.raises(UnknownTemplateError, match="for source 'vllm'.*from 'aten'"):
        build_prompt(spec, "cuda", template_version="vllm/v1")
    with pytest.raises(PromptError, match="invalid template version 'latest'"):
        build_prompt(spec, "cuda", template_version="latest")


def test_registry_versions_latest_and_old() -> None:
    reg = TemplateRegistry()

    def render(tag: str) -> Any:
        def fn(spec: OperatorSpec, platform: str) -> tuple[Message, ...]:
            return (Message(Role.USER, f"{tag} {spec.id} {platform}"),)
        return fn

    for v in ("v1", "v2", "v10"):
        reg.template(Source.VLLM, v)(render(v))
    spec = fake_spec("vllm::kgb_fake")
    assert reg.versions("vllm") == ["v1", "v2", "v10"]
    assert reg.build(spec, "cpu").template == "vllm/v10"
    old = reg.build(spec, "cpu", "v1")
    assert old.template == "vllm/v1" and old.messages[0].content == "v1 vllm::kgb_fake cpu"
    assert reg.build(spec, "cpu", "vllm/v1") == old
    with pytest.raises(ValueError, match="duplicate prompt template vllm/v2"):
        reg.template("vllm", "v2")(render("again"))
    with pytest.raises(UnknownTemplateError, match="no prompt template registered for source 'aten'"):
        reg.build(fake_spec("aten::kgb_fake"), "cpu")


# Released templates never change: these digests pin the v1 text of every source (rendered for
# problems torch knows nothing about, so they do not move with torch). If one fails, do not update
# it: restore the v1 text and register a new version (common.py, *_V2) instead.
V1_DIGESTS = {
    ("aten::kgb_fake", "cuda"):
        "ed628e7b94e115d320612cef92ebe26393106b991ed6896a2673214300d77ac0",
    ("aten::kgb_fake", "cpu"):
        "8f626cddad659a84729eacb8883ad257cabfe2442926386208c989becb571772",
    ("vllm::kgb_fake", "cuda"):
        "e87df59eba0491f11cb39f6faf7608b5165a0698749821a09f83254065d8ae13",
    ("vllm::kgb_fake", "cpu"):
        "aae058524516d786dbbe139a43939f4cce828f5ce4652e04972839fe8162f5db",
    ("cublas::kgb_fake", "cuda"):
        "4fd301cd8bcd68ab516efc674607b5fa28acca3c04d1fa2d0612e48e251713b7",
    ("cublas::kgb_fake", "cpu"):
        "2e8c2ed5be11c21990d36a5556a51fdb9840768b9a9d8bb53bf4edddd7d9436b",
}


@pytest.mark.parametrize("op_id, platform", sorted(V1_DIGESTS))
def test_v1_text_is_frozen(op_id: str, platform: str) -> None:
    prompt = build_prompt(fake_spec(op_id), platform, template_version="v1")
    blob = "\x00".join(f"{m.role.value}\x00{m.content}" for m in prompt.messages)
    assert hashlib.sha256(blob.encode()).hexdigest() == V1_DIGESTS[(op_id, platform)]


def test_every_agent_platform_has_a_prompt_section() -> None:
    """A vendor's plugin comes with its prompt section, kept where generators read it without
    importing the agent (issue #28)."""
    from device_agent.platforms.registry import platform_class, platform_names
    from generators.prompts.common import PLATFORM_NOTES_V1

    # The plugins shipped in the package (a test's out-of-tree stand-in vendor may be registered
    # in this process too: its prompt section is its own business).
    shipped = {n for n in platform_names()
               if platform_class(n).__module__.startswith("device_agent.platforms.")}
    assert {"cpu", "cuda", "rocm"} <= shipped <= set(PLATFORM_NOTES_V1)
    assert "64 lanes" in build_prompt(SPECS[0], "rocm").messages[-1].content
