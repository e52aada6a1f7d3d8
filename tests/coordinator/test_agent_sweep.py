"""The ``agent`` method in a real sweep: Ray, the scripted LLM server answering with tool calls,
a real ``cpu`` agent.

The model writes a kernel that overfits the public cases (right only on the public cases'
shapes), verifies it (public cases only: PASSED), and submits. The sweep scores the final kernel
by the normal path — hidden cases included — so the trajectory's status is WRONG_ANSWER and it
counts as public-pass / hidden-fail; the verify verdict is kept under the public mode and never
as a final verdict; tokens equal the server's billing; wall time and verify calls are stored.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
import torch

import operators
from coordinator.engine import SweepOptions, init_ray, run_sweep
from coordinator.store import DB_NAME, Store
from coordinator.sweep_spec import load_spec
from operators.spec import Tier
from protos.records import Status, Verdict, candidate_id
from tests.coordinator.sweeping import write_spec
from tests.generators.fake_llm_server import fake_server

pytestmark = pytest.mark.usefixtures("agent_secret_env")
ADD = operators.get("aten::add")


def overfit_kernel() -> str:
    """The reference solution, made wrong (alpha off by one) on every output shape that no
    public case has: it passes the public cases and fails hidden ones."""
    shapes = set()
    for case in ADD.public_cases(Tier.CPU):
        for e in ADD.reference(ADD.make_call(case, torch.Generator().manual_seed(0))):
            shapes.add(tuple(e.value.shape))
    marker = "def _launch(a, b, out, alpha):\n"
    assert marker in ADD.solution
    return ADD.solution.replace(marker, marker + f"    if tuple(out.shape) not in {sorted(shapes)!r}:\n"
                                "        alpha = alpha + 1\n")


def _tools(*calls: tuple[str, Any]) -> dict[str, Any]:
    return {"kind": "ok", "text": "", "usage": {"prompt_tokens": 1500, "completion_tokens": 300},
            "tool_calls": [{"id": f"t{i}", "name": n, "arguments": a} for i, (n, a) in enumerate(calls)]}


def test_agent_sweep_scores_the_final_kernel_on_hidden_cases(cpu_agent: str, tmp_path: Path) -> None:
    kernel = overfit_kernel()
    script = {"endpoints": {"ep": {"replies": [
        _tools(("write_kernel", {"source": kernel}), ("verify", {})),
        _tools(("submit", {})),
    ]}}}
    init_ray(num_cpus=2)
    try:
        with fake_server(script, tmp_path) as server:
            llm = SimpleNamespace(base_url=server.url("ep", "openai"))
            spec_path = write_spec(tmp_path / "s.toml", "agentic", llm, [cpu_agent],  # type: ignore[arg-type]
                                   operators=("aten::add",), samples=1,
                                   methods='[[methods]]\nname = "agent"\nmax_verify_calls = 2\n'
                                           'turns = 6\ntime_limit_s = 600\n')
            spec = load_spec(spec_path)
            options = SweepOptions(run_id=spec.name, store_dir=spec.store,
                                   spec_text=spec_path.read_text(), spec_source=str(spec_path),
                                   spec_dir=str(spec_path.parent))
            state, progress = asyncio.run(run_sweep(spec, options))
            billed = server.wait_billing(2)
            requests = server.requests()
    finally:
        import ray

        ray.shutdown()
    assert state == "complete", progress
    assert len(requests) == 2
    verify_result = next(m["content"] for m in requests[1]["body"]["messages"] if m["role"] == "tool"
                         and "Public cases only" in m["content"])
    assert "PASSED" in verify_result and "1 verify call left" in verify_result
    store = Store(spec.store / DB_NAME)
    try:
        (row,) = store.trajectory_results("agentic")
        assert row.end_reason == "CANDIDATE" and row.key.method == "agent"
        assert row.status is Status.WRONG_ANSWER and row.public_pass_hidden_fail
        assert row.best_candidate_hash == candidate_id(kernel)
        assert row.verify_calls == 1 and row.wall_s > 0
        assert row.prompt_tokens + row.completion_tokens == sum(
            b["usage"]["prompt_tokens"] + b["usage"]["completion_tokens"] for b in billed) == 3600
        (final_raw,) = store.db.execute("SELECT verdict FROM verdicts").fetchone()
        final = Verdict.from_json(orjson.loads(final_raw))
        assert not final.public_only and any(c.hidden and not c.passed for c in final.cases)
        (mode, raw) = store.db.execute("SELECT mode, verdict FROM mode_verdicts").fetchone()
        check = Verdict.from_json(orjson.loads(raw))
        assert mode == "public" and check.public_only and check.status is Status.PASSED
        assert check.cases and not any(c.hidden for c in check.cases)
        calls = store.llm_calls("agentic", row.key)
        assert [json.loads(c.call.tool_calls[0].arguments) for c in calls][0] == {"source": kernel}
    finally:
        store.close()
