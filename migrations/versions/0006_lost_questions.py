"""Slack questions queued but never answered (the queue lost them): a requeue count and an
index for the bot's sweep that queues them again.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("slack_messages", sa.Column("requeues", sa.SmallInteger(), server_default="0", nullable=False))
    op.create_index(
        "ix_slack_messages_queued",
        "slack_messages",
        ["created_at"],
        postgresql_where=sa.text("question_id IS NOT NULL AND enqueued_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_slack_messages_queued", table_name="slack_messages")
    op.drop_column("slack_messages", "requeues")
