"""Hidden cases: reproducible for a candidate, different across candidates, secret-dependent;
public cases are fixed; what goes to a worker carries inputs only."""

from __future__ import annotations

from typing import Any

import torch

import operators
from device_agent.case_inputs import CaseInputs, hidden_seed, public_seed
from device_agent.codec import decode
from device_agent.evaluation import Evaluator
from device_agent.judging import determinism_finding
from device_agent.platforms.cpu import CpuPlatform
from device_agent.protocol import CaseOutputs, CheckCase, encode_message
from operators.spec import Tier
from protos.records import Status

ADD = operators.get("aten::add")


def test_hidden_seed_depends_on_secret_problem_and_candidate() -> None:
    a = hidden_seed(b"secret", ADD, "a" * 64)
    assert a == hidden_seed(b"secret", ADD, "a" * 64)
    assert a != hidden_seed(b"secret", ADD, "b" * 64)
    assert a != hidden_seed(b"other secret", ADD, "a" * 64)
    assert a != hidden_seed(b"secret", operators.get("aten::mm"), "a" * 64)


def test_public_seeds_are_fixed_and_per_case() -> None:
    names = [c.name for c in ADD.cases()]
    seeds = [public_seed(ADD, n) for n in names]
    assert seeds == [public_seed(ADD, n) for n in names]
    assert len(set(seeds)) == len(seeds)


def test_hidden_inputs_differ_between_candidates_but_not_between_runs() -> None:
    ev = Evaluator(CpuPlatform(), [], b"k")
    p1 = ev.inputs.prepare(ADD, "1" * 64, ADD.solution)
    p1_again = ev.inputs.prepare(ADD, "1" * 64, ADD.solution)
    p2 = ev.inputs.prepare(ADD, "2" * 64, ADD.solution)
    hidden = [i for i, h in enumerate(p1.hidden) if h]
    assert hidden, "no hidden cases drawn"
    first = hidden[0]
    assert torch.equal(p1.calls[first].args[0], p1_again.calls[first].args[0])
    assert (p1.calls[first].args[0].shape != p2.calls[first].args[0].shape
            or not torch.equal(p1.calls[first].args[0], p2.calls[first].args[0]))
    assert all(n.startswith("hidden#") for n, h in zip(p1.names, p1.hidden, strict=True) if h)


def test_worker_messages_carry_inputs_not_answers() -> None:
    ev = Evaluator(CpuPlatform(), [], b"k")
    p = ev.inputs.prepare(ADD, "1" * 64, ADD.solution)
    frame = decode(encode_message(CheckCase(index=0, call=p.calls[0], warm=True, ghost=True,
                                               repeat=True, replay=p.calls[0]))[4:])
    assert set(frame) == {"type", "index", "call", "warm", "ghost", "repeat", "replay"}
    assert set(frame["call"]) == {"entry", "args", "kwargs", "outputs", "mutable", "out_buffers"}


def test_public_references_are_computed_once_per_problem_and_bounded() -> None:
    ev = Evaluator(CpuPlatform(), [], b"k")
    p1 = ev.inputs.prepare(ADD, "1" * 64, ADD.solution)
    p2 = ev.inputs.prepare(ADD, "2" * 64, ADD.solution)
    n_public = len(ADD.public_cases(ev.tier))
    assert all(p1.calls[i] is p2.calls[i] and p1.expected[i] is p2.expected[i]
               for i in range(n_public))  # shared, not recomputed
    assert p1.calls[n_public:] and p1.calls[n_public] is not p2.calls[n_public]  # hidden: own
    tiny = Evaluator(CpuPlatform(), [], b"k", public_cache_bytes=1)
    softmax = operators.get("aten::softmax")
    tiny.inputs.prepare(ADD, "1" * 64, ADD.solution)
    tiny.inputs.prepare(softmax, "1" * 64, softmax.solution)
    assert list(tiny.inputs.cache) == [softmax.ref]  # over budget: the older problem dropped


def _saxpy_with_a_busy_device(budgets_s: float, held_s: float, deadline_s: float) -> Any:
    """Evaluate the saxpy reference on a one-worker cpu pool while a neighbour holds the
    device alone for ``held_s`` (as a long timed case would)."""
    import asyncio
    import os
    import tempfile
    import time
    import uuid
    from pathlib import Path

    import operators
    from device_agent.evaluation import StageBudgets
    from device_agent.worker_pool import WorkerPool
    from protos.records import EvalRequest

    spec = operators.get("cublas::cublasSaxpy_v2")

    async def go() -> Any:
        with tempfile.TemporaryDirectory() as root:
            os.chmod(root, 0o711)  # as the server does: workers (own uids) reach their directory
            pool = WorkerPool(CpuPlatform(), 0, 1, Path(root))
            await pool.start()
            try:
                ev = Evaluator(CpuPlatform(), [pool], b"k",
                               StageBudgets(correctness_s=budgets_s, margin_s=0.5))
                held = asyncio.Event()

                async def neighbour() -> None:
                    async with pool.gate.exclusive():
                        held.set()
                        await asyncio.sleep(held_s)

                task = asyncio.create_task(neighbour())
                await held.wait()
                try:
                    return await ev.evaluate(
                        EvalRequest(uuid.uuid4().hex, spec.id, spec.solution.encode()),
                        time.monotonic() + deadline_s)
                finally:  # the verdict is in: the neighbour need not hold on
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            finally:
                await pool.close()

    return asyncio.run(go())


def test_waiting_for_the_device_is_not_the_candidates_time(agent_secret_env: None) -> None:
    """The correctness stage has 4 s; the device is busy for 8 s: the wait does not count, so
    an honest candidate passes instead of timing out."""
    v = _saxpy_with_a_busy_device(budgets_s=4.0, held_s=8.0, deadline_s=120.0)
    assert v.status is Status.PASSED, v.message


def test_a_request_deadline_lost_to_waiting_is_an_infra_error(agent_secret_env: None) -> None:
    """When the request's own deadline passes while the candidate waits for the device, the
    agent was overloaded: INFRA_ERROR (retried elsewhere, never scored), not TIMEOUT."""
    v = _saxpy_with_a_busy_device(budgets_s=60.0, held_s=30.0, deadline_s=10.0)
    assert v.status is Status.INFRA_ERROR, (v.status, v.message)
    assert "waiting for the device" in v.message


# The agent's timing protocol (prepare, upload, measure under the exclusive gate, recheck under
# the shared one) runs only where timings mean something. Here a cpu pool stands in for a device:
# torch-only candidates (no Triton: the interpreter would take minutes per benchmark case) on
# aten::sum's benchmark cases, with only the timing layer on, wall-clock timed.
TORCH_SUM = '''
import torch

def sum(self, *, dtype=None):
    return torch.sum(self, dtype=dtype)

def sum_dim_IntList(self, dim, keepdim=False, *, dtype=None):
    return torch.sum(self, dim, keepdim, dtype=dtype)

def sum_IntList_out(self, dim, keepdim=False, *, dtype=None, out):
    return torch.sum(self, dim, keepdim, dtype=dtype, out=out)

def sum_out(self, *, dtype=None, out):
    return out.copy_(torch.sum(self, dtype=dtype))
'''
# Right while checked and during warm-up; on benchmark-sized inputs, zeros once warmed up
# (the first benchmark case is a full sum: the verdict is decided there).
DRIFTING_SUM = TORCH_SUM.replace('''def sum(self, *, dtype=None):
    return torch.sum(self, dtype=dtype)''', '''SEEN = {}

def sum(self, *, dtype=None):
    r = torch.sum(self, dtype=dtype)
    SEEN[self.shape] = SEEN.get(self.shape, 0) + 1
    return r.zero_() if self.numel() >= 1 << 22 and SEEN[self.shape] > 4 else r''')


def _timed_on_cpu(source: str, layers: frozenset[str] = frozenset({"timing"})) -> Any:
    from device_agent.evaluation import StageBudgets
    from tests.helpers import evaluate_in_process

    class TimedCpu(CpuPlatform):
        timings_meaningful = True

    return evaluate_in_process(TimedCpu(), "aten::sum", source,
                               budgets=StageBudgets(timing_case_budget_s=0.3), layers=layers)


def test_the_timing_protocol_times_every_benchmark_case(agent_secret_env: None) -> None:
    v = _timed_on_cpu(TORCH_SUM)
    assert v.status is Status.PASSED, v.message
    bench = operators.get("aten::sum").benchmark_cases()
    assert [t.name for t in v.timings] == [c.name for c in bench]
    assert all(t.meaningful and t.samples >= 2 and t.median_us > 0 and t.baseline_median_us
               for t in v.timings)
    # What the worker timed against travels with the timings; the worker's warm-up answer
    # for every source is in the system description.
    assert v.baseline == "torch"
    assert v.system.baselines == {"aten": "torch", "vllm": "torch", "cublas": "torch"}


def test_a_kernel_that_drifts_while_timed_is_caught_by_the_recheck(agent_secret_env: None) -> None:
    v = _timed_on_cpu(DRIFTING_SUM)
    assert v.status is Status.WRONG_ANSWER, (v.status, v.message)
    assert [f.rule for f in v.findings] == ["recheck-after-timing"]
    assert "after timing" in v.message
    assert len(v.timings) == 1  # decided on the first case: the rest were not timed
    assert v.baseline == "torch"  # a verdict decided while timing names what was timed too


# Honest while checked; once imported, it makes every problem claim vLLM's kernels as its
# baseline, which the worker then reports with its timings.
CLAIMS_VLLM_SUM = TORCH_SUM + '''
import operators.spec

operators.spec.OperatorSpec.baseline_library = lambda self: "vllm"
'''


def test_a_baseline_other_than_the_warm_up_ones_is_tampering(agent_secret_env: None) -> None:
    v = _timed_on_cpu(CLAIMS_VLLM_SUM, layers=frozenset({"timing", "integrity"}))
    assert v.status is Status.CHEAT_DETECTED, (v.status, v.message)
    assert [f.rule for f in v.findings] == ["harness-tampered"]
    assert "the baseline ran 'vllm', not 'torch' as at warm-up" in v.message
    assert v.baseline == "vllm"  # what the worker said it timed against, as said


def test_a_replay_is_judged_against_what_it_really_runs() -> None:
    """The replay refills the first call's top-level tensors in place; index tensors inside a
    list stay as they were, so the expected answer must use them too. (Judged against a fresh
    call's own indices, an honest index_put failed the replay on the H200.)"""
    from device_agent.case_inputs import replay_call
    from device_agent.platforms.cpu import install_interpreter_support
    from operators.checking import check
    from operators.invoke import collect, invoke, prepare
    from operators.spec import Tier
    from operators.testing import load_module

    install_interpreter_support()
    spec = operators.get("aten::_index_put_impl_")
    case = next(c for c in spec.public_cases(Tier.FULL)
                if "idx=(None,(5),None)" in c.name and "acc=False" in c.name)
    first = spec.make_call(case, torch.Generator().manual_seed(1))
    fresh = spec.make_call(case, torch.Generator().manual_seed(2))
    alt = replay_call(first, fresh)
    assert alt.args[1] is first.args[1] and alt.args[0] is fresh.args[0]
    fn = getattr(load_module(spec.solution), case.entry)
    buffers = prepare(first, "cpu")
    invoke(fn, buffers)
    refill = dict(alt.tensor_args())
    for key, t in buffers.tensor_args():  # as the worker's replay does
        t.copy_(refill[key])
    outputs = collect(buffers, invoke(fn, buffers))
    for got, exp in zip(outputs, spec.reference(alt), strict=True):
        assert check(got, exp, spec.tolerance(case, exp.dtype)) is None
    assert any(check(got, exp, spec.tolerance(case, exp.dtype)) is not None
               for got, exp in zip(outputs, spec.reference(fresh), strict=True))


def test_an_out_buffers_contents_before_poisoning_do_not_decide_informativeness() -> None:
    """cublasSdot_v2's result is an out-buffer made with torch.empty: whatever that memory held
    (0.0 as often as not) never reaches the candidate, which finds the poison there. Doing
    nothing fails a case whose answer is 0 however the buffer was made."""
    from device_agent.case_inputs import informative
    from operators.spec import Tier

    spec = operators.get("cublas::cublasSdot_v2")
    case = next(c for c in spec.public_cases(Tier.CPU) if c.shape == (0,))
    call = spec.make_call(case, torch.Generator().manual_seed(0))
    expected = spec.reference(call)
    call.args[5].fill_(0.0)  # the right answer, before the harness poisons it
    assert informative(spec, case, call, expected)


def test_runs_may_differ_only_where_the_op_leaves_outputs_unspecified() -> None:
    """moe_align_block_size places entries with atomics: two runs may order an expert's segment
    differently and leave different garbage past the padded total (``Expected.canonical``), but
    an entry moved to another expert's segment is a disagreement."""
    spec = operators.get("vllm::moe_align_block_size")
    p = CaseInputs(Tier.CPU, b"k", frozenset()).prepare(spec, "1" * 64, spec.solution)
    i = next(j for j, c in enumerate(p.case_objs) if c.shape == (64, 2))  # Mixtral, all experts
    first = [e.value.clone() for e in p.expected[i]]
    total = int(first[2][0])
    second = [t.clone() for t in first]
    second[0][:16] = second[0][:16].flip(0)  # expert 0's first block, reordered
    second[0][total:] = -7  # past the padded total: never read
    second[1][total // 16:] = 5
    assert determinism_finding(p, i, _outputs(i, first, second)) is None
    moved = [t.clone() for t in first]
    assert int(moved[0][0]) < 128 == int(moved[0][total - 1])  # an entry, a padding sentinel
    moved[0][[0, total - 1]] = moved[0][[total - 1, 0]]  # the entry into the last expert's
    finding = determinism_finding(p, i, _outputs(i, first, moved))
    assert finding is not None and finding.rule == "runs-disagree"


def _outputs(i: int, first: list[Any], second: list[Any]) -> CaseOutputs:
    return CaseOutputs(index=i, outputs=first, layouts=[None] * len(first), post_inputs={},
                       seconds=0.0, own_launches=1, guard=(), integrity=(), repeat_outputs=second)
