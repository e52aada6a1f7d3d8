"""One cuBLAS problem's cases through its baseline, each checked against the reference, every
disagreement reported with its case's name. The GPU tests run it once per routine in a fresh
interpreter (``python -m tests.operators.cublas_gpu_cases ID KIND``): a CUDA error such as a
misaligned address is sticky for the whole process, so without that one routine's fault fails
every routine after it. A case whose call raises (a ``CublasError`` status, a CUDA error) is
reported and the next case still runs.

Kinds: ``public`` (every public case, made on the host and moved to the device as the harness
does), ``benchmark`` (every benchmark case, made and checked on the device as the timing
harness does) and ``inplace`` (the in-place cases with C really aliasing A or B)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

import operators
from operators.checking import check
from operators.invoke import collect, prepare, synchronize
from operators.spec import Call, Case, Tier

KINDS = ("public", "benchmark", "inplace")
ROOT = Path(__file__).resolve().parents[2]


def _tolerance(spec: Any, c: Case, dtype: torch.dtype) -> Any:
    return spec.tolerance(c, dtype)


def _public(spec: Any, c: Case, seed: int, device: str) -> list[str]:
    call = spec.make_call(c, torch.Generator().manual_seed(seed))
    expected = spec.reference(call)
    dev = prepare(call, device)
    spec.baseline(dev)
    synchronize(device)
    return [f"{o.describe()}: {m.summary[:300]}"
            for o, got, exp in zip(call.outputs, collect(dev, None), expected, strict=True)
            if (m := check(got.cpu(), exp, _tolerance(spec, c, exp.dtype))) is not None]


def _benchmark(spec: Any, c: Case, seed: int, device: str) -> list[str]:
    with torch.device(device):
        call = spec.make_call(c, torch.Generator(device).manual_seed(seed))
        expected = spec.reference(call)  # from the pristine inputs, before C is written
        spec.baseline(call)
        synchronize(device)
        wrong = [f"{o.describe()}: {m.summary[:300]}"
                 for o, got, exp in zip(call.outputs, collect(call, None), expected, strict=True)
                 if (m := check(got, exp, _tolerance(spec, c, exp.dtype))) is not None]
    del call, expected
    if device == "cuda":
        torch.cuda.empty_cache()
    return wrong


def _inplace(spec: Any, c: Case, seed: int, device: str) -> list[str]:
    call = spec.make_call(c, torch.Generator().manual_seed(seed))
    (exp,) = spec.reference(call)
    c_at = call.outputs[0].key
    alias = next(k for k in call.mutable if k != c_at)
    args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in call.args]
    args[c_at] = args[alias]  # C is the very tensor A (or B) on the device
    spec.baseline(Call(call.entry, tuple(args), outputs=call.outputs))
    synchronize(device)
    m = check(args[c_at].cpu(), exp, _tolerance(spec, c, exp.dtype))
    return [] if m is None else [f"C aliasing argument {alias}: {m.summary[:300]}"]


def cases(spec: Any, kind: str, tier: Tier = Tier.FULL) -> Sequence[Case]:
    if kind == "benchmark":
        return list(spec.benchmark_cases())
    if kind == "inplace":
        return [c for c in spec.public_cases(tier) if c.get("inplace")]
    if kind == "public":
        return list(spec.public_cases(tier))
    raise ValueError(f"unknown kind {kind!r}: one of {KINDS}")


def failures(spec: Any, kind: str, device: str = "cuda", tier: Tier = Tier.FULL) -> list[str]:
    """Every case of ``kind`` the baseline gets wrong or raises on, as ``"<case>: <why>"``; a
    raising case does not stop the rest."""
    run = {"public": _public, "benchmark": _benchmark, "inplace": _inplace}[kind]
    wrong: list[str] = []
    for i, c in enumerate(cases(spec, kind, tier)):
        seed = 0 if kind == "benchmark" else i
        try:
            wrong += [f"{c.name} {w}" for w in run(spec, c, seed, device)]
        except Exception as e:  # noqa: BLE001 - a CublasError or CUDA error is this case's result
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            wrong.append(f"{c.name} raised {type(e).__name__}: {first[:300]}")
    return wrong


def run_isolated(spec_id: str, kind: str, *, device: str = "cuda", tier: str = "full",
                 timeout: float = 1800.0) -> list[str]:
    """:func:`failures` of ``spec_id`` in a fresh interpreter; a process that dies without
    answering (a crash, a timeout) is one failure saying how it ended."""
    cmd = [sys.executable, "-m", "tests.operators.cublas_gpu_cases", spec_id, kind,
           "--device", device, "--tier", tier]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [f"{spec_id} {kind}: no answer within {timeout:.0f} s"]
    lines = proc.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("failures"), list):
        return [f"{spec_id} {kind}: the checking process exited {proc.returncode} without an "
                f"answer; stderr: {proc.stderr[-2000:]}"]
    return [str(f) for f in answer["failures"]]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("spec_id")
    p.add_argument("kind", choices=KINDS)
    p.add_argument("--device", default="cuda")
    p.add_argument("--tier", choices=("cpu", "full"), default="full")
    a = p.parse_args(argv)
    tier = Tier.CPU if a.tier == "cpu" else Tier.FULL
    print(json.dumps({"failures": failures(operators.get(a.spec_id), a.kind, a.device, tier)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
