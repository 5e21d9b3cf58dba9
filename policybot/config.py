"""Settings: environment variables and an optional `.env`, validated once.

Every package (crag pipeline wiring, ingestion, workers, bot, CLI) reads its settings
from here, so there is one place that says what can be configured and what the
defaults are.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from policybot.errors import UserError


class ConfigError(UserError):
    """Configuration is invalid; the message says which setting and why."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore")

    # Where the embedded stack keeps its data, the evaluators and logs.
    policybot_home: Path = Field(default=Path(".policybot"), validation_alias="POLICYBOT_HOME")

    # External servers. Unset means: start the embedded PostgreSQL / Redis.
    database_url: str | None = Field(default=None, validation_alias="DATABASE_URL")
    redis_url: str | None = Field(default=None, validation_alias="REDIS_URL")
    redis_port: int = Field(default=6390, ge=1, le=65535, validation_alias="POLICYBOT_REDIS_PORT")

    # Knowledge base.
    default_collection: str = Field(default="policies", validation_alias="POLICYBOT_COLLECTION")
    embedding_model: str | None = Field(default=None, validation_alias="POLICYBOT_EMBEDDING_MODEL")
    embed_dim: int = Field(default=384, ge=8, le=4096, validation_alias="POLICYBOT_EMBED_DIM")
    embed_batch_size: int = Field(default=32, ge=1, le=1024, validation_alias="POLICYBOT_EMBED_BATCH")
    chunk_tokens: int = Field(default=200, ge=32, le=512, validation_alias="POLICYBOT_CHUNK_TOKENS")
    chunk_overlap: int = Field(default=20, ge=0, le=256, validation_alias="POLICYBOT_CHUNK_OVERLAP")
    hnsw_ef_search: int = Field(default=100, ge=1, le=1000, validation_alias="POLICYBOT_HNSW_EF_SEARCH")
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
    auto_train: bool = Field(default=True, validation_alias="POLICYBOT_AUTO_TRAIN")  # train after the first upload
    train_minutes: float = Field(default=10.0, gt=0, le=600, validation_alias="POLICYBOT_TRAIN_MINUTES")

    # Optional generator: any OpenAI-compatible endpoint; unset means extractive answers.
    generator_url: str | None = Field(default=None, validation_alias="POLICYBOT_GENERATOR_URL")
    generator_model: str | None = Field(default=None, validation_alias="POLICYBOT_GENERATOR_MODEL")
    generator_api_key: str | None = Field(default=None, validation_alias="POLICYBOT_GENERATOR_API_KEY", repr=False)

    # Slack.
    slack_bot_token: str | None = Field(default=None, validation_alias="SLACK_BOT_TOKEN", repr=False)
    slack_signing_secret: str | None = Field(default=None, validation_alias="SLACK_SIGNING_SECRET", repr=False)
    slack_app_token: str | None = Field(default=None, validation_alias="SLACK_APP_TOKEN", repr=False)
    slack_api_url: str = Field(default="https://slack.com/api/", validation_alias="SLACK_API_URL")
    admin_user_ids: str = Field(default="", validation_alias="POLICYBOT_ADMINS")
    ignore_bots: bool = Field(default=True, validation_alias="POLICYBOT_IGNORE_BOTS")
    # Redis redelivers an unacked task after this long: it must exceed the longest task (ingest, 1800 s).
    celery_visibility_timeout: int = Field(default=3600, ge=2, validation_alias="POLICYBOT_CELERY_VISIBILITY_TIMEOUT")
    max_question_chars: int = Field(default=4000, ge=100, le=40000, validation_alias="POLICYBOT_MAX_QUESTION_CHARS")

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("postgresql://", "postgresql+psycopg://", "postgres://")):
            raise ValueError("must be a PostgreSQL URL such as postgresql://user:pass@host:5432/db")
        return value

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must be a Redis URL such as redis://localhost:6379/0")
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
    def admins(self) -> set[str]:
        return {part.strip() for part in self.admin_user_ids.split(",") if part.strip()}


def _describe(error: ValidationError) -> str:
    lines = []
    for problem in error.errors():
        name = ".".join(str(part) for part in problem["loc"]) or "settings"
        secret = any(word in name.lower() for word in ("token", "secret", "key", "url"))
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
