"""The relational schema (owned by the Alembic migrations in `migrations/`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Computed,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# LlamaIndex's PGVectorStore(table_name="chunks") reads and writes "data_chunks".
CHUNKS_TABLE_NAME = "chunks"
CHUNKS_TABLE = "data_" + CHUNKS_TABLE_NAME
TEXT_SEARCH_CONFIG = "english"


class Base(DeclarativeBase):
    metadata = MetaData()


class Document(Base):
    __tablename__ = "documents"
    __table_args__ = (UniqueConstraint("collection", "source", name="uq_documents_collection_source"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    collection: Mapped[str] = mapped_column(String(100), index=True)
    source: Mapped[str] = mapped_column(Text)  # canonical absolute path or URL
    name: Mapped[str] = mapped_column(String(300))  # file name shown to people
    title: Mapped[str] = mapped_column(Text, default="")
    content_hash: Mapped[str] = mapped_column(String(64))  # the file's bytes under a reader version
    # The file's bytes alone: the copy check knows a copy across reader versions (migration 0011).
    file_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    version: Mapped[int] = mapped_column(Integer, default=1)
    chunk_count: Mapped[int] = mapped_column(Integer, default=0)
    ingested_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    deleted: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")
    access_channels: Mapped[list[str] | None] = mapped_column(ARRAY(Text), nullable=True)


# The chunk table keeps exactly the layout PGVectorStore expects (hybrid_search=True),
# plus a unique node_id, which the store itself does not enforce.
def chunks_table(metadata: MetaData, embed_dim: int) -> Table:
    return Table(
        CHUNKS_TABLE,
        metadata,
        Column("id", BigInteger, primary_key=True, autoincrement=True),
        Column("text", String, nullable=False),
        Column("metadata_", JSONB),
        Column("node_id", String, nullable=False),
        Column("embedding", Vector(embed_dim)),
        Column(
            "text_search_tsv",
            TSVECTOR,
            Computed(f"to_tsvector('{TEXT_SEARCH_CONFIG}', text)", persisted=True),
        ),
        UniqueConstraint("node_id", name=f"uq_{CHUNKS_TABLE}_node_id"),
        extend_existing=True,
    )


class Question(Base):
    """One question and what the pipeline did with it: the action log."""

    __tablename__ = "questions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), index=True)
    surface: Mapped[str] = mapped_column(String(20), default="cli")  # cli | mention | dm | assistant
    asker: Mapped[str | None] = mapped_column(String(64), nullable=True)
    channel: Mapped[str | None] = mapped_column(String(64), nullable=True)
    thread_ts: Mapped[str | None] = mapped_column(String(32), nullable=True)
    message_ts: Mapped[str | None] = mapped_column(String(32), nullable=True)
    event_id: Mapped[str | None] = mapped_column(String(64), nullable=True, unique=True)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("questions.id"), nullable=True)
    reference: Mapped[str] = mapped_column(String(16), index=True)  # shown to users in apologies
    question: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default="pending")  # pending | answered | failed
    action: Mapped[str | None] = mapped_column(String(16), nullable=True, index=True)
    found: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    question_class: Mapped[str | None] = mapped_column(String(16), nullable=True)
    answer: Mapped[str | None] = mapped_column(Text, nullable=True)
    citations: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB, nullable=True)
    scores: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB, nullable=True)
    strips: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB, nullable=True)
    sources_used: Mapped[list[str] | None] = mapped_column(JSONB, nullable=True)
    fallback_queries: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB, nullable=True)
    evaluator_version: Mapped[str | None] = mapped_column(String(64), nullable=True)
    upper: Mapped[float | None] = mapped_column(Float, nullable=True)
    lower: Mapped[float | None] = mapped_column(Float, nullable=True)
    # milliseconds per phase, and under "notes" why a source was skipped or failed
    timings_ms: Mapped[dict[str, float | list[str]] | None] = mapped_column(JSONB, nullable=True)
    latency_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    answer_ts: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # Asked where people outside the organisation read (slack_shared/audience.py): the answer goes to
    # the asker by DM, never into the channel. Decided once, when the question arrived (0007).
    private_reply: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    answered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Feedback(Base):
    __tablename__ = "feedback"
    __table_args__ = (UniqueConstraint("question_id", "user_id", name="uq_feedback_question_user"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[str] = mapped_column(String(64))
    vote: Mapped[int] = mapped_column(SmallInteger)  # +1 or -1
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )


class FallbackSourceRow(Base):
    """An allow-listed fallback source. Nothing else may be queried as fallback."""

    __tablename__ = "fallback_sources"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    kind: Mapped[str] = mapped_column(String(20))  # collection | http
    collection: Mapped[str | None] = mapped_column(String(100), nullable=True)
    url: Mapped[str | None] = mapped_column(Text, nullable=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    open_web: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, server_default="true")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class EvaluatorVersion(Base):
    __tablename__ = "evaluator_versions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(32))
    path: Mapped[str] = mapped_column(Text)
    upper: Mapped[float] = mapped_column(Float)
    lower: Mapped[float] = mapped_column(Float)
    strip_threshold: Mapped[float] = mapped_column(Float)
    fallback_threshold: Mapped[float | None] = mapped_column(Float, nullable=True)  # migration 0010
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    beats_cosine: Mapped[bool] = mapped_column(Boolean, default=False)
    active: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


# ------------------------------------------------------------------ Slack state (migration 0002)


class SlackMessage(Base):
    """A Slack message the bot has claimed, so that it is handled exactly once.

    Slack may deliver one message as two events (an `app_mention` and a `message`) and
    retries each event; the (channel, ts) claim makes both cases one answer.
    """

    __tablename__ = "slack_messages"
    __table_args__ = (UniqueConstraint("channel", "message_ts", name="uq_slack_messages_channel_ts"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    channel: Mapped[str] = mapped_column(String(64))
    message_ts: Mapped[str] = mapped_column(String(32))
    event_id: Mapped[str | None] = mapped_column(String(64), nullable=True)  # the event that claimed it first
    kind: Mapped[str] = mapped_column(String(16))  # question | upload | reply
    question_id: Mapped[int | None] = mapped_column(ForeignKey("questions.id", ondelete="SET NULL"), nullable=True)
    enqueued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    reply_ts: Mapped[str | None] = mapped_column(String(32), nullable=True)  # our reply, for uploads and notices
    # The admin who confirmed that the message's files become policy documents (0007).
    confirmed_by: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Outbox(Base):
    """A reply still owed in a question's Slack thread (migration 0008), and when to see to it.

    The bot's sweep (bot/recovery.py) queues the question again once `due_at` passes without the
    row being closed, so a queue that lost the task (a Redis restarted without persistence) loses
    nothing. `posting_since` is set while a post is on its way: a later delivery that finds it set
    does not post again (it cannot tell whether Slack took the first one).
    """

    __tablename__ = "outbox"
    __table_args__ = (Index("ix_outbox_due", "due_at", postgresql_where=text("closed_at IS NULL")),)

    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id", ondelete="CASCADE"), primary_key=True)
    kind: Mapped[str] = mapped_column(String(8), default="answer", server_default="answer")  # answer | apology
    due_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    sweeps: Mapped[int] = mapped_column(SmallInteger, default=0, server_default="0")  # times the sweep queued it
    posting_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    closed_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )  # posted, or never postable
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class SlackInbox(Base):
    """A Slack event stored before its ack, until its listener has carried it out (migration 0009)."""

    __tablename__ = "slack_inbox"

    event_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    body: Mapped[dict[str, Any]] = mapped_column(JSONB)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), index=True)
    replays: Mapped[int] = mapped_column(SmallInteger, default=0, server_default="0")


class SlackUser(Base):
    """Per-user Slack state: whether the app's Messages tab greeted them already."""

    __tablename__ = "slack_users"

    user_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    greeted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class SlackAssistantThread(Base):
    """A thread opened in the app's agent view (`assistant_thread_started`)."""

    __tablename__ = "slack_assistant_threads"

    channel: Mapped[str] = mapped_column(String(64), primary_key=True)
    thread_ts: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    context: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


# ------------------------------------------------------------------ admin console (migration 0003)


class Review(Base):
    """An admin's label on a logged question: was the action/answer right, and which document should have answered."""

    __tablename__ = "reviews"
    __table_args__ = (UniqueConstraint("question_id", "reviewer", name="uq_reviews_question_reviewer"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    question_id: Mapped[int] = mapped_column(ForeignKey("questions.id", ondelete="CASCADE"), index=True)
    reviewer: Mapped[str] = mapped_column(String(100))
    verdict: Mapped[str] = mapped_column(String(8))  # right | wrong
    expected_document_id: Mapped[int | None] = mapped_column(
        ForeignKey("documents.id", ondelete="SET NULL"), nullable=True
    )
    expected_document: Mapped[str | None] = mapped_column(String(300), nullable=True)  # its name when labelled
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Job(Base):
    """Background work started from the console (ingestion, evaluator training), with its progress."""

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # ingest | train
    status: Mapped[str] = mapped_column(String(16), default="queued")  # queued | running | done | failed
    params: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    progress: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_by: Mapped[str | None] = mapped_column(String(100), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), index=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ConsoleSessionCutoff(Base):
    """Console sessions of a user issued before `valid_after` are refused (written at logout; migration 0004)."""

    __tablename__ = "console_session_cutoffs"

    user_name: Mapped[str] = mapped_column(String(100), primary_key=True)
    valid_after: Mapped[datetime] = mapped_column(DateTime(timezone=True))
