"""``kgb run`` as a sweep: the spec of a run of candidate methods on one local agent.

``kgb run`` has no pipeline of its own. It starts a local agent
(:class:`~coordinator.local_agent.LocalAgent`), writes the spec this module builds (the chosen
problems, candidate methods such as ``reference`` and ``replay``, the agent) and hands it to the
sweep engine like any ``kgb sweep run``: the same planning, retries, verdict reuse and
de-duplication, the same store. The run is recorded with kind ``run``, so ``kgb report`` shows
its per-candidate table and ``kgb sweep`` commands leave it alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from coordinator.engine import SweepOptions
from coordinator.sweep_spec import SweepSpec, parse_spec

RUN_KIND = "run"


def _toml(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's; non-ASCII stays as it is)."""
    return json.dumps(value, ensure_ascii=False)


def spec_text(run_id: str, store_dir: Path, operators: Sequence[str],
              methods: Sequence[tuple[str, dict[str, str]]], platform: str, agent: str, *,
              evaluations_in_flight: int = 0) -> str:
    """The TOML spec of a local run. A method used twice (two ``--replay`` files) gets the
    labels ``name``, ``name-2``, ...: each use is its own set of trajectories."""
    lines = [f"operators = [{', '.join(_toml(o) for o in operators)}]",
             f"platforms = [{_toml(platform)}]", "",
             "[sweep]", f"name = {_toml(run_id)}", f"store = {_toml(str(store_dir))}", ""]
    uses: dict[str, int] = {}
    for name, options in methods:
        uses[name] = uses.get(name, 0) + 1
        lines += ["[[methods]]", f"name = {_toml(name)}"]
        if uses[name] > 1:
            lines.append(f"label = {_toml(f'{name}-{uses[name]}')}")
        lines += [f"{k} = {_toml(v)}" for k, v in sorted(options.items())] + [""]
    lines += ["[[agents]]", f"address = {_toml(agent)}", f"platform = {_toml(platform)}", ""]
    if evaluations_in_flight:
        lines += ["[concurrency]", f"evaluations_in_flight = {evaluations_in_flight}", ""]
    return "\n".join(lines)


def local_sweep(run_id: str, store_dir: Path, operators: Sequence[str],
                methods: Sequence[tuple[str, dict[str, str]]], platform: str, agent: str, *,
                evaluations_in_flight: int = 0, eval_timeout_s: float = 900.0
                ) -> tuple[SweepSpec, SweepOptions]:
    """The spec and engine options of a local run, validated as any spec is (a
    :class:`~coordinator.sweep_spec.SweepSpecError` names what is wrong)."""
    store_dir = Path(store_dir).resolve()
    text = spec_text(run_id, store_dir, operators, methods, platform, agent,
                     evaluations_in_flight=evaluations_in_flight)
    source = f"<kgb run {run_id}>"
    spec = parse_spec(text, source, base_dir=store_dir)
    options = SweepOptions(run_id=run_id, store_dir=store_dir, spec_text=text, spec_source=source,
                           spec_dir=str(store_dir), eval_timeout_s=eval_timeout_s, kind=RUN_KIND)
    return spec, options
