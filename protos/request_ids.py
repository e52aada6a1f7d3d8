"""Request ids the coordinator sends with ``Evaluate``: unpredictable, bounded, printable.

An agent makes ``Evaluate`` idempotent on the request id: a repeated id returns the verdict of
the first call. So whoever can guess an id before the coordinator sends it can send it first,
with other content, and have that verdict returned to the coordinator (issue 19: a third party
pre-bound ``PASSED`` to a broken candidate when ids were a plain hash of operator and candidate).
Two kinds of id are made here, neither guessable:

* :func:`fresh` — random (128 bits from ``secrets``): one evaluation, retried under one id;
* :meth:`RequestIds.derive` — deterministic, for callers that want a repeated evaluation (a
  resumed run, two trajectories with the same file) to reach the agent under the same id: an
  HMAC-SHA256, keyed with the coordinator's secret, of operator id, version, candidate hash,
  evaluation mode and run. Without the secret nobody can compute it.

The secret (:func:`load_coordinator_secret`) is kept like the agent's: ``KGB_COORDINATOR_SECRET``
(hex) or a file created once, private to its owner. It never appears in an id, a message, a
log line or a ``repr``. Ids stay under :data:`MAX_CHARS` printable ASCII characters, which
agents require.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

MAX_CHARS = 127           # agents refuse ids of 128 characters or more
MIN_SECRET_BYTES = 16
SECRET_ENV = "KGB_COORDINATOR_SECRET"            # hex
SECRET_FILE_ENV = "KGB_COORDINATOR_SECRET_FILE"  # default ~/.cache/kgb/coordinator-secret
_PREFIX = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
_MAC_HEX = 32             # 128 bits of the HMAC: collisions and guesses are out of reach


class SecretError(RuntimeError):
    """The coordinator secret is unusable (never quotes the value)."""


def is_valid(request_id: str) -> bool:
    """Non-empty, under :data:`MAX_CHARS` + 1 characters, printable ASCII without spaces."""
    return 0 < len(request_id) <= MAX_CHARS and all("!" <= c <= "~" for c in request_id)


def _prefix(prefix: str) -> str:
    if not _PREFIX.match(prefix):
        raise ValueError(f"request id prefix {prefix!r}: lower-case letters, digits and '-', "
                         "at most 32, starting with a letter")
    return prefix


def fresh(prefix: str) -> str:
    """A random id, ``<prefix>-<32 hex>``: for one evaluation and its retries."""
    return f"{_prefix(prefix)}-{secrets.token_hex(16)}"


@dataclass(frozen=True)
class RequestIds:
    """Deterministic ids keyed with the coordinator's secret (kept out of ``repr``)."""

    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.secret) < MIN_SECRET_BYTES:
            raise SecretError(f"the coordinator secret must be at least {MIN_SECRET_BYTES} bytes")

    @classmethod
    def load(cls) -> RequestIds:
        return cls(load_coordinator_secret())

    def derive(self, *, operator_id: str, operator_version: int, candidate_hash: str,
               mode: str, run: str, prefix: str = "kgb") -> str:
        """``<prefix>-<32 hex>``: the same inputs and secret give the same id, anything else
        another one. Each field is length-prefixed, so no two field lists share a message."""
        parts = (operator_id, str(operator_version), candidate_hash, mode, run)
        message = "".join(f"{len(p)}:{p};" for p in parts).encode("utf-8", "surrogateescape")
        mac = hmac.new(self.secret, message, hashlib.sha256).hexdigest()[:_MAC_HEX]
        return f"{_prefix(prefix)}-{mac}"


def load_coordinator_secret() -> bytes:
    """``KGB_COORDINATOR_SECRET`` (hex), else the file at ``KGB_COORDINATOR_SECRET_FILE`` (default
    ``~/.cache/kgb/coordinator-secret``), created once with 32 random bytes, mode 0600."""
    env = os.environ.get(SECRET_ENV)
    if env:
        try:
            value = bytes.fromhex(env)
        except ValueError:
            raise SecretError(f"{SECRET_ENV} must be hex (e.g. from `openssl rand -hex 32`)") from None
        if len(value) < MIN_SECRET_BYTES:
            raise SecretError(f"{SECRET_ENV} must hold at least {MIN_SECRET_BYTES} bytes")
        return value
    default = Path.home() / ".cache" / "kgb" / "coordinator-secret"
    return _read_or_create(Path(os.environ.get(SECRET_FILE_ENV) or default))


def _read_or_create(path: Path) -> bytes:
    """Create the file atomically (a concurrent creator's file wins), else read it."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)  # never replaces an existing secret
    finally:
        tmp.unlink(missing_ok=True)
    return _read_private(path)


def _read_private(path: Path) -> bytes:
    """The secret file's bytes, refusing a link, a file of another user, or one others can read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise SecretError(f"cannot open the coordinator secret {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise SecretError(f"{path} is not a regular file owned by this user")
        if st.st_mode & 0o077:
            raise SecretError(f"{path} is readable or writable by others: chmod 600 it, or "
                              "delete it to make a new one")
        value = f.read()
    if len(value) < MIN_SECRET_BYTES:
        raise SecretError(f"{path} holds fewer than {MIN_SECRET_BYTES} bytes")
    return value
