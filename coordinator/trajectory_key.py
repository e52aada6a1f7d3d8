"""What names a trajectory's rows in the store (:class:`TrajectoryKey`), and the store's error.

Kept apart from :mod:`coordinator.store` so the modules over its tables (:mod:`coordinator.llm_calls`)
can name trajectories without importing the store itself.
"""

from __future__ import annotations

from dataclasses import dataclass


class StoreError(RuntimeError):
    pass


@dataclass(frozen=True)
class TrajectoryKey:
    """What names one trajectory's calls: ``operator id@version/method/model/sample[@platform]``.

    ``method`` is the method's label in the sweep (e.g. ``refine`` or ``refine-t8``); it must not
    contain ``/`` (nor may the version part), so the string form parses back unambiguously —
    the model may (``org/model``). ``platform`` is set by sweeps (the same problem, method, model
    and sample on two platforms are two trajectories with their own calls); "" leaves it out."""

    operator_id: str
    operator_version: int
    method: str
    model: str
    sample: int
    platform: str = ""

    def __post_init__(self) -> None:
        if not self.method or "/" in self.method:
            raise StoreError(f"trajectory method label must be non-empty without '/', got {self.method!r}")
        if "@" in self.operator_id or "/" in self.operator_id:
            raise StoreError(f"operator id must not contain '@' or '/', got {self.operator_id!r}")
        if "/" in self.platform or "@" in self.platform:
            raise StoreError(f"platform must not contain '@' or '/', got {self.platform!r}")

    def __str__(self) -> str:
        where = f"@{self.platform}" if self.platform else ""
        return (f"{self.operator_id}@{self.operator_version}/{self.method}/{self.model}/"
                f"{self.sample}{where}")

    @classmethod
    def parse(cls, text: str) -> TrajectoryKey:
        try:
            ref, method, rest = text.split("/", 2)
            model, last = rest.rsplit("/", 1)
            sample, _, platform = last.partition("@")
            operator_id, version = ref.rsplit("@", 1)
            return cls(operator_id, int(version), method, model, int(sample), platform)
        except ValueError:
            raise StoreError(f"not a trajectory key (operator@version/method/model/sample"
                             f"[@platform]): {text!r}") from None
