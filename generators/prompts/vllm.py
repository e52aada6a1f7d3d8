"""vLLM prompt templates: the kernel's reference semantics (the spec's description) and the exact
signatures of its entry points. vLLM v0.13.0's own CUDA kernels are the baseline."""

from __future__ import annotations

from collections.abc import Callable

from generators.llm import Message, Role
from generators.prompts.common import (
    closing_v1,
    closing_v2,
    entry_points_list_v1,
    system_message_v1,
    system_message_v2,
)
from generators.prompts.registry import REGISTRY
from operators.spec import OperatorSpec, Source

VLLM_VERSION = "v0.13.0"


def _render(spec: OperatorSpec, platform: str, system: Message,
            closing: Callable[[OperatorSpec, str], str]) -> tuple[Message, ...]:
    name = spec.id.split("::", 1)[1]
    user = (
        f"Problem `{spec.id}` (version {spec.version}, kind `{spec.kind.value}`): the inference "
        f"kernel `{name}` of vLLM {VLLM_VERSION}, whose own CUDA kernel is the baseline. "
        "Implement it in Triton with exactly these entry points (names, argument order, "
        "keyword-only arguments and return values as shown):\n\n"
        f"{entry_points_list_v1(spec)}\n\n"
        f"Reference semantics:\n{spec.description}\n\n"
        f"{closing(spec, platform)}"
    )
    return (system, Message(Role.USER, user))


@REGISTRY.template(Source.VLLM, "v1")
def render_v1(spec: OperatorSpec, platform: str) -> tuple[Message, ...]:
    return _render(spec, platform, system_message_v1(), closing_v1)


@REGISTRY.template(Source.VLLM, "v2")
def render_v2(spec: OperatorSpec, platform: str) -> tuple[Message, ...]:
    """v1 with the rules of issue #22: imports (`logging`) and `.item()` by provenance."""
    return _render(spec, platform, system_message_v2(), closing_v2)
