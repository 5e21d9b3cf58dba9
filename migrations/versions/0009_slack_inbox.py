"""Slack events stored before the ack and deleted once carried out: a bot killed between
Slack's ack and its listener's work leaves the event for the sweep to replay (bot/inbox.py).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slack_inbox",
        sa.Column("event_id", sa.String(64), primary_key=True),
        sa.Column("body", JSONB, nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.Column("replays", sa.SmallInteger, nullable=False, server_default="0"),
    )
    op.create_index("ix_slack_inbox_received_at", "slack_inbox", ["received_at"])


def downgrade() -> None:
    op.drop_index("ix_slack_inbox_received_at", table_name="slack_inbox")
    op.drop_table("slack_inbox")
