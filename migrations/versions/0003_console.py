"""Admin console: review labels on logged questions, background jobs with progress.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-16
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reviews",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "question_id", sa.Integer, sa.ForeignKey("questions.id", ondelete="CASCADE"), nullable=False, index=True
        ),
        sa.Column("reviewer", sa.String(100), nullable=False),
        sa.Column("verdict", sa.String(8), nullable=False),
        sa.Column("expected_document_id", sa.Integer, sa.ForeignKey("documents.id", ondelete="SET NULL")),
        sa.Column("expected_document", sa.String(300)),
        sa.Column("note", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.UniqueConstraint("question_id", "reviewer", name="uq_reviews_question_reviewer"),
        sa.CheckConstraint("verdict IN ('right', 'wrong')", name="ck_reviews_verdict"),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False, server_default="queued"),
        sa.Column("params", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("progress", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("result", JSONB),
        sa.Column("error", sa.Text),
        sa.Column("created_by", sa.String(100)),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()"), index=True
        ),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.text("now()")),
        sa.CheckConstraint("kind IN ('ingest', 'train')", name="ck_jobs_kind"),
        sa.CheckConstraint("status IN ('queued', 'running', 'done', 'failed')", name="ck_jobs_status"),
    )


def downgrade() -> None:
    op.drop_table("jobs")
    op.drop_table("reviews")
