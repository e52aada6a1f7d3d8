"""``reference``: the problem's shipped Triton solution (the positive control)."""

from __future__ import annotations

from generators.base import Candidate, Method
from generators.registry import register_method
from operators.spec import OperatorSpec


@register_method("reference")
class ReferenceMethod(Method):
    def samples(self, spec: OperatorSpec) -> int:
        return 1

    def generate(self, spec: OperatorSpec, sample: int) -> Candidate:
        return Candidate(spec.id, spec.solution, self.name, sample, label="reference")
