"""Authentication, quotas, the audit log and request ids, through real agent processes
(issue 19, points 2 and 4; docs/auth.md).

Certificates are made at test time (tests/certs.py, ``cryptography``); tokens with the same
``add_token`` that ``kgb agent token add`` runs. Two agents serve the module: a real ``cpu``
agent behind TLS and tokens with a concurrency quota of one evaluation per tenant and an audit
log, and an instant-verdict agent on every interface (0.0.0.0) with mutual TLS, tokens and a
rate quota of two evaluations a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
from click.testing import CliRunner

import operators
from protos.client import AgentBusy, AgentClient, AgentError, BadRequest, NotAuthorized
from protos.kgb.agent.v1 import agent_pb2, agent_pb2_grpc
from protos.records import EvalRequest, Progress, Status, Verdict
from protos.security import ClientAuth, TokenStore, add_token, bearer_metadata, token_digest
from tests.certs import Certs, make_certs
from tests.helpers import running_agent

ADD = operators.get("aten::add")
SUB = operators.get("aten::sub")
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "candidates"
REJECTED_SOURCE = "import os\n" + ADD.solution  # refused by the static layer: a distinct verdict


@dataclass(frozen=True)
class Creds:
    dir: Path
    certs: Certs
    tokens: Path
    alice: str
    bob: str

    def auth(self, token: str | None, *, client_cert: bool = False) -> ClientAuth:
        """TLS trusting the test CA, ``token``, and the CA's client certificate if asked."""
        pair = self.certs.client if client_cert else None
        return ClientAuth(ca=self.certs.ca.read_bytes(), cert=pair.cert.read_bytes() if pair else None,
                          key=pair.key.read_bytes() if pair else None, token=token)


@pytest.fixture(scope="module")
def creds(tmp_path_factory: pytest.TempPathFactory) -> Creds:
    d = tmp_path_factory.mktemp("auth")
    tokens = d / "tokens"
    alice, bob = add_token(tokens, "alice"), add_token(tokens, "bob")
    return Creds(d, make_certs(d / "certs"), tokens, alice, bob)


def _tls_args(c: Creds) -> tuple[str, ...]:
    return ("--tls-cert", str(c.certs.server.cert), "--tls-key", str(c.certs.server.key),
            "--tokens", str(c.tokens))


@pytest.fixture(scope="module")
def secure_agent(agent_secret_env: None, creds: Creds) -> Iterator[str]:
    """A real cpu agent: TLS, tokens, one evaluation in flight per tenant, an audit log."""
    args = (*_tls_args(creds), "--quota-concurrency", "1", "--audit-log", str(creds.dir / "audit.jsonl"))
    with running_agent(*args, workers=2, auth=creds.auth(None)) as address:
        yield address


@pytest.fixture(scope="module")
def mtls_agent(agent_secret_env: None, creds: Creds) -> Iterator[str]:
    """An instant-verdict agent on 0.0.0.0 (allowed: TLS and tokens) with mutual TLS and a rate
    quota of two evaluations per minute per tenant."""
    args = (*_tls_args(creds), "--tls-client-ca", str(creds.certs.ca), "--host", "0.0.0.0",
            "--quota-rate", "2", "--instant-verdicts")
    with running_agent(*args, auth=creds.auth(None, client_cert=True)) as address:
        yield address


def _req(source: str | bytes = ADD.solution, *, rid: str | None = None, op: str = "aten::add",
         skip_timing: bool = False) -> EvalRequest:
    src = source.encode() if isinstance(source, str) else source
    return EvalRequest(rid or uuid.uuid4().hex, op, src, skip_timing=skip_timing)


def evaluate(address: str, auth: ClientAuth | None, req: EvalRequest, timeout: float = 120) -> Verdict:
    async def go() -> Verdict:
        async with AgentClient(address, auth) as c:
            return await c.evaluate(req, timeout=timeout)

    return asyncio.run(go())


def audit_lines(creds: Creds) -> list[dict[str, Any]]:
    path = creds.dir / "audit.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


# ---- authentication ------------------------------------------------------------------------

def test_no_token_or_a_wrong_one_is_unauthenticated(secure_agent: str, creds: Creds) -> None:
    """No token, a forged one, and the digest from the tokens file (what a reader of the file
    has) are all refused, for Evaluate and Describe alike; health checks stay open."""
    forged = creds.alice[:-4] + "AAAA"
    digest = token_digest(creds.alice)
    for token, why in ((None, "no bearer token"), (forged, "not valid"), (digest, "not valid"),
                       (f"sha256:{digest}", "not valid")):
        auth = replace(creds.auth(None), token=token)
        with pytest.raises(NotAuthorized, match=why):
            evaluate(secure_agent, auth, _req())

        async def describe(auth: ClientAuth = auth) -> None:
            async with AgentClient(secure_agent, auth) as c:
                assert await c.health() == "SERVING"  # liveness probes need no token
                await c.describe()

        with pytest.raises(NotAuthorized, match="UNAUTHENTICATED"):
            asyncio.run(describe())


def test_the_right_token_gets_a_verdict_over_tls(secure_agent: str, creds: Creds) -> None:
    assert evaluate(secure_agent, creds.auth(creds.alice), _req()).status is Status.PASSED


def test_reflection_needs_a_token(secure_agent: str, creds: Creds) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    tls = grpc.ssl_channel_credentials(root_certificates=creds.certs.ca.read_bytes())

    async def services(token: str) -> set[str]:
        async with grpc.aio.secure_channel(secure_agent, tls) as ch:
            stub = reflection_pb2_grpc.ServerReflectionStub(ch)

            async def reqs():  # type: ignore[no-untyped-def]
                yield reflection_pb2.ServerReflectionRequest(list_services="")

            async for resp in stub.ServerReflectionInfo(reqs(), timeout=10,
                                                        metadata=bearer_metadata(token)):
                return {s.name for s in resp.list_services_response.service}
        return set()

    async def anonymous_status() -> grpc.StatusCode:
        # The agent refuses the stream when it opens, before any request. Nothing is written:
        # a write racing that refusal makes grpc.aio's client report INTERNAL ("Internal error
        # from Core") in place of the status the server sent.
        async with grpc.aio.secure_channel(secure_agent, tls) as ch:
            call = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(timeout=10)
            code: grpc.StatusCode = await call.code()
            return code

    assert "kgb.agent.v1.DeviceAgent" in asyncio.run(services(creds.bob))
    assert asyncio.run(anonymous_status()) == grpc.StatusCode.UNAUTHENTICATED


def test_a_plaintext_client_cannot_talk_to_a_tls_agent(secure_agent: str, creds: Creds) -> None:
    plaintext = ClientAuth(token=creds.alice)
    with pytest.raises(AgentError, match="UNAVAILABLE"):
        evaluate(secure_agent, plaintext, _req(), timeout=5)


def test_mutual_tls_refuses_clients_without_a_certificate_of_its_ca(mtls_agent: str, creds: Creds) -> None:
    with_cert = creds.auth(creds.bob, client_cert=True)
    assert evaluate(mtls_agent, with_cert, _req()).status is Status.PASSED
    no_cert = creds.auth(creds.bob)
    stranger = replace(with_cert, cert=creds.certs.stranger.cert.read_bytes(),
                       key=creds.certs.stranger.key.read_bytes())
    for auth in (no_cert, stranger):
        with pytest.raises(AgentError, match="UNAVAILABLE"):
            evaluate(mtls_agent, auth, _req(), timeout=5)


# ---- quotas ----------------------------------------------------------------------------------

def test_concurrency_quota_is_per_tenant_with_a_retry_hint(secure_agent: str, creds: Creds) -> None:
    """Alice's hang holds her one slot: her next evaluation is RESOURCE_EXHAUSTED with a retry
    hint; Bob's is evaluated meanwhile. Once the hang is cancelled Alice is admitted again."""
    hang = (FIXTURES / "add_hang_python.py").read_bytes()

    async def go() -> None:
        async with AgentClient(secure_agent, creds.auth(creds.alice)) as a, \
                AgentClient(secure_agent, creds.auth(creds.bob)) as b:
            admitted = asyncio.Event()

            async def hold() -> None:
                async for event in a.evaluate_stream(_req(hang), timeout=120):
                    if isinstance(event, Progress):
                        admitted.set()

            holder = asyncio.ensure_future(hold())
            await asyncio.wait_for(admitted.wait(), timeout=60)
            with pytest.raises(AgentBusy, match="concurrency quota") as busy:
                await a.evaluate(_req(), timeout=60)
            assert busy.value.retry_after_s == pytest.approx(1.0)
            assert (await b.evaluate(_req(), timeout=120)).status is Status.PASSED
            holder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await holder
            for _ in range(50):  # the cancellation reaches the agent asynchronously
                try:
                    verdict = await a.evaluate(_req(), timeout=120)
                    break
                except AgentBusy:
                    await asyncio.sleep(0.2)
            assert verdict.status is Status.PASSED

    asyncio.run(go())


def test_rate_quota_is_per_tenant_with_a_retry_hint(mtls_agent: str, creds: Creds) -> None:
    """Two evaluations a minute: Alice's third is RESOURCE_EXHAUSTED, told to come back in
    about 30 s; repeats of an id she already used cost nothing; Bob is unaffected."""
    alice = creds.auth(creds.alice, client_cert=True)
    first = _req()
    assert evaluate(mtls_agent, alice, first).status is Status.PASSED
    assert evaluate(mtls_agent, alice, _req()).status is Status.PASSED
    with pytest.raises(AgentBusy, match="rate quota") as busy:
        evaluate(mtls_agent, alice, _req())
    assert 20.0 < busy.value.retry_after_s <= 30.0
    assert evaluate(mtls_agent, alice, first).status is Status.PASSED  # a repeat, not a new one
    assert evaluate(mtls_agent, creds.auth(creds.bob, client_cert=True), _req()).status is Status.PASSED


# ---- request ids -----------------------------------------------------------------------------

def test_a_request_id_repeated_with_the_same_content_gets_the_same_verdict(secure_agent: str,
                                                                          creds: Creds) -> None:
    """Concurrent repeats join the one evaluation (and cost no quota slot); a later repeat
    gets the stored verdict."""
    req = _req()

    async def go() -> tuple[Verdict, Verdict, Verdict]:
        async with AgentClient(secure_agent, creds.auth(creds.alice)) as c:
            one, two = await asyncio.gather(c.evaluate(req, timeout=120), c.evaluate(req, timeout=120))
            return one, two, await c.evaluate(req, timeout=120)

    one, two, three = asyncio.run(go())
    assert one == two == three and one.status is Status.PASSED


@pytest.mark.parametrize("change", ["source", "operator", "mode"])
def test_a_request_id_reused_for_other_content_is_invalid_argument(secure_agent: str, creds: Creds,
                                                                   change: str) -> None:
    alice = creds.auth(creds.alice)
    first = _req(REJECTED_SOURCE)
    assert evaluate(secure_agent, alice, first).status is Status.REJECTED
    other = {"source": replace(first, source=ADD.solution.encode()),
             "operator": replace(first, operator_id=SUB.id, source=SUB.solution.encode()),
             "mode": replace(first, skip_timing=True)}[change]
    with pytest.raises(BadRequest, match="already used with another"):
        evaluate(secure_agent, alice, other)
    assert evaluate(secure_agent, alice, first).status is Status.REJECTED


def test_request_ids_are_scoped_per_tenant(secure_agent: str, creds: Creds) -> None:
    """Bob reusing Alice's id gets his own evaluation of his own source, never her verdict."""
    rid = f"shared-{uuid.uuid4().hex}"
    assert evaluate(secure_agent, creds.auth(creds.alice), _req(REJECTED_SOURCE, rid=rid)).status \
        is Status.REJECTED
    assert evaluate(secure_agent, creds.auth(creds.bob), _req(rid=rid)).status is Status.PASSED
    records = [r for r in audit_lines(creds) if r["request_id"] == rid]
    assert [(r["tenant"], r["status"], r["repeat"]) for r in records] == [
        ("alice", "REJECTED", False), ("bob", "PASSED", False)]


@pytest.mark.parametrize("rid", ["x" * 129, "has space", "tab\there", "é" * 4, "x" * (8 << 20)],
                         ids=["129-chars", "space", "tab", "non-ascii", "8-MiB"])
def test_long_or_unprintable_request_ids_are_invalid_argument(secure_agent: str, creds: Creds,
                                                               rid: str) -> None:
    with pytest.raises(BadRequest, match="printable ASCII"):
        evaluate(secure_agent, creds.auth(creds.alice), _req(rid=rid))


def test_the_longest_request_id_is_accepted(secure_agent: str, creds: Creds) -> None:
    rid = "~" * 127 + "!"
    assert evaluate(secure_agent, creds.auth(creds.bob), _req(rid=rid)).status is Status.PASSED


# ---- the audit log ---------------------------------------------------------------------------

def test_audit_log_has_one_line_per_call_with_its_fields(secure_agent: str, creds: Creds) -> None:
    ok, refused = _req(rid=f"audit-{uuid.uuid4().hex}"), _req(rid=f"audit-{uuid.uuid4().hex}")
    assert evaluate(secure_agent, creds.auth(creds.bob), ok).status is Status.PASSED
    with pytest.raises(BadRequest):
        evaluate(secure_agent, creds.auth(creds.bob), replace(refused, operator_id="aten::nope"))
    with pytest.raises(NotAuthorized):
        evaluate(secure_agent, creds.auth(None), _req())
    lines = audit_lines(creds)
    mine = {r["request_id"]: r for r in lines if r["request_id"] in (ok.request_id, refused.request_id)}
    assert sum(r["request_id"] == ok.request_id for r in lines) == 1
    good = mine[ok.request_id]
    assert good["tenant"] == "bob" and good["peer"].startswith("ipv4:127.0.0.1:")
    assert good["rpc"] == "/kgb.agent.v1.DeviceAgent/Evaluate"
    assert good["operator"] == f"aten::add@{ADD.version}"
    assert good["candidate_hash"] == hashlib.sha256(ADD.solution.encode()).hexdigest()
    assert (good["status"], good["refused"], good["skip_timing"]) == ("PASSED", None, False)
    assert good["time"].endswith("+00:00")
    bad = mine[refused.request_id]
    assert (bad["status"], bad["refused"], bad["operator"]) == (None, "invalid", "aten::nope@")
    assert "unknown operator" in bad["detail"]
    last = lines[-1]
    assert (last["tenant"], last["refused"], last["rpc"]) == (
        None, "unauthenticated", "/kgb.agent.v1.DeviceAgent/Evaluate")
    assert creds.alice not in (creds.dir / "audit.jsonl").read_text()


# ---- clients: kgb eval -----------------------------------------------------------------------

def test_kgb_eval_reaches_a_secured_agent_with_ca_and_token_file(secure_agent: str, creds: Creds,
                                                                 tmp_path: Path) -> None:
    from coordinator.cli import kgb

    token_file = tmp_path / "token"
    token_file.write_text(creds.bob + "\n")
    cand = tmp_path / "add.py"
    cand.write_text(ADD.solution)
    base = ["eval", str(cand), "--op", ADD.id, "--agent", secure_agent, "--json"]
    r = CliRunner().invoke(kgb, [*base, "--ca", str(creds.certs.ca), "--token-file", str(token_file)])
    assert r.exit_code == 0, r.stderr
    assert orjson.loads(r.stdout)["status"] == "PASSED"
    assert creds.bob not in r.stdout + r.stderr
    r = CliRunner(env={"KGB_AGENT_TOKEN": creds.bob}).invoke(kgb, [*base, "--ca", str(creds.certs.ca)])
    assert r.exit_code == 0 and orjson.loads(r.stdout)["status"] == "PASSED", r.stderr
    r = CliRunner(env={"KGB_AGENT_TOKEN": ""}).invoke(kgb, [*base, "--ca", str(creds.certs.ca)])
    assert r.exit_code == 3 and "refused us" in r.stderr and "--token-file" in r.stderr


def test_tokens_file_never_holds_a_token(creds: Creds) -> None:
    text = creds.tokens.read_text()
    assert creds.alice not in text and creds.bob not in text
    assert creds.tokens.stat().st_mode & 0o777 == 0o600


def test_raw_stub_without_metadata_is_refused(secure_agent: str, creds: Creds) -> None:
    """What any gRPC tool does without our client: no token, no evaluation."""
    async def go() -> None:
        tls = grpc.ssl_channel_credentials(root_certificates=creds.certs.ca.read_bytes())
        async with grpc.aio.secure_channel(secure_agent, tls) as ch:
            stub = agent_pb2_grpc.DeviceAgentStub(ch)
            await stub.Evaluate(agent_pb2.EvaluateRequest(
                request_id="raw", operator_id="aten::add", source=ADD.solution.encode()), timeout=30)

    with pytest.raises(grpc.aio.AioRpcError) as err:
        asyncio.run(go())
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


# ---- who may listen where ---------------------------------------------------------------------

def test_non_loopback_without_tls_and_tokens_is_refused(creds: Creds) -> None:
    """The real program, in its own process with a deadline: a broken guard would serve (and
    the test fail on the timeout) rather than hang the suite."""
    tls = ["--tls-cert", str(creds.certs.server.cert), "--tls-key", str(creds.certs.server.key)]
    for extra, missing in (([], "TLS and tokens"), (tls, "tokens"), (["--tokens", str(creds.tokens)], "TLS")):
        r = subprocess.run([sys.executable, "-m", "device_agent", "serve", "--host", "0.0.0.0",
                            "--port", "0", "--platform", "cpu", "--instant-verdicts", *extra],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert f"refusing to listen on 0.0.0.0 without {missing}" in r.stderr, r.stderr
        assert "--insecure" in r.stderr and "kgb agent token add" in r.stderr


def test_serve_itself_refuses_an_exposed_address() -> None:
    """Not only the CLI: an embedding that builds settings by hand is refused too."""
    from device_agent.server import AgentSettings, ExposureRefused, serve

    settings = AgentSettings(host="0.0.0.0", port=0, platform="cpu", instant_verdicts=True)
    with pytest.raises(ExposureRefused, match="without TLS and tokens"):
        asyncio.run(asyncio.wait_for(serve(settings), timeout=30))


def test_insecure_allows_an_open_non_loopback_agent_with_a_warning(agent_secret_env: None) -> None:
    from coordinator.local_agent import LocalAgent

    agent = LocalAgent(platform="cpu", workers=1,
                       extra_args=("--host", "0.0.0.0", "--insecure", "--instant-verdicts"))
    with agent:
        asyncio.run(agent.wait_serving(120))
        assert evaluate(agent.address, None, _req()).status is Status.PASSED
    assert "WARNING: --insecure: listening on 0.0.0.0 without TLS and tokens" in agent.log_tail()


# ---- the CLI ---------------------------------------------------------------------------------

def test_kgb_agent_serve_mirrors_the_agent_programs_access_options() -> None:
    from coordinator.cli.agent_cmd import serve as click_serve
    from device_agent.__main__ import _parser

    sub = next(a for a in _parser()._actions if a.dest == "command")
    serve = sub.choices["serve"]  # type: ignore[attr-defined]
    group = next(g for g in serve._action_groups if g.title and g.title.startswith("access"))
    access = {o for a in group._group_actions for o in a.option_strings}
    assert {"--tls-cert", "--tokens", "--quota-rate", "--audit-log", "--insecure"} <= access
    assert access <= {o for p in click_serve.params for o in p.opts}


def test_kgb_agent_token_add_prints_a_working_token_once(tmp_path: Path) -> None:
    tokens = tmp_path / "sub" / "tokens"
    tokens.parent.mkdir()
    made = []
    for tenant in ("team-a", "team.b"):
        r = subprocess.run([sys.executable, "-m", "coordinator", "agent", "token", "add",
                            "--tenant", tenant, "--tokens", str(tokens)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        token = r.stdout.strip()
        assert token and "\n" not in token and token not in r.stderr
        assert "printed above once" in r.stderr
        made.append(token)
    store = TokenStore(tokens)
    assert [store.tenant_for(t) for t in made] == ["team-a", "team.b"]
    assert not any(t in tokens.read_text() for t in made)
    r = subprocess.run([sys.executable, "-m", "device_agent", "token", "add", "--tenant", "no spaces",
                        "--tokens", str(tokens)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "tenant name" in r.stderr and not r.stdout


def test_refusals_are_counted_and_tokens_work_on_plain_loopback(agent_secret_env: None, creds: Creds,
                                                                 tmp_path: Path) -> None:
    """Tokens without TLS are fine on loopback; unauthenticated and quota refusals show in
    kgb_agent_rejected_total."""
    from tests.deploy.helpers import metrics_agent, sample, scrape

    args = ("--instant-verdicts", "--tokens", str(creds.tokens), "--quota-rate", "1")
    with metrics_agent(tmp_path / "agent.log", extra_args=args) as m:
        alice = ClientAuth(token=creds.alice)
        assert evaluate(m.address, alice, _req()).status is Status.PASSED
        with pytest.raises(AgentBusy):
            evaluate(m.address, alice, _req())
        with pytest.raises(NotAuthorized):
            evaluate(m.address, None, _req())
        families = scrape(m.metrics_url)
        for reason in ("quota", "unauthenticated"):
            assert sample(families, "kgb_agent_rejected_total", platform="cpu", reason=reason) == 1


def test_kgb_agent_serve_forwards_every_access_option(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    """The click wrapper execs the agent program: every access flag must reach its argv."""
    from coordinator.cli import agent_cmd, kgb

    seen: list[list[str]] = []

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        seen.append(argv)
        raise SystemExit(0)

    monkeypatch.setattr(agent_cmd.os, "execve", execve)
    f = tmp_path / "f.pem"
    f.write_text("x")
    flags = {"--tls-cert": str(f), "--tls-key": str(f), "--tls-client-ca": str(f), "--tokens": str(f),
             "--quota-concurrency": "3", "--quota-rate": "7", "--audit-log": str(tmp_path / "a.jsonl"),
             "--register": "127.0.0.1:9", "--register-ca": str(f), "--register-cert": str(f),
             "--register-key": str(f), "--register-token-file": str(f)}
    args = [a for kv in flags.items() for a in kv]
    r = CliRunner().invoke(kgb, ["agent", "serve", *args, "--insecure"])
    assert r.exit_code == 0, r.output
    argv = seen[0]
    for flag, value in flags.items():
        assert argv[argv.index(flag) + 1] == value, flag
    assert "--insecure" in argv
