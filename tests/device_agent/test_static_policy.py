"""The static policy layer on its own: honest code passes, each cheat pattern is caught by its
rule with the line, and a real agent (layer on) turns a violation into REJECTED."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import operators
from device_agent.static_policy import check
from operators.spec import Kind
from protos.client import AgentClient
from protos.records import EvalRequest, Status
from tests.helpers import running_agent, softmax_with_libdevice

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "candidates"
HONEST_FIXTURES = ["add_autotuned.py", "add_inline_asm.py", "add_mutates_input.py",
                   "add_unwritten.py", "add_oob_write.py"]

WRAP = ("import torch\nimport triton\nimport triton.language as tl\n\n\n"
        "def add_Tensor(self, other, *, alpha=1):\n{}\n")


def _body(code: str) -> str:
    return WRAP.format("\n".join("    " + line for line in code.splitlines()))


@pytest.mark.parametrize("spec", operators.all_specs(), ids=lambda s: s.id)
def test_shipped_solutions_and_negatives_pass(spec: operators.OperatorSpec) -> None:
    for src in [spec.solution] + [n.source for n in spec.negatives]:
        assert check(src, spec.kind) == []


@pytest.mark.parametrize("name", HONEST_FIXTURES)
def test_honest_fixtures_pass(name: str) -> None:
    assert check((FIXTURES / name).read_text()) == []


def test_libdevice_candidate_passes() -> None:
    assert check(softmax_with_libdevice().decode()) == []


@pytest.mark.parametrize("code, rule", [
    ("return torch.matmul(self, other)", "torch-call"),
    ("return torch.add(self, other, alpha=alpha)", "torch-call"),
    ("return torch.nn.functional.relu(self)", "torch-call"),
    ("return torch.ops.aten.add(self, other)", "torch-ops"),
    ("return self.add_(other)", "tensor-method"),
    ("return self.__matmul__(other)", "tensor-method"),
    ("return self.addmm_(other, other)", "tensor-method"),
    ("return torch.__dict__['ops'].aten.add(self, other)", "introspection"),
    ("return self.sum() + other", "tensor-method"),
    ("return self @ other", "matmul-operator"),
    ("return torch.tensor(self.cpu().numpy())", "cpu-roundtrip"),
    ("v = self.item()\nreturn self", "cpu-roundtrip"),
    ("return eval('torch.add')(self, other)", "dynamic-code"),
    ("return getattr(torch, 'ma' + 'tmul')(self, other)", "dynamic-attribute"),
    ("return getattr(torch, 'matmul')(self, other)", "torch-call"),
    ("return getattr(self, 'sum')()", "tensor-method"),
    ("torch.empty = lambda *a, **k: self\nreturn self", "monkeypatch"),
    ("setattr(torch, 'empty', None)\nreturn self", "monkeypatch"),
    ("triton.testing.do_bench = None\nreturn self", "monkeypatch"),
    ("s = torch.cuda.Stream()\nreturn self", "stream"),
    ("g = torch.cuda.CUDAGraph()\nreturn self", "cuda-graph"),
    ("return torch.compile(lambda a, b: a + b)(self, other)", "cuda-graph"),
])
def test_cheat_patterns_are_caught(code: str, rule: str) -> None:
    found = check(_body(code))
    assert rule in {v.rule for v in found}, found
    assert all(v.line > 0 and v.evidence for v in found)


@pytest.mark.parametrize("source, rule", [
    ("import torch as T\n\ndef f(x):\n    return T.matmul(x, x)\n", "torch-call"),
    ("from torch import matmul as mm\n\ndef f(x):\n    return mm(x, x)\n", "torch-call"),
    ("import torch\nF = torch.nn.functional\n\ndef f(x):\n    return F.softmax(x, -1)\n",
     "torch-call"),
    ("import torch\nop = torch.cumsum\n\ndef f(x):\n    return op(x, 0)\n", "torch-call"),
    ("import os\n", "import"),
    ("import subprocess\n", "import"),
    ("import ctypes\n", "import"),
    ("import numpy as np\n", "import"),
    ("import threading\n", "import"),
    ("from importlib import import_module\n", "import"),
    ("import cupy\n", "import"),
    ("import vllm._custom_ops as ops\n", "import"),
    ("import gc\n", "import"),
    ("from torch import *\n", "import"),
    ("x = __import__('os')\n", "dynamic-code"),
    ("g = globals()\n", "dynamic-code"),
    ("f = open('/etc/passwd')\n", "dynamic-code"),
])
def test_aliases_and_imports(source: str, rule: str) -> None:
    assert rule in {v.rule for v in check(source)}


def test_kind_specific_rules() -> None:
    item = _body("v = self.item()\nreturn self")
    assert check(item, Kind.SCALAR) == []
    assert check(item, Kind.COMPUTE)
    zeros = _body("return torch.zeros(self.shape)")
    assert check(zeros, Kind.COMPUTE) == []
    assert {v.rule for v in check(zeros, Kind.ALLOC)} == {"torch-call"}
    view = _body("return torch.as_strided(self, (2,), (1,))")
    assert check(view, Kind.VIEW) == [] and check(view, Kind.COMPUTE)
    # how an honest kernel reaches complex data, in any kind
    pairs = _body("r = torch.view_as_real(self)\nreturn torch.view_as_complex(r)")
    assert all(check(pairs, k) == [] for k in Kind)


def test_triton_code_is_left_to_the_compiler() -> None:
    src = ("import triton\nimport triton.language as tl\n\n@triton.jit\n"
           "def k(x_ptr, BLOCK: tl.constexpr):\n    v = tl.load(x_ptr + tl.arange(0, BLOCK))\n"
           "    s = tl.sum(v, axis=0)\n    tl.store(x_ptr, s.to(tl.float32))\n")
    assert check(src) == []


@pytest.fixture(scope="module")
def static_agent(agent_secret_env: None) -> Iterator[str]:
    with running_agent() as address:
        yield address


def test_agent_rejects_with_rule_and_line(static_agent: str) -> None:
    cheat = _body("return torch.add(self, other, alpha=alpha)\n") + \
        "\n\nadd_Scalar = add_out = add_Tensor\n"
    spec = operators.get("aten::add")

    async def go() -> None:
        async with AgentClient(static_agent) as c:
            v = await c.evaluate(EvalRequest(uuid.uuid4().hex, spec.id, cheat.encode()), timeout=60)
            assert v.status is Status.REJECTED
            assert v.findings and v.findings[0].layer == "static"
            assert v.findings[0].rule == "torch-call" and "line 7" in v.findings[0].evidence
            assert "torch.add" in v.message
            ok = await c.evaluate(EvalRequest(uuid.uuid4().hex, spec.id, spec.solution.encode()),
                                  timeout=120)
            assert ok.status is Status.PASSED

    asyncio.run(go())


def test_names_shared_with_python_containers_are_left_to_the_runtime_layer() -> None:
    """``seen.add(key)`` on a set and ``torch.tensor`` metadata are honest wrapper code; the
    dispatch guard still sees ``tensor.add`` if it reaches torch."""
    src = _body("seen = set()\nseen.add(self.shape)\n"
                "meta = torch.tensor(list(self.shape), device=self.device)\nreturn meta")
    assert check(src) == []
