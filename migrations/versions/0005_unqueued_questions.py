"""Slack claims of questions never queued: an index for the bot's sweep that queues them.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_slack_messages_unqueued",
        "slack_messages",
        ["created_at"],
        postgresql_where=sa.text("enqueued_at IS NULL AND question_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_slack_messages_unqueued", table_name="slack_messages")
