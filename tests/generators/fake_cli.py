#!/usr/bin/env python3
"""A scripted coding-agent CLI for the agent-cli tests (stdlib only: it runs as the workspace's
uid, which cannot reach the project's virtual environment).

``fake_cli.py MODE MODEL``: reads PROMPT.md, asks its model (through ANTHROPIC_BASE_URL, a
streamed Messages request) for a kernel, writes it to kernel.py, runs ``verify``, and on failure
asks again and rewrites, printing Claude Code's stream-json lines (usage per assistant message,
the session's totals in the result line). Other modes misbehave: ``exit`` (code 3 at once),
``malformed`` (a line that is not JSON), ``nokernel`` (ends without writing kernel.py), ``hang``
(starts a child in a session of its own, then sleeps), ``probe`` (tries to read what a
workspace must not reach and prints what it got), ``spin`` (calls its model until refused).
``--version`` prints a version line.
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request


def emit(obj):
    print(json.dumps(obj), flush=True)


def ask(model, content):
    body = {"model": model, "max_tokens": 4096, "stream": True,
            "messages": [{"role": "user", "content": content}]}
    req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"],
                                          "anthropic-version": "2023-06-01",
                                          "content-type": "application/json"})
    text, usage, msg_id = [], {}, ""
    with urllib.request.urlopen(req, timeout=60) as reply:
        for raw in reply.read().decode().splitlines():
            if not raw.startswith("data:"):
                continue
            ev = json.loads(raw[5:])
            if ev.get("type") == "message_start":
                msg_id = ev["message"].get("id", "")
                usage.update(ev["message"].get("usage") or {})
            elif ev.get("type") == "message_delta":
                usage.update(ev.get("usage") or {})
            elif ev.get("type") == "content_block_delta" and ev["delta"].get("type") == "text_delta":
                text.append(ev["delta"]["text"])
    emit({"type": "assistant", "message": {"id": msg_id, "usage": usage}})
    return "".join(text), usage


def total(usages):
    keys = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    return {k: sum(u.get(k, 0) for u in usages) for k in keys}


def work(model):
    with open("PROMPT.md") as f:
        prompt = f.read()
    usages = []
    emit({"type": "system", "subtype": "init", "model": model})
    content = prompt
    for _ in range(3):
        kernel, usage = ask(model, content)
        usages.append(usage)
        with open("kernel.py", "w") as f:
            f.write(kernel)
        v = subprocess.run(["verify"], capture_output=True, text=True)
        emit({"type": "user", "verify_exit": v.returncode, "verify": v.stdout[-300:]})
        if v.returncode == 0:
            break
        content = prompt + "\n\nverify said:\n" + v.stdout
    emit({"type": "result", "subtype": "success", "is_error": False, "usage": total(usages)})


def probe(targets):
    out = {}
    for t in targets:
        try:
            with open(t, "rb") as f:
                out[t] = "READ " + repr(f.read(40))
        except OSError as exc:
            out[t] = f"denied: {exc.strerror}"
    out["env"] = sorted(os.environ)
    emit({"type": "probe", "results": out})
    with open("kernel.py", "w") as f:
        f.write("# probe\n")
    emit({"type": "result", "usage": total([])})


def main():
    if sys.argv[1] == "--version":
        print("fake-cli 1.2.3 (scripted)")
        return
    mode, model = sys.argv[1], sys.argv[2]
    if mode == "exit":
        sys.exit(3)
    if mode == "malformed":
        print("this is { not json", flush=True)
        with open("kernel.py", "w") as f:
            f.write("# something\n")
        return
    if mode == "nokernel":
        emit({"type": "result", "usage": total([])})
        return
    if mode == "hang":
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"],
                         start_new_session=True)
        emit({"type": "system", "subtype": "init", "pid": os.getpid()})
        time.sleep(3600)
    if mode == "probe":
        probe(sys.argv[3:])
        return
    if mode == "spin":
        while True:
            try:
                ask(model, "again")
            except urllib.error.HTTPError as exc:
                emit({"type": "refused", "status": exc.code})
                time.sleep(3600)
    work(model)


main()
