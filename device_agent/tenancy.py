"""What the agent keeps per tenant: request ids, quotas, and the audit log of every call.

A request id makes Evaluate idempotent, so it must never let one caller read or steer another's
verdict. Ids are therefore scoped by tenant (the bearer token's owner, ``""`` without tokens)
and bound to what they were first used for — operator, version, candidate hash and evaluation
mode — so reusing an id for other content is refused instead of answered with the first
verdict. Ids are short printable strings; the agent keeps thousands of them.

Quotas are per tenant: evaluations in flight (concurrency) and evaluations started per minute
(a token bucket holding a minute's allowance). Idempotent repeats cost nothing.

:class:`Access` puts it together for the server: TLS credentials, the bearer-token interceptor
(``protos/security.py``), quotas and the audit log, from one :class:`AccessSettings`.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import grpc
import orjson

from device_agent.evaluation import InvalidRequest
from protos.records import EvalRequest, Verdict, candidate_id
from protos.security import (
    AuthConfigError,
    BearerTokenInterceptor,
    ServerTLS,
    TokenStore,
    exposure_problem,
)

log = logging.getLogger(__name__)

MAX_REQUEST_ID = 128

RequestKey = tuple[str, str]  # (tenant, request id): ids are scoped per tenant


class QueueFull(Exception):
    """The agent holds ``--max-queue`` evaluations: RESOURCE_EXHAUSTED."""


class Draining(Exception):
    """The agent is shutting down: UNAVAILABLE."""


@dataclass(frozen=True)
class Caller:
    tenant: str
    peer: str
    rpc: str
_REQUEST_ID = re.compile(rf"[!-~]{{1,{MAX_REQUEST_ID}}}")


def check_request_id(request_id: str) -> str:
    """``request_id`` if it is 1-128 printable ASCII characters (no spaces), else
    InvalidRequest: the agent remembers ids, so their size must be bounded."""
    if not request_id:
        raise InvalidRequest("request_id is required (it makes Evaluate idempotent)")
    if not _REQUEST_ID.fullmatch(request_id):
        raise InvalidRequest(f"request_id must be 1-{MAX_REQUEST_ID} printable ASCII characters "
                             f"without spaces (got {len(request_id)} characters)")
    return request_id


@dataclass(frozen=True)
class Binding:
    """What a request id stands for; a repeat must match it exactly."""

    operator_id: str
    operator_version: int
    candidate_hash: str
    skip_timing: bool
    public_only: bool = False

    @property
    def operator(self) -> str:
        return f"{self.operator_id}@{self.operator_version}"

    def differences(self, other: Binding) -> list[str]:
        return [name for name, a, b in (
            ("operator", self.operator, other.operator),
            ("candidate", self.candidate_hash, other.candidate_hash),
            ("evaluation mode (skip_timing)", self.skip_timing, other.skip_timing),
            ("evaluation mode (public_only)", self.public_only, other.public_only)) if a != b]


def check_repeat(request_id: str, first: Binding, again: Binding) -> None:
    """InvalidRequest when a request id comes back with other content."""
    changed = again.differences(first)
    if changed:
        raise InvalidRequest(f"request_id {request_id!r} was already used with another "
                             f"{', '.join(changed)}; use a new request id for new content")


@dataclass(frozen=True)
class Admitted:
    """An Evaluate call let in: a running evaluation to wait on, or (``repeat``) the verdict or
    evaluation of an earlier call with the same request id and content."""

    key: RequestKey
    binding: Binding
    got: asyncio.Task[Verdict] | Verdict
    repeat: bool


class QuotaExceeded(Exception):
    """A tenant is over a quota: RESOURCE_EXHAUSTED with ``retry_after_s``."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class QuotaSettings:
    concurrency: int | None = None  # evaluations in flight per tenant
    per_minute: int | None = None   # evaluations started per minute per tenant

    def __post_init__(self) -> None:
        for name in ("concurrency", "per_minute"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"quota {name} must be >= 1, got {value}")


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class TenantQuotas:
    """Admission by tenant. :meth:`admit` reserves (or raises QuotaExceeded), :meth:`release`
    gives the concurrency slot back when the evaluation ends."""

    def __init__(self, settings: QuotaSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._clock = clock
        self._in_flight: dict[str, int] = {}
        self._buckets: dict[str, _Bucket] = {}

    def in_flight(self, tenant: str) -> int:
        return self._in_flight.get(tenant, 0)

    def _refill(self, tenant: str, rate: int) -> _Bucket:
        now = self._clock()
        bucket = self._buckets.setdefault(tenant, _Bucket(float(rate), now))
        bucket.tokens = min(float(rate), bucket.tokens + (now - bucket.stamp) * rate / 60.0)
        bucket.stamp = now
        return bucket

    def admit(self, tenant: str) -> None:
        limit, rate = self.settings.concurrency, self.settings.per_minute
        who = f"tenant {tenant!r}" if tenant else "this agent's callers"
        if limit is not None and self.in_flight(tenant) >= limit:
            raise QuotaExceeded(f"{who} already has {limit} evaluation(s) in flight (the "
                                "concurrency quota); retry when one finishes", 1.0)
        if rate is not None:
            bucket = self._refill(tenant, rate)
            if bucket.tokens < 1.0:
                wait = (1.0 - bucket.tokens) * 60.0 / rate
                raise QuotaExceeded(f"{who} started {rate} evaluation(s) in the last minute (the "
                                    f"rate quota); retry in {wait:.1f} s", wait)
            bucket.tokens -= 1.0
        self._in_flight[tenant] = self.in_flight(tenant) + 1

    def release(self, tenant: str) -> None:
        left = self.in_flight(tenant) - 1
        if left > 0:
            self._in_flight[tenant] = left
        else:
            self._in_flight.pop(tenant, None)


@dataclass(frozen=True)
class AuditRecord:
    """One line of the audit log: one call and how it ended. Exactly one of ``status`` (the
    verdict's) and ``refused`` (why there was none) is set."""

    time: str
    tenant: str | None          # None: the caller was not authenticated
    peer: str
    rpc: str
    request_id: str | None = None
    operator: str | None = None  # id@version as evaluated (as sent when refused)
    candidate_hash: str | None = None
    skip_timing: bool | None = None
    public_only: bool | None = None  # an agent's verify: no hidden case was run
    status: str | None = None    # PASSED, WRONG_ANSWER, ...
    refused: str | None = None   # unauthenticated, quota, invalid, busy, draining, cancelled, error
    repeat: bool = False         # the verdict of an earlier call with this request id
    detail: str = ""


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def clip(text: str | None, limit: int = 160) -> str | None:
    """Caller-supplied strings go into the log bounded (an oversize id is itself the attack)."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}...[{len(text)} chars]"


def refusal(exc: BaseException) -> str:
    """The audit log's name for why a call got no verdict."""
    kinds: tuple[tuple[type[BaseException], str], ...] = (
        (InvalidRequest, "invalid"), (QuotaExceeded, "quota"), (QueueFull, "busy"),
        (Draining, "draining"), (asyncio.CancelledError, "cancelled"))
    return next((name for cls, name in kinds if isinstance(exc, cls)), "error")


def audit_record(caller: Caller, req: EvalRequest, admitted: Admitted | None,
                 verdict: Verdict | None, refused: BaseException | None) -> AuditRecord:
    """The audit line of one Evaluate call: what was evaluated (as admitted, else as sent) and
    its verdict, or why it got none."""
    if admitted is not None:
        operator, chash = admitted.binding.operator, admitted.binding.candidate_hash
    else:
        version = "" if req.operator_version is None else str(req.operator_version)
        operator, chash = f"{clip(req.operator_id, 100)}@{version}", candidate_id(req.source)
    return AuditRecord(
        time=now_iso(), tenant=caller.tenant, peer=caller.peer, rpc=caller.rpc,
        request_id=clip(req.request_id), operator=operator, candidate_hash=chash,
        skip_timing=req.skip_timing, public_only=req.public_only,
        status=verdict.status.value if verdict else None,
        refused=None if refused is None else refusal(refused),
        repeat=bool(admitted and admitted.repeat and verdict),
        detail="" if refused is None else clip(str(refused), 300) or "")


class AuditLog:
    """JSON lines appended to ``path``, one per call, flushed as written (a crash loses none);
    a log that cannot be written is reported and does not stop the agent."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "ab")  # noqa: SIM115 - held open for the agent's lifetime
        except OSError as exc:
            raise AuthConfigError(f"cannot open the audit log {path}: {exc.strerror or exc}") from None
        self._lock = threading.Lock()

    def write(self, record: AuditRecord) -> None:
        line = orjson.dumps(asdict(record)) + b"\n"
        with self._lock:
            try:
                self._file.write(line)
                self._file.flush()
            except (OSError, ValueError) as exc:
                log.error("cannot write the audit log %s: %s", self.path, exc)

    def close(self) -> None:
        with self._lock:
            self._file.close()


# ---- the server's access control, assembled ----------------------------------------------------

@dataclass(frozen=True)
class AccessSettings:
    """Who may call the agent and how much (docs/auth.md). The default is the embedded loopback
    agent: no TLS, no tokens, no quotas, no audit log."""

    tls: ServerTLS | None = None
    tokens: Path | None = None       # a tokens file (``kgb agent token add``)
    quotas: QuotaSettings = QuotaSettings()
    audit_log: Path | None = None
    insecure: bool = False           # allow a non-loopback address without TLS and tokens

    def problem(self, host: str) -> str | None:
        return exposure_problem(host, tls=self.tls is not None, tokens=self.tokens is not None,
                                insecure=self.insecure)


class Access:
    """The loaded :class:`AccessSettings`: AuthConfigError at construction for an unusable
    certificate, key or tokens file, so the agent refuses to start rather than serve open."""

    def __init__(self, settings: AccessSettings) -> None:
        self.settings = settings
        self._credentials = settings.tls.credentials() if settings.tls is not None else None
        self.tokens = TokenStore(settings.tokens) if settings.tokens is not None else None
        self.quotas = TenantQuotas(settings.quotas)
        self.audit = AuditLog(settings.audit_log) if settings.audit_log is not None else None

    def interceptors(self, counted: Callable[[], None] | None = None,
                     ) -> list[grpc.aio.ServerInterceptor]:
        """What checks each call's token (nothing without tokens). A refusal is audited, and
        ``counted`` is called (the metrics' count of refusals)."""
        if self.tokens is None:
            return []

        def refused(method: str, peer: str, reason: str) -> None:
            self.record(AuditRecord(time=now_iso(), tenant=None, peer=peer, rpc=method,
                                    refused="unauthenticated", detail=reason))
            if counted is not None:
                counted()

        return [BearerTokenInterceptor(self.tokens, on_refused=refused)]

    def bind(self, server: grpc.aio.Server, address: str) -> int:
        """Listen on ``address`` (TLS when configured); the port, 0 when it could not bind."""
        if self._credentials is None:
            return int(server.add_insecure_port(address))
        return int(server.add_secure_port(address, self._credentials))

    def describe(self) -> str:
        s = self.settings
        parts = ["mutual TLS" if s.tls and s.tls.client_ca else "TLS" if s.tls else "no TLS",
                 f"{len(self.tokens)} token(s)" if self.tokens is not None else "no tokens"]
        if s.quotas.concurrency or s.quotas.per_minute:
            parts.append(f"quotas {s.quotas.concurrency or '-'} in flight, "
                         f"{s.quotas.per_minute or '-'}/min per tenant")
        if s.audit_log:
            parts.append(f"audit log {s.audit_log}")
        return ", ".join(parts)

    def record(self, record: AuditRecord) -> None:
        if self.audit is not None:
            self.audit.write(record)

    def close(self) -> None:
        if self.audit is not None:
            self.audit.close()
