"""Sweep specs: one TOML file that says what a sweep runs, parsed and validated up front.

A spec names the problems (suites and explicit ids), the platforms, the model endpoints and
models (``[[models]]``, with the ``provider/model`` short form: :mod:`coordinator.spec_models`),
the generation methods with their options, the agents, the budgets and the concurrency.
Every key is documented in ``docs/sweep-spec.md``. :func:`load_spec` reads a file and
:func:`parse_spec` reads text; both return a frozen :class:`SweepSpec` or raise
:class:`SweepSpecError`, whose message names the file and the exact key path::

    sweep.toml: models[1].endpoint: no endpoint named "vlm"; known: local-vllm, openai

Key paths count array entries from 0 in file order (``models[1]`` is the second ``[[models]]``).

Validation is done by the code that will use the values, so the spec cannot drift from it:
endpoints are built as :class:`generators.providers.base.EndpointConfig`, prices as a
:class:`generators.providers.pricing.PriceTable`, methods are instantiated through
:func:`generators.create` / :func:`generators.create_trajectory` (an unknown or invalid option fails
here, not hours into a sweep), and operator ids and suites resolve against the operator registry.
Unknown keys are errors: a typo is never silently ignored. Secrets never appear in a spec: an
endpoint names the environment variable that holds its key (``api_key_env``), and a value there
that looks like a literal key is refused (without echoing it).

Things that are allowed but probably not meant are returned as :attr:`SweepSpec.warnings`
(a suite only partly registered so far, a model no method uses, an endpoint no model uses ...).

:meth:`SweepSpec.plan` enumerates the trajectories: platform x operator x method x model x
sample, where candidate methods (``reference``, ``replay``) take no model, and a problem is
planned only on the platforms it declares. ``[sweep] generation = "shared"`` plans a problem once
and judges its final candidate on every platform (:class:`PlannedTrajectory`'s ``judged_on``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from coordinator.spec_parser import SpecParser
from coordinator.spec_records import (
    AGENT_AUTH_KEYS,
    GENERATION_MODES,
    MAX_RUNNERS_PER_ENDPOINT,
    NAME_RE,
    PER_PLATFORM,
    SHARED,
    SUITES,
    AgentSpec,
    Budgets,
    Concurrency,
    FleetSettings,
    MethodEntry,
    PlannedTrajectory,
    SweepSpec,
    SweepSpecError,
)

__all__ = ["AGENT_AUTH_KEYS", "GENERATION_MODES", "MAX_RUNNERS_PER_ENDPOINT", "NAME_RE",
           "PER_PLATFORM", "SHARED", "SUITES", "AgentSpec", "Budgets", "Concurrency",
           "FleetSettings", "MethodEntry", "PlannedTrajectory", "SpecParser", "SweepSpec",
           "SweepSpecError", "load_spec", "parse_spec"]


# -- loading -----------------------------------------------------------------------------------


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate the spec at ``path``; relative paths in it are relative to its folder."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SweepSpecError(str(path), "", f"cannot read the spec: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SweepSpecError(str(path), "", "the spec is not UTF-8 text") from None
    return parse_spec(text, str(path), base_dir=p.parent)


def parse_spec(text: str, source_name: str = "<spec>", *, base_dir: str | Path | None = None) -> SweepSpec:
    """Validate spec ``text``; ``source_name`` starts every error message. Relative paths (the
    store, a method's ``path`` option) are resolved against ``base_dir`` when given."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SweepSpecError(source_name, "", f"not valid TOML: {exc}") from None
    return SpecParser(source_name, None if base_dir is None else Path(base_dir)).spec(data)
