"""protos/security.py on its own: the tokens file, token lookup, client and server credentials,
and who may listen where. The services that use it are tested through real processes in
tests/device_agent/test_auth.py and tests/coordinator/test_registry_auth.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protos.security import (
    AuthConfigError,
    ClientAuthFiles,
    ServerTLS,
    TokenStore,
    add_token,
    bearer_from,
    exposure_problem,
    is_loopback,
    parse_tokens,
    read_token,
    token_digest,
)
from tests.certs import make_certs
from tests.helpers import FakeClock


def test_added_tokens_are_stored_as_digests_and_map_to_their_tenant(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    alice, bob = add_token(path, "alice"), add_token(path, "bob")
    assert alice != bob and len(alice) > 40
    text = path.read_text()
    assert alice not in text and bob not in text and token_digest(alice) in text
    assert os.stat(path).st_mode & 0o777 == 0o600
    store = TokenStore(path)
    assert (store.tenant_for(alice), store.tenant_for(bob)) == ("alice", "bob")
    assert store.tenant_for(alice + "x") is None
    assert store.tenant_for(token_digest(alice)) is None  # the digest is not the token
    assert store.tenant_for("") is None and store.tenant_for(None) is None
    assert store.tenants == {"alice", "bob"}


@pytest.mark.parametrize("line, message", [
    ("alice kgb_IamAtokenInClearText", "never tokens"),
    ("alice sha256:" + "A" * 64, "64 lower-case hex"),
    ("alice sha256:" + "a" * 63, "64 lower-case hex"),
    ("al ice sha256:" + "a" * 64, "expected"),
    ("-alice sha256:" + "a" * 64, "tenant name"),
])
def test_malformed_tokens_files_are_refused_with_the_line(line: str, message: str) -> None:
    text = "# comment\n\nbob sha256:" + "b" * 64 + "  # trailing comment\n" + line + "\n"
    with pytest.raises(AuthConfigError, match=message) as err:
        parse_tokens(text, "f")
    assert "f:4:" in str(err.value)


def test_the_same_digest_twice_is_refused() -> None:
    with pytest.raises(AuthConfigError, match="twice"):
        parse_tokens(f"a sha256:{'c' * 64}\nb sha256:{'c' * 64}\n", "f")


def test_token_add_refuses_to_append_to_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("alice kgb_clear\n")
    with pytest.raises(AuthConfigError):
        add_token(path, "bob")
    assert path.read_text() == "alice kgb_clear\n"
    with pytest.raises(AuthConfigError, match="tenant name"):
        add_token(tmp_path / "other", "a b")


def test_a_changed_tokens_file_is_reread_and_a_broken_change_keeps_the_old_tokens(tmp_path: Path) -> None:
    path, clock = tmp_path / "tokens", FakeClock()
    alice = add_token(path, "alice")
    store = TokenStore(path, clock=clock)
    bob = add_token(path, "bob")
    assert store.tenant_for(bob) is None  # checked at most once a second
    clock.now += 1.5
    assert store.tenant_for(bob) == "bob"
    path.write_text(f"bob sha256:{token_digest(bob)}\n")  # alice revoked
    clock.now += 1.5
    assert store.tenant_for(alice) is None and store.tenant_for(bob) == "bob"
    path.write_text("garbage\n")
    clock.now += 1.5
    assert store.tenant_for(bob) == "bob"


def test_bearer_metadata_is_parsed_strictly() -> None:
    assert bearer_from((("authorization", "Bearer abc"),)) == "abc"
    assert bearer_from((("Authorization", "bearer  abc "),)) == "abc"
    assert bearer_from((("authorization", "Basic abc"),)) is None
    assert bearer_from((("authorization", "Bearer "),)) is None
    assert bearer_from((("x-token", "abc"),)) is None
    assert bearer_from(None) is None


def test_client_tokens_come_from_a_file_or_the_environment(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "t"
    f.write_text("kgb_0123456789abcdefXYZ\n")
    monkeypatch.setenv("KGB_TEST_TOKEN", "kgb_fromtheenvironment")
    assert read_token(f, "KGB_TEST_TOKEN") == "kgb_0123456789abcdefXYZ"
    assert read_token(None, "KGB_TEST_TOKEN") == "kgb_fromtheenvironment"
    assert read_token(None, "KGB_UNSET_VARIABLE") is None and read_token(None) is None
    f.write_text("two words here\n")
    with pytest.raises(AuthConfigError, match="one token"):
        read_token(f)
    with pytest.raises(AuthConfigError, match="cannot read token file"):
        read_token(tmp_path / "missing")


def test_client_credentials_are_checked_and_never_shown(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    token = tmp_path / "token"
    token.write_text("kgb_secretsecretsecret")
    auth = ClientAuthFiles(certs.ca, certs.client.cert, certs.client.key, token).load()
    assert auth.tls and auth.metadata() == (("authorization", "Bearer kgb_secretsecretsecret"),)
    assert "secret" not in repr(auth) and "BEGIN" not in repr(auth)
    with pytest.raises(AuthConfigError, match="needs its key"):
        ClientAuthFiles(certs.ca, certs.client.cert)
    with pytest.raises(AuthConfigError, match="server's CA"):
        ClientAuthFiles(None, certs.client.cert, certs.client.key)
    with pytest.raises(AuthConfigError, match="not PEM"):
        ClientAuthFiles(token).load()


def test_server_credentials_refuse_a_key_of_another_certificate(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    ServerTLS(certs.server.cert, certs.server.key, certs.ca).credentials()
    with pytest.raises(AuthConfigError, match="does not match"):
        ServerTLS(certs.server.cert, certs.client.key).credentials()
    with pytest.raises(AuthConfigError, match="cannot read"):
        ServerTLS(tmp_path / "nope.pem", certs.server.key).credentials()
    with pytest.raises(AuthConfigError, match="client CA"):
        ServerTLS(certs.server.cert, certs.server.key, certs.server.key).credentials()


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.0.0.5", True), ("localhost", True), ("::1", True), ("[::1]", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.7", False), ("gpu-7.example", False),
])
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_exposed_addresses_need_tls_and_tokens_or_insecure() -> None:
    assert exposure_problem("127.0.0.1", tls=False, tokens=False, insecure=False) is None
    assert exposure_problem("0.0.0.0", tls=True, tokens=True, insecure=False) is None
    assert exposure_problem("0.0.0.0", tls=False, tokens=False, insecure=True) is None
    assert "without TLS and tokens" in str(exposure_problem("0.0.0.0", tls=False, tokens=False,
                                                            insecure=False))
    assert "without tokens" in str(exposure_problem("::", tls=True, tokens=False, insecure=False))
    assert "without TLS" in str(exposure_problem("10.1.2.3", tls=False, tokens=True, insecure=False))
