"""Console sign-in: scrypt password hashes, signed session cookies, CSRF tokens.

- Passwords are stored only as `scrypt$N$r$p$salt$hash` (stdlib `hashlib.scrypt`, N=2^17,
  r=8, p=1 as OWASP advises), made by `policybot console hash-password`; verification is
  constant-time. Hashes of the older cost (N=2^14) still verify; signing in with one says to
  make a new one (the hashes live in POLICYBOT_CONSOLE_USERS, which policybot cannot rewrite).
- Failed sign-ins are counted in Redis, so that every console process and app instance
  shares one throttle (LoginThrottle).
- The session is a cookie holding {user, account fingerprint, csrf token, issue time},
  HMAC-SHA256-signed with POLICYBOT_CONSOLE_SECRET (or a random secret kept in
  POLICYBOT_HOME/console-secret, mode 0600). HttpOnly, SameSite=Strict, Secure over HTTPS
  (POLICYBOT_CONSOLE_SECURE_COOKIE), path /admin, expiring after
  POLICYBOT_CONSOLE_SESSION_HOURS. A session is treated as signed out when its user is no
  longer configured, when the user's password hash changed (the fingerprint is an HMAC of
  it), or when the user logged out after it was issued (table console_session_cutoffs).
- Every POST carries the session's CSRF token (a form field or the X-CSRF-Token header).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import redis

from core import services
from core.config import ConfigError, Settings, home_secret, parse_scrypt_hash, secret_value
from core.errors import UserError

log = logging.getLogger(__name__)

COOKIE_NAME = "policybot_console"
DEVICE_COOKIE_NAME = "policybot_console_device"
DEVICE_COOKIE_DAYS = 90
SCRYPT_N, SCRYPT_R, SCRYPT_P, SCRYPT_LEN = 2**17, 8, 1, 32
# scrypt needs 128 * r * (N + p + 2) bytes; parse_scrypt_hash caps 128 * N * r at 128 MiB, and
# OpenSSL's default ceiling (32 MiB) would refuse N=2^17.
SCRYPT_MAXMEM = 2**27 + 2**20
LOGIN_WINDOW_S, LOGIN_MAX_FAILURES = 300, 10
VERIFY_SLOTS, VERIFY_WAIT_S = 2, 10.0  # concurrent scrypt checks; how long a sign-in waits for one
THROTTLE_PREFIX = "policybot:console:sign-in:"  # Redis keys of LoginThrottle


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hash_password(password: str, n: int = SCRYPT_N) -> str:
    """A `scrypt$N$r$p$salt$hash` of the password; `n` below SCRYPT_N only from the tests' settings."""
    if len(password) < 8:
        raise ValueError("use a password of at least 8 characters")
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(
        password.encode(), salt=salt, n=n, r=SCRYPT_R, p=SCRYPT_P, dklen=SCRYPT_LEN, maxmem=SCRYPT_MAXMEM
    )
    return f"scrypt${n}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, encoded: str) -> bool:
    try:
        n, r, p, salt, expected = parse_scrypt_hash(encoded)
        actual = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=len(expected), maxmem=SCRYPT_MAXMEM)
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(actual, expected)


def is_outdated(encoded: str, settings: Settings) -> bool:
    """Whether a hash costs less than new ones do (made before the cost was raised)."""
    n, r, p, _, _ = parse_scrypt_hash(encoded)
    return n * r * p < settings.console_scrypt_n * SCRYPT_R * SCRYPT_P


@lru_cache(maxsize=4)
def _dummy_hash(n: int) -> str:
    """A well-formed hash of a random password: checked for unknown names, so they cost as much as known ones."""
    return hash_password(secrets.token_urlsafe(16), n)


def check_credentials(settings: Settings, user: str, password: str) -> bool:
    accounts = settings.console_accounts
    encoded = accounts.get(user)
    # The users' own cost (2^14 for hashes made before 2^17): a faster "no" would tell names apart.
    dummy_cost = max((parse_scrypt_hash(hashed)[0] for hashed in accounts.values()), default=settings.console_scrypt_n)
    ok = verify_password(password, encoded or _dummy_hash(dummy_cost))
    return ok and encoded is not None


MIN_SECRET_BYTES = 32


def _strong(secret: bytes, where: str) -> bytes:
    if len(secret) < MIN_SECRET_BYTES:
        raise ConfigError(
            f"{where} must be at least {MIN_SECRET_BYTES} bytes (got {len(secret)}); make one with "
            "`python -c 'import secrets; print(secrets.token_urlsafe(48))'`"
        )
    return secret


def session_secret(settings: Settings) -> bytes:
    """The key that signs session cookies: POLICYBOT_CONSOLE_SECRET, or one kept in POLICYBOT_HOME/console-secret."""
    configured = secret_value(settings.console_secret)
    if configured:
        return _strong(configured.encode(), "POLICYBOT_CONSOLE_SECRET")
    path = settings.home / "console-secret"
    return _strong(home_secret(path).encode(), f"the console secret in {path} (delete the file to make a new one)")


@dataclass
class Session:
    user: str | None = None
    account: str = ""  # account_fingerprint() of the user when signed in: a new password ends the session
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    issued: float = field(default_factory=time.time)
    flash: list[list[str]] = field(default_factory=list)  # [level, text] shown on the next page
    changed: bool = False

    def payload(self) -> dict[str, Any]:
        return {"u": self.user, "a": self.account, "c": self.csrf, "t": self.issued, "f": self.flash}

    def sign_in(self, user: str, account: str) -> None:
        self.user, self.account, self.csrf, self.issued = user, account, secrets.token_urlsafe(32), time.time()
        self.changed = True

    def sign_out(self) -> None:
        self.user, self.account, self.csrf, self.issued = None, "", secrets.token_urlsafe(32), time.time()
        self.flash, self.changed = [], True

    def add_flash(self, level: str, text: str) -> None:
        self.flash.append([level, text])
        self.changed = True

    def pop_flash(self) -> list[list[str]]:
        shown, self.flash = self.flash, []
        if shown:
            self.changed = True
        return shown

    def csrf_ok(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(str(token).encode(), self.csrf.encode())


def account_fingerprint(settings: Settings, secret: bytes, user: str) -> str | None:
    """A keyed digest of the user's stored password hash (None for an unknown user)."""
    encoded = settings.console_accounts.get(user)
    if encoded is None:
        return None
    return _b64(hmac.new(secret, b"account\0" + user.encode() + b"\0" + encoded.encode(), hashlib.sha256).digest()[:18])


def sessions_valid_after(settings: Settings, user: str) -> float | None:
    """The time (epoch seconds) before which the user's sessions were ended by a logout, if any."""
    # SQLAlchemy here, not at the top: `policybot console hash-password` imports this module and starts in an instant
    from core import db
    from core.models import ConsoleSessionCutoff

    with db.session(settings) as session:
        row = session.get(ConsoleSessionCutoff, user)
        return row.valid_after.timestamp() if row else None


def end_sessions(settings: Settings, user: str) -> None:
    """Refuse every session of the user issued until now (logout, in every browser)."""
    # SQLAlchemy here, not at the top: as in sessions_valid_after
    from sqlalchemy.dialects.postgresql import insert

    from core import db
    from core.models import ConsoleSessionCutoff

    now = datetime.fromtimestamp(time.time(), UTC)
    statement = insert(ConsoleSessionCutoff).values(user_name=user, valid_after=now)
    with db.session(settings) as session:
        session.execute(statement.on_conflict_do_update(index_elements=["user_name"], set_={"valid_after": now}))


def encode_session(session: Session, secret: bytes) -> str:
    return _sign(session.payload(), secret)


def decode_session(value: str | None, secret: bytes, settings: Settings) -> Session:
    """The cookie's session, or a fresh anonymous one if it is missing, forged, expired or for a removed user."""
    data = _verified(value, secret)
    if data is None:
        return Session(changed=True)
    try:
        session = Session(
            user=data.get("u"),
            account=str(data.get("a") or ""),
            csrf=str(data["c"]),
            issued=float(data["t"]),
            flash=list(data.get("f") or []),
        )
    except (ValueError, KeyError, TypeError):
        return Session(changed=True)
    if time.time() - session.issued > settings.console_session_hours * 3600:
        return Session(changed=True)
    if session.user is not None:
        # Signed out when the user was removed from the config or their password hash changed.
        expected = account_fingerprint(settings, secret, str(session.user))
        if expected is None or not hmac.compare_digest(session.account.encode(), expected.encode()):
            return Session(changed=True)
    return session


def encode_device(account: str, secret: bytes) -> str:
    """A cookie for a browser that signed in to this account (`account_fingerprint`: the user
    and their current password hash, keyed): guesses at the name from elsewhere cannot lock it
    out (see LoginThrottle). A password change revokes it, and it names no one."""
    return _sign({"a": account, "t": time.time()}, _purpose_key(secret, b"device"))


def is_known_device(value: str | None, secret: bytes, account: str | None) -> bool:
    """True when the cookie is ours, unexpired, and was issued for this account as it is now."""
    data = _verified(value, _purpose_key(secret, b"device")) if account is not None else None
    if data is None:
        return False
    try:
        issued, issued_for = float(data["t"]), str(data["a"])
    except (ValueError, KeyError, TypeError):
        return False
    fresh = time.time() - issued < DEVICE_COOKIE_DAYS * 86400
    return fresh and hmac.compare_digest(issued_for.encode(), str(account).encode())


def _sign(payload: dict[str, Any], key: bytes) -> str:
    """A cookie value: the payload as base64 JSON, then its HMAC."""
    body = _b64(json.dumps(payload, separators=(",", ":")).encode())
    return body + "." + _b64(hmac.new(key, body.encode(), hashlib.sha256).digest())


def _verified(value: str | None, key: bytes) -> dict[str, Any] | None:
    """The payload of a cookie value signed with `key`; None if missing, forged or unreadable."""
    if not value or "." not in value:
        return None
    body, _, signature = value.rpartition(".")
    expected = _b64(hmac.new(key, body.encode(), hashlib.sha256).digest())
    if not hmac.compare_digest(signature.encode(), expected.encode()):
        return None
    try:
        data = json.loads(_unb64(body))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _purpose_key(secret: bytes, purpose: bytes) -> bytes:
    """A key of its own per kind of cookie, so that no cookie's signature passes for another's."""
    return hmac.new(secret, b"purpose\0" + purpose, hashlib.sha256).digest()


def secure_cookie(settings: Settings, scheme: str) -> bool:
    mode = settings.console_secure_cookie
    return mode == "true" or (mode == "auto" and scheme == "https")


def user_tag(user: str) -> str:
    """A short digest standing for a sign-in name in logs and in the throttle (the name itself is never kept)."""
    return hashlib.sha256(user.encode(errors="replace")).hexdigest()[:12]


class LoginBusy(Exception):
    """Every password check slot stayed busy: the sign-in is refused rather than queued without end."""


# Count an attempt on every key, or on none when one is at its limit: one step in Redis, so that
# parallel guesses through several processes cannot all slip through. Redis's own clock, so that
# the processes' clocks do not matter. KEYS: the counters; ARGV: window (s), limit, the attempt's id.
_ATTEMPT_SCRIPT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local window, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
for _, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  if redis.call('ZCARD', key) >= limit then return 0 end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[3])
  redis.call('EXPIRE', key, math.ceil(window) + 1)
end
return 1
"""


class ThrottleUnavailable(Exception):
    """Redis, which holds the sign-in throttle, cannot be reached: sign-in is refused, not unthrottled."""


class LoginThrottle:
    """Sign-in attempts: at most LOGIN_MAX_FAILURES per client address and per user name per LOGIN_WINDOW_S,
    counted in Redis (services.redis_url), so every console process and app instance shares them.

    A browser that signed in as the user before (a known device, `is_known_device`) is held
    only to its address's limit: guessing at the name from elsewhere locks out strangers,
    not the user.

    An attempt is counted before its password is checked, so parallel guesses cannot all slip
    through; a success un-counts itself and clears its address. At most VERIFY_SLOTS scrypt
    checks run at once per process (each takes 128 MiB and about a second of CPU at N=2^17).
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._client: redis.Redis | None = None
        self._client_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(VERIFY_SLOTS)

    def _redis(self) -> redis.Redis:
        with self._client_lock:  # connected on first use: the embedded Redis may have to start
            if self._client is None:
                url = services.redis_url(self._settings)
                self._client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
            return self._client

    @staticmethod
    def _keys(client: str, user: str) -> tuple[str, str]:
        return THROTTLE_PREFIX + "address:" + client, THROTTLE_PREFIX + "user:" + user_tag(user)

    @classmethod
    def _limited_by(cls, client: str, user: str, known_device: bool) -> tuple[str, ...]:
        address, name = cls._keys(client, user)
        return (address,) if known_device else (address, name)

    def attempt(self, client: str, user: str, known_device: bool = False) -> str | None:
        """Count an attempt and return its id, or None (not counted) when the address or the name is at its limit."""
        stamp = secrets.token_hex(8)
        keys = self._limited_by(client, user, known_device)
        try:
            counted = self._redis().eval(_ATTEMPT_SCRIPT, len(keys), *keys, LOGIN_WINDOW_S, LOGIN_MAX_FAILURES, stamp)
        except (redis.RedisError, UserError) as error:  # UserError: the embedded Redis could not start
            raise ThrottleUnavailable(type(error).__name__) from None
        return stamp if counted else None

    def succeeded(self, client: str, user: str, stamp: str) -> None:
        address, name = self._keys(client, user)
        try:
            pipe = self._redis().pipeline()
            pipe.delete(address)
            pipe.zrem(name, stamp)
            pipe.execute()
        except (redis.RedisError, UserError) as error:  # the attempts stay counted: at worst fewer tries left
            log.warning("could not clear the sign-in throttle after a success: %s", type(error).__name__)

    async def check(self, settings: Settings, user: str, password: str) -> bool:
        """check_credentials in a worker thread, once one of the VERIFY_SLOTS is free (LoginBusy after VERIFY_WAIT_S)."""
        # Starlette and anyio: not at the top, where `policybot console hash-password` would load them
        from starlette.concurrency import run_in_threadpool

        deadline = time.monotonic() + VERIFY_WAIT_S
        while not self._slots.acquire(blocking=False):
            if time.monotonic() > deadline:
                raise LoginBusy()
            await asyncio.sleep(0.02)
        try:
            return await run_in_threadpool(check_credentials, settings, user, password)
        finally:
            self._slots.release()
