"""A candidate's cases as the agent makes them: inputs and fp64 references, public and hidden.

The trusted half: references, hidden seeds and expected outputs stay in the agent; a worker gets
inputs only. Public cases are the same for every candidate of a problem, so they are made once
and kept; hidden ones are drawn from an HMAC of the agent's secret over the problem and the
candidate, reproducible by this agent and unknowable to the submitter.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import random
import threading
from dataclasses import dataclass, field
from typing import Any

import torch

from device_agent.harness_faults import blamed
from operators.checking import check, poison_value
from operators.spec import Call, Expected, Kind, OperatorSpec, PointerArray, Tier

PROBED_CASES = 2  # informative cases that also get a ghost replay and a determinism re-run
RANDOM_PROBE_MIN = 64  # elements: two honest draws of this many never coincide

# (case, its call, the call's expected outputs)
PublicCase = tuple[Any, Call, tuple[Expected, ...]]


@dataclass
class Prepared:
    """Everything the agent needs to judge one candidate's cases."""

    spec: OperatorSpec
    candidate_hash: str
    source: str
    calls: list[Call]
    expected: list[tuple[Expected, ...]]
    names: list[str]
    hidden: list[bool]
    case_objs: list[Any] = field(default_factory=list)
    probes: frozenset[int] = frozenset()  # cases whose outputs a no-op could not produce
    # Replay probe per probed case: the same case on new contents (inputs, answer).
    replays: dict[int, tuple[Call, tuple[Expected, ...]]] = field(default_factory=dict)


def public_seed(spec: OperatorSpec, case_name: str) -> int:
    """Seeds of public cases are public and fixed: anyone can reproduce them."""
    digest = hashlib.sha256(f"{spec.ref}/{case_name}".encode()).digest()
    return int.from_bytes(digest[:7], "little")


def hidden_seed(secret: bytes, spec: OperatorSpec, cand_hash: str) -> int:
    """Seed of the hidden cases: HMAC of the agent's secret over the problem and the candidate.
    Reproducible by this agent, unknowable to the submitter."""
    mac = hmac.new(secret, f"{spec.ref}\x00{cand_hash}".encode(), hashlib.sha256).digest()
    return int.from_bytes(mac[:7], "little")


class CaseInputs:
    """Makes candidates' cases for one agent: its tier, its secret, its layers, and a bounded
    cache of public cases (``cache_bytes``, least recently used dropped first)."""

    def __init__(self, tier: Tier, secret: bytes, layers: frozenset[str],
                 cache_bytes: int = 2 << 30) -> None:
        self.tier = tier
        self.secret = secret
        self.layers = layers
        self.cache_bytes = cache_bytes
        self.cache: dict[str, list[PublicCase]] = {}
        self._lock = threading.Lock()  # guards the cache and the per-problem locks
        self._locks: dict[str, threading.Lock] = {}

    def public(self, spec: OperatorSpec) -> list[PublicCase]:
        """Inputs and fp64 references of the public cases: the same for every candidate of a
        problem, so computed once and kept. Nothing here is ever mutated: workers get copies."""
        with self._lock:
            computing = self._locks.setdefault(spec.ref, threading.Lock())
        with computing:  # one computation per problem, without holding up other problems
            with self._lock:
                hit = self.cache.pop(spec.ref, None)
            if hit is None:
                hit = self._make_public(spec)
            with self._lock:
                self.cache[spec.ref] = hit  # most recently used last
                while (len(self.cache) > 1
                       and sum(_entry_bytes(v) for v in self.cache.values()) > self.cache_bytes):
                    self.cache.pop(next(iter(self.cache)))
            return hit

    def _make_public(self, spec: OperatorSpec) -> list[PublicCase]:
        made: list[PublicCase] = []
        with blamed("input generation", "the public cases"):
            cases = list(spec.public_cases(self.tier))
        for c in cases:
            seed = public_seed(spec, c.name)
            made.append((c, *_made(spec, c, torch.Generator().manual_seed(seed), f"case {c.name}")))
        return made

    def prepare(self, spec: OperatorSpec, chash: str, text: str,
                public_only: bool = False) -> Prepared:
        """The candidate's public and hidden cases (no hidden ones for ``public_only``, an
        agent's verify), which of them are probed, and the replay of each probed case where
        the layer is on."""
        public = self.public(spec)
        p = Prepared(spec, chash, text, calls=[call for _, call, _ in public],
                     expected=[exp for _, _, exp in public], names=[c.name for c, _, _ in public],
                     hidden=[False] * len(public), case_objs=[c for c, _, _ in public])
        seeds = [public_seed(spec, c.name) for c, _, _ in public]
        hseed = hidden_seed(self.secret, spec, chash)
        with blamed("input generation", "the hidden cases"):
            hidden = [] if public_only else list(spec.hidden_cases(random.Random(hseed), self.tier))
        for i, c in enumerate(hidden):
            seed = (hseed + 7919 * (i + 1)) & ((1 << 62) - 1)
            name = f"hidden#{len(p.names)}"  # a hidden case's own name is no one's business
            call, expected = _made(spec, c, torch.Generator().manual_seed(seed), f"case {name}")
            p.calls.append(call)
            p.expected.append(expected)
            p.names.append(name)
            p.hidden.append(True)
            p.case_objs.append(c)
            seeds.append(seed)
        p.probes = _probes(p)
        if "replay" in self.layers and spec.kind is not Kind.RANDOM:
            p.replays = _replays(p, seeds)
        return p


def _made(spec: OperatorSpec, case: Any, generator: torch.Generator,
          where: str) -> tuple[Call, tuple[Expected, ...]]:
    """A case's call and its expected outputs: the problem's own code, whose exceptions are
    the harness's (:mod:`device_agent.harness_faults`)."""
    with blamed("input generation", where):
        call = spec.make_call(case, generator)
    with blamed("reference", where):
        return call, spec.reference(call)


def _probes(p: Prepared) -> frozenset[int]:
    if p.spec.kind is Kind.RANDOM:  # probed for fresh samples on a second call
        return frozenset([i for i in range(len(p.calls))
                          if all(e.judge is not None and e.value.numel() >= RANDOM_PROBE_MIN
                                 for e in p.expected[i])][:PROBED_CASES])
    # The first PROBED_CASES informative cases (each test compares a whole output).
    with blamed("checker", "choosing the probed cases"):
        return frozenset(itertools.islice(
            (i for i in range(len(p.calls))
             if informative(p.spec, p.case_objs[i], p.calls[i], p.expected[i])), PROBED_CASES))


def _replays(p: Prepared, seeds: list[int]) -> dict[int, tuple[Call, tuple[Expected, ...]]]:
    replays = {}
    for i in sorted(p.probes):
        where = f"case {p.names[i]}'s replay"
        with blamed("input generation", where):
            alt = p.spec.make_call(p.case_objs[i],
                                   torch.Generator().manual_seed(seeds[i] ^ 0x5EED_5EED))
            same = _same_layout(alt, p.calls[i])
        if same:
            alt = replay_call(p.calls[i], alt)
            with blamed("reference", where):
                replays[i] = (alt, p.spec.reference(alt))
    return replays


def informative(spec: OperatorSpec, case: Any, call: Call, expected: tuple[Expected, ...]) -> bool:
    """Whether a candidate that does nothing would fail this case: every output has elements
    and differs from what doing nothing leaves there (the poison — an out-buffer's contents
    before poisoning never reach the candidate — or an in-place argument's original value).
    Only such cases can show that the answer came from the kernels."""
    if not expected or not all(e.by_value and e.python is None for e in expected):
        return False
    args = dict(call.tensor_args())
    for o, exp in zip(call.outputs, expected, strict=True):
        if exp.value.numel() == 0:
            return False
        in_place = o.where == "arg" and o.key in call.mutable and o.key not in call.out_buffers
        untouched = args.get(o.key) if in_place and o.key is not None else None
        if untouched is None:
            untouched = torch.full(tuple(exp.value.shape), poison_value(exp.dtype), dtype=exp.dtype)
        if check(untouched, exp, spec.tolerance(case, exp.dtype)) is None:
            return False
    return True


def _entry_bytes(entry: list[PublicCase]) -> int:
    total = 0
    for _, call, exp in entry:
        total += sum(t.numel() * t.element_size() for _, t in call.tensor_args())
        for e in exp:
            total += e.value.numel() * e.value.element_size()
            if e.scale is not None:
                total += e.scale.numel() * e.scale.element_size()
    return total


def _same_layout(a: Call, b: Call) -> bool:
    """Whether ``a``'s tensors can be copied into ``b``'s buffers (same keys, shapes, dtypes)."""
    ta, tb = dict(a.tensor_args()), dict(b.tensor_args())
    return ta.keys() == tb.keys() and all(
        ta[k].shape == tb[k].shape and ta[k].dtype == tb[k].dtype for k in ta)


def replay_call(first: Call, alt: Call) -> Call:
    """What a replay really runs: ``alt``'s top-level tensors copied into the first call's
    buffers, every other argument — scalars, index tensors inside a list — the first call's
    own, since nothing refills those. The expected answer is computed from this call (from
    ``alt`` alone, an honest index_put with new index values in ``alt`` was flagged)."""
    new = dict(alt.tensor_args())

    def refilled(key: int | str, a: Any) -> Any:
        if isinstance(a, PointerArray):  # alt's pointees at the first call's addresses
            return PointerArray(new[key], a.offsets)
        return new[key] if isinstance(a, torch.Tensor) else a

    args = tuple(refilled(i, a) for i, a in enumerate(first.args))
    kwargs = {k: refilled(k, v) for k, v in first.kwargs.items()}
    return Call(first.entry, args, kwargs, first.outputs, first.mutable, first.out_buffers)
