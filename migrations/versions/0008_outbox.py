"""The outbox: every reply still owed in Slack (an answer not yet posted, an apology due) with
its due time, so the bot's sweep can rebuild whatever a restarted Redis dropped. Replaces the
sweep's look at claims (the requeue count and the two partial indexes of 0005 and 0006).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "outbox",
        sa.Column("question_id", sa.Integer, sa.ForeignKey("questions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("kind", sa.String(8), nullable=False, server_default="answer"),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.Column("sweeps", sa.SmallInteger, nullable=False, server_default="0"),
        sa.Column("posting_since", sa.DateTime(timezone=True)),
        sa.Column("closed_at", sa.DateTime(timezone=True)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.CheckConstraint("kind IN ('answer', 'apology')", name="ck_outbox_kind"),
    )
    op.create_index("ix_outbox_due", "outbox", ["due_at"], postgresql_where=sa.text("closed_at IS NULL"))
    # Slack questions of the last day still waiting for their answer, as the sweep of 0006 would have seen them.
    op.execute(
        "INSERT INTO outbox (question_id, due_at) SELECT id, now() FROM questions "
        "WHERE channel IS NOT NULL AND answer_ts IS NULL AND status <> 'failed' "
        "AND created_at > now() - interval '1 day'"
    )
    op.drop_index("ix_slack_messages_queued", table_name="slack_messages")
    op.drop_index("ix_slack_messages_unqueued", table_name="slack_messages")
    op.drop_column("slack_messages", "requeues")


def downgrade() -> None:
    op.add_column("slack_messages", sa.Column("requeues", sa.SmallInteger(), server_default="0", nullable=False))
    op.create_index(
        "ix_slack_messages_unqueued",
        "slack_messages",
        ["created_at"],
        postgresql_where=sa.text("enqueued_at IS NULL AND question_id IS NOT NULL"),
    )
    op.create_index(
        "ix_slack_messages_queued",
        "slack_messages",
        ["created_at"],
        postgresql_where=sa.text("question_id IS NOT NULL AND enqueued_at IS NOT NULL"),
    )
    op.drop_index("ix_outbox_due", table_name="outbox")
    op.drop_table("outbox")
