"""The headline metrics of a sweep, each defined once (docs/reports.md, "Headline metrics"):
accuracy over the problems the sweep *named*, fast_p, the paper's speed-up (also over the
problems every compared method solved), % of speed-of-light, 95 % bootstrap intervals, and the
sequential Pass@K of ``sample`` with ``rounds`` (pass after round K).

Pure functions of ``trajectory_results`` rows and the run's recorded spec: the denominator is the
suite or list of problems the sweep named (:func:`run_scope`), so a problem that was never
attempted, or whose every trajectory was excluded (the system's failure) or failed in the
platform's toolchain, counts as unsolved and is shown apart instead of leaving the denominator.
The bootstrap's seed is fixed here, so a report stays a pure function of the store.
"""

from __future__ import annotations

import math
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coordinator.store import TrajectoryResult
from generators.trajectory import EndReason
from protos.records import Status

#: The published size of each source's problem set (shared/reference/operators.md).
SOURCE_SIZES: Mapping[str, int] = {"aten": 110, "vllm": 50, "cublas": 50}
#: The sources each suite of a sweep spec names (coordinator/sweep_spec.py's SUITES).
SUITE_SOURCES: Mapping[str, tuple[str, ...]] = {
    "ms": ("aten", "vllm", "cublas"), "mc": ("aten",), "aten": ("aten",), "vllm": ("vllm",),
    "cublas": ("cublas",)}
#: fast_p thresholds reported.
FAST_PS: tuple[float, ...] = (0.0, 0.8, 1.0, 1.5, 2.0)
#: The bootstrap: resamples and seed, fixed so the intervals are a pure function of the rows.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 27
ALL = "all"


def _fast_key(p: float) -> str:
    return f"fast_{p:g}"


# ---- the denominator ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    """The problems a sweep named, per source: ``sizes`` maps a source to its denominator.

    ``recorded`` is False when the run recorded no spec (a store from a harness before specs were
    kept, or a spec that no longer parses): the denominator is then the problems attempted, and
    the report says so (``why``)."""

    suites: tuple[str, ...]
    listed: tuple[str, ...]
    sizes: tuple[tuple[str, int], ...]
    recorded: bool
    why: str = ""
    generation: str = "per-platform"  # the spec's [sweep] generation: "shared" counts tokens once

    def size(self, source: str) -> int:
        if source == ALL:
            return sum(n for _s, n in self.sizes)
        return dict(self.sizes).get(source, 0)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(s for s, _n in self.sizes)

    def to_json(self) -> dict[str, Any]:
        return {"suites": list(self.suites), "operators": list(self.listed),
                "sizes": dict(self.sizes), "total": self.size(ALL), "recorded": self.recorded,
                "why": self.why, "generation": self.generation}


def _spec_selection(config: Mapping[str, Any] | None) -> tuple[list[str], list[str], str] | str:
    """(suites, operator ids, generation mode) of the recorded spec, or why there are none."""
    text = (config or {}).get("spec")
    if not isinstance(text, str) or not text.strip():
        return "the run recorded no sweep spec (a store from an older harness, or no runs row)"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return f"the recorded sweep spec does not parse ({exc})"
    suites, ops = data.get("suites", []), data.get("operators", [])
    if not isinstance(suites, list) or not isinstance(ops, list) or not (suites or ops):
        return "the recorded sweep spec names no suites or operators"
    unknown = [s for s in suites if s not in SUITE_SOURCES]
    if unknown:
        return f"the recorded sweep spec names unknown suites {unknown}"
    sweep = data.get("sweep")
    generation = sweep.get("generation") if isinstance(sweep, dict) else None
    return ([str(s) for s in suites], [str(o) for o in ops],
            generation if isinstance(generation, str) else "per-platform")


def method_rounds(config: Mapping[str, Any] | None) -> dict[str, int]:
    """The sequential methods of the run's recorded spec: method label -> ``rounds``, for each
    ``[[methods]]`` entry of ``sample`` with ``rounds`` > 1 (such a trajectory stops at its first
    passing round, so its passing round is its turn count). Empty without a recorded spec."""
    text = (config or {}).get("spec")
    if not isinstance(text, str):
        return {}
    try:
        tables = tomllib.loads(text).get("methods", [])
    except tomllib.TOMLDecodeError:
        return {}
    out: dict[str, int] = {}
    for t in tables if isinstance(tables, list) else ():
        if not isinstance(t, dict) or t.get("name") != "sample":
            continue
        rounds = t.get("rounds", 1)
        if isinstance(rounds, int) and not isinstance(rounds, bool) and rounds > 1:
            out[str(t.get("label", "sample"))] = rounds
    return out


def run_scope(config: Mapping[str, Any] | None, results: Iterable[TrajectoryResult]) -> Scope:
    """The denominator of a run: per source, the published size of a suite that covers it, else
    the operators listed (and attempted) of that source; never fewer than the problems attempted."""
    attempted: dict[str, set[str]] = defaultdict(set)
    for r in results:
        attempted[r.source].add(r.key.operator_id)
    sel = _spec_selection(config)
    if isinstance(sel, str):
        sizes = tuple(sorted((s, len(ids)) for s, ids in attempted.items()))
        return Scope((), (), sizes, False, f"{sel}: the denominator is the problems attempted")
    suites, listed, generation = sel
    covered = {src for s in suites for src in SUITE_SOURCES[s]}
    named: dict[str, set[str]] = defaultdict(set)
    for op in listed:
        named[op.split("::", 1)[0]].add(op)
    out = {}
    for src in sorted(covered | set(named) | set(attempted)):
        extra = len(attempted[src] | named[src])
        out[src] = max(SOURCE_SIZES.get(src, 0), len(attempted[src])) if src in covered else extra
    return Scope(tuple(suites), tuple(sorted(listed)), tuple(sorted(out.items())), True,
                 generation=generation)


# ---- per problem -------------------------------------------------------------------------------


def is_excluded(r: TrajectoryResult) -> bool:
    """An unsolved trajectory the system ended (INFRA_ERROR): never counted against a model."""
    return not r.solved and (r.end_reason == EndReason.INFRA_ERROR.value
                             or r.status is Status.INFRA_ERROR)


def geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


@dataclass(frozen=True)
class ProblemOutcome:
    """One problem (operator id) of one (model, method, platform): its samples and speed.

    ``speedup`` is the geometric mean of its passing samples' speed-ups (each already the
    geometric mean over the verdict's timed cases), ``sol_percent`` the mean of their % of
    speed-of-light; None when no passing sample was timed."""

    model: str
    method: str
    platform: str
    source: str
    problem: str
    scored: int
    passed: int
    excluded: int
    toolchain: int
    speedup: float | None
    sol_percent: float | None
    solved_round: int | None = None   # the fewest turns of a passing sample (None: unsolved)

    @property
    def solved(self) -> bool:
        return self.passed > 0

    @property
    def state(self) -> str:
        """solved; excluded (every trajectory the system's failure); toolchain (every scored
        trajectory a TOOLCHAIN_ERROR); failed."""
        if self.solved:
            return "solved"
        if self.scored == 0:
            return "excluded"
        return "toolchain" if self.toolchain == self.scored else "failed"


def problem_outcomes(results: Iterable[TrajectoryResult]) -> list[ProblemOutcome]:
    """One outcome per (model, method, platform, problem), sorted."""
    groups: dict[tuple[str, str, str, str, str], list[TrajectoryResult]] = defaultdict(list)
    for r in results:
        groups[(r.key.model, r.key.method, r.platform, r.source, r.key.operator_id)].append(r)
    out = []
    for key, rows in sorted(groups.items()):
        passing = [r for r in rows if r.solved]
        speeds = [r.speedup for r in passing if r.speedup is not None and r.speedup > 0]
        sols = [r.sol_percent for r in passing if r.sol_percent is not None]
        excluded = sum(1 for r in rows if is_excluded(r))
        out.append(ProblemOutcome(
            *key, scored=len(rows) - excluded, passed=len(passing), excluded=excluded,
            toolchain=sum(1 for r in rows if r.status is Status.TOOLCHAIN_ERROR),
            speedup=geomean(speeds), sol_percent=sum(sols) / len(sols) if sols else None,
            solved_round=min((r.turns for r in passing), default=None)))
    return out


# ---- the bootstrap -----------------------------------------------------------------------------


def bootstrap_ci(values: Sequence[float], stat: str, seed: int = BOOTSTRAP_SEED,
                 resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float] | None:
    """The 95 % percentile interval of ``stat`` ("mean" or "geomean") over ``values`` resampled
    with replacement (one value per problem); None with fewer than 2 values."""
    if len(values) < 2:
        return None
    arr = np.asarray(values, dtype=np.float64)
    if stat == "geomean":
        arr = np.log(arr)
    idx = np.random.default_rng(seed).integers(0, len(arr), size=(resamples, len(arr)))
    means = arr[idx].mean(axis=1)
    lo, hi = np.quantile(means, [0.025, 0.975])
    if stat == "geomean":
        lo, hi = np.exp(lo), np.exp(hi)
    return float(lo), float(hi)


# ---- the rows ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricRow:
    """The headline metrics of one (model, method, source, platform); ``source`` "all" is the
    whole named set on that platform. Fractions are in [0, 1] and over ``named`` problems:
    ``solved + failed + excluded + toolchain + unattempted == named``."""

    model: str
    method: str
    source: str
    platform: str
    named: int
    attempted: int
    solved: int
    failed: int
    excluded: int
    toolchain: int
    unattempted: int
    accuracy: float | None
    accuracy_ci: tuple[float, float] | None
    fast_p: tuple[tuple[str, float | None], ...]
    timed: int
    speedup: float | None
    speedup_ci: tuple[float, float] | None
    common_problems: int
    common_speedup: float | None
    sol_percent: float | None
    problems: tuple[str, ...] = field(default=(), repr=False)   # the solved problems
    pass_after_round: tuple[float | None, ...] = ()   # sequential Pass@K, K = 1..rounds

    def fast(self, p: float) -> float | None:
        return dict(self.fast_p)[_fast_key(p)]

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__
             if k not in ("fast_p", "problems", "pass_after_round")}
        d["accuracy_ci"] = list(self.accuracy_ci) if self.accuracy_ci else None
        d["speedup_ci"] = list(self.speedup_ci) if self.speedup_ci else None
        d["fast_p"] = dict(self.fast_p)
        d["pass_after_round"] = list(self.pass_after_round)
        return d


def _fast_p(outs: Sequence[ProblemOutcome], named: int) -> tuple[tuple[str, float | None], ...]:
    """fast_p over the named problems: solved with a per-problem speed-up above p (fast_0 is the
    accuracy); for p > 0, None when something was solved but nothing solved was timed."""
    solved = [o for o in outs if o.solved]
    timed = [o for o in solved if o.speedup is not None]
    out: list[tuple[str, float | None]] = []
    for p in FAST_PS:
        if named == 0:
            out.append((_fast_key(p), None))
        elif p == 0:
            out.append((_fast_key(p), len(solved) / named))
        elif solved and not timed:
            out.append((_fast_key(p), None))
        else:
            out.append((_fast_key(p), sum(1 for o in timed if (o.speedup or 0) > p) / named))
    return tuple(out)


def pass_after_round(outs: Sequence[ProblemOutcome], named: int,
                     rounds: int) -> tuple[float | None, ...]:
    """Sequential Pass@K for K = 1..``rounds``: the named problems solved by round K (a sample
    whose passing round is at most K) over ``named``; None for each K when nothing is named."""
    if named == 0:
        return (None,) * rounds
    firsts = [o.solved_round for o in outs if o.solved and o.solved_round is not None]
    return tuple(sum(1 for f in firsts if f <= k) / named for k in range(1, rounds + 1))


def metric_row(key: tuple[str, str, str, str], outs: Sequence[ProblemOutcome], named: int,
               common: frozenset[str], rounds: int = 0) -> MetricRow:
    """The row of one group from its problems' outcomes and its denominator; ``rounds`` > 1 adds
    the sequential Pass@K (:func:`pass_after_round`)."""
    states = [o.state for o in outs]
    solved = [o for o in outs if o.solved]
    speeds = [o.speedup for o in solved if o.speedup is not None]
    common_speeds = [o.speedup for o in solved if o.problem in common and o.speedup is not None]
    sols = [o.sol_percent for o in solved if o.sol_percent is not None]
    indicator = [1.0] * len(solved) + [0.0] * (named - len(solved))
    return MetricRow(
        *key, named=named, attempted=len(outs), solved=len(solved), failed=states.count("failed"),
        excluded=states.count("excluded"), toolchain=states.count("toolchain"),
        unattempted=named - len(outs), accuracy=len(solved) / named if named else None,
        accuracy_ci=bootstrap_ci(indicator, "mean"), fast_p=_fast_p(outs, named),
        timed=len(speeds), speedup=geomean(speeds), speedup_ci=bootstrap_ci(speeds, "geomean"),
        common_problems=len(common), common_speedup=geomean(common_speeds),
        sol_percent=sum(sols) / len(sols) if sols else None,
        problems=tuple(sorted(o.problem for o in solved)),
        pass_after_round=pass_after_round(outs, named, rounds) if rounds > 1 else ())


def metric_rows(outs: Sequence[ProblemOutcome], scope: Scope,
                rounds: Mapping[str, int] | None = None) -> list[MetricRow]:
    """One row per (model, method) x source (each named, and "all") x platform of the run, from
    its :func:`problem_outcomes`; ``rounds``: the sequential methods' rounds by method label
    (:func:`method_rounds`)."""
    rounds = rounds or {}
    pairs = sorted({(o.model, o.method) for o in outs})
    platforms = sorted({o.platform for o in outs})
    by: dict[tuple[str, str, str, str], list[ProblemOutcome]] = defaultdict(list)
    for o in outs:
        by[(o.model, o.method, o.source, o.platform)].append(o)
        by[(o.model, o.method, ALL, o.platform)].append(o)
    rows = []
    for platform in platforms:
        for source in (*scope.sources, ALL):
            solved_sets = [{o.problem for o in by[(m, meth, source, platform)] if o.solved}
                           for m, meth in pairs]
            common = frozenset(set.intersection(*solved_sets)) if solved_sets else frozenset()
            for m, meth in pairs:
                key = (m, meth, source, platform)
                rows.append(metric_row(key, by.get(key, []), scope.size(source), common,
                                       rounds.get(meth, 0)))
    return rows
