"""The write-ahead journal of model calls (coordinator/llm_calls.py): intents before requests
leave, calls before their text is used, both committed durably; unconfirmed calls estimated;
an older store migrated; and the books by idempotency key against the scripted server's log,
bad input included (a reply billed then dropped, malformed JSON with usage, a 200 without usage).
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import operators
from coordinator.engine.storage import StoreWriter
from coordinator.llm_calls import CallIntent, CallRecord
from coordinator.recorded_provider import RecordedProvider, idempotency_key_of
from coordinator.report import read_report
from coordinator.store import SCHEMA_VERSION, Store, StoreError, TrajectoryKey
from generators.llm import CallStatus, LLMCall, Message, Prompt, Role, Usage
from generators.providers import create
from generators.providers.attempts import AttemptRecord, attempt_records, attempts_json
from tests.coordinator.books import books
from tests.generators.fake_llm_server import fake_server
from tests.generators.llm_helpers import KEY, KEY_ENV, MODEL, PRICES, PROMPT, endpoint, wire_usage

ADD = operators.get("aten::add")
RUN = "run-j"


def _key(sample: int = 0, method: str = "sample") -> TrajectoryKey:
    return TrajectoryKey(ADD.id, ADD.version, method, "label-a", sample)


def _intent(sample: int, turn: int = 1, attempt: int = 1, prompt: int = 1000) -> CallIntent:
    k = _key(sample)
    return CallIntent(RUN, str(k), turn, attempt, idempotency_key_of(RUN, k, turn), "h" * 64,
                      MODEL, prompt, 500, 1.0, 4.0)


def _call(usage: Usage | None, attempts: tuple[AttemptRecord, ...] = ()) -> LLMCall:
    prompt = Prompt((Message(Role.USER, "write add"),), "aten/v1", ADD.id)
    return LLMCall("ep", MODEL, prompt, CallStatus.OK if usage else CallStatus.SERVER_ERROR,
                   text="x", usage=usage, cost_usd=0.01 if usage else 0.0,
                   attempts=max(1, len(attempts)), extra={"attempts": attempts_json(list(attempts))})


# -- durability ---------------------------------------------------------------------------------


class SyncSpy:
    """SQLite's trace callback on a connection: the ``synchronous`` level in force at every
    COMMIT of a transaction that wrote the journal's tables."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.level = str(db.execute("PRAGMA synchronous").fetchone()[0])
        self.wrote = False
        self.commits: list[str] = []
        db.set_trace_callback(self.trace)

    def trace(self, statement: str) -> None:
        s = " ".join(statement.split()).upper()
        if s.startswith("PRAGMA SYNCHRONOUS="):
            self.level = s.split("=", 1)[1]
        elif s.startswith(("INSERT", "UPDATE")) and ("LLM_CALLS" in s or "LLM_INTENTS" in s):
            self.wrote = True
        elif s == "COMMIT" and self.wrote:
            self.commits.append(self.level)
            self.wrote = False


def test_every_journal_write_commits_with_a_full_sync(tmp_path: Path) -> None:
    """An intent and a call are committed with ``synchronous=FULL`` (the WAL fsynced before the
    commit returns): in the store, and on the sweep's path (the store writer's group commit)."""
    store = Store(tmp_path / "kgb.sqlite")
    spy = SyncSpy(store.db)
    store.add_intent(_intent(0))
    store.add_llm_call(RUN, _key(0), 1, _call(Usage(10, 5)), intent=1)
    store.journal([_intent(1), CallRecord(RUN, str(_key(1)), 1, _call(Usage(3, 4)), 1)])
    assert spy.commits == ["FULL", "FULL", "FULL"], spy.commits
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL for the rest
    store.close()

    async def sweep_path() -> list[str]:
        writer = StoreWriter(str(tmp_path / "kgb.sqlite"), RUN)
        spied = writer._pool.submit(SyncSpy, writer._store.db).result()
        await writer.set_state("running", "test", 15.0)
        got = await asyncio.gather(writer.journal([_intent(2)]), writer.journal(
            [CallRecord(RUN, str(_key(2)), 1, _call(Usage(1, 2)), 1)]))
        assert got[0] == [None] and got[1][0] is not None
        await writer.close()
        return spied.commits

    assert set(asyncio.run(sweep_path())) == {"FULL"}


def test_a_call_completes_its_intent_in_the_same_transaction(tmp_path: Path) -> None:
    store = Store(tmp_path / "kgb.sqlite")
    store.add_intent(_intent(0))
    assert [i[4] for i in store.intents(RUN)] == [None]
    with pytest.raises(StoreError, match="turn must be an int"):
        store.journal([_intent(0), CallRecord(RUN, str(_key(0)), 0, _call(Usage(1, 1)), 1)])
    assert [i[4] for i in store.intents(RUN)] == [None]  # nothing of the refused batch
    store.add_llm_call(RUN, _key(0), 1, _call(Usage(1, 1)), intent=1,
                       idempotency_key=_intent(0).idempotency_key)
    ((traj, turn, attempt, key, completed),) = store.intents(RUN)
    assert (traj, turn, attempt, key) == (str(_key(0)), 1, 1, _intent(0).idempotency_key)
    assert completed is not None
    assert store.db.execute("SELECT idempotency_key, intent FROM llm_calls").fetchone() == (key, 1)


# -- unconfirmed calls ------------------------------------------------------------------------


def test_unconfirmed_calls_are_counted_linked_and_estimated(tmp_path: Path) -> None:
    store = Store(tmp_path / "kgb.sqlite")
    # a billed call of the model: its completion (300) is the model's average
    store.add_intent(_intent(0))
    store.add_llm_call(RUN, _key(0), 1, _call(Usage(900, 300)), intent=1)
    # sample 1: an intent lost in a crash, re-sent by a resume and answered (the link: attempt 2)
    store.add_intent(_intent(1, prompt=2000))
    store.add_intent(_intent(1, attempt=2, prompt=2000))
    store.add_llm_call(RUN, _key(1), 1, _call(Usage(2000, 300)), intent=2)
    # sample 2: lost, never re-sent; sample 3: a call with an attempt sent but never answered
    store.add_intent(_intent(2, prompt=1000))
    lost = AttemptRecord(1, CallStatus.SERVER_ERROR, 0, error="connection lost")
    answered = AttemptRecord(2, CallStatus.OK, 200, Usage(800, 300), 0.002)
    store.add_intent(_intent(3, prompt=800))
    store.add_llm_call(RUN, _key(3), 1, _call(Usage(800, 300), (lost, answered)), intent=1)
    assert store.last_intent(RUN, _key(1), 1) == 2 and store.last_intent(RUN, _key(9), 1) == 0

    (u,) = store.unconfirmed_calls(RUN)
    assert (u.model, u.method, u.intents, u.resent, u.attempts, u.calls) == \
        ("label-a", "sample", 2, 1, 1, 3)
    assert u.est_tokens == (2000 + 300) + (1000 + 300) + (800 + 300)
    assert u.est_cost_usd == pytest.approx(((2000 + 1000 + 800) * 1.0 + 3 * 300 * 4.0) / 1e6)
    # a live coordinator's own open intents are on the wire, not unconfirmed
    (live,) = store.unconfirmed_calls(RUN, before=0.0)
    assert (live.intents, live.attempts) == (0, 1)
    # the report carries them beside the billed calls
    rep = read_report(store, RUN)
    assert (rep.cost_total.unconfirmed_calls, rep.cost_total.billed_calls) == (3, 3)
    assert rep.to_json()["cost_total"]["unconfirmed_tokens_estimate"] == u.est_tokens


# -- an older store -------------------------------------------------------------------------------


V5_LLM_CALLS = """CREATE TABLE llm_calls (
    run_id TEXT NOT NULL, trajectory TEXT NOT NULL, turn INTEGER NOT NULL,
    provider TEXT NOT NULL, model TEXT NOT NULL, method TEXT NOT NULL, status TEXT NOT NULL,
    billed INTEGER NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL, reasoning_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL, attempts INTEGER NOT NULL, call TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (run_id, trajectory, turn));
CREATE TABLE run_states (
    run_id TEXT PRIMARY KEY, state TEXT NOT NULL, detail TEXT NOT NULL, updated REAL NOT NULL);
"""


def test_a_version_5_store_migrates_on_open(tmp_path: Path) -> None:
    path = tmp_path / "kgb.sqlite"
    old = Store(tmp_path / "tmp.sqlite")
    old.add_llm_call(RUN, _key(0), 1, _call(Usage(7, 3)))
    (row,) = old.db.execute("SELECT * FROM llm_calls").fetchall()
    old.close()
    db = sqlite3.connect(path)
    db.executescript(V5_LLM_CALLS)
    db.execute("INSERT INTO llm_calls VALUES (" + ", ".join("?" * 17) + ")", row[:17])
    db.execute("INSERT INTO run_states VALUES (?, 'running', 'pid 1 on elsewhere', 1.0)", (RUN,))
    db.commit()
    db.close()

    store = Store(path)  # migrated in place
    assert store.db.execute("SELECT value FROM meta").fetchone()[0] == str(SCHEMA_VERSION)
    assert store.db.execute("SELECT idempotency_key, intent, unconfirmed_attempts FROM "
                            "llm_calls").fetchone() == ("", 0, 0)
    assert store.llm_call(RUN, _key(0), 1) is not None and store.run_spend(RUN) == (10, 0.01)
    assert store.run_lease(RUN) == (None, None)  # recorded before leases
    store.add_llm_call(RUN, _key(0), 2, _call(Usage(1, 1)), intent=1)  # new rows fit
    assert store.unconfirmed_calls(RUN) == []
    store.close()
    Store(path).close()  # opening again changes nothing


# -- through the provider, against the scripted server -----------------------------------------


async def _complete(store: Store, server: Any, sample: int, **config: Any) -> LLMCall:
    cfg = endpoint(server, "openai", "ep", **config)
    if sample == REFUSED:  # nothing listens there: the connection is never made
        cfg = dataclasses.replace(cfg, base_url=f"http://127.0.0.1:{_closed_port()}/v1")
    async with create(cfg, PRICES) as inner:
        rp = RecordedProvider(inner, store, RUN, _key(sample))
        return await rp.complete(PROMPT, model=MODEL, temperature=None, max_tokens=256,
                                 deadline_s=20)


REFUSED = 5  # the sample whose endpoint refuses the connection


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again: connecting is refused


def test_bad_input_is_recorded_by_the_billing_rule_and_the_books_balance(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reply billed and then dropped (retried, and not), malformed JSON carrying usage, a 200
    without usage, a connection refused: each stored as docs/generators.md's billing rule says,
    and by idempotency key every response the server billed is recorded or unconfirmed — and
    only what may have been billed is unconfirmed (a refused connection sent nothing)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    u = wire_usage("openai", 120, 40)
    replies = [
        {"kind": "drop", "text": "x" * 300, "usage": wire_usage("openai", 50, 20)},  # sample 0 ...
        {"kind": "ok", "text": "after the drop", "usage": u},                           # ... retried
        {"kind": "malformed", "shape": "not_json", "usage": wire_usage("openai", 60, 21)},
        {"kind": "malformed", "shape": "truncated_json", "text": "y" * 200,
         "usage": wire_usage("openai", 61, 22)},
        {"kind": "ok", "text": "no usage"},                                              # sample 3
        {"kind": "drop", "text": "z" * 300, "usage": wire_usage("openai", 70, 23)},    # no retry
    ]
    store = Store(tmp_path / "kgb.sqlite")
    with fake_server({"endpoints": {"ep": {"replies": replies}}}, tmp_path) as server:
        calls = [asyncio.run(_complete(store, server, i)) for i in range(4)]
        calls.append(asyncio.run(_complete(store, server, 4, max_retries=0)))
        calls.append(asyncio.run(_complete(store, server, REFUSED, max_retries=1)))
        server.wait_billing(len(replies))
        b = books(server, store, RUN)
    assert [(c.status, c.billed, c.attempts) for c in calls] == [
        (CallStatus.OK, True, 2), (CallStatus.MALFORMED, True, 1), (CallStatus.MALFORMED, True, 1),
        (CallStatus.OK, False, 1), (CallStatus.SERVER_ERROR, False, 1),
        (CallStatus.SERVER_ERROR, False, 2)]
    assert calls[0].usage == Usage(120, 40)  # the dropped attempt's usage never reached us
    assert calls[3].usage is None and calls[3].text == "no usage"
    assert [a.sent for a in attempt_records(calls[REFUSED])] == [False, False]
    assert b.problems() == [], b.problems()
    assert b.billed_unrecorded == 2 and sum(b.unconfirmed.values()) == 2  # the two drops
    assert read_report(store, RUN).cost_total.unconfirmed_calls == 2


def test_the_intent_is_stored_before_the_request_leaves_under_the_turns_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    store = Store(tmp_path / "kgb.sqlite")
    seen: list[list[Any]] = []

    def watched(inner: Any) -> Any:
        send = inner.complete

        async def complete(*args: Any, **kw: Any) -> LLMCall:
            seen.append(store.intents(RUN))  # what the store holds as the request leaves
            return await send(*args, **kw)

        inner.complete = complete
        return inner

    script = {"endpoints": {"ep": {"default": {"kind": "ok", "text": "A",
                                               "usage": wire_usage("openai", 5, 5)}}}}
    with fake_server(script, tmp_path) as server:
        async def go() -> tuple[LLMCall, list[Any]]:
            async with create(endpoint(server, "openai", "ep"), PRICES) as inner:
                rp = RecordedProvider(watched(inner), store, RUN, _key(0))
                with pytest.raises(StoreError, match="idempotency key"):
                    await rp.complete(PROMPT, model=MODEL, temperature=None, max_tokens=64,
                                      deadline_s=10, idempotency_key="another-key")
                rp = RecordedProvider(inner, store, RUN, _key(0))
                key = idempotency_key_of(RUN, _key(0), 1)
                call = await rp.complete(PROMPT, model=MODEL, temperature=None, max_tokens=64,
                                         deadline_s=10, idempotency_key=key)
                return call, server.requests()

        call, requests = asyncio.run(go())
    key = idempotency_key_of(RUN, _key(0), 1)
    assert len(requests) == 1 and requests[0]["idempotency_key"] == key
    # the first (refused) call wrote nothing; the second's intent was there before it was sent
    assert [[(t, n, a, k, done is None) for t, n, a, k, done in s] for s in seen] == \
        [[(str(_key(0)), 1, 1, key, True)]]
    assert call.status is CallStatus.OK and "resends" not in call.extra
    assert store.intents(RUN)[0][4] is not None
