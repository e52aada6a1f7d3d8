"""The red-team corpus: every cheat caught by its own layer alone, no honest candidate flagged.

Each file in ``cheats/`` names, in its header, the problem, the catalogue row it plays
(``../shared/reference/cheats-and-timing.md``), the layer expected to catch it and the verdict.
It is evaluated by a real ``cpu`` agent with **only that layer switched on**, so each layer is
proven on its own (``correctness`` and ``process`` are always on: their agents run with no
optional layer at all). Each file in ``honest/`` must pass an agent with every layer on.

On a GPU (``gpu`` marker, run on the H200 by ``bench/h200.sh corpus``) the same corpus runs on a
``cuda`` agent, together with ``cheats_gpu/``: the cheats whose defence needs real device timing.

Verdicts of one agent are computed together (the agent's two workers in parallel) the first
time a test of that group runs, then each file's test checks its own verdict.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from protos.client import AgentClient
from protos.records import EvalRequest, Status, Verdict
from tests.adversarial.catalogue import headers
from tests.helpers import only_layer, running_agent

HERE = Path(__file__).resolve().parent
ALWAYS_ON = ("correctness", "process")  # not switchable: their cheats run with no layer on
# Catalogue rows whose defence needs a GPU (the timing layer, device memory, the profiler);
# they are exercised on the H200 (bench/h200.sh) rather than here.
GPU_ONLY_ROWS = {4: "batch-and-skip is visible only to per-call device timing",
                 22: "the physical floor needs a real device time"}
# Layers whose checks need a real device: their cheats live in cheats_gpu/.
GPU_ONLY_LAYERS = {"timing": "device timing, the physical floor",
                   "profile": "a kernel profiler's device time per kernel"}


@dataclass(frozen=True)
class Entry:
    path: Path
    operator: str
    layer: str
    expect: Status
    row: int | None

    @property
    def id(self) -> str:
        return self.path.stem


def _load(kind: str) -> list[Entry]:
    out = []
    for path in sorted((HERE / kind).glob("*.py")):
        h = headers(path)
        if kind == "honest":
            out.append(Entry(path, h["operator"], "all", Status.PASSED, None))
        else:
            out.append(Entry(path, h["operator"], h["layer"], Status[h["expect"]],
                             int(h["catalogue"])))
    return out


CHEATS = _load("cheats")
GPU_CHEATS = _load("cheats_gpu")
HONEST = _load("honest")
_verdicts: dict[tuple[str, str], dict[Path, Verdict]] = {}


def _agent_args(group: str) -> tuple[str, ...]:
    if group == "all":
        return ()
    return only_layer() if group in ALWAYS_ON else only_layer(group)


def _verdicts_for(group: str, entries: list[Entry], platform: str = "cpu") -> dict[Path, Verdict]:
    if (platform, group) not in _verdicts:
        workers = 2 if platform == "cpu" else 6

        async def run_all(address: str) -> dict[Path, Verdict]:
            sem = asyncio.Semaphore(workers)
            async with AgentClient(address) as client:
                async def one(e: Entry) -> tuple[Path, Verdict]:
                    async with sem:
                        return e.path, await client.evaluate(
                            EvalRequest(uuid.uuid4().hex, e.operator, e.path.read_bytes()),
                            timeout=240)
                return dict(await asyncio.gather(*(one(e) for e in entries)))

        with running_agent(*_agent_args(group), workers=workers, platform=platform) as address:
            _verdicts[(platform, group)] = asyncio.run(run_all(address))
    return _verdicts[(platform, group)]


def _check_cheat(entry: Entry, v: Verdict) -> None:
    assert v.status is entry.expect, f"{entry.id}: {v.status.name}: {v.message}"
    if entry.layer not in ("correctness",) and entry.expect is not Status.RUNTIME_ERROR:
        layers = {f.layer for f in v.findings}
        assert entry.layer in layers, f"{entry.id}: findings from {layers}, not {entry.layer}"


@pytest.mark.parametrize("entry", sorted(CHEATS, key=lambda e: (e.layer, e.id)), ids=lambda e: e.id)
def test_cheat_is_caught_by_its_layer_alone(agent_secret_env: None, entry: Entry) -> None:
    group = [e for e in CHEATS if e.layer == entry.layer]
    _check_cheat(entry, _verdicts_for(entry.layer, group)[entry.path])


@pytest.mark.parametrize("entry", HONEST, ids=lambda e: e.id)
def test_honest_candidate_passes_every_layer(agent_secret_env: None, entry: Entry) -> None:
    v = _verdicts_for("all", HONEST)[entry.path]
    assert v.status is Status.PASSED, f"{entry.id}: {v.status.name}: {v.message}"
    assert not v.findings


@pytest.mark.gpu
@pytest.mark.parametrize("entry", sorted(CHEATS + GPU_CHEATS, key=lambda e: (e.layer, e.id)),
                         ids=lambda e: e.id)
def test_cheat_is_caught_by_its_layer_alone_on_gpu(agent_secret_env: None, entry: Entry) -> None:
    group = [e for e in CHEATS + GPU_CHEATS if e.layer == entry.layer]
    _check_cheat(entry, _verdicts_for(entry.layer, group, "cuda")[entry.path])


@pytest.mark.gpu
@pytest.mark.parametrize("entry", HONEST, ids=lambda e: e.id)
def test_honest_candidate_passes_every_layer_on_gpu(agent_secret_env: None, entry: Entry) -> None:
    v = _verdicts_for("all", HONEST, "cuda")[entry.path]
    assert v.status is Status.PASSED, f"{entry.id}: {v.status.name}: {v.message}"
    assert not v.findings
    assert v.timings and all(t.median_us for t in v.timings if t.meaningful)


def test_corpus_covers_the_catalogue() -> None:
    assert len(CHEATS) >= 30 and len(HONEST) >= 30
    rows = {e.row for e in CHEATS}
    missing = [r for r in range(1, 26) if r not in rows and r not in GPU_ONLY_ROWS]
    assert not missing, f"catalogue rows without a cheat in the corpus: {missing}"
    gpu_rows = {e.row for e in GPU_CHEATS}
    assert set(GPU_ONLY_ROWS) <= gpu_rows, "a GPU-only row has no cheat in cheats_gpu/"
    assert {e.layer for e in GPU_CHEATS} == set(GPU_ONLY_LAYERS)
    for layer in GPU_ONLY_LAYERS:  # each GPU-only layer is proven on the H200 by two cheats
        assert sum(e.layer == layer for e in GPU_CHEATS) >= 2, f"layer {layer} has < 2 cheats"
    from device_agent.evaluation import LAYERS

    switchable_with_cheats = {e.layer for e in CHEATS} - set(ALWAYS_ON)
    assert switchable_with_cheats <= set(LAYERS)
    # Every switchable layer that can run on the CPU is proven by at least two cheats.
    for layer in set(LAYERS) - set(GPU_ONLY_LAYERS):
        assert sum(e.layer == layer for e in CHEATS) >= 2, f"layer {layer} has < 2 cheats"
    assert {e.operator for e in CHEATS} <= {e.operator for e in HONEST}  # honest twins exist


def test_docs_table_matches_the_corpus() -> None:
    from tests.adversarial.catalogue import BEGIN, END, table

    docs = (HERE.parent.parent / "docs" / "anticheat.md").read_text()
    assert BEGIN in docs and END in docs, "docs/anticheat.md lacks the corpus table markers"
    current = docs[docs.index(BEGIN):docs.index(END) + len(END)]
    assert current == table(), "run `python -m tests.adversarial.catalogue` and paste the table"
