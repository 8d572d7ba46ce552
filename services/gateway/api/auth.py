"""API keys and per-key rate limits for the gateway, as pure building blocks.

- Keys look like ``gmk_<id>_<secret>``: ``id`` is 8 hex characters that
  name the stored record (not secret), ``secret`` 32 random bytes in
  URL-safe base64. Only a salted scrypt hash is stored, one line a key:
  ``<name>:<id>:scrypt:<n>:<r>:<p>:<salt>:<hash>`` (``graphmesh keys create``).
- ``KeyStore`` loads those lines from a file and/or an environment value and
  verifies a presented key in constant time. ``extract_key`` reads it from
  ``authorization: Bearer KEY`` or ``x-api-key: KEY`` (gRPC metadata or HTTP
  headers alike). ``TokenBucketLimiter`` answers how long a key must wait.
- ``Gate`` combines both into one decision; ``AuthInterceptor`` applies it
  to a grpc.aio server (UNAUTHENTICATED / RESOURCE_EXHAUSTED with a
  ``retry-after`` trailer), exempting health and reflection; ``build_gate``
  makes it from GatewaySettings (auth.enabled, auth.api_keys_file, auth.api_keys,
  rate_limit.per_second, rate_limit.burst).
- Keys never reach a log: services.common.redaction masks them in every service.
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import logging
import math
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from services.common.errors import ConfigError
from services.common.mesh_auth import refusing_handler

log = logging.getLogger("graphmesh.gateway.auth")

# scrypt cost: N=2^14, r=8, p=1 (16 MiB, tens of milliseconds), the
# interactive-login parameters of RFC 7914 section 2 / Python's hashlib docs.
SCRYPT_N, SCRYPT_R, SCRYPT_P, SCRYPT_DKLEN, SALT_BYTES = 2**14, 8, 1, 32, 16
KEY_PREFIX = "gmk"
_KEY = re.compile(r"^gmk_([0-9a-f]{8})_([A-Za-z0-9_-]{43})$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_BEARER = re.compile(r"^\s*bearer\s+(\S+)\s*$", re.I)
EXEMPT_SERVICES = frozenset({"grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection"})


@dataclass(frozen=True)
class KeyRecord:
    """One stored key: its name, public id and scrypt parameters and hash."""

    name: str
    key_id: str
    n: int
    r: int
    p: int
    salt: bytes
    digest: bytes

    def line(self) -> str:
        """The stored form, ``name:id:scrypt:n:r:p:salt:hash`` (base64)."""
        b64 = lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")  # noqa: E731
        return f"{self.name}:{self.key_id}:scrypt:{self.n}:{self.r}:{self.p}:{b64(self.salt)}:{b64(self.digest)}"


def _scrypt(secret: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(secret.encode(), salt=salt, n=n, r=r, p=p, maxmem=256 * 1024 * 1024, dklen=SCRYPT_DKLEN)


def new_key(name: str) -> tuple[str, KeyRecord]:
    """A fresh random key for ``name`` and its stored record.

    Raises:
        ValueError: the name is not 1-64 of [A-Za-z0-9_.-] starting alphanumeric.
    """
    if not _NAME.match(name):
        raise ValueError("key name: 1-64 characters of letters, digits, '_', '.', '-', starting with a letter or digit")
    key_id, secret = secrets.token_hex(4), secrets.token_urlsafe(32)
    salt = secrets.token_bytes(SALT_BYTES)
    record = KeyRecord(name, key_id, SCRYPT_N, SCRYPT_R, SCRYPT_P, salt, _scrypt(secret, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P))
    return f"{KEY_PREFIX}_{key_id}_{secret}", record


def parse_line(line: str) -> KeyRecord:
    """Parses one stored line. Raises ValueError naming what is wrong (never echoing the hash)."""
    parts = line.strip().split(":")
    if len(parts) != 8 or parts[2] != "scrypt":
        raise ValueError("expected name:id:scrypt:n:r:p:salt:hash")
    name, key_id, _, n, r, p, salt, digest = parts
    if not _NAME.match(name) or not re.fullmatch(r"[0-9a-f]{8}", key_id):
        raise ValueError("bad key name or id")
    unb64 = lambda s: base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))  # noqa: E731
    return KeyRecord(name, key_id, int(n), int(r), int(p), unb64(salt), unb64(digest))


class KeyStore:
    """Stored keys by id; verifies presented keys. Successful verifications
    are remembered (HMAC of the key under a per-process secret -> name), so
    scrypt runs once per key per process."""

    def __init__(self, records: Iterable[KeyRecord]) -> None:
        self._by_id: dict[str, KeyRecord] = {}
        for rec in records:
            if rec.key_id in self._by_id:
                raise ValueError(f"duplicate key id {rec.key_id} (names {self._by_id[rec.key_id].name}, {rec.name})")
            self._by_id[rec.key_id] = rec
        self._pepper = secrets.token_bytes(32)
        self._verified: OrderedDict[bytes, str] = OrderedDict()
        self._file, self._env, self._stamp = "", "", None

    @classmethod
    def load(cls, file: str = "", env_value: str = "") -> "KeyStore":
        """Keys from ``file`` (one line each; blank and # lines skipped) and
        from ``env_value`` (lines separated by commas or newlines).
        Raises ValueError with the source and line number of a bad line."""
        sources = [(file, Path(file).read_text(encoding="utf-8").splitlines())] if file else []
        sources.append(("environment", re.split(r"[,\n]", env_value)))
        records = []
        for source, lines in sources:
            for number, line in enumerate(lines, 1):
                if line.strip() and not line.lstrip().startswith("#"):
                    try:
                        records.append(parse_line(line))
                    except ValueError as err:
                        raise ValueError(f"{source}: line {number}: {err}") from None
        store = cls(records)
        store._file, store._env, store._stamp = file, env_value, _stamp(file)
        return store

    def _refresh(self) -> None:
        """Reads the keys file again when it changed since it was read, so a key added or removed (revoked)
        counts from the next call without a restart (a trial's revoked key kept working until one); a file
        that no longer parses keeps the keys read before, with a warning."""
        stamp = _stamp(self._file) if self._file else None
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            fresh = KeyStore.load(self._file, self._env)
        except (OSError, ValueError) as err:
            log.warning("API keys file %s not reloaded, the keys read before stay: %s", self._file, err)
            return
        self._by_id, self._verified = fresh._by_id, OrderedDict()
        log.info("API keys file %s read again: %d keys", self._file, len(self._by_id))

    def __len__(self) -> int:
        return len(self._by_id)
    def _remembered(self, presented: str) -> tuple[bytes, str | None]:
        tag = hmac.new(self._pepper, presented.encode(), hashlib.sha256).digest()
        return tag, self._verified.get(tag)

    def verify(self, presented: str | None) -> str | None:
        """The key's name when ``presented`` is a stored key, else None.
        CPU-bound (scrypt) on the first sight of a key: call ``averify`` from
        an event loop."""
        self._refresh()
        match = _KEY.match(presented or "")
        record = self._by_id.get(match.group(1)) if match else None
        tag, name = self._remembered(presented) if record else (b"", None)
        if record is None or name is not None:
            return name
        if not hmac.compare_digest(_scrypt(match.group(2), record.salt, record.n, record.r, record.p), record.digest):
            return None
        self._verified[tag] = record.name
        while len(self._verified) > 10_000:
            self._verified.popitem(last=False)
        return record.name

    async def averify(self, presented: str | None) -> str | None:
        """``verify`` without blocking the loop (scrypt in a worker thread)."""
        self._refresh()
        if presented and self._remembered(presented)[1] is not None:
            return self.verify(presented)
        return await asyncio.to_thread(self.verify, presented)


def _stamp(file: str) -> tuple[int, int] | None:
    """(modification time in ns, size) of ``file``; None when it cannot be read."""
    with contextlib.suppress(OSError):
        return (status := Path(file).stat()).st_mtime_ns, status.st_size  # one stat: it runs on every key check
    return None


def extract_key(metadata: Iterable[tuple[str, Any]]) -> str | None:
    """The API key in ``authorization: Bearer KEY`` (preferred) or
    ``x-api-key: KEY``; header names in any case, values str or bytes."""
    found: dict[str, str] = {}
    for name, value in metadata or ():
        value = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        found.setdefault(name.lower(), value)
    bearer = _BEARER.match(found.get("authorization", ""))
    return bearer.group(1) if bearer else (found.get("x-api-key", "").strip() or None)


class TokenBucketLimiter:
    """A token bucket per key: ``rate`` tokens a second, at most ``burst``."""

    def __init__(self, rate: float, burst: int = 0, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0:
            raise ValueError("rate must be > 0 tokens per second")
        self.rate, self.burst, self._clock = rate, float(burst or max(1, math.ceil(rate))), clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def acquire(self, key: str, cost: float = 1.0) -> float:
        """Takes ``cost`` tokens for ``key``: 0.0 when admitted, else the
        seconds until they will be there (nothing taken)."""
        with self._lock:
            now = self._clock()
            tokens, last = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= cost:
                self._buckets[key] = (tokens - cost, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (cost - tokens) / self.rate


def retry_after(seconds: float) -> str:
    """Whole seconds for a Retry-After header / trailer (RFC 9110 section 10.2.3), at least 1."""
    return str(max(1, math.ceil(seconds)))


@dataclass(frozen=True)
class Decision:
    """Outcome of ``Gate.check``: ``code`` None when allowed; ``http_status``
    401 / 429 for REST; ``retry_after`` seconds as text when rate limited."""

    key_name: str | None
    code: grpc.StatusCode | None = None
    http_status: int = 200
    message: str = ""
    retry_after: str | None = None


class Gate:
    """One auth + rate-limit decision for gRPC metadata or HTTP headers."""

    def __init__(self, keys: KeyStore, limiter: TokenBucketLimiter | None = None) -> None:
        self.keys, self.limiter = keys, limiter

    async def check(self, metadata: Iterable[tuple[str, Any]]) -> Decision:
        """Verifies the key in ``metadata``, then charges its bucket."""
        name = await self.keys.averify(extract_key(metadata))
        if name is None:
            return Decision(None, grpc.StatusCode.UNAUTHENTICATED, 401, "a valid API key is required: authorization: Bearer KEY, or x-api-key: KEY")
        wait = self.limiter.acquire(name) if self.limiter else 0.0
        if wait > 0:
            after = retry_after(wait)
            return Decision(name, grpc.StatusCode.RESOURCE_EXHAUSTED, 429, f"rate limit reached for key {name!r}; retry after {after} s", after)
        return Decision(name)


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Rejects RPCs without a valid key (UNAUTHENTICATED) or over their
    key's rate (RESOURCE_EXHAUSTED, trailing metadata ``retry-after``:
    seconds); services in ``exempt`` (health, reflection) pass untouched."""

    def __init__(self, gate: Gate, exempt: Iterable[str] = EXEMPT_SERVICES) -> None:
        self.gate, self.exempt = gate, frozenset(exempt)

    async def intercept_service(self, continuation: Callable, handler_call_details: grpc.HandlerCallDetails) -> Any:
        method = handler_call_details.method
        if method.split("/")[1] in self.exempt:
            return await continuation(handler_call_details)
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        decision = await self.gate.check(handler_call_details.invocation_metadata or ())
        if decision.code is None:
            return handler
        note = f"{method} refused: {decision.code.name} (key {decision.key_name or 'none/invalid'})"
        trailer = (("retry-after", decision.retry_after),) if decision.retry_after else ()
        return refusing_handler(handler, decision.code, decision.message, trailer, lambda peer: log.info("%s from %s", note, peer))


def build_gate(enabled: bool, keys_file: str, keys: str, rate_per_second: float, burst: int) -> Gate | None:
    """The gate of the gateway's settings; None when auth is off.

    Raises:
        ConfigError: the keys file cannot be read, a stored key line is
            malformed, or auth is on with no key.
    """
    if not enabled:
        return None
    try:
        store = KeyStore.load(keys_file, keys)
    except (OSError, ValueError) as err:
        raise ConfigError(f"API keys: {err}") from None
    if not len(store):
        raise ConfigError("GRAPHMESH_GATEWAY_AUTH__ENABLED but no API key is configured (AUTH__API_KEYS_FILE / AUTH__API_KEYS)")
    limiter = TokenBucketLimiter(rate_per_second, burst) if rate_per_second > 0 else None
    return Gate(store, limiter)
