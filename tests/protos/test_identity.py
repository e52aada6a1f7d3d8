"""A candidate's identity: one function, the same bytes whatever form the source arrives in."""

from __future__ import annotations

import hashlib

from generators.base import Candidate
from protos.integrity import Expected
from protos.records import EvalRequest, candidate_id, source_bytes


def test_text_and_bytes_have_one_identity() -> None:
    raw = b"def add(a, b):\n    return a + b  # \xff not UTF-8\n"
    text = raw.decode("utf-8", "surrogateescape")
    assert source_bytes(text) == raw and source_bytes(raw) is raw
    assert candidate_id(text) == candidate_id(raw) == hashlib.sha256(raw).hexdigest()


def test_every_layer_agrees_on_it() -> None:
    text = "import triton\n# é\n"
    req = EvalRequest(request_id="r", operator_id="aten::add", operator_version=1,
                      source=source_bytes(text))
    cand = Candidate(operator_id="aten::add", source=text, method="replay")
    assert Expected.of(req).candidate_hash == cand.candidate_hash == candidate_id(text)
