"""The providers' HTTP client against scripted loopback servers (and a loopback proxy).

Each server is an asyncio server in the test's own loop whose handler scripts every byte of a
connection, so framing, keep-alive, failures and timeouts are exercised exactly; it counts the
connections and requests it saw.
"""

from __future__ import annotations

import asyncio
import gzip
import shutil
import ssl
import subprocess
import time
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from generators.providers.http import (
    ConnectError,
    ConnectionLost,
    Headers,
    HTTPClient,
    HTTPError,
    HTTPTimeout,
    ProtocolError,
    ResponseTooLarge,
)
from generators.providers.http import _NoProxy as NoProxy
from generators.providers.http import _Proxies as Proxies

PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hermetic: no proxy or certificate variables from the machine running the tests."""
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


Handler = Callable[["Server", asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Request:
    def __init__(self, line: str, headers: dict[str, str], body: bytes, head: str) -> None:
        self.line, self.headers, self.body, self.head = line, headers, body, head


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """One request off the wire (Content-Length bodies), or None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(lines[0], headers, body, head.decode("latin-1"))


class Server:
    """A loopback server: ``handler(server, reader, writer)`` runs once per connection."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.connections = 0
        self.requests: list[Request] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.closed_by_client = 0
        self.port = 0
        self._server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    def url(self, path: str = "/v1/x") -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}{path}"

    async def next(self, reader: asyncio.StreamReader) -> Request | None:
        request = await read_request(reader)
        if request is None:
            self.closed_by_client += 1
        else:
            self.requests.append(request)
        return request

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(self, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()


def reply(body: bytes = b'{"ok": true}', status: str = "200 OK", extra: str = "",
          version: str = "HTTP/1.1") -> bytes:
    return (f"{version} {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}"
            f"\r\n{extra}\r\n").encode() + body


def serve(*responses: bytes, delay_s: float = 0.0) -> Handler:
    """Answer the server's n-th request with the n-th of ``responses`` (the last repeats)."""
    async def handler(server: Server, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        while await server.next(reader) is not None:
            n = len(server.requests) - 1
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
            await asyncio.sleep(delay_s)
            server.in_flight -= 1
            writer.write(responses[min(n, len(responses) - 1)])
            await writer.drain()
    return handler


def run(coro: Awaitable[Any]) -> Any:
    async def main() -> Any:
        return await asyncio.wait_for(coro, 10)  # a bug must fail the test, never hang it
    return asyncio.run(main())


# -- framing ------------------------------------------------------------------------------------


def test_content_length_and_chunked_bodies_and_the_request_we_send() -> None:
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Multi: a\r\nx-multi: b\r\n\r\n"
               b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n")

    async def main() -> None:
        async with Server(serve(reply(b'{"n": 1}'), chunked)) as server, HTTPClient(4) as client:
            first = await client.post(server.url(), json={"model": "m", "é": [1, 2]},
                                      headers={"Authorization": "Bearer k"}, timeout=2)
            second = await client.post(server.url(), json={}, timeout=2,
                                       headers={"Content-Type": "application/x.kgb+json"})
        assert (first.status_code, first.reason, first.content) == (200, "OK", b'{"n": 1}')
        assert first.headers["Content-Type"] == "application/json" == first.headers.get("CONTENT-TYPE")
        assert second.text == "hello, world" and second.http_version == "HTTP/1.1"
        assert second.headers.get_all("x-multi") == ["a", "b"] and second.headers["X-MULTI"] == "a, b"
        req = server.requests[0]
        assert req.line == "POST /v1/x HTTP/1.1"
        assert req.headers["host"] == f"127.0.0.1:{server.port}"
        assert req.headers["content-type"] == "application/json"
        assert req.headers["accept-encoding"] == "identity" and req.headers["authorization"] == "Bearer k"
        assert req.body == '{"model":"m","é":[1,2]}'.encode()
        assert server.requests[1].headers["content-type"] == "application/x.kgb+json"
        assert server.requests[1].head.lower().count("content-type:") == 1  # theirs, not both
        assert server.connections == 1  # the chunked reply came on the kept-alive connection

    run(main())


def test_a_response_split_into_single_bytes_parses_the_same() -> None:
    whole = (b"HTTP/1.1 100 Continue\r\n\r\n"
             b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n")

    async def handler(server: Server, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        await server.next(reader)
        for i in range(len(whole)):
            writer.write(whole[i:i + 1])
            await writer.drain()
        await server.next(reader)

    async def main() -> None:
        async with Server(handler) as server, HTTPClient() as client:
            response = await client.post(server.url(), content=b"x", timeout=5)
        assert (response.status_code, response.content) == (201, b"abc0123456789abcdef")

    run(main())


def test_read_to_close_and_http_1_0_are_not_reused() -> None:
    heads = [b"HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\n",
             b"HTTP/1.1 200 OK\r\n\r\n",  # no framing at all
             b"HTTP/1.1 200 OK\r\ntransfer-encoding: identity\r\ncontent-length: 3\r\n\r\n"]

    async def handler(server: Server, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        await server.next(reader)
        writer.write(heads[len(server.requests) - 1] + b"all of it, until close")
        await writer.drain()

    async def main() -> None:
        async with Server(handler) as server, HTTPClient() as client:
            bodies = [(await client.post(server.url(), json=1, timeout=2)).text for _ in heads]
        assert bodies == ["all of it, until close"] * 3
        assert server.connections == 3 and len(server.requests) == 3

    run(main())


def test_bytes_beyond_the_response_or_a_long_idle_retire_the_connection() -> None:
    replies = [reply(b"ok") + b"HTTP/1.1 200 OK\r\n", reply(b"ok")]

    async def main() -> None:
        async with Server(serve(*replies)) as server, \
                HTTPClient(keepalive_expiry_s=0.1) as client:
            for _ in range(2):  # the first reply came with extra bytes: out of step, not reused
                assert (await client.post(server.url(), json=0, timeout=2)).text == "ok"
            assert server.connections == 2
            await client.post(server.url(), json=0, timeout=2)
            assert server.connections == 2  # a quick reuse
            await asyncio.sleep(0.2)  # idle longer than keepalive_expiry_s: a new connection
            await client.post(server.url(), json=0, timeout=2)
            assert server.connections == 3 and len(server.requests) == 4

    run(main())


def test_decoding_charset_gzip_and_deflate() -> None:
    text = "grüße " * 200
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    replies = [
        reply(gzip.compress(text.encode()), extra="content-encoding: gzip\r\n"),
        reply(zlib.compress(text.encode()), extra="content-encoding: deflate\r\n"),
        reply(raw_deflate.compress(text.encode()) + raw_deflate.flush(),
              extra="content-encoding: deflate\r\n"),
        reply(gzip.compress(b"one ") + gzip.compress(b"two"), extra="content-encoding: gzip\r\n"),
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=ISO-8859-1\r\ncontent-length: 5"
        b"\r\n\r\ngr\xfc\xdfe",
        reply(b"ok \xff\xfe bad utf-8"),
        reply(b"ok", extra="content-encoding: br\r\n"),
    ]

    async def main() -> list[Any]:
        async with Server(serve(*replies)) as server, HTTPClient() as client:
            out: list[Any] = []
            for _ in replies:
                try:
                    out.append((await client.post(server.url(), json=0, timeout=2)).text)
                except HTTPError as exc:
                    out.append(exc)
            return out

    gz, zl, raw, members, latin, bad, br = run(main())
    assert gz == zl == raw == text and members == "one two"
    assert latin == "grüße" and bad == "ok \ufffd\ufffd bad utf-8"
    assert isinstance(br, ProtocolError) and "br" in str(br)


# -- connections --------------------------------------------------------------------------------


def test_keep_alive_reuses_connections_within_the_bound() -> None:
    async def main() -> None:
        async with Server(serve(reply(), delay_s=0.05)) as server, HTTPClient(3) as client:
            for _ in range(5):
                await client.post(server.url(), json=0, timeout=2)
            assert server.connections == 1  # one after another: one connection
            await asyncio.gather(*(client.post(server.url(), json=0, timeout=5) for _ in range(12)))
            assert server.connections == 3 and server.max_in_flight == 3  # the bound holds
            assert len(server.requests) == 17

    run(main())


def test_connection_close_is_honoured() -> None:
    async def main() -> None:
        async with Server(serve(reply(extra="Connection: close\r\n"))) as server, \
                HTTPClient() as client:
            for _ in range(3):
                assert (await client.post(server.url(), json=0, timeout=2)).status_code == 200
        assert server.connections == 3

    run(main())


def test_a_connection_closed_by_the_server_while_idle_is_retried_once_on_a_new_one() -> None:
    # The race a keep-alive client must survive: the request goes out on a connection the
    # server has just given up on. Here the server answers a connection's first request and
    # drops its second unanswered.
    async def one_per_connection(server: Server, reader: asyncio.StreamReader,
                                 writer: asyncio.StreamWriter) -> None:
        await server.next(reader)
        writer.write(reply(b"fine"))
        await writer.drain()
        await server.next(reader)  # ... and close without a word

    async def main() -> None:
        async with Server(one_per_connection) as server, HTTPClient() as client:
            assert (await client.post(server.url(), json=0, timeout=2)).text == "fine"
            assert (await client.post(server.url(), json=0, timeout=2)).text == "fine"
            assert (server.connections, len(server.requests)) == (2, 3)

    run(main())


def test_a_failure_on_a_new_connection_or_the_retry_is_reported() -> None:
    async def first_ok_then_drop_everything(server: Server, reader: asyncio.StreamReader,
                                            writer: asyncio.StreamWriter) -> None:
        request = await server.next(reader)
        if request is not None and len(server.requests) == 1:
            writer.write(reply())
            await writer.drain()
            await server.next(reader)

    async def main() -> None:
        async with Server(first_ok_then_drop_everything) as server, HTTPClient() as client:
            await client.post(server.url(), json=0, timeout=2)
            with pytest.raises(ConnectionLost) as lost:  # reused: dropped; retried: dropped too
                await client.post(server.url(), json=0, timeout=2)
            assert lost.value.before_response
            assert (server.connections, len(server.requests)) == (2, 3)  # one retry, no more
            with pytest.raises(ConnectionLost):  # a new connection's failure: no retry at all
                await client.post(server.url(), json=0, timeout=2)
            assert (server.connections, len(server.requests)) == (3, 4)

    run(main())


def test_a_connection_the_server_closed_while_idle_is_not_used_again() -> None:
    async def close_after_reply(server: Server, reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
        await server.next(reader)
        writer.write(reply())  # keep-alive by the headers, then closed anyway
        await writer.drain()

    async def main() -> None:
        async with Server(close_after_reply) as server, HTTPClient() as client:
            await client.post(server.url(), json=0, timeout=2)
            await asyncio.sleep(0.05)  # the FIN arrives while the connection is idle
            await client.post(server.url(), json=0, timeout=2)
            assert (server.connections, len(server.requests)) == (2, 2)  # no failed attempt

    run(main())


def test_a_connection_that_talks_out_of_turn_is_dropped() -> None:
    async def chatty(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await server.next(reader) is not None:
            writer.write(reply(b"ok"))
            await writer.drain()
            if len(server.requests) == 1:
                await asyncio.sleep(0.03)
                writer.write(b"HTTP/1.1 408 Request Timeout\r\n\r\n")  # unasked, while idle

    async def main() -> None:
        async with Server(chatty) as server, HTTPClient() as client:
            await client.post(server.url(), json=0, timeout=2)
            await asyncio.sleep(0.1)
            assert (await client.post(server.url(), json=0, timeout=2)).text == "ok"
            assert (server.connections, len(server.requests)) == (2, 2)

    run(main())


def test_the_server_closing_mid_response_is_connection_lost() -> None:
    async def half(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.next(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly some")
        await writer.drain()

    async def main() -> None:
        async with Server(half) as server, HTTPClient() as client:
            with pytest.raises(ConnectionLost, match="before the response was complete") as lost:
                await client.post(server.url(), json=0, timeout=2)
        assert not lost.value.before_response

    run(main())


def test_aclose_closes_every_connection_and_fails_what_is_in_flight() -> None:
    async def main() -> None:
        async with Server(serve(reply(), delay_s=0.2)) as server:
            client = HTTPClient(4)
            await asyncio.gather(*(client.post(server.url(), json=0, timeout=2) for _ in range(3)))
            busy = asyncio.ensure_future(client.post(server.url(), json=0, timeout=2))
            await asyncio.sleep(0.05)
            await client.aclose()
            with pytest.raises(HTTPError, match="closed"):
                await busy
            await asyncio.sleep(0.3)  # the busy connection's handler wakes up to find it gone
            assert server.connections == 3 and server.closed_by_client == 3
            with pytest.raises(HTTPError, match="closed"):
                await client.post(server.url(), json=0, timeout=2)

    run(main())


def test_refused_connection_is_connect_error() -> None:
    async def main() -> None:
        async with HTTPClient() as client:
            with pytest.raises(ConnectError, match="cannot connect to 127.0.0.1:9"):
                await client.post("http://127.0.0.1:9/x", json=0, timeout=2)

    run(main())


# -- timeouts and limits ------------------------------------------------------------------------


def test_a_server_that_never_answers_times_out() -> None:
    async def silent(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.next(reader)
        await server.next(reader)  # until the client goes

    async def main() -> float:
        async with Server(silent) as server, HTTPClient() as client:
            t0 = time.monotonic()
            with pytest.raises(HTTPTimeout, match="0.2s"):
                await client.post(server.url(), json=0, timeout=0.2)
            return time.monotonic() - t0

    assert 0.19 <= run(main()) < 1.0


def test_a_server_that_trickles_times_out_on_the_whole_request() -> None:
    async def trickle(server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.next(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n")
        for _ in range(1000):  # a byte every 20 ms: every read is quick, the whole is not
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(0.02)

    async def main() -> float:
        async with Server(trickle) as server, HTTPClient() as client:
            t0 = time.monotonic()
            with pytest.raises(HTTPTimeout):
                await client.post(server.url(), json=0, timeout=0.3)
            return time.monotonic() - t0

    assert 0.29 <= run(main()) < 1.0


def test_waiting_for_a_free_connection_is_bounded_by_the_timeout() -> None:
    async def main() -> None:
        async with Server(serve(reply(), delay_s=0.5)) as server, HTTPClient(1) as client:
            slow = asyncio.ensure_future(client.post(server.url(), json=0, timeout=2))
            await asyncio.sleep(0.02)
            with pytest.raises(HTTPTimeout, match="came free"):
                await client.post(server.url(), json=0, timeout=0.1)
            assert (await slow).status_code == 200
            assert server.connections == 1

    run(main())


def test_oversized_bodies_are_refused() -> None:
    big = b"y" * 5000
    replies = [reply(big),
               b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + b"400\r\n" + b"z" * 1024
               + b"\r\n" + b"400\r\n" + b"z" * 1024 + b"\r\n0\r\n\r\n",
               reply(gzip.compress(big), extra="content-encoding: gzip\r\n"),
               reply(b"small")]

    async def main() -> list[Any]:
        async with Server(serve(*replies)) as server, HTTPClient(max_body_bytes=2000) as client:
            out: list[Any] = []
            for _ in replies:
                try:
                    out.append((await client.post(server.url(), json=0, timeout=2)).text)
                except HTTPError as exc:
                    out.append(exc)
            return out

    *refused, small = run(main())
    assert all(isinstance(e, ResponseTooLarge) and "2000" in str(e) for e in refused), refused
    assert small == "small"


@pytest.mark.parametrize("garbage, message", [
    (b"HTP/1.1 200 OK\r\n\r\n", "status line"),
    (b"HTTP/1.1 2x0 OK\r\ncontent-length: 0\r\n\r\n", "status line"),
    (b"SSH-2.0-OpenSSH_9.6\r\n", "status line"),
    (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n", "chunk size"),
    (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabXY\r\n0\r\n\r\n", "CRLF"),
    (b"HTTP/1.1 200 OK\r\ncontent-length: 3, 4\r\n\r\nabc", "content-length"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "header line"),
    (b"HTTP/1.1 200 OK\r\nx-big: " + b"a" * 70_000 + b"\r\n\r\n", "exceed"),
])
def test_malformed_responses_are_protocol_errors_at_once(garbage: bytes, message: str) -> None:
    async def handler(server: Server, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        await server.next(reader)
        writer.write(garbage)
        await writer.drain()
        await server.next(reader)  # stay open: the client must not wait for more

    async def main() -> float:
        async with Server(handler) as server, HTTPClient() as client:
            t0 = time.monotonic()
            with pytest.raises(ProtocolError, match=message):
                await client.post(server.url(), json=0, timeout=3)
            return time.monotonic() - t0

    assert run(main()) < 1.0  # recognised, not timed out


def test_header_injection_is_refused_without_showing_the_value() -> None:
    async def main() -> None:
        async with HTTPClient() as client:
            with pytest.raises(HTTPError, match="authorization") as bad:
                await client.post("http://127.0.0.1:9/x", json=0, timeout=1,
                                  headers={"authorization": "Bearer sk-secret\r\nX-Evil: 1"})
            assert "sk-secret" not in str(bad.value)

    run(main())


def test_headers_mapping() -> None:
    headers = Headers([("Retry-After", "2"), ("Set-Thing", "a"), ("set-thing", "b")])
    assert headers.get("retry-after") == "2" and "RETRY-AFTER" in headers and "x" not in headers
    assert dict(headers) == {"retry-after": "2", "set-thing": "a, b"} and len(headers) == 2
    assert headers.multi_items()[2] == ("set-thing", "b") and headers.get("nope", "d") == "d"


# -- proxies ------------------------------------------------------------------------------------


class Proxy:
    """A loopback proxy: CONNECT tunnels (recording what it was asked), and absolute-form http
    requests answered by itself (recording the request line)."""

    def __init__(self) -> None:
        self.connects: list[Request] = []
        self.forwarded: list[Request] = []
        self.refuse = False
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
            request = await read_request(reader)
            if request is None:
                return
            method, target, _ = request.line.split(" ", 2)
            if method != "CONNECT":
                self.forwarded.append(request)
                writer.write(reply(b"from the proxy"))
                await writer.drain()
                return
            self.connects.append(request)
            if self.refuse:
                writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
                return
            host, _, port = target.rpartition(":")
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


def test_http_through_a_proxy_uses_absolute_form_and_basic_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        async with Proxy() as proxy, Server(serve(reply(b"direct"))) as origin:
            monkeypatch.setenv("HTTP_PROXY", f"http://u%40x:p%3Ass@127.0.0.1:{proxy.port}")
            async with HTTPClient() as client:
                via = await client.post(origin.url("/v1/chat?x=1"), json=0, timeout=2)
            assert via.text == "from the proxy" and origin.connections == 0
            (seen,) = proxy.forwarded
            assert seen.line == f"POST http://127.0.0.1:{origin.port}/v1/chat?x=1 HTTP/1.1"
            assert seen.headers["host"] == f"127.0.0.1:{origin.port}"
            assert seen.headers["proxy-authorization"] == "Basic dUB4OnA6c3M="  # u@x:p:ss
            # NO_PROXY (here in lower case) sends the same URL direct.
            monkeypatch.setenv("no_proxy", "example.com, 127.0.0.0/8")
            async with HTTPClient() as client:
                assert (await client.post(origin.url(), json=0, timeout=2)).text == "direct"
            assert len(proxy.forwarded) == 1 and origin.connections == 1

    run(main())


def test_no_proxy_and_variable_precedence() -> None:
    rules = NoProxy("example.com, .internal.net,*.corp, 10.0.0.0/8, ::1, [fd00::5]:8443, api:8080")
    assert rules.matches("example.com", 443) and rules.matches("a.b.example.com", 80)
    assert not rules.matches("notexample.com", 443)
    assert rules.matches("x.internal.net", 1) and rules.matches("internal.net", 1)
    assert rules.matches("h.corp", 1) and not rules.matches("corpx", 1)
    assert rules.matches("10.1.2.3", 1) and not rules.matches("11.0.0.1", 1)
    assert rules.matches("::1", 5) and rules.matches("fd00::5", 8443) and not rules.matches("fd00::5", 443)
    assert rules.matches("api", 8080) and not rules.matches("api", 80)
    assert NoProxy("*").matches("anything", 1) and not NoProxy("").matches("anything", 1)
    env = {"HTTPS_PROXY": "http://upper:1", "https_proxy": "lower:2", "ALL_PROXY": "http://all:3"}
    proxies = Proxies(env)
    https, http = proxies.lookup("https", "h", 443), proxies.lookup("http", "h", 80)
    assert https is not None and (https.host, https.port) == ("lower", 2)  # lower case first
    assert http is not None and (http.host, http.port, http.label) == ("all", 3, "http://all:3")
    socks = Proxies({"ALL_PROXY": "socks5://user:pw@s:1080"}).lookup("http", "h", 80)
    assert socks is not None and "only http:// proxies" in socks.error and "pw" not in socks.error
    assert Proxies({}).lookup("https", "h", 443) is None


# -- TLS ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost (openssl; skipped without it)."""
    out = tmp_path_factory.mktemp("tls")
    cert, key = out / "cert.pem", out / "key.pem"
    try:
        import cryptography  # noqa: F401
    except ImportError:
        pass
    else:
        _make_cert_with_cryptography(cert, key)
        return cert, key
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("neither the cryptography package nor the openssl binary is available to "
                    "make a test certificate")
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=kgb-test",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=30)
    return cert, key


def _make_cert_with_cryptography(cert: Path, key: Path) -> None:
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kgb-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    built = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
             .public_key(private.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=2))
             .add_extension(x509.SubjectAlternativeName(
                 [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                 critical=False)
             .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
             .sign(private, hashes.SHA256()))
    cert.write_bytes(built.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))


def _server_context(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    return context


def test_tls_verifies_against_ssl_cert_file_direct_and_through_connect(
        certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        async with Server(serve(reply(b"secret")), tls=_server_context(certificate)) as origin, \
                Proxy() as proxy:
            # Not trusted yet: the self-signed certificate is refused.
            async with HTTPClient() as client:
                with pytest.raises(ConnectError, match="certificate verify failed"):
                    await client.post(origin.url(), json=0, timeout=2)
            monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
            async with HTTPClient() as client:
                for _ in range(2):
                    assert (await client.post(origin.url(), json=0, timeout=2)).text == "secret"
            assert origin.connections == 1  # kept alive (a refused handshake never got here)
            # Through the proxy: a CONNECT tunnel with TLS to the origin inside it.
            monkeypatch.setenv("https_proxy", f"http://bob:pw@127.0.0.1:{proxy.port}")
            async with HTTPClient() as client:
                for _ in range(2):
                    assert (await client.post(origin.url(), json=0, timeout=2)).text == "secret"
            (tunnel,) = proxy.connects  # one tunnel, reused for the second request
            assert tunnel.line == f"CONNECT 127.0.0.1:{origin.port} HTTP/1.1"
            assert tunnel.headers["proxy-authorization"] == "Basic Ym9iOnB3"  # bob:pw
            assert origin.connections == 2 and not proxy.forwarded
            # A proxy that refuses the tunnel: a ConnectError that says so.
            proxy.refuse = True
            async with HTTPClient() as client:
                with pytest.raises(ConnectError, match="refused a tunnel.*407"):
                    await client.post(origin.url(), json=0, timeout=2)

    run(main())


def test_an_unsupported_proxy_scheme_fails_requests_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")

    async def main() -> None:
        async with HTTPClient() as client:
            with pytest.raises(ConnectError, match="only http:// proxies"):
                await client.post("http://127.0.0.1:9/x", json=0, timeout=1)

    run(main())
