"""The loopback fake LLM (``bench/fake_llm.py``) that sweep tests and benchmarks bill against:
its ``Idempotency-Key`` handling, which the kill -9 resume tests rely on for "zero tokens
spent twice", must itself be right."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.coordinator.sweeping import FakeLLM, fake_llm

BODY = {"model": "m", "messages": [{"role": "user", "content": "Problem `aten::add`"}]}


def _post(llm: FakeLLM, key: str | None, body: dict[str, Any] = BODY) -> tuple[int, dict[str, Any]]:
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    req = urllib.request.Request(f"{llm.base_url}/chat/completions", json.dumps(body).encode(),
                                 headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_key_is_generated_once_and_billed_once(tmp_path: Path) -> None:
    with fake_llm(tmp_path, "--latency-s", "0.5", "--jitter", "0", "--prompt-tokens", "7",
                  "--completion-tokens", "3") as llm:
        with ThreadPoolExecutor(2) as pool:  # the repeat arrives while the first is generated
            first = pool.submit(_post, llm, "k1")
            time.sleep(0.1)
            second = pool.submit(_post, llm, "k1")
            (s1, r1), (s2, r2) = first.result(), second.result()
        s3, r3 = _post(llm, "k1")                      # a repeat after the reply was sent
        s4, r4 = _post(llm, None)                      # no key: a new reply, billed
        s5, r5 = _post(llm, "k1", {**BODY, "model": "other"})  # same key, another request
        stats = llm.stats()
        billed = llm.billed()
    assert (s1, s2, s3, s4) == (200, 200, 200, 200) and s5 == 422
    assert r1["id"] == r2["id"] == r3["id"] != r4["id"]
    assert "different request body" in r5["error"]["message"]
    assert billed == (2, 20)
    assert (stats["requests"], stats["generated"], stats["replayed"]) == (5, 2, 2)


def test_a_failed_reply_is_not_kept_and_an_abandoned_one_is_billed_on_delivery(tmp_path: Path) -> None:
    with fake_llm(tmp_path, "--latency-s", "0.3", "--jitter", "0", "--fail-every", "2") as llm:
        assert _post(llm, "a")[0] == 200             # reply 1
        assert _post(llm, "b")[0] == 503             # reply 2 fails (scripted) ...
        status, again = _post(llm, "b")              # ... and the retry generates reply 3
        assert status == 200 and again["id"] == "fake-3"
        assert _post(llm, None)[0] == 503            # reply 4 fails
        # A client that hangs up while its reply is generated is not billed; the repeat under
        # the same key gets that reply and is billed for it, once.
        raw = json.dumps(BODY).encode()
        with socket.create_connection(("127.0.0.1", llm.port)) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nIdempotency-Key: c\r\n"
                      b"Content-Length: " + str(len(raw)).encode() + b"\r\n\r\n" + raw)
        time.sleep(0.6)
        assert llm.stats()["abandoned"] == 1
        status, late = _post(llm, "c")               # reply 5, generated for the one who left
        stats = llm.stats()
        billed = llm.billed()
    assert status == 200 and late["id"] == "fake-5"
    assert billed[0] == 3 and stats["replayed"] == 0 and stats["generated"] == 5
