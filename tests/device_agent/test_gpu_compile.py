"""``validate --compile-for sm_90``: every launch a problem's controls make, compiled for Hopper
by Triton's real compiler on this CPU; code the interpreter runs but the compiler refuses is
reported."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

import operators
from device_agent import gpu_compile, problem_check

SM90 = ("cuda", 90, 32)

# A solution of aten::neg whose kernel reassigns a constexpr inside a static_range loop: the
# interpreter runs it, the compiler refuses it on the loop's second pass ("S is already defined.
# constexpr cannot be reassigned"), as vllm::hadacore_transform's reference once did.
TOY = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _neg_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, LOG: tl.constexpr):
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    y = -tl.load(x_ptr + idx, mask=mask)
    for s in tl.static_range(LOG):
        STEP
        y = y * (S // S)
    tl.store(out_ptr + idx, y, mask=mask)


def neg_out(self, *, out):
    x = self.contiguous()
    tmp = torch.empty_like(x)
    n = x.numel()
    if n:
        _neg_kernel[(triton.cdiv(n, 1024),)](x, tmp, n, BLOCK=1024, LOG=2)
    out.copy_(tmp)
    return out


def neg(self):
    return neg_out(self, out=torch.empty_like(self))
'''
BROKEN = TOY.replace("STEP", "S: tl.constexpr = 1 << s")
CORRECT = TOY.replace("STEP", "S = 1 << s")


@pytest.fixture(scope="module")
def worker() -> Iterator[gpu_compile.CompileWorker]:
    problem_check.controls_device()  # the interpreter, as validate sets it up
    with gpu_compile.CompileWorker(SM90) as w:
        yield w


def _check(op_id: str, source: str, w: gpu_compile.CompileWorker) -> list[str]:
    from operators.spec import Tier

    return gpu_compile.check_sources(operators.get(op_id), [("toy", source)], Tier.CPU, w)


def test_the_toys_run_under_the_interpreter(worker: gpu_compile.CompileWorker) -> None:
    from operators.testing import run_cases

    for source in (BROKEN, CORRECT):
        outcomes = run_cases(operators.get("aten::neg"), source, hidden=False)
        assert all(o.passed for o in outcomes), [o.error or o.mismatch for o in outcomes][:1]


def test_a_constexpr_reassigned_in_static_range_is_reported(
        worker: gpu_compile.CompileWorker) -> None:
    problems = _check("aten::neg", BROKEN, worker)
    assert problems, "the compiler's refusal went unreported"
    assert all(p.startswith("toy fails to compile for sm_90: _neg_kernel(") for p in problems)
    assert "constexpr cannot be reassigned" in problems[0], problems[0]
    assert "x_ptr: *fp16" in "".join(problems) and "LOG=2" in problems[0]


def test_a_correct_kernel_compiles(worker: gpu_compile.CompileWorker) -> None:
    assert _check("aten::neg", CORRECT, worker) == []


@pytest.mark.parametrize("op_id", ["vllm::hadacore_transform", "aten::add"])
def test_real_references_compile_clean(op_id: str, worker: gpu_compile.CompileWorker) -> None:
    from operators.spec import Tier

    spec = operators.get(op_id)
    assert gpu_compile.capture(spec, spec.solution, Tier.CPU, SM90), "no launch recorded"
    assert _check(op_id, spec.solution, worker) == []


def test_a_launch_is_what_compiled_triton_compiles(worker: gpu_compile.CompileWorker) -> None:
    """Triton's own binder: pointers by dtype and alignment, ints by value (1 is a constexpr),
    floats fp32, constexpr parameters and launch options."""
    import torch
    import triton.language as tl

    def k(x_ptr, y_ptr, n, big, one, alpha, flag, D: tl.constexpr):  # type: ignore[no-untyped-def]
        pass

    x = torch.zeros(8, dtype=torch.bfloat16)
    launch = gpu_compile.to_launch(k, (x, x[1:], 7, 2**40, 1, 0.5, True, tl.float16),
                                   {"num_warps": 8}, SM90)
    assert dict(launch.signature) == {"x_ptr": "*bf16", "y_ptr": "*bf16", "n": "i32",
                                      "big": "i64", "one": "constexpr", "alpha": "fp32",
                                      "flag": "u1", "D": "constexpr"}
    assert dict(launch.constexprs) == {(4,): 1, (7,): gpu_compile.DtypeRef("fp16")}
    assert dict(launch.attrs)[(0,)] == (("tt.divisibility", 16),)  # x is 16-byte aligned
    assert dict(launch.attrs)[(1,)] == ()  # x[1:] is not
    assert launch.options == (("num_warps", 8),)


def test_targets() -> None:
    assert gpu_compile.parse_target("sm_90") == SM90
    assert gpu_compile.parse_target("sm_100") == ("cuda", 100, 32)
    with pytest.raises(ValueError, match="sm_90"):
        gpu_compile.parse_target("hopper")


def _args(*ids: str, compile_for: str | None) -> argparse.Namespace:
    return argparse.Namespace(op_ids=list(ids), tier="cpu", controls=False, budget_s=60.0,
                              compile_for=compile_for)


def test_validate_compile_for_reports_the_failure(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent's validate fails a problem whose controls do not compile, saying which (the
    problem's own checks, tested elsewhere, are left out here for time)."""
    import operators.validate

    monkeypatch.setattr(operators.validate, "validate",
                        lambda *a, **k: operators.validate.ValidationReport())
    monkeypatch.setattr(gpu_compile, "controls_of", lambda spec: [("toy", BROKEN)])
    assert problem_check.run(_args("aten::neg", compile_for="sm_90")) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAIL aten::neg")
    assert "- toy fails to compile for sm_90: _neg_kernel(x_ptr: *fp16" in out
    monkeypatch.setattr(gpu_compile, "controls_of", lambda spec: [("toy", CORRECT)])
    assert problem_check.run(_args("aten::neg", compile_for="sm_90")) == 0
    assert capsys.readouterr().out.startswith("ok   aten::neg")


def test_validate_refuses_an_unknown_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert problem_check.run(_args("aten::neg", compile_for="gfx942")) == 2
    assert "--compile-for: unknown compile target 'gfx942'" in capsys.readouterr().err


def test_kgb_passes_compile_for_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """``kgb operators validate --compile-for`` execs the agent's validate with the flag."""
    from click.testing import CliRunner

    from coordinator.cli import operators_cmd

    execs: list[list[str]] = []

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        execs.append(argv)

    monkeypatch.setattr("os.execve", execve)
    r = CliRunner().invoke(operators_cmd.operators_group,
                           ["validate", "aten::neg", "--compile-for", "sm_90"])
    assert r.exit_code == 0, r.output
    assert execs[0][1:5] == ["-m", "device_agent", "validate", "aten::neg"]
    assert execs[0][-2:] == ["--compile-for", "sm_90"]
    r = CliRunner().invoke(operators_cmd.operators_group, ["validate", "--help"])
    assert "--compile-for ARCH" in r.output



@pytest.mark.slow
@pytest.mark.parametrize("spec", operators.all_specs(), ids=lambda s: s.id)
def test_every_reference_compiles_for_sm_90(spec: operators.OperatorSpec,
                                            worker: gpu_compile.CompileWorker) -> None:
    """Every problem's reference solution, on its cpu-tier public cases, compiles for Hopper
    (38 CPU-minutes over all problems here, hence slow)."""
    from operators.spec import Tier

    named = gpu_compile.controls_of(spec, negatives=False)
    assert gpu_compile.check_sources(spec, named, Tier.CPU, worker) == []


def test_a_dead_compiler_process_fails_the_request_and_is_replaced() -> None:
    import torch
    import triton.language as tl

    def k(x_ptr, D: tl.constexpr):  # type: ignore[no-untyped-def]
        pass

    launch = gpu_compile.to_launch(k, (torch.zeros(4), 4), {}, SM90)
    with gpu_compile.CompileWorker(SM90) as w:
        w._proc.kill()
        w._proc.wait()
        [out] = w.compile([], [launch])
        assert out.error is not None and "the compiling process died" in out.error
        [out] = w.compile([], [launch])  # a fresh process answers
        assert out.error is None and out.skipped is not None and "inside a function" in out.skipped
