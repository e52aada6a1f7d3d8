"""The generator interface every method implements."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar

from operators.spec import OperatorSpec
from protos.records import candidate_id


class MethodError(ValueError):
    """A method was configured wrongly (bad file, bad option): a user error, said plainly."""


@dataclass(frozen=True)
class Candidate:
    """One generated candidate file and where it came from."""

    operator_id: str
    source: str
    method: str
    sample: int = 0
    model: str = ""
    label: str = ""  # human-readable origin: "reference", a replay label, a file name

    @property
    def candidate_hash(self) -> str:
        """Content address of the source (what the store and the agent key on)."""
        return candidate_id(self.source)


class Method(abc.ABC):
    """A way of producing candidates for a problem.

    ``samples(spec)`` says how many trajectories the method runs for that problem (0 skips it);
    ``generate(spec, sample)`` produces the candidate of one trajectory.
    """

    name: ClassVar[str]

    @abc.abstractmethod
    def samples(self, spec: OperatorSpec) -> int: ...

    @abc.abstractmethod
    def generate(self, spec: OperatorSpec, sample: int) -> Candidate: ...
