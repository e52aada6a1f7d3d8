"""The vLLM cache and attention problems time against vLLM's own kernels where ``vllm`` imports:
with a stand-in ``vllm._custom_ops`` each baseline calls its op with the call's own tensors
(vLLM's argument order and container types), and says so; without one it runs PyTorch."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import operators
from operators.spec import Tier
from operators.vllm import _baseline

KV_PROBLEMS = ("reshape_and_cache", "reshape_and_cache_flash", "concat_and_cache_mla",
               "copy_blocks", "copy_blocks_mla", "swap_blocks", "cp_gather_cache",
               "cp_gather_indexer_k_quant_cache", "gather_and_maybe_dequant_cache",
               "paged_attention_v1", "paged_attention_v2")


@pytest.fixture
def stand_in() -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    """A fake ``vllm._custom_ops`` recording every call (name, args)."""
    calls: list[tuple[str, tuple[Any, ...]]] = []
    ops = types.ModuleType("vllm._custom_ops")
    for name in KV_PROBLEMS:
        setattr(ops, name, lambda *args, _n=name: calls.append((_n, args)))
    pkg = types.ModuleType("vllm")
    pkg._custom_ops = ops  # type: ignore[attr-defined]
    saved = {k: sys.modules.get(k) for k in ("vllm", "vllm._custom_ops")}
    sys.modules.update({"vllm": pkg, "vllm._custom_ops": ops})
    _baseline.custom_ops.cache_clear()
    try:
        yield calls
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
        _baseline.custom_ops.cache_clear()


def _first_call(name: str) -> tuple[operators.OperatorSpec, Any]:
    spec = operators.get(f"vllm::{name}")
    c = next(c for c in spec.public_cases(Tier.CPU) if c.shape and c.shape[0] > 0)
    return spec, spec.make_call(c, torch.Generator().manual_seed(0))


@pytest.mark.parametrize("name", KV_PROBLEMS)
def test_baseline_calls_vllms_own_op(name: str,
                                     stand_in: list[tuple[str, tuple[Any, ...]]]) -> None:
    spec, call = _first_call(name)
    assert spec.baseline_library() == "vllm"
    assert spec.baseline(call) is None
    assert [n for n, _ in stand_in] == [name]
    args = stand_in[0][1]
    if name in ("copy_blocks", "copy_blocks_mla"):
        # vLLM takes per-layer lists: views of the stacked caches, in layer order.
        for i, stacked in enumerate(call.args[:-1]):
            assert isinstance(args[i], list) and len(args[i]) == stacked.shape[0]
            assert all(t.data_ptr() == stacked[k].data_ptr() for k, t in enumerate(args[i]))
        assert args[-1] is call.args[-1]
    elif name == "swap_blocks":
        # vLLM wants the mapping on the host (.cpu(): a no-op for this test's CPU tensors).
        assert args[0] is call.args[0] and args[1] is call.args[1]
        assert torch.equal(args[2], call.args[2])
    else:
        assert len(args) == len(call.args)
        assert all(a is b for a, b in zip(args, call.args, strict=True))


@pytest.mark.parametrize("name", KV_PROBLEMS)
def test_without_vllm_the_baseline_is_torch(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import fails
    _baseline.custom_ops.cache_clear()
    try:
        spec = operators.get(f"vllm::{name}")
        assert spec.baseline_library() == "torch"
    finally:
        _baseline.custom_ops.cache_clear()
