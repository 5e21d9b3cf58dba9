"""An evaluator version's own bar for fallback results (crag.types.Thresholds.fallback),
calibrated on fallback-only against unanswerable questions; empty for versions calibrated
before it, which answer from the fallback above upper as before.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("evaluator_versions", sa.Column("fallback_threshold", sa.Float, nullable=True))


def downgrade() -> None:
    op.drop_column("evaluator_versions", "fallback_threshold")
