"""``python -m device_agent validate`` — what ``kgb operators validate`` runs.

Checking a problem means running its reference solution and negative controls, which are
Triton kernels: that is the agent host's job, on the GPU when torch sees one, else under
Triton's interpreter with the cpu platform's interpreter support. Keeping it here (and having
``kgb`` exec this module, as it does for ``serve``) keeps the coordinator free of the agent.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from device_agent.gpu_compile import CompileWorker
    from operators.spec import OperatorSpec, Tier
    from operators.validate import ValidationReport


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    v = sub.add_parser("validate", help="check problems themselves: deterministic reference, "
                                        "tolerances, memory budget; with --controls the "
                                        "reference passes and every negative control is caught")
    v.add_argument("op_ids", nargs="*", metavar="ID", help="problems to check (default: all)")
    v.add_argument("--tier", choices=["cpu", "full"], default="cpu",
                   help="which correctness cases to check (default cpu)")
    v.add_argument("--controls", action=argparse.BooleanOptionalAction, default=True,
                   help="also run each reference solution and negative control (on the GPU if "
                        "there is one, else under Triton's interpreter; default on)")
    v.add_argument("--budget", dest="budget_s", type=float, default=60.0,
                   help="seconds a problem may take; slower ones fail (default 60)")
    v.add_argument("--compile-for", metavar="ARCH", default=None,
                   help="also compile, for this NVIDIA GPU (e.g. sm_90, Hopper), every Triton "
                        "kernel launch the reference solution and each negative control make on "
                        "the tier's public cases, with Triton's real compiler and no GPU: code "
                        "the interpreter runs but the compiler refuses fails here. Compiles "
                        "only, runs nothing; uses this host's Triton version")


def controls_device() -> str:
    """The GPU if torch sees one, else the CPU under Triton's interpreter, set up before triton
    is first imported, with the cpu platform's interpreter support."""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from device_agent.platforms.cpu import install_interpreter_support

    install_interpreter_support()
    return "cpu"


def _compile_check(spec: OperatorSpec, tier: Tier, device: str, worker: CompileWorker,
                   report: ValidationReport) -> None:
    """Add --compile-for's findings (and its time) to ``report``."""
    from device_agent.gpu_compile import check_sources, controls_of

    t0 = time.monotonic()
    report.checks += 1
    report.problems += check_sources(spec, controls_of(spec), tier, worker, device)
    report.seconds += time.monotonic() - t0


def _mark(ok: bool) -> str:
    if not sys.stdout.isatty():
        return "ok  " if ok else "FAIL"
    return "\033[32mok  \033[0m" if ok else "\033[31mFAIL\033[0m"


def run(args: argparse.Namespace) -> int:
    """Validate the named problems (all by default); exit 1 if any fails, 2 on bad input."""
    import operators
    from operators.spec import Tier

    if args.budget_s < 0:
        print("kgb operators validate: --budget must be >= 0", file=sys.stderr)
        return 2
    try:
        specs = [operators.get(i) for i in args.op_ids] if args.op_ids else operators.all_specs()
    except operators.UnknownOperatorError as exc:
        print(f"kgb operators validate: {exc}", file=sys.stderr)
        return 2
    target = None
    if args.compile_for is not None:
        from device_agent.gpu_compile import parse_target

        try:
            target = parse_target(args.compile_for)
        except ValueError as exc:
            print(f"kgb operators validate: --compile-for: {exc}", file=sys.stderr)
            return 2
    device = controls_device() if args.controls or target else "cpu"
    with contextlib.ExitStack() as stack:
        worker = None
        if target is not None:
            from device_agent.gpu_compile import CompileWorker

            worker = stack.enter_context(CompileWorker(target))
        return _validate_all(specs, Tier(args.tier), args.controls, device, args.budget_s,
                             worker)


def _validate_all(specs: Sequence[OperatorSpec], tier: Tier, controls: bool, device: str,
                  budget_s: float, worker: CompileWorker | None = None) -> int:
    from operators.validate import validate

    failed = 0
    for spec in specs:
        report = validate(spec, tier, controls=controls, device=device)
        if worker is not None:
            _compile_check(spec, tier, device, worker, report)
        if budget_s and report.seconds > budget_s:
            report.problems.append(f"took {report.seconds:.1f}s, over the {budget_s:g}s budget")
        print(f"{_mark(report.ok)} {spec.ref:40s} {report.checks} checks, {report.seconds:.1f}s",
              flush=True)
        for p in report.problems:
            print(f"       - {p}", flush=True)
        failed += not report.ok
    if failed:
        print(f"{failed} of {len(specs)} problems failed validation", file=sys.stderr)
    return 1 if failed else 0
