"""Alembic environment: runs on the connection policybot hands over (see core.db.upgrade)."""

from alembic import context

from core.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with `policybot db upgrade`, which provides the database connection")

context.configure(connection=connection, target_metadata=Base.metadata, transaction_per_migration=False)
with context.begin_transaction():
    context.run_migrations()
