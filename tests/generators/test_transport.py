"""The providers' HTTP transport (aiohttp) as the providers use it, against the scripted server:
TLS, proxies from the environment (and what is not read from it), the reply size limit, broken
and cut replies, redirects, compression, keep-alive and a provider used by two event loops.

What docs/generators.md promises about HTTP is checked here, including where aiohttp reads less
than the hand-written client it replaced did (CIDR ranges in NO_PROXY, ALL_PROXY).
"""

from __future__ import annotations

import asyncio
import gc
import logging
from pathlib import Path

import pytest

from generators.llm import CallStatus, LLMCall
from generators.providers import EndpointConfig, ProviderConfigError, attempt_records, create, transport
from tests.certs import make_certs
from tests.generators.fake_llm_server import fake_server
from tests.generators.llm_helpers import KEY, KEY_ENV, MODEL, PROMPT, endpoint
from tests.generators.llm_helpers import wire_usage as u

PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Hermetic: the key set; no proxy, certificate or .netrc of the machine running the tests."""
    monkeypatch.setenv(KEY_ENV, KEY)
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    empty = tmp_path / "empty-netrc"
    empty.write_text("")
    monkeypatch.setenv("NETRC", str(empty))


async def _calls(config: EndpointConfig, n: int = 1) -> list[LLMCall]:
    async with create(config) as provider:
        return [await provider.complete(PROMPT, model=MODEL, temperature=None, max_tokens=16,
                                        deadline_s=10) for _ in range(n)]


OK = {"kind": "ok", "text": "ok", "usage": u("openai", 5, 5)}


# -- a loopback proxy ---------------------------------------------------------------------------


class Proxy:
    """CONNECT tunnels, and absolute-form http requests forwarded to the origin (one request per
    connection); records the request head of each."""

    def __init__(self) -> None:
        self.connects: list[tuple[str, dict[str, str]]] = []
        self.forwarded: list[tuple[str, dict[str, str]]] = []
        self.port = 0
        self._server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> Proxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            line, *rest = head.split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in
                       (h.partition(":") for h in rest if h)}
            method, target, _ = line.split(" ", 2)
            if method == "CONNECT":
                self.connects.append((line, headers))
                host, _, port = target.rpartition(":")
                up_reader, up_writer = await asyncio.open_connection(host, int(port))
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
                return
            self.forwarded.append((line, headers))
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            await self._forward(method, target, headers, body, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _forward(self, method: str, target: str, headers: dict[str, str], body: bytes,
                       writer: asyncio.StreamWriter) -> None:
        origin = target.split("/", 3)  # http:, "", host:port, path
        host, _, port = origin[2].rpartition(":")
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        kept = "".join(f"{k}: {v}\r\n" for k, v in headers.items()
                       if k not in ("proxy-authorization", "connection"))
        up_writer.write(f"{method} /{origin[3]} HTTP/1.1\r\n{kept}connection: close\r\n\r\n"
                        .encode("latin-1") + body)
        reply_head = await up_reader.readuntil(b"\r\n\r\n")
        writer.write(reply_head[:-2] + b"connection: close\r\n\r\n")
        await _pipe(up_reader, writer)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


# -- TLS and proxies ----------------------------------------------------------------------------


def test_tls_is_verified_against_ssl_cert_file_direct_and_through_a_tunnel(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    certs = make_certs(tmp_path / "tls")
    with fake_server({"endpoints": {"ep": {"default": OK}}}, tmp_path,
                     tls=(certs.server.cert, certs.server.key)) as server:
        async def main() -> tuple[list[LLMCall], Proxy]:
            refused = await _calls(endpoint(server, "openai", "ep", max_retries=0))
            monkeypatch.setenv("SSL_CERT_FILE", str(certs.ca))  # read when a session is made
            direct = await _calls(endpoint(server, "openai", "ep"), 2)
            async with Proxy() as proxy:
                monkeypatch.setenv("https_proxy", f"http://bob:pw@127.0.0.1:{proxy.port}")
                tunneled = await _calls(endpoint(server, "openai", "ep"), 2)
            return refused + direct + tunneled, proxy

        calls, proxy = asyncio.run(main())
        ports = [r["peer_port"] for r in server.requests()]
    refused, *fine = calls
    assert refused.status is CallStatus.SERVER_ERROR and not refused.billed
    assert "certificate verify failed" in refused.error
    assert [c.status for c in fine] == [CallStatus.OK] * 4
    assert len(ports) == 4 and ports[0] == ports[1] and ports[2] == ports[3]  # kept alive
    (tunnel,) = proxy.connects  # one tunnel, reused for the second call
    assert tunnel[0] == f"CONNECT 127.0.0.1:{server.port} HTTP/1.1"
    assert tunnel[1]["proxy-authorization"] == "Basic Ym9iOnB3"  # bob:pw
    assert not proxy.forwarded


def test_http_proxy_from_the_environment_and_what_no_proxy_takes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_server({"endpoints": {"ep": {"default": OK}}}, tmp_path) as server:
        async def main() -> tuple[list[LLMCall], Proxy]:
            async with Proxy() as proxy:
                monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # the lower-case one wins
                monkeypatch.setenv("http_proxy", f"http://u%40x:p%3Ass@127.0.0.1:{proxy.port}")
                via = await _calls(endpoint(server, "openai", "ep"))
                monkeypatch.setenv("no_proxy", "example.com, .0.1")  # a suffix of 127.0.0.1
                direct = await _calls(endpoint(server, "openai", "ep"))
                monkeypatch.setenv("no_proxy", "example.com, 127.0.0.0/8")  # CIDR: not read
                cidr = await _calls(endpoint(server, "openai", "ep"))
            return via + direct + cidr, proxy

        calls, proxy = asyncio.run(main())
    assert [c.status for c in calls] == [CallStatus.OK] * 3
    assert len(proxy.forwarded) == 2  # the first call and the CIDR one
    line, headers = proxy.forwarded[0]
    assert line == f"POST http://127.0.0.1:{server.port}/ep/v1/chat/completions HTTP/1.1"
    assert headers["proxy-authorization"] == "Basic dUB4OnA6c3M="  # u@x:p:ss
    assert headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize(("no_proxy", "url", "direct"), [
    ("example.com", "https://api.example.com/v1", True),      # subdomains match
    (".example.com", "https://example.com/v1", True),         # a leading dot is ignored
    ("example.com", "https://notexample.com/v1", False),
    ("*", "https://anything.example/v1", True),
    ("10.1.2.3, ::1", "http://[::1]:8000/v1", True),          # IP literals, as names
    ("10.0.0.0/8", "http://10.1.2.3:8000/v1", False),         # no CIDR ranges
    ("api.example.com:443", "https://api.example.com/v1", False),  # no host:port
    ("*.example.com", "https://api.example.com/v1", False),   # no *. wildcards
])
def test_no_proxy_is_read_as_aiohttp_reads_it(no_proxy: str, url: str, direct: bool,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    proxy, _ = transport.env_proxy(url)
    assert (proxy is None) == direct, proxy


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("HTTPS_PROXY", "socks5://user:secretpw@127.0.0.1:1080", "proxy socks5://127.0.0.1:1080 for"),
    ("https_proxy", "https://user:secretpw@proxy.example:3128", "proxy https://proxy.example:3128 for"),
    ("ALL_PROXY", "http://user:secretpw@proxy.example:3128", "only HTTP_PROXY and HTTPS_PROXY"),
])
def test_a_proxy_that_would_not_be_used_as_meant_is_a_configuration_error(
        variable: str, value: str, says: str, monkeypatch: pytest.MonkeyPatch) -> None:
    config = EndpointConfig(name="x", kind="openai", base_url="https://api.example.com/v1")
    provider = create(config)  # made before the variable was set: the first call checks again
    monkeypatch.setenv(variable, value)
    with pytest.raises(ProviderConfigError, match="only") as made:
        create(config)
    assert says in str(made.value) and "secretpw" not in str(made.value)
    with pytest.raises(ProviderConfigError, match="only"):
        asyncio.run(provider.complete(PROMPT, model=MODEL, temperature=None, max_tokens=8,
                                      deadline_s=5))
    monkeypatch.setenv("NO_PROXY", "example.com")  # a host that needs no proxy is fine
    create(config)


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_netrc_is_never_sent_to_the_endpoint(wire: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login bob password hunter2\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    ok = {"kind": "ok", "text": "ok", "usage": u(wire, 5, 5)}
    with fake_server({"endpoints": {"ep": {"default": ok}}}, tmp_path) as server:
        (call,) = asyncio.run(_calls(endpoint(server, wire, "ep")))
        (seen,) = server.requests()
    assert call.status is CallStatus.OK
    if wire == "openai":
        assert seen["authorization"] == f"Bearer {KEY}"
    else:
        assert seen["authorization"] is None and seen["x_api_key"] == KEY


# -- replies ------------------------------------------------------------------------------------


def test_replies_over_the_size_limit_are_refused(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport, "MAX_REPLY_BYTES", 4000)
    big = {"kind": "ok", "text": "x" * 5000, "usage": u("openai", 5, 5)}
    replies = [big, {**big, "gzip": True}, {**big, "chunk_chars": 500}, OK]
    with fake_server({"endpoints": {"ep": {"replies": replies}}}, tmp_path) as server:
        async def main() -> list[LLMCall]:
            whole = await _calls(endpoint(server, "openai", "ep", max_retries=0), 2)
            return whole + await _calls(endpoint(server, "openai", "ep", max_retries=0,
                                                 stream=True), 2)

        calls = asyncio.run(main())
    sized, zipped, streamed, small = calls
    assert "reply of" in sized.error and "exceeds 4000" in sized.error
    assert "exceeds 4000 bytes" in zipped.error  # decoded size: the gzip body itself is small
    assert "stream cut off" in streamed.error and "exceeds 4000 bytes" in streamed.error
    for call in (sized, zipped, streamed):
        assert call.status is CallStatus.SERVER_ERROR and not call.billed
    assert small.status is CallStatus.OK


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_broken_and_cut_replies_are_server_errors_and_unbilled(wire: str, tmp_path: Path) -> None:
    replies = [{"kind": "garbage"}, {"kind": "drop", "text": "x" * 300, "usage": u(wire, 40, 20)},
               {"kind": "ok", "text": "ok", "usage": u(wire, 5, 5)}]
    with fake_server({"endpoints": {"ep": {"replies": replies}}}, tmp_path) as server:
        (call,) = asyncio.run(_calls(endpoint(server, wire, "ep")))
        billing = sorted(server.wait_billing(3), key=lambda r: r["seq"])
    garbage, dropped, ok = attempt_records(call)
    assert call.status is CallStatus.OK and call.attempts == 3
    assert garbage.status is dropped.status is CallStatus.SERVER_ERROR
    assert garbage.usage is None and dropped.usage is None  # the rule: not billed ...
    assert billing[1]["usage"] is not None  # ... though this server billed the dropped one
    assert "payload is not completed" in dropped.error.lower()
    assert KEY not in garbage.error + dropped.error


def test_a_redirect_is_the_endpoints_answer_not_followed(tmp_path: Path) -> None:
    redirect = {"kind": "error", "status": 307, "headers": {"Location": "http://127.0.0.1:9/x"}}
    with fake_server({"endpoints": {"ep": {"replies": [redirect]}}}, tmp_path) as server:
        (call,) = asyncio.run(_calls(endpoint(server, "openai", "ep")))
    assert call.status is CallStatus.CLIENT_ERROR and call.attempts == 1
    assert attempt_records(call)[0].http_status == 307


def test_compressed_replies_kept_alive_connections_and_a_second_event_loop(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    zipped = {"kind": "ok", "text": "zipped", "usage": u("openai", 5, 5), "gzip": True}
    with fake_server({"endpoints": {"ep": {"default": zipped}}}, tmp_path) as server:
        held = [create(endpoint(server, "openai", "ep"))]

        async def three() -> list[LLMCall]:
            return [await held[0].complete(PROMPT, model=MODEL, temperature=None, max_tokens=8,
                                           deadline_s=10) for _ in range(3)]

        calls = asyncio.run(three()) + asyncio.run(three())  # never closed between the loops
        asyncio.run(held[0].aclose())
        requests = server.requests()
    held.clear()  # and the first loop's session is gone with nothing said
    gc.collect()
    assert [(c.status, c.text) for c in calls] == [(CallStatus.OK, "zipped")] * 6
    assert {r["accept_encoding"] for r in requests} == {"identity"}
    ports = [r["peer_port"] for r in requests]
    assert len(set(ports[:3])) == 1 and len(set(ports[3:])) == 1 and ports[0] != ports[3]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text

