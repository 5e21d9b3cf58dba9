"""Database access: one engine per process, sessions, and migrations on first use."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

from core import services
from core.config import Settings, secret_value

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
# Serialises concurrent `upgrade` runs (several workers starting at once).
MIGRATION_LOCK_KEY = 7_201_401_884

_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()
# One session factory per engine: sessionmaker builds a Session subclass, too slow to repeat per transaction.
_session_factories: dict[Engine, sessionmaker[Session]] = {}
_migrated: set[str] = set()


def _vector_search_settings(ef_search: int):
    """A connect hook that sets the HNSW search parameters on every new connection.

    Set here, not through PGVectorStore's hnsw_kwargs: those break psycopg 3 (see STACK-NOTES).
    ef_search must be >= the LIMIT of a query, and iterative scans keep filtered top-k full.
    """

    def configure(dbapi_connection, _record) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute(f"SET hnsw.ef_search = {int(ef_search)}")
            cursor.execute("SET hnsw.iterative_scan = relaxed_order")
        dbapi_connection.commit()

    return configure


def _engine_key(settings: Settings) -> str:
    """What identifies a database without asking anything: DATABASE_URL, or the embedded server's home."""
    return secret_value(settings.database_url) or f"embedded:{settings.home}"


def engine(settings: Settings) -> Engine:
    """The process-wide engine for the configured (or embedded) database; migrated on first use.

    Only the first call per database resolves the URL: for the embedded server that checks
    the server and opens an extra connection, which cost the Slack listener a third of its
    time when it ran on every session (bench.ack).
    """
    key = _engine_key(settings)
    existing = _engines.get(key)
    if existing is not None:
        return existing
    url = services.database_url(settings)
    with _engines_lock:
        existing = _engines.get(key)
        if existing is not None:
            return existing
        # hide_parameters: a failed statement's message would otherwise carry its values (a
        # question's text, with whatever personal data it holds) into every error log line.
        created = create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5, hide_parameters=True)
        event.listen(created, "connect", _vector_search_settings(settings.hnsw_ef_search))
        if url not in _migrated:
            upgrade(created, settings)
            _migrated.add(url)
        _engines[key] = created  # published only once migrated
    return created


def dispose_engines() -> None:
    """Drop pooled connections (after fork, or before stopping the embedded server)."""
    with _engines_lock:
        for created in _engines.values():
            created.dispose()
        _engines.clear()
        _session_factories.clear()
        _migrated.clear()


@contextmanager
def session(settings: Settings) -> Iterator[Session]:
    """A transaction: committed on success, rolled back on error."""
    bound = engine(settings)
    factory = _session_factories.get(bound)
    if factory is None:
        factory = _session_factories.setdefault(bound, sessionmaker(bind=bound, expire_on_commit=False))
    with factory() as db_session, db_session.begin():
        yield db_session


def _alembic_config(settings: Settings) -> AlembicConfig:
    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["embed_dim"] = settings.embed_dim
    return config


def upgrade(target: Engine, settings: Settings) -> list[str]:
    """Apply pending migrations; return the revisions applied (empty when up to date)."""
    config = _alembic_config(settings)
    script = ScriptDirectory.from_config(config)
    with target.begin() as connection:
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        before = MigrationContext.configure(connection).get_current_revision()
        if before == script.get_current_head():
            return []
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        after = MigrationContext.configure(connection).get_current_revision()
    return [rev.revision for rev in script.iterate_revisions(after, before)]


def current_revision(settings: Settings) -> str | None:
    with engine(settings).connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision(settings: Settings) -> str | None:
    return ScriptDirectory.from_config(_alembic_config(settings)).get_current_head()
