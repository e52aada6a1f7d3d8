"""vLLM's own kernels as the baseline, where the agent host has vLLM installed.

The published benchmark times candidates against vLLM 0.13.0's CUDA kernels. Where ``vllm``
imports (it needs a CUDA build), a problem's ``baseline`` calls ``vllm._custom_ops``; elsewhere it
runs its PyTorch implementation of the same semantics, and ``baseline_library`` says which ran,
so a verdict's speed-up always names what it was measured against.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

import torch


@functools.cache
def custom_ops() -> ModuleType | None:
    """``vllm._custom_ops`` when vLLM imports on this host, else None (looked up once)."""
    try:
        return importlib.import_module("vllm._custom_ops")
    except Exception:  # not installed, or a build for another torch/CUDA: no vLLM baseline
        return None


def library() -> str:
    """``"vllm"`` when vLLM's kernels are the baseline on this host, else ``"torch"``."""
    return "vllm" if custom_ops() is not None else "torch"


def for_tensor(t: torch.Tensor) -> ModuleType | None:
    """``vllm._custom_ops`` when its kernels can run on ``t`` (a CUDA tensor, vLLM imported),
    else None: ``validate`` runs baselines on CPU tensors even where vLLM is installed."""
    return custom_ops() if t.is_cuda else None
