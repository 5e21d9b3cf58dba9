"""Database: migrations from an empty database, and error messages that carry no values."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import create_engine, inspect, text

from core import db, services
from core.models import CHUNKS_TABLE

from support.environment import REPO

EXPECTED_TABLES = {"documents", CHUNKS_TABLE, "questions", "feedback", "fallback_sources", "evaluator_versions"}


def test_migrations_from_empty_twice(settings):
    admin_url = services.database_url(settings).replace("/policybot?", "/postgres?")
    with psycopg.connect(admin_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as connection:
        connection.execute("DROP DATABASE IF EXISTS migration_check")
        connection.execute("CREATE DATABASE migration_check")
    fresh = create_engine(services.database_url(settings).replace("/policybot?", "/migration_check?"))
    try:
        first = db.upgrade(fresh, settings)
        # Every migration file ran, the head last (iterate_revisions lists newest first).
        migrations = sorted(path.stem.split("_")[0] for path in (REPO / "migrations" / "versions").glob("0*.py"))
        assert sorted(first) == migrations and first[0] == db.head_revision(settings)
        assert set(inspect(fresh).get_table_names()) >= EXPECTED_TABLES
        with fresh.connect() as connection:
            assert connection.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar()
            indexes = {
                row[0]
                for row in connection.execute(
                    text(f"SELECT indexname FROM pg_indexes WHERE tablename = '{CHUNKS_TABLE}'")
                )
            }
        assert any("hnsw" in name for name in indexes)
        assert db.upgrade(fresh, settings) == []  # second run is a no-op
        # The migrations build everything the models declare. (They also build what the models
        # leave to SQL: the chunks table of LlamaIndex's store and a few indexes.)
        from alembic.autogenerate import compare_metadata
        from alembic.migration import MigrationContext

        from core.models import Base

        with fresh.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        drift = [d for d in differences if not (isinstance(d, tuple) and d[0] in ("remove_index", "remove_table"))]
        assert drift == [], "\n".join(map(str, drift))
    finally:
        fresh.dispose()


def test_a_failed_statement_does_not_carry_its_values_into_error_messages(settings):
    """Errors are logged with their message; a question's text must not ride along."""
    import sqlalchemy

    from core import db

    with pytest.raises(sqlalchemy.exc.DBAPIError) as raised, db.engine(settings).connect() as connection:
        connection.execute(
            sqlalchemy.text("INSERT INTO no_such_table (question) VALUES (:question)"),
            {"question": "priya@example.com asks about leave"},
        )
    assert "priya@example.com" not in str(raised.value) and "hidden" in str(raised.value)
