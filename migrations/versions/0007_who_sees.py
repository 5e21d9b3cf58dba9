"""Who sees what the bot posts: a question answered privately (asked where outsiders read,
slack_shared/audience.py), and the admin who confirmed that a file they sent becomes a policy document.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("questions", sa.Column("private_reply", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.add_column("slack_messages", sa.Column("confirmed_by", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("slack_messages", "confirmed_by")
    op.drop_column("questions", "private_reply")
