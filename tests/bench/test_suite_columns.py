"""bench/suite_columns.py: a published table counts only verdicts of a problem's current
version (a re-versioned problem's old PASSED is not today's result)."""

from __future__ import annotations

import operators
from bench.suite_columns import table


def _row(op: str, version: int, file: str, status: str) -> dict[str, object]:
    return {"operator": op, "operator_version": version, "file": f"/x/{file}.py",
            "status": status, "baseline": "cublas", "timings": [], "cases": []}


def test_older_versions_are_not_counted() -> None:
    spec = operators.get("cublas::cublasDsbmv_v2")
    old, now = spec.version - 1, spec.version
    rows = [_row(spec.id, old, "reference", "PASSED")]
    line = next(x for x in table(rows, "cublas").splitlines() if spec.id in x)
    assert f"not run at v{now} (v{old} ran)" in line
    rows.append(_row(spec.id, now, "reference", "WRONG_ANSWER"))
    rows.append(_row(spec.id, old, "negative_ignores_lda", "WRONG_ANSWER"))
    line = next(x for x in table(rows, "cublas").splitlines() if spec.id in x)
    assert "WRONG_ANSWER" in line and "controls rejected" not in line
