"""Admin console: logging out ends a user's sessions (a per-user "valid after" time).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "console_session_cutoffs",
        sa.Column("user_name", sa.String(100), primary_key=True),
        sa.Column("valid_after", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("console_session_cutoffs")
