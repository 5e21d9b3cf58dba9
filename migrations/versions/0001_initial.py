"""Initial schema: pgvector, documents, chunks (PGVectorStore layout), action log, feedback,
fallback sources, evaluator versions.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import context, op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

CHUNKS = "data_chunks"


def _now() -> sa.TextClause:
    return sa.text("now()")


def upgrade() -> None:
    embed_dim = int(context.config.attributes.get("embed_dim", 384))
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.create_table(
        "documents",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("collection", sa.String(100), nullable=False, index=True),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("title", sa.Text, nullable=False, server_default=""),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer, nullable=False, server_default="1"),
        sa.Column("chunk_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("ingested_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
        sa.Column("deleted", sa.Boolean, nullable=False, server_default="false"),
        sa.Column("access_channels", ARRAY(sa.Text), nullable=True),
        sa.UniqueConstraint("collection", "source", name="uq_documents_collection_source"),
    )

    # The layout LlamaIndex PGVectorStore(table_name="chunks", hybrid_search=True) expects,
    # created here so that the index, the unique node_id and the dimension are ours to decide.
    op.create_table(
        CHUNKS,
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("text", sa.String, nullable=False),
        sa.Column("metadata_", JSONB),
        sa.Column("node_id", sa.String, nullable=False),
        sa.Column("embedding", Vector(embed_dim)),
        sa.Column("text_search_tsv", TSVECTOR, sa.Computed("to_tsvector('english', text)", persisted=True)),
        sa.UniqueConstraint("node_id", name=f"uq_{CHUNKS}_node_id"),
    )
    op.execute(
        f"CREATE INDEX ix_{CHUNKS}_embedding_hnsw ON {CHUNKS} "
        "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
    )
    op.execute(f"CREATE INDEX ix_{CHUNKS}_tsv ON {CHUNKS} USING gin (text_search_tsv)")
    op.execute(f"CREATE INDEX ix_{CHUNKS}_doc_id ON {CHUNKS} ((metadata_->>'doc_id'))")
    op.execute(f"CREATE INDEX ix_{CHUNKS}_collection ON {CHUNKS} ((metadata_->>'collection'))")

    op.create_table(
        "questions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_now(), index=True),
        sa.Column("surface", sa.String(20), nullable=False, server_default="cli"),
        sa.Column("asker", sa.String(64)),
        sa.Column("channel", sa.String(64)),
        sa.Column("thread_ts", sa.String(32)),
        sa.Column("message_ts", sa.String(32)),
        sa.Column("event_id", sa.String(64), unique=True),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey("questions.id")),
        sa.Column("reference", sa.String(16), nullable=False, index=True),
        sa.Column("question", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False, server_default="pending", index=True),
        sa.Column("action", sa.String(16), index=True),
        sa.Column("found", sa.Boolean),
        sa.Column("question_class", sa.String(16)),
        sa.Column("answer", sa.Text),
        sa.Column("citations", JSONB),
        sa.Column("scores", JSONB),
        sa.Column("strips", JSONB),
        sa.Column("sources_used", JSONB),
        sa.Column("fallback_queries", JSONB),
        sa.Column("evaluator_version", sa.String(64)),
        sa.Column("upper", sa.Float),
        sa.Column("lower", sa.Float),
        sa.Column("timings_ms", JSONB),
        sa.Column("latency_ms", sa.Float),
        sa.Column("error", sa.Text),
        sa.Column("answer_ts", sa.String(32)),
        sa.Column("answered_at", sa.DateTime(timezone=True)),
    )

    op.create_table(
        "feedback",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "question_id", sa.Integer, sa.ForeignKey("questions.id", ondelete="CASCADE"), nullable=False, index=True
        ),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("vote", sa.SmallInteger, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
        sa.UniqueConstraint("question_id", "user_id", name="uq_feedback_question_user"),
        sa.CheckConstraint("vote IN (-1, 1)", name="ck_feedback_vote"),
    )

    op.create_table(
        "fallback_sources",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("collection", sa.String(100)),
        sa.Column("url", sa.Text),
        sa.Column("config", JSONB, nullable=False, server_default="{}"),
        sa.Column("open_web", sa.Boolean, nullable=False, server_default="false"),
        sa.Column("enabled", sa.Boolean, nullable=False, server_default="true"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
        sa.CheckConstraint("kind IN ('collection', 'http')", name="ck_fallback_kind"),
    )

    op.create_table(
        "evaluator_versions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("version", sa.String(64), nullable=False, unique=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("upper", sa.Float, nullable=False),
        sa.Column("lower", sa.Float, nullable=False),
        sa.Column("strip_threshold", sa.Float, nullable=False),
        sa.Column("metrics", JSONB, nullable=False, server_default="{}"),
        sa.Column("beats_cosine", sa.Boolean, nullable=False, server_default="false"),
        sa.Column("active", sa.Boolean, nullable=False, server_default="false"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_now()),
    )
    # At most one active evaluator.
    op.execute("CREATE UNIQUE INDEX uq_evaluator_versions_active ON evaluator_versions (active) WHERE active")


def downgrade() -> None:
    for table in ("evaluator_versions", "fallback_sources", "feedback", "questions", CHUNKS, "documents"):
        op.drop_table(table)
