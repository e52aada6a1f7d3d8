"""Generation methods: registry, reference, replay (good and bad files)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

import operators
from generators import MethodError, create, method_names


def test_registered_methods() -> None:
    assert {"reference", "replay"} <= set(method_names())


def test_unknown_method_suggests() -> None:
    with pytest.raises(MethodError, match="did you mean reference"):
        create("referenc")


def test_reference_yields_the_shipped_solution() -> None:
    spec = operators.get("aten::mm")
    m = create("reference")
    assert m.samples(spec) == 1
    c = m.generate(spec, 0)
    assert c.source == spec.solution and c.method == "reference" and len(c.candidate_hash) == 64


def test_replay_reads_jsonl(tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl"
    f.write_bytes(b"\n".join(orjson.dumps(r) for r in [
        {"operator": "aten::add", "source": "a = 1", "label": "first", "model": "m1"},
        {"operator": "aten::add", "source": "a = 2"},
        {"operator": "aten::mm", "source": "b = 1"},
    ]) + b"\n\n")
    m = create("replay", path=str(f))
    add = operators.get("aten::add")
    assert m.samples(add) == 2 and m.samples(operators.get("aten::cumsum")) == 0
    c0, c1 = m.generate(add, 0), m.generate(add, 1)
    assert (c0.source, c0.label, c0.model) == ("a = 1", "first", "m1")
    assert c1.label == "r.jsonl#1" and c0.candidate_hash != c1.candidate_hash


@pytest.mark.parametrize("content, message", [
    (b"{not json}\n", ":1: not JSON"),
    (b'{"operator": "aten::add"}\n', ":1: need string fields"),
    (b'{"operator": "aten::add", "source": "x"}\n[1]\n', ":2: need string fields"),
])
def test_replay_rejects_bad_lines(tmp_path: Path, content: bytes, message: str) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_bytes(content)
    with pytest.raises(MethodError, match=message):
        create("replay", path=str(f))


def test_replay_missing_file() -> None:
    with pytest.raises(MethodError, match="cannot read"):
        create("replay", path="/nonexistent/file.jsonl")
