"""``replay``: candidates recorded in a JSONL file, re-evaluated without spending tokens.

Each line is an object with ``operator`` (an id) and ``source`` (the candidate file), and
optionally ``label`` and ``model``. Lines for problems outside the sweep are ignored; a line
that is not valid is an error naming its line number.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import orjson

from generators.base import Candidate, Method, MethodError
from generators.registry import register_method
from operators.spec import OperatorSpec


@register_method("replay")
class ReplayMethod(Method):
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._by_op: dict[str, list[dict[str, str]]] = defaultdict(list)
        try:
            lines = self.path.read_bytes().splitlines()
        except OSError as exc:
            raise MethodError(f"replay: cannot read {self.path}: {exc.strerror}") from None
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise MethodError(f"replay: {self.path}:{n}: not JSON ({exc})") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("operator"), str) \
                    or not isinstance(rec.get("source"), str):
                raise MethodError(f"replay: {self.path}:{n}: need string fields 'operator' and 'source'")
            self._by_op[rec["operator"]].append(rec)

    def samples(self, spec: OperatorSpec) -> int:
        return len(self._by_op.get(spec.id, ()))

    def generate(self, spec: OperatorSpec, sample: int) -> Candidate:
        rec = self._by_op[spec.id][sample]
        return Candidate(spec.id, rec["source"], self.name, sample, model=str(rec.get("model", "")),
                         label=str(rec.get("label", f"{self.path.name}#{sample}")))
