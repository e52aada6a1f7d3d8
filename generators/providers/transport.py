"""The providers' HTTP transport: aiohttp, one session per provider and event loop.

Why aiohttp: HTTP/1.1 parsing, TLS and proxies are code to keep secure, and aiohttp is a
maintained client whose request path is cheap enough for a sweep's thousands of calls (issue
#21 replaced our own ~1,000-line client with it). The retry and billing loop stays ours
(:mod:`generators.providers.base`): no SDK hides an attempt.

What a :class:`Transport` sets up, and why:

* One ``aiohttp.ClientSession`` with a ``TCPConnector`` of at most ``max_connections``
  connections (the endpoint's ``max_concurrency``), kept alive for :data:`KEEPALIVE_S` (just
  under the 5 s that uvicorn, under vLLM and SGLang, keeps an idle connection). aiohttp resends
  nothing on its own for a POST: a request that found its kept-alive connection closed is an
  attempt like any other failure (the providers retry it, under the same idempotency key).
* TLS verified against the system store, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``: the context is
  made with the session, so variables set before the first call count (aiohttp's own default
  context is made when aiohttp is imported).
* ``Accept-Encoding: identity`` (replies are a few KB: compressing them costs both sides CPU for
  nothing); a compressed reply is decoded all the same. No cookies, no redirects followed (a
  redirect would carry the key's header to wherever it points): a 3xx is the endpoint's answer.
* Replies over :data:`MAX_REPLY_BYTES` (decoded) are refused, never read whole into memory.
* Proxies from the environment, read by aiohttp's own reader (``get_env_proxy_for_url``: the
  rules of ``urllib.request.getproxies`` and ``proxy_bypass``) once per URL and session, then
  passed with each request. The session itself runs with ``trust_env=False``, because
  ``trust_env=True`` also looks up ``~/.netrc`` for the *origin* on every request (in a worker
  thread): with an entry for the endpoint's host aiohttp then refuses every request that carries
  ``Authorization`` (OpenAI's key header) and sends the ``.netrc`` password as Basic
  authorization along with Anthropic's ``x-api-key``. A proxy the environment names that would
  not be used as meant — an ``https://`` one (aiohttp ignores it and connects directly), a
  ``socks5://`` one (aiohttp would speak HTTP to it), or one only in ``ALL_PROXY`` (which aiohttp
  does not read) — is a :class:`ProxyConfigError`, never a silent bypass. ``NO_PROXY`` is read
  as urllib reads it: ``*``, or host names matching themselves and their subdomains (a leading
  ``.`` is ignored), compared with the URL's host alone — no CIDR ranges, no ``host:port``.

Failures come out as :class:`ReplyTimeout` (the attempt's time ran out: connecting, sending or
reading) or :class:`TransportError` (no usable reply: refused or lost connection, a malformed
response, a reply too large), with aiohttp's message and never its request headers.
"""

from __future__ import annotations

import codecs
import ssl
import urllib.request
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

MAX_REPLY_BYTES = 64 * 1024 * 1024
KEEPALIVE_S = 4.0
USER_AGENT = "kernelgenbench"


class TransportError(Exception):
    """No usable reply: the connection failed or was lost, the response was not HTTP we can
    read, or it was too large."""


class ReplyTimeout(TransportError):
    """The attempt's timeout passed before the reply was complete."""


class NotSent(TransportError):
    """The connection was never made (refused, no such host, a failed TLS handshake, a proxy
    that would not connect, the connect timeout): the request did not leave, so nothing can have
    been billed for it."""


class ProxyConfigError(ValueError):
    """The environment names a proxy the transport cannot use."""


Proxy = tuple[URL | None, aiohttp.BasicAuth | None]


def env_proxy(url: str) -> Proxy:
    """The proxy aiohttp's environment rules pick for ``url`` (None: direct), or
    :class:`ProxyConfigError` when the environment names one that would not be used as meant."""
    target = URL(url)
    try:
        proxy, auth = get_env_proxy_for_url(target)
    except LookupError:  # no proxy for this scheme, or NO_PROXY names the host
        proxy, auth = None, None
    if proxy is not None and proxy.scheme == "http":
        return proxy, auth
    if proxy is not None:
        raise ProxyConfigError(f"the environment names proxy {_safe(str(proxy))} for "
                               f"{target.scheme} URLs; only http:// proxies are supported")
    named = urllib.request.getproxies()
    if urllib.request.proxy_bypass(target.host or ""):
        return None, None
    if named.get(target.scheme):  # aiohttp ignored it (an https:// proxy): not a silent bypass
        raise ProxyConfigError(f"the environment names proxy {_safe(named[target.scheme])} for "
                               f"{target.scheme} URLs; only http:// proxies are supported")
    if named.get("all"):
        raise ProxyConfigError(f"ALL_PROXY names proxy {_safe(named['all'])}, but only "
                               "HTTP_PROXY and HTTPS_PROXY are read: name it in "
                               f"{target.scheme.upper()}_PROXY, or list {target.host} in NO_PROXY")
    return None, None


def _safe(proxy_url: str) -> str:
    """A proxy URL without its credentials."""
    parts = urlsplit(proxy_url if "://" in proxy_url else f"http://{proxy_url}")
    host = parts.hostname or "?"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}"


class Response:
    """A reply being read: status, headers, and the body (bounded by :data:`MAX_REPLY_BYTES`)."""

    __slots__ = ("_raw",)

    def __init__(self, raw: aiohttp.ClientResponse) -> None:
        self._raw = raw

    @property
    def status(self) -> int:
        return self._raw.status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._raw.headers  # case-insensitive

    @property
    def content_type(self) -> str:
        return self._raw.content_type

    @property
    def charset(self) -> str:
        """The Content-Type's charset when Python knows it, else utf-8."""
        name = self._raw.charset
        if not name:
            return "utf-8"
        try:
            return codecs.lookup(name).name
        except LookupError:
            return "utf-8"

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives; :class:`TransportError` once it passes the size limit."""
        size = 0
        async for chunk in self._raw.content.iter_any():
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                raise TransportError(f"reply exceeds {MAX_REPLY_BYTES} bytes; refused")
            yield chunk

    async def body(self) -> bytes:
        length = self._raw.content_length
        if length is not None and length > MAX_REPLY_BYTES:
            raise TransportError(f"reply of {length} bytes exceeds {MAX_REPLY_BYTES}; refused")
        parts = [chunk async for chunk in self.chunks()]
        return parts[0] if len(parts) == 1 else b"".join(parts)


class Transport:
    """One provider's HTTP session on one event loop."""

    def __init__(self, max_connections: int) -> None:
        context = ssl.create_default_context()
        connector = aiohttp.TCPConnector(limit=max_connections, keepalive_timeout=KEEPALIVE_S,
                                         ssl=context)
        self.session = aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"})
        self._proxies: dict[str, Proxy] = {}

    def proxy(self, url: str) -> Proxy:
        hit = self._proxies.get(url)
        if hit is None:
            hit = self._proxies[url] = env_proxy(url)
        return hit

    @asynccontextmanager
    async def post(self, url: str, body: bytes, headers: Mapping[str, str],
                   timeout: float) -> AsyncIterator[Response]:
        """POST ``body``; the block reads the reply. ``timeout`` bounds everything from
        connecting to the last byte read in the block."""
        proxy, auth = self.proxy(url)
        try:
            async with self.session.post(url, data=body, headers=headers, proxy=proxy,
                                         proxy_auth=auth, allow_redirects=False,
                                         timeout=aiohttp.ClientTimeout(total=timeout)) as raw:
                yield Response(raw)
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            raise NotSent(f"{type(exc).__name__}: {exc}") from None
        except TimeoutError:  # aiohttp's timeouts are TimeoutErrors (some also ClientErrors)
            raise ReplyTimeout(f"no complete reply within {timeout:.3g}s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from None

    async def aclose(self) -> None:
        await self.session.close()

    def abandon(self) -> None:
        """Drop the session of an event loop that is closed (its connections cannot be closed
        gracefully any more): close the sockets without the loop, and say nothing at exit."""
        connector = self.session.connector
        self.session.detach()
        close_now = getattr(connector, "_close", None)  # aiohttp's synchronous part of close()
        if close_now is not None:
            try:
                close_now()
            except Exception:  # noqa: BLE001 - best effort on a dead loop
                pass

