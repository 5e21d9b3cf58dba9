"""A document's file hash: SHA-256 of its bytes alone, whatever the reader version, so that the
copy check ("same content as X, already in the collection") still knows a copy after an upgrade
bumps READER_VERSION (ingestion/ingest.py). Empty for documents ingested before it, which the
check compares by content_hash as before.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("documents", sa.Column("file_hash", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("documents", "file_hash")
