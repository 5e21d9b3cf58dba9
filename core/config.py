"""Settings: environment variables and an optional `.env`, validated once.

Every package (crag pipeline wiring, ingestion, workers, bot, CLI) reads its settings
from here, so there is one place that says what can be configured and what the
defaults are.
"""

from __future__ import annotations

import base64
import os
import secrets
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.errors import UserError


class ConfigError(UserError):
    """Configuration is invalid; the message says which setting and why."""


def parse_scrypt_hash(encoded: str) -> tuple[int, int, int, bytes, bytes]:
    """N, r, p, salt and digest of a `scrypt$N$r$p$salt$hash` password hash; ValueError says what is wrong."""
    parts = encoded.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        raise ValueError(f"expected 6 $-separated parts scrypt$N$r$p$salt$hash, got {len(parts)}")
    try:
        n, r, p = (int(part) for part in parts[1:4])
        salt, digest = (
            base64.b64decode(part + "=" * (-len(part) % 4), altchars=b"-_", validate=True) for part in parts[4:]
        )
    except ValueError:  # binascii.Error is one
        raise ValueError("N, r and p must be whole numbers and salt and hash URL-safe base64") from None
    if n < 2 or n & (n - 1) or r < 1 or p < 1 or n * r * 128 > 2**27:
        raise ValueError("N must be a power of 2 and N, r, p within scrypt's limits (at most 128 MB)")
    if len(salt) < 8 or len(digest) < 16:
        raise ValueError("the salt or the hash is too short")
    return n, r, p, salt, digest


def home_secret(path: Path) -> str:
    """A random secret kept in `path` (mode 0600), made on first use.

    The file is written whole under a temporary name and linked into place, so no process ever
    reads a half-written (empty) secret, and when several start at once the first link wins and
    the others read its secret.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(48))
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass  # another process made it first: use theirs
        finally:
            os.unlink(temporary)
    return path.read_text().strip()


def console_user_pairs(value: str) -> list[tuple[str, str]]:
    """(name, hash) pairs of POLICYBOT_CONSOLE_USERS ("name:hash,name:hash"), stripped."""
    pairs = []
    for entry in (part.strip() for part in value.split(",") if part.strip()):
        name, _, hashed = entry.partition(":")
        pairs.append((name.strip(), hashed.strip()))
    return pairs


def secret_value(secret: SecretStr | str | None) -> str | None:
    """The plain value of a secret setting, for the call that needs it (a connection, a header),
    never for a message. A plain str passes through: `model_copy(update=...)` does not validate."""
    return secret.get_secret_value() if isinstance(secret, SecretStr) else secret


# `policybot evaluator pretrain`'s default budget, which `bench.quality` pretrains with too: the
# longest the learning curve (bench/learning_curve.py, docs/quality.md) allows on 2 cores.
PRETRAIN_MINUTES = 60.0


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore")

    # Where the embedded stack keeps its data, the evaluators and logs.
    policybot_home: Path = Field(default=Path(".policybot"), validation_alias="POLICYBOT_HOME")

    # External servers. Unset means: start the embedded PostgreSQL / Redis.
    # Every secret is a SecretStr: repr(), str() and model dumps show '**********'; secret_value() reads it.
    database_url: SecretStr | None = Field(default=None, validation_alias="DATABASE_URL")
    redis_url: SecretStr | None = Field(default=None, validation_alias="REDIS_URL")
    # Port of the embedded Redis; 0: a free port chosen on first start and kept in $POLICYBOT_HOME/redis/port,
    # so that each home has a Redis of its own.
    redis_port: int = Field(default=0, ge=0, le=65535, validation_alias="POLICYBOT_REDIS_PORT")

    # Knowledge base.
    default_collection: str = Field(default="policies", validation_alias="POLICYBOT_COLLECTION")
    embedding_model: str | None = Field(default=None, validation_alias="POLICYBOT_EMBEDDING_MODEL")
    embed_dim: int = Field(default=384, ge=8, le=4096, validation_alias="POLICYBOT_EMBED_DIM")
    embed_batch_size: int = Field(default=32, ge=1, le=1024, validation_alias="POLICYBOT_EMBED_BATCH")
    chunk_tokens: int = Field(default=200, ge=32, le=512, validation_alias="POLICYBOT_CHUNK_TOKENS")
    chunk_overlap: int = Field(default=20, ge=0, le=256, validation_alias="POLICYBOT_CHUNK_OVERLAP")
    # 200: recall@10 0.93 at 100k chunks and 0.95 at 1M (p99 26 ms) in bench.retrieval_scale, where
    # 100 gave 0.88; at 10k chunks it costs under 1 ms more (docs/performance.md).
    hnsw_ef_search: int = Field(default=200, ge=1, le=1000, validation_alias="POLICYBOT_HNSW_EF_SEARCH")
    max_file_mb: float = Field(default=50.0, gt=0, validation_alias="POLICYBOT_MAX_FILE_MB")

    # CRAG.
    top_k: int = Field(default=10, ge=1, le=100, validation_alias="POLICYBOT_TOP_K")
    upper_threshold: float | None = Field(default=None, validation_alias="POLICYBOT_UPPER")
    lower_threshold: float | None = Field(default=None, validation_alias="POLICYBOT_LOWER")
    strip_threshold: float | None = Field(default=None, validation_alias="POLICYBOT_STRIP_THRESHOLD")
    strip_mode: Literal["sentences", "words"] = Field(default="sentences", validation_alias="POLICYBOT_STRIP_MODE")
    strips_top_n: int = Field(default=5, ge=1, le=50, validation_alias="POLICYBOT_STRIPS_TOP_N")
    fallback_limit: int = Field(default=5, ge=1, le=50, validation_alias="POLICYBOT_FALLBACK_LIMIT")
    contact: str = Field(
        default="the People team in #ask-people or people@example.com",
        validation_alias="POLICYBOT_CONTACT",
    )
    evaluator_path: Path | None = Field(default=None, validation_alias="POLICYBOT_EVALUATOR_PATH")
    evaluator_threads: int = Field(default=1, ge=1, le=64, validation_alias="POLICYBOT_TORCH_THREADS")
    evaluator_int8: bool = Field(default=False, validation_alias="POLICYBOT_EVALUATOR_INT8")
    # bfloat16 inference: "auto" uses it where the CPU has native bf16 (scores move by < 0.01).
    evaluator_bf16: Literal["auto", "on", "off"] = Field(default="auto", validation_alias="POLICYBOT_EVALUATOR_BF16")
    # Memory for passages' MiniLM states, per process: chunks and strips recur across questions.
    evaluator_cache_mb: int = Field(default=256, ge=0, le=65536, validation_alias="POLICYBOT_EVALUATOR_CACHE_MB")
    auto_train: bool = Field(default=True, validation_alias="POLICYBOT_AUTO_TRAIN")  # train after the first upload
    train_minutes: float = Field(default=10.0, gt=0, le=600, validation_alias="POLICYBOT_TRAIN_MINUTES")
    # The labelled policy-qa corpus (datasets/policy-qa/) the evaluator learns from, calibrates on
    # and is gated by, beside the knowledge base's weak supervision; "off" trains on weak supervision alone.
    corpus: str = Field(default="", validation_alias="POLICYBOT_CORPUS")
    # Its documents live in a database of their own (real retrieval, never mixed with the knowledge
    # base): by default "policybot_corpus" beside the policybot database, on the same server.
    corpus_database_url: SecretStr | None = Field(default=None, validation_alias="POLICYBOT_CORPUS_DATABASE_URL")

    # Optional generator: any OpenAI-compatible endpoint; unset means extractive answers. It receives
    # the question unredacted and the kept evidence, restricted documents the asker may see included.
    generator_url: str | None = Field(default=None, validation_alias="POLICYBOT_GENERATOR_URL")
    generator_model: str | None = Field(default=None, validation_alias="POLICYBOT_GENERATOR_MODEL")
    generator_api_key: SecretStr | None = Field(default=None, validation_alias="POLICYBOT_GENERATOR_API_KEY")

    # Slack.
    slack_bot_token: SecretStr | None = Field(default=None, validation_alias="SLACK_BOT_TOKEN")
    slack_signing_secret: SecretStr | None = Field(default=None, validation_alias="SLACK_SIGNING_SECRET")
    slack_app_token: SecretStr | None = Field(default=None, validation_alias="SLACK_APP_TOKEN")
    slack_api_url: str = Field(default="https://slack.com/api/", validation_alias="SLACK_API_URL")
    admin_user_ids: str = Field(default="", validation_alias="POLICYBOT_ADMINS")
    ignore_bots: bool = Field(default=True, validation_alias="POLICYBOT_IGNORE_BOTS")
    # Members of other organisations in Slack Connect conversations: not answered unless this is on.
    answer_outsiders: bool = Field(default=False, validation_alias="POLICYBOT_ANSWER_OUTSIDERS")
    # Guests of the workspace (multi- and single-channel): not answered unless this is on.
    answer_guests: bool = Field(default=False, validation_alias="POLICYBOT_ANSWER_GUESTS")
    # Answers in a channel with guests go to the asker by DM, as in Slack Connect channels (slack_shared/audience.py).
    private_with_guests: bool = Field(default=False, validation_alias="POLICYBOT_PRIVATE_WITH_GUESTS")
    # Other workspaces of our Enterprise Grid organisation, whose members count as ours (team IDs).
    member_team_ids: str = Field(default="", validation_alias="POLICYBOT_MEMBER_TEAMS")
    # Redis redelivers a task whose worker died this long after it was due: it must exceed the answer
    # task's hard time limit (180 s). Retries waiting out a countdown and ingest tasks (30 minutes) are
    # held longer by the worker (workers/celery_app.py, hold_until_due).
    celery_visibility_timeout: int = Field(default=300, ge=2, validation_alias="POLICYBOT_CELERY_VISIBILITY_TIMEOUT")
    # A reply owed in Slack whose task has not moved it on within this long is queued again by the
    # bot's sweep (bot/recovery.py), which looks every POLICYBOT_SWEEP_INTERVAL_S seconds.
    reply_wait_s: int = Field(default=120, ge=2, validation_alias="POLICYBOT_REPLY_WAIT_S")
    sweep_interval_s: float = Field(default=60.0, gt=0, validation_alias="POLICYBOT_SWEEP_INTERVAL_S")
    max_question_chars: int = Field(default=4000, ge=100, le=40000, validation_alias="POLICYBOT_MAX_QUESTION_CHARS")

    # Admin console (`policybot console`, or /admin in HTTP mode).
    # "name:hash" pairs, comma-separated; hashes from `policybot console hash-password`.
    console_users: SecretStr = Field(default=SecretStr(""), validation_alias="POLICYBOT_CONSOLE_USERS")
    console_secret: SecretStr | None = Field(default=None, validation_alias="POLICYBOT_CONSOLE_SECRET")
    console_secure_cookie: Literal["auto", "true", "false"] = Field(
        default="auto", validation_alias="POLICYBOT_CONSOLE_SECURE_COOKIE"
    )
    console_session_hours: float = Field(
        default=12.0, gt=0, le=24 * 30, validation_alias="POLICYBOT_CONSOLE_SESSION_HOURS"
    )
    # scrypt cost (N) of new password hashes: OWASP's 2^17 (128 MiB, about a second here). Only the
    # tests lower it, to 2^14 (the old cost), so that their many sign-ins stay fast.
    console_scrypt_n: int = Field(default=2**17, ge=2**14, le=2**17, validation_alias="POLICYBOT_CONSOLE_SCRYPT_N")
    # Dashboard alert: Incorrect share of the last 7 days above the previous 28 days' by more than this.
    alert_margin: float = Field(default=0.10, ge=0, le=1, validation_alias="POLICYBOT_ALERT_MARGIN")
    slack_workspace_url: str | None = Field(default=None, validation_alias="POLICYBOT_SLACK_WORKSPACE_URL")

    @field_validator(
        "database_url",
        "redis_url",
        "corpus_database_url",
        "generator_api_key",
        "slack_bot_token",
        "slack_signing_secret",
        "slack_app_token",
        "console_secret",
    )
    @classmethod
    def _empty_secret_is_unset(cls, value: SecretStr | None) -> SecretStr | None:
        return value if value is not None and value.get_secret_value() else None

    @field_validator("console_users")
    @classmethod
    def _check_console_users(cls, value: SecretStr) -> SecretStr:
        how = (
            "make a hash with `policybot console hash-password`; in a .env that Docker Compose reads, "
            "single-quote the value (Compose expands $ in unquoted values)"
        )
        for name, hashed in console_user_pairs(value.get_secret_value()):
            if not name:
                raise ValueError(f"use name:hash pairs separated by commas; {how}")
            try:
                parse_scrypt_hash(hashed)
            except ValueError as error:
                raise ValueError(f"the hash of user {name!r} is not valid: {error}; {how}") from None
        return value

    @field_validator("console_secret")
    @classmethod
    def _check_console_secret(cls, value: SecretStr | None) -> SecretStr | None:
        # unset or empty: a random secret kept in POLICYBOT_HOME/console-secret
        if value is not None and len(value.get_secret_value().encode()) < 32:
            raise ValueError(
                "must be at least 32 bytes; make one with "
                "`python -c 'import secrets; print(secrets.token_urlsafe(48))'`"
            )
        return value

    @field_validator("database_url", "corpus_database_url")
    @classmethod
    def _check_database_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(
            ("postgresql://", "postgresql+psycopg://", "postgres://")
        ):
            raise ValueError("must be a PostgreSQL URL such as postgresql://user:pass@host:5432/db")
        return value

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must be a Redis URL such as redis://localhost:6379/0")
        return value

    @field_validator("console_scrypt_n")
    @classmethod
    def _check_console_scrypt_n(cls, value: int) -> int:
        if value & (value - 1):
            raise ValueError("must be a power of 2")
        return value

    @field_validator("slack_api_url")
    @classmethod
    def _check_slack_api_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL, e.g. https://slack.com/api/")
        return value if value.endswith("/") else value + "/"

    @property
    def home(self) -> Path:
        return self.policybot_home.expanduser().resolve()

    @property
    def evaluators_dir(self) -> Path:
        return self.home / "evaluators"

    @property
    def console_accounts(self) -> dict[str, str]:
        """Console sign-in names and their password hashes."""
        return dict(console_user_pairs(secret_value(self.console_users) or ""))

    @property
    def admins(self) -> set[str]:
        return {part.strip() for part in self.admin_user_ids.split(",") if part.strip()}

    @property
    def member_teams(self) -> frozenset[str]:
        return frozenset(part.strip() for part in self.member_team_ids.split(",") if part.strip())


def _describe(error: ValidationError) -> str:
    lines = []
    for problem in error.errors():
        name = ".".join(str(part) for part in problem["loc"]) or "settings"
        secret = any(word in name.lower() for word in ("token", "secret", "key", "url", "users", "password"))
        shown = "<hidden>" if secret else repr(problem.get("input"))
        lines.append(f"{name}: {problem['msg']} (got {shown})")
    return "invalid configuration:\n  " + "\n  ".join(lines)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as error:
        raise ConfigError(_describe(error)) from None


def reset_settings() -> None:
    """Forget cached settings (tests and the CLI change the environment)."""
    get_settings.cache_clear()
