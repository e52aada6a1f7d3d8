"""Authentication shared by every gRPC service of ours: bearer tokens, TLS, the interceptor.

Both the device agent (``device_agent/server.py``) and the coordinator's agent registry
(``coordinator/fleet/registration.py``) serve through this module, and their clients
(``protos/client.py``, ``protos/registration.py``) dial through it, so one token file format, one
header and one way of loading certificates hold everywhere (docs/auth.md).

Tokens are random strings of about 256 bits handed out by ``kgb agent token add``. A tokens file
holds only their SHA-256 digests, one per line with the tenant it belongs to::

    # TENANT sha256:HEX
    alice sha256:5d41402abc4b2a76b9719d911017c592...  # added 2025-01-01T00:00:00Z

A plain hash is enough (no salt, no slow KDF) because the tokens are high-entropy: nobody can
guess one from its digest. Digests are compared in constant time. The file is re-read when it
changes, so tokens can be added or revoked (delete the line) without restarting the server.

Clients send ``authorization: Bearer TOKEN`` metadata on every call. The server's
:class:`BearerTokenInterceptor` maps it to a tenant, which handlers read with
:func:`current_tenant`; ``""`` is the one anonymous tenant of a server without tokens.
"""

from __future__ import annotations

import contextvars
import datetime
import hashlib
import hmac
import ipaddress
import logging
import os
import re
import secrets
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

log = logging.getLogger(__name__)

AUTH_HEADER = "authorization"
TOKEN_PREFIX = "kgb_"
TENANT_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_LINE = re.compile(r"(?P<tenant>\S+)\s+sha256:(?P<digest>[0-9a-f]{64})")
_TOKEN_CHARS = re.compile(r"[!-~]{16,512}")  # printable ASCII: what gRPC metadata can carry
RELOAD_CHECK_S = 1.0

# Health checks stay open (load balancers and liveness probes carry no token).
OPEN_METHODS = ("/grpc.health.v1.Health/",)


class AuthConfigError(ValueError):
    """A tokens file, certificate or key that cannot be used; the message says which and why."""


# ---- tokens ----------------------------------------------------------------------------------

def new_token() -> str:
    """A fresh bearer token (256 random bits, URL-safe)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_tenant(name: str) -> str:
    if not TENANT_PATTERN.fullmatch(name):
        raise AuthConfigError(f"tenant name {name!r} must be 1-64 letters, digits, '_', '.', '@' "
                              "or '-', starting with a letter or digit")
    return name


@dataclass(frozen=True)
class TokenEntry:
    tenant: str
    digest: str  # hex SHA-256 of the token


def parse_tokens(text: str, source: str) -> tuple[TokenEntry, ...]:
    """The entries of a tokens file; AuthConfigError naming the first bad line. A line that is
    not ``TENANT sha256:HEX`` is refused, so a token pasted in clear never works (and is named
    as the likely mistake)."""
    entries: list[TokenEntry] = []
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _LINE.fullmatch(line)
        if m is None:
            raise AuthConfigError(
                f"{source}:{number}: expected 'TENANT sha256:HEX' (64 lower-case hex digits); tokens "
                "files hold digests, never tokens: create entries with `kgb agent token add`")
        if not TENANT_PATTERN.fullmatch(m["tenant"]):
            raise AuthConfigError(f"{source}:{number}: bad tenant name {m['tenant']!r}")
        tenant, digest = m["tenant"], m["digest"]
        if digest in seen:
            raise AuthConfigError(f"{source}:{number}: the same token digest appears twice")
        seen.add(digest)
        entries.append(TokenEntry(tenant, digest))
    return tuple(entries)


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AuthConfigError(f"cannot read {what} {path}: {getattr(exc, 'strerror', None) or exc}") from None


class TokenStore:
    """The tokens of one file, re-read (at most once a second) when the file changes. A change
    that does not parse is logged and the previous tokens stay in force."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self._clock = clock
        self._stamp = self._stat()
        self._entries = parse_tokens(_read_text(self.path, "tokens file"), str(self.path))
        self._checked = clock()

    def _stat(self) -> tuple[int, int, int]:
        try:
            st = self.path.stat()
        except OSError:
            return (0, 0, 0)
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    @property
    def tenants(self) -> frozenset[str]:
        return frozenset(e.tenant for e in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def _maybe_reload(self) -> None:
        now = self._clock()
        if now - self._checked < RELOAD_CHECK_S:
            return
        self._checked = now
        stamp = self._stat()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            self._entries = parse_tokens(_read_text(self.path, "tokens file"), str(self.path))
        except AuthConfigError as exc:
            log.error("tokens file changed but cannot be used (the previous tokens stay): %s", exc)
            return
        log.warning("tokens file %s re-read: %d token(s), tenants %s", self.path,
                    len(self._entries), ", ".join(sorted(self.tenants)) or "none")

    def tenant_for(self, token: str | None) -> str | None:
        """The tenant holding ``token``, else None. Every digest is compared, in constant time."""
        self._maybe_reload()
        if not token:
            return None
        digest = token_digest(token)
        found: str | None = None
        for entry in self._entries:
            if hmac.compare_digest(digest, entry.digest):
                found = entry.tenant
        return found


def add_token(path: Path, tenant: str) -> str:
    """Create a token for ``tenant``, append its digest to ``path`` (created ``0600``) and return
    the token: the only time it exists outside its holder's hands."""
    check_tenant(tenant)
    path = Path(path)
    if path.exists():
        parse_tokens(_read_text(path, "tokens file"), str(path))  # never append to a broken file
    token = new_token()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        if f.tell() == 0:
            f.write("# kgb bearer tokens: TENANT sha256:HEX (digests only; `kgb agent token add`)\n")
        f.write(f"{tenant} sha256:{token_digest(token)}  # added {stamp}\n")
    return token


def read_token(path: Path | None, env: str | None = None) -> str | None:
    """A client's token: from ``path`` (its first line) if given, else from the environment
    variable ``env``, else None. AuthConfigError if it is not one printable word."""
    if path is not None:
        token, where = _read_text(Path(path), "token file").strip(), str(path)
    elif env and os.environ.get(env):
        token, where = os.environ[env].strip(), f"${env}"
    else:
        return None
    if not _TOKEN_CHARS.fullmatch(token):
        raise AuthConfigError(f"{where} does not hold one token (16-512 printable characters, "
                              "no spaces or line breaks)")
    return token


def bearer_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    return ((AUTH_HEADER, f"Bearer {token}"),) if token else ()


def bearer_from(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The token of an ``authorization: Bearer TOKEN`` entry, else None."""
    for key, value in metadata or ():
        if key.lower() == AUTH_HEADER and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


# ---- the server interceptor ------------------------------------------------------------------

_TENANT: contextvars.ContextVar[str] = contextvars.ContextVar("kgb_tenant", default="")


def current_tenant() -> str:
    """The tenant of the call being handled ("" without tokens). gRPC runs the interceptors and
    the handler of one call in one ``contextvars`` context, so this is per call."""
    return _TENANT.get()


Refused = Callable[[str, str, str], None]  # (method, peer, reason)

_HANDLER_FACTORIES = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def _refusing(handler: grpc.RpcMethodHandler, method: str, message: str,
              on_refused: Refused | None) -> grpc.RpcMethodHandler:
    """A handler of the same shape as ``handler`` that answers UNAUTHENTICATED."""

    async def refuse(request: Any, context: grpc.aio.ServicerContext) -> None:
        if on_refused is not None:
            on_refused(method, context.peer(), message)
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    factory = _HANDLER_FACTORIES[(bool(handler.request_streaming), bool(handler.response_streaming))]
    return factory(refuse, request_deserializer=handler.request_deserializer,
                   response_serializer=handler.response_serializer)


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Every method outside ``open_methods`` needs a token of ``tokens``; the caller's tenant is
    then :func:`current_tenant`. Refusals are UNAUTHENTICATED and reported to ``on_refused``
    (the audit log) with the method and the peer."""

    def __init__(self, tokens: TokenStore, *, open_methods: Sequence[str] = OPEN_METHODS,
                 on_refused: Refused | None = None) -> None:
        self.tokens = tokens
        self.open_methods = tuple(open_methods)
        self.on_refused = on_refused

    async def intercept_service(
            self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
            details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        method: str = details.method
        if handler is None or method.startswith(self.open_methods):
            return handler
        token = bearer_from(details.invocation_metadata)
        tenant = self.tokens.tenant_for(token)
        if tenant is None:
            why = ("no bearer token: this service needs 'authorization: Bearer TOKEN' metadata "
                   "(kgb: --token-file FILE or KGB_AGENT_TOKEN)" if token is None
                   else "the bearer token is not valid here")
            return _refusing(handler, method, why, self.on_refused)
        _TENANT.set(tenant)
        return handler


# ---- TLS -------------------------------------------------------------------------------------

def _read_pem(path: Path, what: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise AuthConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if b"-----BEGIN " not in data:
        raise AuthConfigError(f"{what} {path} is not PEM (no '-----BEGIN' line)")
    return data


def _no_password() -> bytes:
    raise AuthConfigError("encrypted private keys are not supported (gRPC cannot use them)")


@dataclass(frozen=True)
class ServerTLS:
    """A server's certificate chain and key; with ``client_ca``, mutual TLS: every client must
    present a certificate signed by that CA."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    def credentials(self) -> grpc.ServerCredentials:
        """Checked credentials: AuthConfigError if a file is unreadable, not PEM, or the key does
        not belong to the certificate (gRPC itself would only fail at the first handshake)."""
        cert, key = _read_pem(self.cert, "certificate"), _read_pem(self.key, "private key")
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            ctx.load_cert_chain(self.cert, self.key, password=_no_password)
        except ssl.SSLError as exc:
            raise AuthConfigError(f"private key {self.key} does not match certificate {self.cert} "
                                  f"({exc.reason or exc})") from None
        ca = None
        if self.client_ca is not None:
            ca = _read_pem(self.client_ca, "client CA")
            try:
                ctx.load_verify_locations(cafile=str(self.client_ca))
            except ssl.SSLError as exc:
                raise AuthConfigError(f"client CA {self.client_ca} is not a certificate "
                                      f"({exc.reason or exc})") from None
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                           require_client_auth=ca is not None)


@dataclass(frozen=True)
class ClientAuth:
    """How a client proves itself and checks the server. ``ca`` set: TLS, the server's
    certificate must chain to it; ``cert``/``key``: a client certificate (mutual TLS);
    ``token``: sent as a bearer token on every call. Secrets never show in ``repr``."""

    ca: bytes | None = field(default=None, repr=False)
    cert: bytes | None = field(default=None, repr=False)
    key: bytes | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)

    @property
    def tls(self) -> bool:
        return self.ca is not None

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return bearer_metadata(self.token)


@dataclass(frozen=True)
class ClientAuthFiles:
    """Where a client's credentials live: paths only, so it is safe to log, to pickle and to
    hand to another process, which reads the files with :meth:`load`."""

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    token_file: Path | None = None
    token_env: str | None = None  # read the token from this variable when token_file is None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise AuthConfigError("a client certificate needs its key, and a key its certificate")
        if self.cert is not None and self.ca is None:
            raise AuthConfigError("a client certificate is for mutual TLS: give the server's CA too")

    def load(self) -> ClientAuth:
        return ClientAuth(
            ca=_read_pem(self.ca, "CA certificate") if self.ca else None,
            cert=_read_pem(self.cert, "client certificate") if self.cert else None,
            key=_read_pem(self.key, "client key") if self.key else None,
            token=read_token(self.token_file, self.token_env))


def channel(address: str, auth: ClientAuth | None,
            options: Sequence[tuple[str, Any]] = ()) -> grpc.aio.Channel:
    """A channel to ``address``: TLS when ``auth`` has a CA, plaintext otherwise. (The token
    travels as per-call metadata, :meth:`ClientAuth.metadata`, so it works on both.)"""
    if auth is None or not auth.tls:
        return grpc.aio.insecure_channel(address, options=list(options))
    creds = grpc.ssl_channel_credentials(root_certificates=auth.ca, private_key=auth.key,
                                         certificate_chain=auth.cert)
    return grpc.aio.secure_channel(address, creds, options=list(options))


# ---- exposure policy -------------------------------------------------------------------------

def is_loopback(host: str) -> bool:
    """``host`` is a loopback address or ``localhost`` (brackets allowed)."""
    h = host.strip("[]")
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def exposure_problem(host: str, *, tls: bool, tokens: bool, insecure: bool) -> str | None:
    """Why a server must not listen on ``host`` as configured, else None. Loopback is always
    allowed (tests, ``make run``); anything else needs TLS and tokens, unless ``insecure``."""
    if is_loopback(host) or (tls and tokens) or insecure:
        return None
    missing = " and ".join(w for w, ok in (("TLS", tls), ("tokens", tokens)) if not ok)
    return (f"refusing to listen on {host} without {missing}: anyone who can reach the port could "
            "use it")
