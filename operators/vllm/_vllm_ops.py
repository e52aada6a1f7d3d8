"""vLLM's own kernel as the baseline of a call whose tensors live where vLLM's kernels run
(CUDA) on a host where vLLM imports (registers nothing). Looked up through ``_baseline`` at
call time, so one stand-in ``vllm._custom_ops`` in a test reaches every problem."""

from __future__ import annotations

from typing import Any

import torch

from operators.vllm import _baseline


def vllm_ops(t: torch.Tensor) -> Any:
    """``vllm._custom_ops`` when vLLM imports here and ``t`` is a CUDA tensor, else None."""
    ops = _baseline.custom_ops()
    return ops if ops is not None and t.is_cuda else None


def library() -> str:
    """Which implementation the baselines run on this host (``"vllm"`` or ``"torch"``)."""
    return _baseline.library()
