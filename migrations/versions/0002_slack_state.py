"""Slack state: claimed messages (one answer per message), greeted users, agent-view threads.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-09
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slack_messages",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("message_ts", sa.String(32), nullable=False),
        sa.Column("event_id", sa.String(64)),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("question_id", sa.Integer, sa.ForeignKey("questions.id", ondelete="SET NULL"), index=True),
        sa.Column("enqueued_at", sa.DateTime(timezone=True)),
        sa.Column("reply_ts", sa.String(32)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.UniqueConstraint("channel", "message_ts", name="uq_slack_messages_channel_ts"),
        sa.CheckConstraint("kind IN ('question', 'upload', 'reply')", name="ck_slack_messages_kind"),
    )
    op.create_table(
        "slack_users",
        sa.Column("user_id", sa.String(64), primary_key=True),
        sa.Column("greeted_at", sa.DateTime(timezone=True)),
    )
    op.create_table(
        "slack_assistant_threads",
        sa.Column("channel", sa.String(64), primary_key=True),
        sa.Column("thread_ts", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(64)),
        sa.Column("context", JSONB),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
    )
    # Thread follow-ups look up the earlier question of a thread.
    op.create_index("ix_questions_channel_thread", "questions", ["channel", "thread_ts"])


def downgrade() -> None:
    op.drop_index("ix_questions_channel_thread", table_name="questions")
    for table in ("slack_assistant_threads", "slack_users", "slack_messages"):
        op.drop_table(table)
