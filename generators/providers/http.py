"""The providers' HTTP/1.1 client: POST a JSON body, get the whole reply, on asyncio callbacks.

Why our own and not httpx: the providers need little — one method, a JSON body, a complete
(never streamed) reply, keep-alive, TLS, proxies from the environment and one deadline per
request — and httpx's layers (httpx, httpcore, anyio) cost about 2.5 ms of CPU per request; at
thousands of requests in flight that was half a core of the coordinator (issue #6). Here a
connection is an :class:`asyncio.Protocol` whose ``data_received`` parses the response as it
arrives; a request costs one write, one future and one timer (measured in docs/BENCHMARKS.md,
"HTTP client CPU per request"; ``bench/http_client.py``).

What it does:

* Requests: ``Host``, ``User-Agent``, ``Accept``, ``Accept-Encoding: identity`` and
  ``Content-Length`` are ours; the caller's headers are sent as given (and override the
  defaults). Identity, because replies are a few KB and their time is the model's: compressing
  costs the server CPU and decompressing costs ours, for no gain. A server that compresses
  anyway is understood: gzip and deflate (zlib or raw) bodies are decoded, within the size limit.
* Responses: Content-Length, chunked, or read until the server closes; 1xx are skipped;
  :class:`Headers` are case-insensitive, repeated headers joined with ", " (``get_all`` keeps
  them apart); :attr:`Response.text` is decoded by the ``charset`` of Content-Type (UTF-8 by
  default, undecodable bytes replaced). Bodies over ``max_body_bytes`` (64 MiB) are refused.
* Connections: a keep-alive pool per (scheme, host, port, proxy) of at most ``max_connections``
  (the endpoint's ``max_concurrency``). A connection the server ends (``Connection: close``,
  HTTP/1.0, read-to-close, EOF, extra bytes) is not reused, nor one idle longer than
  ``keepalive_expiry_s`` (4 s: just under the 5 s that uvicorn, under vLLM and SGLang, keeps an
  idle connection). A request that fails on a *reused* connection before any response byte
  arrived (the server closed it while it was idle) is sent once more on a new connection; every
  other failure is the caller's to handle (the providers retry, with idempotency keys).
* https with ``ssl.create_default_context()``: certificates and host names verified, SNI,
  ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` honoured as OpenSSL honours them.
* Proxies from the environment (``trust_env``, as httpx did): ``HTTP_PROXY``, ``HTTPS_PROXY``,
  ``ALL_PROXY`` and ``NO_PROXY``, lower-case names first. An http URL goes to the proxy in
  absolute form; an https URL through a ``CONNECT`` tunnel; ``user:password@`` in the proxy URL
  becomes ``Proxy-Authorization: Basic``. Only ``http://`` proxies are supported; another scheme
  fails each request with a :class:`ConnectError` that says so. ``NO_PROXY`` takes ``*``, host
  names (matching their subdomains; a leading ``.`` or ``*.`` is allowed), ``host:port``, IP
  addresses and CIDR ranges.
* One deadline per request (``timeout``) bounds everything: waiting for a free connection,
  connecting, TLS, the proxy's CONNECT, writing and reading. Failures are :class:`HTTPError`\\ s:
  :class:`HTTPTimeout`, :class:`ConnectError`, :class:`ConnectionLost`, :class:`ProtocolError`
  (a malformed response: never a hang or a crash) and :class:`ResponseTooLarge`.

A client belongs to the event loop that first uses it. It is not picklable; the providers make
one per loop and drop it when pickled.
"""

from __future__ import annotations

import asyncio
import base64
import codecs
import collections
import ipaddress
import logging
import os
import re
import ssl
import zlib
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

import orjson

__all__ = ["ConnectError", "ConnectionLost", "HTTPClient", "HTTPError", "HTTPTimeout", "Headers",
           "ProtocolError", "Response", "ResponseTooLarge"]

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
MAX_HEAD_BYTES = 64 * 1024       # status line and headers (and, apart, the trailers)
MAX_CHUNK_LINE_BYTES = 1024
KEEPALIVE_EXPIRY_S = 4.0
USER_AGENT = "kernelgenbench"
_TARGET_CACHE = 1024             # parsed URLs kept (the providers use one or two per endpoint)
_CLOSE_WAIT_S = 1.0              # aclose waits this long for graceful closes, then aborts


class HTTPError(Exception):
    """Any failure of a request: the base of this module's errors."""


class HTTPTimeout(HTTPError):
    """The request's deadline passed (waiting for a connection, connecting, or the response)."""


class ConnectError(HTTPError):
    """No connection: refused, unresolvable, TLS failure, or the proxy refused the tunnel."""


class ConnectionLost(HTTPError):
    """The connection closed or reset after it was made, before the response was complete.
    ``before_response``: not one byte of the response had arrived."""

    def __init__(self, message: str, *, before_response: bool = False) -> None:
        super().__init__(message)
        self.before_response = before_response


class ProtocolError(HTTPError):
    """The server's bytes are not an HTTP/1.x response we can read."""


class ResponseTooLarge(HTTPError):
    """The response body (or its decoded form) exceeds the client's ``max_body_bytes``."""


class Headers(Mapping[str, str]):
    """Response headers: case-insensitive; a repeated header reads as its values joined by ", "."""

    __slots__ = ("_items", "_map")

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self._items = items
        joined: dict[str, str] = {}
        for name, value in items:
            key = name.lower()
            joined[key] = f"{joined[key]}, {value}" if key in joined else value
        self._map = joined

    def __getitem__(self, name: str) -> str:
        return self._map[name.lower()]

    def get(self, name: str, default: Any = None) -> Any:  # the Mapping default, without a raise
        return self._map.get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._map

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def get_all(self, name: str) -> list[str]:
        """Every value of ``name``, in the order received."""
        key = name.lower()
        return [v for n, v in self._items if n.lower() == key]

    def multi_items(self) -> list[tuple[str, str]]:
        """Every (name, value) as received, names as the server spelt them."""
        return list(self._items)

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


class Response:
    """A complete response: status, headers and the (decoded) body."""

    __slots__ = ("_text", "content", "headers", "http_version", "reason", "status_code")

    def __init__(self, status_code: int, reason: str, http_version: str, headers: Headers,
                 content: bytes) -> None:
        self.status_code = status_code
        self.reason = reason
        self.http_version = http_version
        self.headers = headers
        self.content = content
        self._text: str | None = None

    @property
    def charset(self) -> str:
        """The Content-Type's charset when Python knows it, else utf-8."""
        for param in self.headers.get("content-type", "").split(";")[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "charset":
                value = value.strip().strip('"').strip()
                try:
                    return codecs.lookup(value).name
                except LookupError:
                    break
        return "utf-8"

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.content.decode(self.charset, errors="replace")
        return self._text

    def __repr__(self) -> str:
        return f"<Response {self.status_code} {self.reason!r}, {len(self.content)} bytes>"


# -- parsing a response, as the bytes arrive -----------------------------------------------------

_IDLE, _HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _CLOSE = range(8)
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_DIGITS = re.compile(r"[0-9]{1,19}")


class _Connection(asyncio.Protocol):
    """One connection: writes a request, parses the response in ``data_received``, and hands it
    to the waiting request's future. It never raises into asyncio: every failure fails the
    future and aborts the connection."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_body: int) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = loop.create_future()
        self.closed = False
        self.used = 0               # requests sent on it
        self.idle_since = 0.0
        self.reusable = False       # the last response left it fit for another request
        self._max_body = max_body
        self._waiter: asyncio.Future[Response] | None = None
        self._method = ""
        self._state = _IDLE
        self._buf = bytearray()
        self._got_bytes = False
        self._keep_alive = False
        self._status = 0
        self._reason = ""
        self._version = ""
        self._headers = Headers([])
        self._parts: list[bytes] = []
        self._body_len = 0
        self._remaining = 0
        self._trailer_len = 0

    # -- asyncio's callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._state == _IDLE:  # bytes nobody asked for: the connection is not ours to trust
            self.abort()
            return
        self._got_bytes = True
        try:
            self._feed(data)
        except HTTPError as exc:
            self._fail(exc)
        except Exception as exc:  # noqa: BLE001 - a parser bug must not hang the request
            self._fail(ProtocolError(f"unreadable response ({type(exc).__name__}: {exc})"))

    def eof_received(self) -> bool:
        return False  # the transport closes itself; connection_lost finishes a read-to-close body

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if not self.lost.done():
            self.lost.set_result(None)
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        state, self._state = self._state, _IDLE
        why = f": {exc}" if exc is not None else ""
        if state == _CLOSE and exc is None:
            try:
                self._finish(bytes(self._buf))
            except HTTPError as err:
                waiter.set_exception(err)
        elif state == _HEAD and self._buf and not b"HTTP/".startswith(bytes(self._buf[:5])):
            waiter.set_exception(ProtocolError(f"malformed status line {bytes(self._buf[:100])!r}"))
        elif not self._got_bytes:
            waiter.set_exception(ConnectionLost(
                "the server closed the connection before sending a response" + why,
                before_response=True))
        else:
            waiter.set_exception(ConnectionLost(
                "the server closed the connection before the response was complete" + why))

    # -- the request side

    def start(self, data: bytes, method: str, waiter: asyncio.Future[Response]) -> None:
        """Send one request; its response (or failure) completes ``waiter``."""
        self._waiter = waiter
        self._method = method
        self._state = _HEAD
        self._got_bytes = False
        self._buf.clear()
        self._parts = []
        self._body_len = 0
        self.reusable = False
        self.used += 1
        if self.closed or self.transport is None or self.transport.is_closing():
            self._state = _IDLE
            waiter.set_exception(ConnectionLost("the connection was already closed",
                                                before_response=True))
            return
        self.transport.write(data)

    def on_deadline(self, message: str) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(HTTPTimeout(message))
            self.abort()

    def abort(self) -> None:
        self.closed = True
        self.reusable = False
        self._state = _IDLE
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: HTTPError) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.abort()

    # -- the parser

    def _feed(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        while True:
            state = self._state
            if state == _HEAD:
                end = buf.find(b"\r\n\r\n")
                lf = buf.find(b"\n\n", 0, end if end >= 0 else len(buf))
                if lf >= 0:
                    end, skip = lf, 2
                elif end >= 0:
                    skip = 4
                else:
                    if len(buf) >= 5 and not buf.startswith(b"HTTP/"):
                        raise ProtocolError(f"malformed status line {bytes(buf[:100])!r}")
                    if len(buf) > MAX_HEAD_BYTES:
                        raise ProtocolError(f"response headers exceed {MAX_HEAD_BYTES} bytes")
                    return
                if end > MAX_HEAD_BYTES:
                    raise ProtocolError(f"response headers exceed {MAX_HEAD_BYTES} bytes")
                head = bytes(buf[:end])
                del buf[:end + skip]
                self._head(head)
            elif state == _LENGTH:
                if len(buf) < self._remaining:
                    return
                body = bytes(buf[:self._remaining])
                del buf[:self._remaining]
                self._finish(body)
                return
            elif state == _CHUNK_SIZE:
                nl = buf.find(b"\n")
                if nl < 0:
                    if len(buf) > MAX_CHUNK_LINE_BYTES:
                        raise ProtocolError("chunk size line too long")
                    return
                line = bytes(buf[:nl])
                del buf[:nl + 1]
                size_text = line.split(b";", 1)[0].strip()
                if not _HEX.fullmatch(size_text):
                    raise ProtocolError(f"malformed chunk size line {line[:40]!r}")
                size = int(size_text, 16)
                if size == 0:
                    self._state = _TRAILER
                    self._trailer_len = 0
                else:
                    if self._body_len + size > self._max_body:
                        raise ResponseTooLarge(f"response body exceeds {self._max_body} bytes")
                    self._remaining = size
                    self._state = _CHUNK_DATA
            elif state == _CHUNK_DATA:
                take = min(self._remaining, len(buf))
                if take == 0:
                    return
                self._parts.append(bytes(buf[:take]))
                del buf[:take]
                self._body_len += take
                self._remaining -= take
                if self._remaining:
                    return
                self._state = _CHUNK_END
            elif state == _CHUNK_END:
                if buf.startswith(b"\r\n"):
                    del buf[:2]
                elif buf.startswith(b"\n"):
                    del buf[:1]
                elif not buf or buf == b"\r":  # the rest of the CRLF is still to come
                    return
                else:
                    raise ProtocolError("chunk data not followed by CRLF")
                self._state = _CHUNK_SIZE
            elif state == _TRAILER:
                nl = buf.find(b"\n")
                if nl < 0:
                    if self._trailer_len + len(buf) > MAX_HEAD_BYTES:
                        raise ProtocolError(f"response trailers exceed {MAX_HEAD_BYTES} bytes")
                    return
                self._trailer_len += nl + 1
                if self._trailer_len > MAX_HEAD_BYTES:
                    raise ProtocolError(f"response trailers exceed {MAX_HEAD_BYTES} bytes")
                empty = buf[:nl].rstrip(b"\r") == b""
                del buf[:nl + 1]
                if empty:
                    self._finish(b"".join(self._parts))
                    return
            elif state == _CLOSE:
                if len(buf) > self._max_body:
                    raise ResponseTooLarge(f"response body exceeds {self._max_body} bytes")
                return
            else:
                return

    def _head(self, head: bytes) -> None:
        """Read a status line and headers; choose how the body is framed."""
        lines = head.decode("latin-1").split("\n")
        status_line = lines[0].rstrip("\r")
        parts = status_line.split(" ", 2)
        if (len(parts) < 2 or parts[0] not in ("HTTP/1.1", "HTTP/1.0") or len(parts[1]) != 3
                or not parts[1].isdigit() or parts[1][0] == "0"):
            raise ProtocolError(f"malformed status line {status_line[:100]!r}")
        status = int(parts[1])
        items: list[tuple[str, str]] = []
        for raw in lines[1:]:
            line = raw[:-1] if raw.endswith("\r") else raw
            if not line:
                continue
            if line[0] in " \t":  # an obsolete folded continuation of the previous header
                if not items:
                    raise ProtocolError(f"malformed header line {line[:100]!r}")
                items[-1] = (items[-1][0], f"{items[-1][1]} {line.strip()}")
                continue
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip() or " " in name:
                raise ProtocolError(f"malformed header line {line[:100]!r}")
            items.append((name, value.strip()))
        if 100 <= status < 200:
            if status == 101:
                raise ProtocolError("the server switched protocols (HTTP 101)")
            return  # informational (100 Continue, 103 Early Hints): the real response follows
        headers = Headers(items)
        self._status, self._reason, self._version, self._headers = (
            status, parts[2] if len(parts) > 2 else "", parts[0], headers)
        connection = headers.get("connection")
        self._keep_alive = parts[0] == "HTTP/1.1" and not (
            connection is not None and "close" in connection.lower())
        if self._method == "CONNECT" and 200 <= status < 300:
            self._finish(b"")  # the tunnel is open; what follows is the tunnelled protocol
            return
        if self._method == "HEAD" or status in (204, 304):
            self._finish(b"")
            return
        transfer = headers.get("transfer-encoding")
        length = headers.get("content-length")
        if transfer is not None:
            codings = [c.strip().lower() for c in transfer.split(",") if c.strip()]
            if length is not None:
                self._keep_alive = False  # both framings given: read it, then do not trust it
            if codings and codings[-1] == "chunked":
                if any(c not in ("chunked", "identity") for c in codings):
                    raise ProtocolError(f"unsupported transfer-encoding {transfer!r}")
                self._state = _CHUNK_SIZE
            else:
                self._keep_alive = False
                self._state = _CLOSE
        elif length is not None:
            values = {v.strip() for v in length.split(",")}
            if len(values) != 1 or not _DIGITS.fullmatch(next(iter(values))):
                raise ProtocolError(f"malformed content-length {length[:40]!r}")
            n = int(values.pop())
            if n > self._max_body:
                raise ResponseTooLarge(f"response body of {n} bytes exceeds {self._max_body}")
            if n == 0:
                self._finish(b"")
                return
            self._remaining = n
            self._state = _LENGTH
        else:
            self._keep_alive = False
            self._state = _CLOSE

    def _finish(self, body: bytes) -> None:
        self._state = _IDLE
        if self._buf:  # more than one response's worth of bytes: the connection is out of step
            self._keep_alive = False
            self._buf.clear()
        headers = self._headers
        encoding = headers.get("content-encoding")
        if encoding is not None and body:
            body = _decode(body, encoding, self._max_body)
        self.reusable = self._keep_alive and not self.closed
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(Response(self._status, self._reason, self._version, headers, body))


def _decode(body: bytes, encoding: str, limit: int) -> bytes:
    """Undo the Content-Encoding (gzip, deflate; the last one applied first)."""
    for coding in reversed([c.strip().lower() for c in encoding.split(",") if c.strip()]):
        if coding == "identity":
            continue
        if coding in ("gzip", "x-gzip"):
            wbits = 16 + zlib.MAX_WBITS
        elif coding == "deflate":  # a zlib stream as the RFC says, or raw deflate as some send
            zlib_header = len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
            wbits = zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS
        else:
            raise ProtocolError(f"unsupported content-encoding {coding!r}")
        out: list[bytes] = []
        size = 0
        data = body
        while data:  # gzip allows several members one after another
            inflater = zlib.decompressobj(wbits)
            try:
                chunk = inflater.decompress(data, limit + 1 - size)
                if inflater.unconsumed_tail:
                    raise ResponseTooLarge(f"decoded response body exceeds {limit} bytes")
                chunk += inflater.flush()
            except zlib.error as exc:
                raise ProtocolError(f"undecodable {coding} body: {exc}") from None
            size += len(chunk)
            if size > limit:
                raise ResponseTooLarge(f"decoded response body exceeds {limit} bytes")
            if not inflater.eof:
                raise ProtocolError(f"truncated {coding} body")
            out.append(chunk)
            data = inflater.unused_data if wbits > 16 else b""
        body = b"".join(out)
    return body


# -- proxies from the environment ----------------------------------------------------------------


class _Proxy(NamedTuple):
    host: str
    port: int
    authorization: str   # "Basic ..." or ""
    label: str           # for keys and messages: never holds the credentials
    error: str = ""      # set when the proxy cannot be used (requests fail with it)


def _env(environ: Mapping[str, str], name: str) -> str:
    """``name`` in lower case, else in upper case (curl's and urllib's order); "" when unset."""
    return (environ.get(name.lower()) or environ.get(name.upper()) or "").strip()


def _parse_proxy(raw: str, variable: str) -> _Proxy:
    text = raw if "://" in raw else "http://" + raw
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    try:
        port = parts.port or 80
    except ValueError:
        return _Proxy("", 0, "", f"{scheme}://{host}", f"{variable} has a bad port")
    label = f"{scheme}://{host}:{port}"
    if scheme != "http":
        return _Proxy(host, port, "", label, f"{variable} names a {scheme}:// proxy ({label}); only "
                      "http:// proxies are supported (add the host to NO_PROXY to go direct)")
    if not host:
        return _Proxy("", 0, "", label, f"{variable} names no proxy host")
    authorization = ""
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    return _Proxy(host, port, authorization, label)


class _NoProxy:
    """The NO_PROXY list: ``*``, names (and their subdomains), ``host:port``, IPs, CIDR ranges."""

    def __init__(self, raw: str) -> None:
        self.everything = False
        self.names: list[tuple[str, int | None]] = []
        self.networks: list[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, int | None]] = []
        for entry in re.split(r"[,\s]+", raw.strip()):
            if not entry:
                continue
            if entry == "*":
                self.everything = True
                continue
            host, port = entry, None
            if entry.startswith("["):  # [v6] or [v6]:port
                host, _, rest = entry[1:].partition("]")
                port = int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
            elif entry.count(":") == 1:
                name, _, digits = entry.partition(":")
                if digits.isdigit():
                    host, port = name, int(digits)
            try:
                self.networks.append((ipaddress.ip_network(host, strict=False), port))
            except ValueError:
                self.names.append((host.lower().lstrip("*").lstrip("."), port))

    def matches(self, host: str, port: int) -> bool:
        if self.everything:
            return True
        try:
            address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
        except ValueError:
            address = None
        if address is not None:
            for network, want in self.networks:
                if address in network and want in (None, port):
                    return True
        host = host.lower().rstrip(".")
        for name, want in self.names:
            if name and (host == name or host.endswith("." + name)) and want in (None, port):
                return True
        return False


class _Proxies:
    """The proxy for each URL scheme, read once from the environment."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        every = _env(environ, "all_proxy")
        self.by_scheme: dict[str, _Proxy | None] = {}
        for scheme in ("http", "https"):
            raw = _env(environ, f"{scheme}_proxy")
            variable = f"{scheme.upper()}_PROXY"
            if not raw and every:
                raw, variable = every, "ALL_PROXY"
            self.by_scheme[scheme] = _parse_proxy(raw, variable) if raw else None
        self.no_proxy = _NoProxy(_env(environ, "no_proxy"))

    def lookup(self, scheme: str, host: str, port: int) -> _Proxy | None:
        proxy = self.by_scheme.get(scheme)
        if proxy is None or self.no_proxy.matches(host, port):
            return None
        return proxy


# -- the pool and the client ---------------------------------------------------------------------


class _Pool:
    """Keep-alive connections to one origin (through one proxy): at most ``limit``, and
    requests wait first come, first served for one to come free."""

    def __init__(self, client: HTTPClient, scheme: str, host: str, port: int, authority: str,
                 proxy: _Proxy | None) -> None:
        self.client = client
        self.scheme, self.host, self.port, self.authority, self.proxy = scheme, host, port, authority, proxy
        self.limit = client.max_connections
        self.idle: list[_Connection] = []
        self.conns: set[_Connection] = set()
        self.total = 0            # connections open or being opened (slots taken)
        self.waiters: collections.deque[asyncio.Future[_Connection | None]] = collections.deque()
        # http through a proxy: the proxy's credentials travel with every request
        self.extra_head = (f"proxy-authorization: {proxy.authorization}\r\n"
                           if proxy is not None and scheme == "http" and proxy.authorization else "")

    async def acquire(self, loop: asyncio.AbstractEventLoop, deadline: float, timeout: float,
                      fresh: bool = False) -> _Connection:
        idle = self.idle
        if fresh:
            if self.total >= self.limit and idle:  # make room for a new connection
                self._discard(idle.pop())
        else:
            now = loop.time()
            while idle:
                conn = idle.pop()
                transport = conn.transport
                if (conn.closed or transport is None or transport.is_closing()
                        or now - conn.idle_since > self.client.keepalive_expiry_s):
                    self._discard(conn)
                    continue
                return conn
        if self.total < self.limit:
            self.total += 1
            return await self._open(loop, deadline, timeout)
        waiter: asyncio.Future[_Connection | None] = loop.create_future()
        self.waiters.append(waiter)
        timer = loop.call_at(deadline, _expire, waiter,
                             f"no connection to {self.authority} came free within {timeout:.3g}s")
        try:
            got = await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._hand_back(waiter.result())  # handed to us just as we were cancelled
            raise
        finally:
            timer.cancel()
        if got is not None and fresh:
            self._close(got)  # keep its slot for the new connection
            got = None
        if got is None:  # a slot was reserved for us
            return await self._open(loop, deadline, timeout)
        return got

    async def _open(self, loop: asyncio.AbstractEventLoop, deadline: float, timeout: float) -> _Connection:
        try:
            conn = await self.client._connect(self, loop, deadline, timeout)
        except BaseException:
            self._slot_freed()
            raise
        self.conns.add(conn)
        return conn

    def release(self, conn: _Connection, ok: bool) -> None:
        """Put ``conn`` back after a request; ``ok``: its response was read completely."""
        if not (ok and conn.reusable and not conn.closed and not self.client.closed):
            self._discard(conn)
            return
        conn.idle_since = conn.loop.time()
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        self.idle.append(conn)

    def _hand_back(self, got: _Connection | None) -> None:
        if got is None:
            self._slot_freed()
        else:
            self.release(got, True)

    def _close(self, conn: _Connection) -> None:
        self.conns.discard(conn)
        if conn.closed:
            return
        if conn.transport is not None and conn._state == _IDLE:
            conn.closed = True
            conn.transport.close()
        else:
            conn.abort()

    def _discard(self, conn: _Connection) -> None:
        self._close(conn)
        self._slot_freed()

    def _slot_freed(self) -> None:
        self.total -= 1
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                self.total += 1
                waiter.set_result(None)
                return


def _expire(waiter: asyncio.Future[Any], message: str) -> None:
    if not waiter.done():
        waiter.set_exception(HTTPTimeout(message))


class HTTPClient:
    """An HTTP/1.1 client with keep-alive pools; see the module doc for what it does and why.

    ``max_connections`` bounds each origin's pool; ``trust_env`` reads the proxy variables (once,
    here); ``max_body_bytes`` bounds a response body, compressed and decoded."""

    def __init__(self, max_connections: int = 16, *, trust_env: bool = True,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 keepalive_expiry_s: float = KEEPALIVE_EXPIRY_S) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self.max_connections = max_connections
        self.max_body_bytes = max_body_bytes
        self.keepalive_expiry_s = keepalive_expiry_s
        self.closed = False
        self._proxies = _Proxies(os.environ if trust_env else {})
        self._pools: dict[tuple[str, str, int, str], _Pool] = {}
        self._targets: dict[str, tuple[_Pool, str]] = {}
        self._ssl: ssl.SSLContext | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def post(self, url: str, *, json: Any = None, content: bytes | None = None,
                   headers: Mapping[str, str] | None = None, timeout: float) -> Response:
        """POST ``json`` (serialised with orjson; Content-Type application/json unless the
        headers give one) or ``content`` bytes."""
        if json is not None:
            return await self._request("POST", url, orjson.dumps(json), headers, timeout,
                                       "application/json")
        return await self._request("POST", url, content or b"", headers, timeout, None)

    async def request(self, method: str, url: str, *, body: bytes = b"",
                      headers: Mapping[str, str] | None = None, timeout: float) -> Response:
        """Send one request and read its whole response within ``timeout`` seconds."""
        return await self._request(method, url, body, headers, timeout, None)

    async def _request(self, method: str, url: str, body: bytes, headers: Mapping[str, str] | None,
                       timeout: float, content_type: str | None) -> Response:
        if self.closed:
            raise HTTPError("the HTTP client is closed")
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._loop is not None and not self._loop.is_closed():
                raise RuntimeError("this HTTPClient belongs to another event loop")
            self._loop, self._pools, self._targets = loop, {}, {}
        deadline = loop.time() + timeout
        pool, target = self._target(url)
        data = _request_head(method, target, pool.authority, headers, len(body),
                             pool.extra_head, content_type) + body
        conn = await pool.acquire(loop, deadline, timeout)
        try:
            return await self._exchange(pool, conn, data, method, loop, deadline, timeout)
        except ConnectionLost as exc:
            if not (exc.before_response and conn.used > 1):
                raise
            log.debug("%s %s: idle connection was closed by the server (%s); retrying on a new "
                      "connection", method, pool.authority, exc)
        conn = await pool.acquire(loop, deadline, timeout, fresh=True)
        return await self._exchange(pool, conn, data, method, loop, deadline, timeout)

    async def _exchange(self, pool: _Pool, conn: _Connection, data: bytes, method: str,
                        loop: asyncio.AbstractEventLoop, deadline: float, timeout: float) -> Response:
        waiter: asyncio.Future[Response] = loop.create_future()
        timer = loop.call_at(deadline, conn.on_deadline,
                             f"no complete response within {timeout:.3g}s")
        ok = False
        try:
            conn.start(data, method, waiter)
            response = await waiter
            ok = True
            return response
        finally:
            timer.cancel()
            pool.release(conn, ok)

    def _target(self, url: str) -> tuple[_Pool, str]:
        """The pool and request target for ``url`` (cached: the providers reuse a few URLs)."""
        hit = self._targets.get(url)
        if hit is not None:
            return hit
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = parts.hostname
        if scheme not in ("http", "https") or not host:
            raise HTTPError(f"not an http:// or https:// URL: {url!r}")
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:
            raise HTTPError(f"bad port in URL {url!r}") from None
        bracketed = f"[{host}]" if ":" in host else host
        authority = bracketed if port == (443 if scheme == "https" else 80) else f"{bracketed}:{port}"
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        proxy = self._proxies.lookup(scheme, host, port)
        key = (scheme, host, port, proxy.label if proxy is not None else "")
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = _Pool(self, scheme, host, port, authority, proxy)
        target = f"http://{authority}{path}" if proxy is not None and scheme == "http" else path
        if len(self._targets) >= _TARGET_CACHE:
            self._targets.clear()
        self._targets[url] = (pool, target)
        return pool, target

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            context = ssl.create_default_context()
            context.set_alpn_protocols(["http/1.1"])
            self._ssl = context
        return self._ssl

    async def _connect(self, pool: _Pool, loop: asyncio.AbstractEventLoop, deadline: float,
                       timeout: float) -> _Connection:
        """A new connection for ``pool``: TCP, then (through a proxy) CONNECT, then TLS."""
        proxy = pool.proxy
        if proxy is not None and proxy.error:
            raise ConnectError(proxy.error)
        host, port = (proxy.host, proxy.port) if proxy is not None else (pool.host, pool.port)
        where = f"proxy {proxy.label}" if proxy is not None else pool.authority
        tunnel = proxy is not None and pool.scheme == "https"
        context = self._ssl_context() if pool.scheme == "https" else None
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise HTTPTimeout(f"no time left to connect to {where} within {timeout:.3g}s")
        max_body = self.max_body_bytes
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(
                lambda: _Connection(loop, max_body), host, port,
                ssl=None if tunnel else context,
                server_hostname=pool.host if context is not None and not tunnel else None),
                remaining)
        except asyncio.TimeoutError:
            raise HTTPTimeout(f"no connection to {where} within {timeout:.3g}s") from None
        except OSError as exc:
            raise ConnectError(f"cannot connect to {where}: {exc}") from exc
        if tunnel:
            assert proxy is not None and context is not None
            try:
                await self._tunnel(pool, proxy, conn, context, loop, deadline, timeout)
            except BaseException:
                conn.abort()
                raise
        return conn

    async def _tunnel(self, pool: _Pool, proxy: _Proxy, conn: _Connection, context: ssl.SSLContext,
                      loop: asyncio.AbstractEventLoop, deadline: float, timeout: float) -> None:
        """Ask the proxy for a tunnel to the origin, then speak TLS through it."""
        authority = f"[{pool.host}]:{pool.port}" if ":" in pool.host else f"{pool.host}:{pool.port}"
        auth = f"proxy-authorization: {proxy.authorization}\r\n" if proxy.authorization else ""
        head = (f"CONNECT {authority} HTTP/1.1\r\nhost: {authority}\r\n"
                f"user-agent: {USER_AGENT}\r\n{auth}\r\n").encode("latin-1")
        waiter: asyncio.Future[Response] = loop.create_future()
        timer = loop.call_at(deadline, conn.on_deadline,
                             f"proxy {proxy.label} did not open a tunnel within {timeout:.3g}s")
        try:
            conn.start(head, "CONNECT", waiter)
            try:
                response = await waiter
            except ConnectionLost as exc:
                raise ConnectError(f"proxy {proxy.label} closed the connection: {exc}") from None
        finally:
            timer.cancel()
        if not 200 <= response.status_code < 300:
            raise ConnectError(f"proxy {proxy.label} refused a tunnel to {authority}: HTTP "
                               f"{response.status_code} {response.reason}")
        transport = conn.transport
        assert transport is not None
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise HTTPTimeout(f"no TLS connection to {pool.authority} within {timeout:.3g}s")
        try:
            tls = await asyncio.wait_for(loop.start_tls(transport, conn, context,
                                                        server_hostname=pool.host), remaining)
        except asyncio.TimeoutError:
            raise HTTPTimeout(f"no TLS connection to {pool.authority} within {timeout:.3g}s") from None
        except OSError as exc:
            raise ConnectError(f"TLS to {pool.authority} through proxy {proxy.label} failed: "
                               f"{exc}") from exc
        if tls is None:
            raise ConnectError(f"the tunnel to {pool.authority} closed during the TLS handshake")
        conn.transport = tls
        conn.used = 0  # the CONNECT was not a request on the origin's connection

    async def aclose(self) -> None:
        """Close every pooled connection (requests still in flight fail with HTTPError)."""
        self.closed = True
        pools, self._pools, self._targets = list(self._pools.values()), {}, {}
        conns: list[_Connection] = []
        for pool in pools:
            while pool.waiters:
                waiter = pool.waiters.popleft()
                if not waiter.done():
                    waiter.set_exception(HTTPError("the HTTP client was closed"))
            conns.extend(pool.conns)
            pool.idle.clear()
            pool.conns.clear()
        for conn in conns:
            if conn._state != _IDLE:  # a request in flight: it fails now
                conn._fail(HTTPError("the HTTP client was closed"))
            elif conn.transport is not None and not conn.closed:
                conn.closed = True
                conn.transport.close()
        pending = [c.lost for c in conns if not c.lost.done()]
        if pending:
            await asyncio.wait(pending, timeout=_CLOSE_WAIT_S)
            for conn in conns:
                if not conn.lost.done() and conn.transport is not None:
                    conn.transport.abort()

    async def __aenter__(self) -> HTTPClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


_DEFAULTS = (("user-agent", USER_AGENT), ("accept", "*/*"), ("accept-encoding", "identity"))
_OURS = frozenset({"content-length", "transfer-encoding"})


def _request_head(method: str, target: str, authority: str, headers: Mapping[str, str] | None,
                  length: int, extra: str, content_type: str | None) -> bytes:
    """The request line and headers. A header with a line break or NUL is refused (it would
    smuggle a second header or request); its value is never shown, it may be a key."""
    lines = [f"{method} {target} HTTP/1.1\r\n"]
    given: set[str] = set()
    if headers:
        for name, value in headers.items():
            lower = name.lower()
            if lower in _OURS:
                continue
            if not name or "\r" in name or "\n" in name or ":" in name or " " in name:
                raise HTTPError(f"invalid request header name {name[:40]!r}")
            if "\r" in value or "\n" in value or "\0" in value:
                raise HTTPError(f"request header {name!r} has a line break or NUL in its value")
            given.add(lower)
            lines.append(f"{name}: {value}\r\n")
    if "host" not in given:
        lines.insert(1, f"host: {authority}\r\n")
    for name, value in _DEFAULTS:
        if name not in given:
            lines.append(f"{name}: {value}\r\n")
    if content_type is not None and "content-type" not in given:
        lines.append(f"content-type: {content_type}\r\n")
    lines.append(f"{extra}content-length: {length}\r\n\r\n")
    try:
        return "".join(lines).encode("latin-1")
    except UnicodeEncodeError:
        raise HTTPError("request headers must be Latin-1 text") from None
