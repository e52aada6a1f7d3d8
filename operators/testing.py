"""Run a candidate source against a problem in this process — for testing the problems only.

The device agent never does this (candidates run in sandbox workers); the suite's own tests and
problem authors use it to check a reference solution or a negative control quickly. Set
``TRITON_INTERPRET=1`` before calling it on a machine without a GPU.
"""

from __future__ import annotations

import hashlib
import importlib.util
import random
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

from operators.checking import Mismatch, check, same_bits
from operators.invoke import collect, invoke, layouts, prepare, synchronize
from operators.spec import Case, OperatorSpec, Tier


@dataclass(frozen=True)
class CaseOutcome:
    case: Case
    mismatch: Mismatch | None = None
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.mismatch is None and self.error is None


def load_module(source: str, directory: Path | None = None) -> ModuleType:
    """Import ``source`` from a real file (``@triton.jit`` needs one) under a unique name."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    name = f"kgb_candidate_{digest}"
    folder = Path(directory or tempfile.mkdtemp(prefix="kgb-cand-"))
    path = folder / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_cases(spec: OperatorSpec, source: str, *, tier: Tier = Tier.CPU, seed: int = 0,
              hidden: bool = True, device: str = "cpu") -> list[CaseOutcome]:
    """Check ``source`` on the tier's public cases (and hidden ones drawn from ``seed``)."""
    module = load_module(source)
    cases = spec.public_cases(tier)
    if hidden:
        cases += list(spec.hidden_cases(random.Random(seed), tier))
    outcomes = []
    for i, c in enumerate(cases):
        gen = torch.Generator().manual_seed(seed * 1_000_003 + i)
        call = spec.make_call(c, gen)
        expected = spec.reference(call)
        dev_call = prepare(call, device)
        try:
            fn = getattr(module, c.entry)
            result = invoke(fn, dev_call)
            synchronize(device)
        except Exception:  # noqa: BLE001 - a failing candidate is a result here
            outcomes.append(CaseOutcome(c, error=traceback.format_exc(limit=3)))
            continue
        outs = collect(dev_call, result)
        mismatch = None
        for o, got, exp, lay in zip(call.outputs, outs, expected, layouts(dev_call, outs),
                                    strict=True):
            m = check(got, exp, spec.tolerance(c, exp.dtype), lay)
            if m is not None:
                mismatch = Mismatch(f"{o.describe()}: {m.summary}", m.bad, m.total, m.max_abs_error)
                break
        if mismatch is None:
            for key, before in call.tensor_args():
                if key not in call.mutable and not same_bits(before, dev_call.buffer(key)):
                    mismatch = Mismatch(f"input argument {key!r} was modified")
                    break
        outcomes.append(CaseOutcome(c, mismatch=mismatch))
    return outcomes
