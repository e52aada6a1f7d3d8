"""LLM endpoints: configuration, the retrying, rate-limited call, and the billing rule.

A :class:`Provider` speaks one wire format (OpenAI-compatible Chat Completions or Anthropic
Messages) to one configured endpoint. ``complete`` never raises for what the endpoint does: every
outcome — a reply, a truncated reply, a malformed body, 429, 5xx, a timeout — comes back as one
:class:`~generators.llm.LLMCall`. It raises only for configuration the user must fix (a missing
key variable).

Why plain HTTP and not the vendor SDKs: we need every attempt's status, headers, raw body and
usage — a retried 5xx that carried usage is billed, a 2xx body that does not parse may still
carry usage, and Retry-After must be honoured by our own retry loop (the SDKs retry internally,
hiding billed attempts, and raise on bodies they cannot parse, losing the usage in them). Both
wire formats are small and stable, so one HTTP client serves OpenAI, vLLM, SGLang, DeepSeek and
Anthropic alike: our own (:mod:`generators.providers.http`, asyncio and the standard library
only), because httpx's request path cost about 2.5 ms of CPU per request and the sweep's
generators send thousands at once (issue #6). Each provider has one client per event loop, with
one keep-alive pool of up to ``max_concurrency`` connections per origin; proxies come from the
environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``) and certificates from
the system store or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``. The device agent never imports this
package.

Keys: an endpoint names the environment variable that holds its key (``api_key_env``); the key
is read from the environment at each attempt, put in the request header and nowhere else — not
in the config, the provider, an :class:`LLMCall`, a log record or an exception (error text from
the server is scrubbed of it). ``api_key_env = ""`` sends no key (a local vLLM or SGLang server).

Retries: 429, 5xx, 408 and transport failures (timeouts, refused or dropped connections) are
retried up to ``max_retries`` times. The wait is the server's Retry-After (``retry-after-ms``,
or ``Retry-After`` as seconds or an HTTP date) plus up to 10 % jitter when given, else capped
exponential backoff with full jitter: ``uniform(0, min(cap, base * 2**n))``. Other 4xx and every
2xx (complete, truncated or malformed) are final. A connection that fails (refused, reset)
ends as ``SERVER_ERROR`` and a 408 as ``TIMEOUT``, each with the error text. No attempt starts
after ``deadline_s``, and each attempt's timeout is the smaller of ``timeout_s`` and what is left
of the deadline; it bounds the whole attempt (waiting for a connection, connecting, TLS, sending
and reading the reply), so a server that trickles its reply times out like one that never
answers. (A request that found its kept-alive connection closed by the server before any reply
byte is resent once on a new connection by the HTTP client itself: that is not an attempt.)

Idempotency: a caller may give ``complete`` an ``idempotency_key``, sent in every attempt under
the endpoint's ``idempotency_header`` (default ``Idempotency-Key``; ``""`` sends none). The sweep
derives it from (run, trajectory, turn), so a resumed run asks for a lost reply under the key it
was first asked with; an endpoint or gateway that honours the key answers a repeat with the reply
it already billed instead of generating and billing it again. That is what closes the window a
``kill -9`` leaves between a reply's arrival and its commit to the store. Endpoints that ignore
the header (the OpenAI and Anthropic chat APIs do) bill a repeat as a new call.

Limits, per endpoint (per provider instance): at most ``max_concurrency`` requests in flight;
``requests_per_minute`` and ``tokens_per_minute`` as token buckets that hold ``burst_s`` seconds'
worth of the rate (smooth pacing — providers enforce their limits at sub-minute granularity).
The token bucket is charged with an estimate of the prompt (characters / 4) before sending, then
corrected to the reply's true total tokens; an attempt that got no usage is refunded.

Billing rule: every HTTP response that carries usage is billed — complete, truncated
(``finish_reason`` length, ``stop_reason`` max_tokens → ``TRUNCATED``), malformed-but-has-usage
(usage is recovered from a body that is not valid JSON by decoding the object after its
``"usage"`` key) and error responses that carry usage. An error response without usage, and an
attempt that timed out or lost its connection, are not billed (the client cannot know what the
server counted). With retries, every billed attempt counts: the returned call's ``usage`` and
``cost_usd`` are the sums over its attempts, ``attempts`` is the number of requests sent, and
``extra["attempts"]`` holds the per-attempt records as JSON (see :func:`attempt_records`).
``usage`` is None only when no attempt carried usage. ``latency_s`` is the whole call's wall
time (waits and backoff included); each attempt's own latency is in its record.
"""

from __future__ import annotations

import abc
import asyncio
import email.utils
import json
import logging
import math
import os
import random
import re
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, ClassVar, Literal

from generators.llm import CallStatus, LLMCall, Prompt, Usage
from generators.providers.http import HTTPClient, HTTPError, HTTPTimeout
from generators.providers.limits import TokenBucket
from generators.providers.pricing import PriceTable

log = logging.getLogger(__name__)

ProviderKind = Literal["openai", "anthropic"]
_REDACTED = "[REDACTED]"
_ERROR_BODY_CHARS = 500


class ProviderConfigError(ValueError):
    """An endpoint is configured wrongly (bad field, key variable unset): a user error.
    ``field`` names the offending :class:`EndpointConfig` field, when there is one."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


_HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")


@dataclass(frozen=True)
class EndpointConfig:
    """One model endpoint as a sweep spec names it; holds the key's variable name, never the key."""

    name: str                      # e.g. "local-vllm"; recorded as LLMCall.provider
    kind: ProviderKind
    base_url: str                  # OpenAI: ".../v1"; Anthropic: "https://api.anthropic.com"
    api_key_env: str = ""          # environment variable holding the key; "" sends none
    timeout_s: float = 600.0       # per attempt
    max_retries: int = 5
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 60.0
    max_concurrency: int = 16
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    burst_s: float = 1.0           # the rate buckets hold this many seconds of their rate
    # OpenAI kind only: newer OpenAI models take "max_completion_tokens"; vLLM, SGLang and
    # DeepSeek take "max_tokens".
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    # The header that carries a call's idempotency key ("" sends none); see the module doc.
    idempotency_header: str = "Idempotency-Key"

    def __post_init__(self) -> None:
        if not self.name:
            raise ProviderConfigError("endpoint needs a name", "name")
        if self.kind not in ("openai", "anthropic"):
            raise ProviderConfigError(f"endpoint {self.name!r}: kind must be 'openai' or 'anthropic', "
                                      f"got {self.kind!r}", "kind")
        if not self.base_url.startswith(("http://", "https://")):
            raise ProviderConfigError(f"endpoint {self.name!r}: base_url must start with http:// or "
                                      f"https://, got {self.base_url!r}", "base_url")
        positive = {"timeout_s": self.timeout_s, "max_concurrency": self.max_concurrency,
                    "burst_s": self.burst_s, "backoff_cap_s": self.backoff_cap_s,
                    "requests_per_minute": self.requests_per_minute,
                    "tokens_per_minute": self.tokens_per_minute}
        for key, value in positive.items():
            if value is not None and not value > 0:
                raise ProviderConfigError(f"endpoint {self.name!r}: {key} must be > 0, got {value!r}",
                                          key)
        if self.idempotency_header and not _HEADER_NAME.fullmatch(self.idempotency_header):
            raise ProviderConfigError(f"endpoint {self.name!r}: idempotency_header must be an HTTP "
                                      f"header name (letters, digits, '-') or \"\", got "
                                      f"{self.idempotency_header!r}", "idempotency_header")
        for key, number in (("max_retries", self.max_retries), ("backoff_base_s", self.backoff_base_s)):
            if number < 0:
                raise ProviderConfigError(f"endpoint {self.name!r}: {key} must be >= 0, got "
                                          f"{number!r}", key)


@dataclass(frozen=True)
class AttemptRecord:
    """One HTTP request of a call: what came back and what it billed."""

    attempt: int                   # 1-based
    status: CallStatus
    http_status: int = 0           # 0: no HTTP response (timeout, connection failure)
    usage: Usage | None = None
    cost_usd: float = 0.0
    latency_s: float = 0.0
    retry_after_s: float | None = None
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["status"] = self.status.value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AttemptRecord:
        usage = data.get("usage")
        return cls(attempt=int(data["attempt"]), status=CallStatus(data["status"]),
                   http_status=int(data.get("http_status", 0)),
                   usage=Usage(**usage) if isinstance(usage, dict) else None,
                   cost_usd=float(data.get("cost_usd", 0.0)), latency_s=float(data.get("latency_s", 0.0)),
                   retry_after_s=data.get("retry_after_s"), error=str(data.get("error", "")))


def attempt_records(call: LLMCall) -> tuple[AttemptRecord, ...]:
    """The per-attempt records a provider stored in ``call.extra["attempts"]``."""
    raw = call.extra.get("attempts")
    if not raw:
        return ()
    return tuple(AttemptRecord.from_json(item) for item in json.loads(raw))


@dataclass(frozen=True)
class WireRequest:
    """A request body and headers, without the key (added at send time)."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    max_tokens: int | None = None  # what was actually sent


@dataclass(frozen=True)
class WireReply:
    """A 2xx body as understood by a wire format."""

    status: CallStatus             # OK, TRUNCATED or MALFORMED
    text: str = ""
    finish_reason: str = ""
    response_id: str = ""
    error: str = ""


def parse_retry_after(headers: Any, now: datetime | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms)
        except ValueError:
            ms = math.nan
        if math.isfinite(ms):
            return max(ms / 1000.0, 0.0)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def scan_usage(text: str) -> dict[str, Any] | None:
    """The first JSON object that follows a ``"usage"`` key in a body that is not valid JSON."""
    decoder = json.JSONDecoder()
    start = 0
    while True:
        at = text.find('"usage"', start)
        if at < 0:
            return None
        pos = at + len('"usage"')
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos < len(text) and text[pos] == ":":
            pos += 1
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
            try:
                obj, _ = decoder.raw_decode(text, pos)
            except ValueError:
                obj = None
            if isinstance(obj, dict):
                return obj
        start = at + 1


def int_field(obj: Any, *path: str) -> int | None:
    """``obj[path[0]][path[1]]...`` when it is a non-negative int (not a bool), else None."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    if isinstance(obj, bool) or not isinstance(obj, int) or obj < 0:
        return None
    return obj


def str_field(obj: Any, key: str) -> str:
    """``obj[key]`` when ``obj`` is a dict and the value a string, else ""."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


def estimate_prompt_tokens(prompt: Prompt) -> int:
    """A cheap over-estimate-ish of prompt tokens (4 characters a token, 4 per message)."""
    return sum(math.ceil(len(m.content) / 4) + 4 for m in prompt.messages)


class _LoopState:
    """Things bound to one event loop: the HTTP client, the semaphore, the rate buckets."""

    def __init__(self, loop: asyncio.AbstractEventLoop, config: EndpointConfig) -> None:
        self.loop = loop
        # One pool per origin of up to max_concurrency connections: the semaphore below lets
        # no more requests through, so a request never waits for a connection.
        self.client = HTTPClient(max_connections=config.max_concurrency, trust_env=True)
        self.semaphore = asyncio.Semaphore(config.max_concurrency)
        self.rpm: TokenBucket | None = None
        self.tpm: TokenBucket | None = None
        if config.requests_per_minute:
            rate = config.requests_per_minute / 60.0
            self.rpm = TokenBucket(rate, max(1.0, rate * config.burst_s))
        if config.tokens_per_minute:
            rate = config.tokens_per_minute / 60.0
            self.tpm = TokenBucket(rate, max(1.0, rate * config.burst_s))


class Provider(abc.ABC):
    """A client for one endpoint. Subclasses say how to build requests and read replies."""

    kind: ClassVar[str]

    def __init__(self, config: EndpointConfig, prices: PriceTable | None = None) -> None:
        if config.kind != self.kind:
            raise ProviderConfigError(f"endpoint {config.name!r} has kind {config.kind!r}, "
                                      f"not {self.kind!r}")
        self.config = config
        self.prices = prices if prices is not None else PriceTable()
        self._api_key()  # fail at set-up, not at the first call, when the variable is unset
        self._state: _LoopState | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config.name!r}, {self.config.base_url!r})"

    def __getstate__(self) -> dict[str, Any]:
        """Pickle config and prices only (a Ray actor rebuilds its client on its own loop)."""
        state = dict(self.__dict__)
        state["_state"] = None
        return state

    # -- what a wire format defines ------------------------------------------------------------

    @abc.abstractmethod
    def build_request(self, prompt: Prompt, *, model: str, temperature: float | None,
                      max_tokens: int | None) -> WireRequest: ...

    @abc.abstractmethod
    def auth_headers(self, key: str) -> dict[str, str]: ...

    @abc.abstractmethod
    def parse_reply(self, data: Any) -> WireReply:
        """Read a decoded 2xx JSON body."""

    @abc.abstractmethod
    def parse_usage(self, usage: Any) -> Usage | None:
        """Read the wire format's usage object; None when it is not one."""

    # -- the call ------------------------------------------------------------------------------

    def _api_key(self) -> str:
        env = self.config.api_key_env
        if not env:
            return ""
        key = os.environ.get(env, "")
        if not key:
            raise ProviderConfigError(f"endpoint {self.config.name!r}: environment variable {env} "
                                      "is not set; it must hold the API key")
        return key

    def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._state
        if state is not None and state.loop is not loop:
            if not state.loop.is_closed():
                raise RuntimeError(f"provider {self.config.name!r} is in use by another event loop")
            state = None  # the old loop is gone (e.g. a second asyncio.run): start afresh
        if state is None:
            state = self._state = _LoopState(loop, self.config)
        return state

    async def aclose(self) -> None:
        """Close the HTTP connections of the current loop's client."""
        state, self._state = self._state, None
        if state is not None and not state.loop.is_closed():
            await state.client.aclose()

    async def __aenter__(self) -> Provider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _redact(self, text: str) -> str:
        env = self.config.api_key_env
        key = os.environ.get(env, "") if env else ""
        if len(key) >= 4:
            text = text.replace(key, _REDACTED)
        return text

    def _backoff(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after * (1.0 + 0.1 * random.random())
        ceiling = min(self.config.backoff_cap_s, self.config.backoff_base_s * 2.0 ** retry)
        return random.uniform(0.0, ceiling)

    async def complete(self, prompt: Prompt, *, model: str, temperature: float | None,
                       max_tokens: int | None, deadline_s: float,
                       idempotency_key: str | None = None) -> LLMCall:
        """Send ``prompt`` with retries; every outcome is a call record (see the module doc).
        ``idempotency_key`` goes in every attempt's ``idempotency_header``."""
        start = time.monotonic()
        deadline = start + deadline_s
        request = self.build_request(prompt, model=model, temperature=temperature, max_tokens=max_tokens)
        if idempotency_key and self.config.idempotency_header:
            request = replace(request, headers={
                **request.headers, self.config.idempotency_header: idempotency_key})
        url = self.config.base_url.rstrip("/") + request.path
        state = self._loop_state()
        estimate = estimate_prompt_tokens(prompt)
        records: list[AttemptRecord] = []
        reply = WireReply(CallStatus.TIMEOUT)
        unpriced = False
        for n in range(1, self.config.max_retries + 2):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                reply = _final_timeout(reply, "deadline passed before the request could be sent")
                break
            try:
                await asyncio.wait_for(self._admit(state, estimate), remaining)
            except asyncio.TimeoutError:
                reply = _final_timeout(reply, "deadline passed waiting for the endpoint's limits")
                break
            try:
                timeout = max(min(self.config.timeout_s, deadline - time.monotonic()), 0.001)
                sent = time.monotonic()
                record, reply = await self._send(state.client, n, url, request, model, timeout)
                record = _with_latency(record, time.monotonic() - sent)
            finally:
                state.semaphore.release()
            if state.tpm is not None:
                state.tpm.adjust((record.usage.total_tokens if record.usage is not None else 0) - estimate)
            records.append(record)
            if record.usage is not None and not self.prices.cost(model, record.usage).priced:
                unpriced = True
            if not _retryable(record) or n > self.config.max_retries:
                break
            delay = self._backoff(n - 1, record.retry_after_s)
            if time.monotonic() + delay >= deadline:
                log.info("endpoint %s: attempt %d ended %s; no time left for a retry in %.2fs",
                         self.config.name, n, record.status.value, delay)
                break
            log.info("endpoint %s: attempt %d ended %s (HTTP %d); retrying in %.2fs",
                     self.config.name, n, record.status.value, record.http_status, delay)
            await asyncio.sleep(delay)
        return self._call(prompt, model, temperature, request, records, reply, unpriced,
                          time.monotonic() - start)

    async def _admit(self, state: _LoopState, estimate: int) -> None:
        """Take a concurrency slot (released by the caller after sending) and the rate tokens."""
        await state.semaphore.acquire()
        try:
            if state.rpm is not None:
                await state.rpm.acquire(1)
            if state.tpm is not None:
                await state.tpm.acquire(estimate)
        except BaseException:
            state.semaphore.release()
            raise

    async def _send(self, client: HTTPClient, n: int, url: str, request: WireRequest,
                    model: str, timeout: float) -> tuple[AttemptRecord, WireReply]:
        headers = {"content-type": "application/json", **request.headers,
                   **self.auth_headers(self._api_key())}
        try:
            # The client's timeout bounds the whole exchange, a trickling reply included.
            response = await client.post(url, json=request.body, headers=headers, timeout=timeout)
        except HTTPTimeout:
            error = f"no reply within {timeout:.3g}s"
            return (AttemptRecord(n, CallStatus.TIMEOUT, error=error),
                    WireReply(CallStatus.TIMEOUT, error=error))
        except HTTPError as exc:
            error = self._redact(f"{type(exc).__name__}: {exc}")
            return (AttemptRecord(n, CallStatus.SERVER_ERROR, error=error),
                    WireReply(CallStatus.SERVER_ERROR, error=error))
        code = response.status_code
        body = response.text
        try:
            data: Any = json.loads(body)
            decoded = True
        except ValueError:
            data, decoded = None, False
        raw_usage = data.get("usage") if isinstance(data, dict) else None
        if raw_usage is None and not decoded:
            raw_usage = scan_usage(body)
        usage = self.parse_usage(raw_usage) if raw_usage is not None else None
        cost = self.prices.cost(model, usage).usd
        if 200 <= code < 300:
            if decoded:
                reply = self.parse_reply(data)
            else:
                reply = WireReply(CallStatus.MALFORMED, error=f"HTTP {code} body is not JSON: "
                                  f"{self._redact(body[:_ERROR_BODY_CHARS])!r}")
            reply = WireReply(reply.status, reply.text, reply.finish_reason, reply.response_id,
                              self._redact(reply.error))
            return AttemptRecord(n, reply.status, code, usage, cost, error=reply.error), reply
        if code == 429:
            status = CallStatus.RATE_LIMITED
        elif code >= 500:
            status = CallStatus.SERVER_ERROR
        elif code == 408:
            status = CallStatus.TIMEOUT
        else:
            status = CallStatus.CLIENT_ERROR
        error = self._redact(f"HTTP {code}: {body[:_ERROR_BODY_CHARS]}")
        retry_after = parse_retry_after(response.headers)
        return (AttemptRecord(n, status, code, usage, cost, retry_after_s=retry_after, error=error),
                WireReply(status, error=error))

    def _call(self, prompt: Prompt, model: str, temperature: float | None, request: WireRequest,
              records: list[AttemptRecord], reply: WireReply, unpriced: bool, elapsed: float) -> LLMCall:
        billed = [r.usage for r in records if r.usage is not None]
        usage: Usage | None = None
        for u in billed:
            usage = u if usage is None else usage + u
        extra = {"attempts": json.dumps([r.to_json() for r in records], separators=(",", ":")),
                 "endpoint_kind": self.kind}
        if unpriced:
            extra["price"] = "unknown"
        return LLMCall(provider=self.config.name, model=model, prompt=prompt, status=reply.status,
                       text=reply.text, usage=usage, cost_usd=sum(r.cost_usd for r in records),
                       latency_s=elapsed, attempts=len(records), finish_reason=reply.finish_reason,
                       error=self._redact(reply.error), response_id=reply.response_id,
                       temperature=temperature, max_tokens=request.max_tokens, extra=extra)


def _retryable(record: AttemptRecord) -> bool:
    return record.status in (CallStatus.RATE_LIMITED, CallStatus.SERVER_ERROR, CallStatus.TIMEOUT)


def _with_latency(record: AttemptRecord, latency: float) -> AttemptRecord:
    return AttemptRecord(record.attempt, record.status, record.http_status, record.usage, record.cost_usd,
                         latency, record.retry_after_s, record.error)


def _final_timeout(last: WireReply, why: str) -> WireReply:
    """The outcome when the deadline ends the call: the last attempt's status, else TIMEOUT."""
    if last.status is CallStatus.TIMEOUT:
        return WireReply(CallStatus.TIMEOUT, error=f"{last.error}; {why}" if last.error else why)
    return last
