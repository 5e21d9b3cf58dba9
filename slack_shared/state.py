"""Slack state kept in our own tables: message claims, greetings, agent-view threads.

Small, fast statements only: the listener calls these between the ack and the enqueue.
Those it runs together take a session, so that claiming a message and recording its
question are one transaction (one commit per event instead of four; the ack waits
behind this work for the CPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from core import db
from core.config import Settings
from core.models import Question, SlackAssistantThread, SlackMessage, SlackUser

# Slack retries an unacknowledged event after about 1 s, 1 min and 5 min: a claim younger
# than this belongs to a delivery that is still being handled.
CLAIM_LEASE_S = 30


@dataclass(frozen=True)
class Claim:
    id: int
    new: bool  # this event claimed the message just now
    same_event: bool  # the claim was made by this very event (a retried delivery)
    question_id: int | None
    enqueued: bool
    reply_ts: str | None
    in_progress: bool = False  # claimed moments ago and not yet enqueued: another delivery is handling it
    kind: str = "question"  # question | upload | reply, as the first delivery decided

    @property
    def handled_elsewhere(self) -> bool:
        """True when this event must do nothing: another event owns the message, or this
        event's earlier delivery finished, is still working, or took it for a notice. Only a
        delivery whose first attempt died (claim older than the lease, never enqueued) takes over."""
        return not self.new and (not self.same_event or self.enqueued or self.in_progress or self.kind == "reply")


# As text, compiled once: SQLAlchemy never caches its PostgreSQL INSERT construct
# (`inherit_cache = False`), so an ON CONFLICT statement would be compiled on every event.
_CLAIM = text(
    "INSERT INTO slack_messages (channel, message_ts, event_id, kind) VALUES (:channel, :message_ts, :event_id, :kind) "
    "ON CONFLICT ON CONSTRAINT uq_slack_messages_channel_ts DO NOTHING RETURNING id"
)


def claim_message(session: Session, channel: str, message_ts: str, event_id: str | None, kind: str) -> Claim:
    """Claim a Slack message for handling; a second event for the same message finds the claim
    (once this session's transaction commits: until then the second one waits for it)."""
    inserted = session.execute(
        _CLAIM, {"channel": channel, "message_ts": message_ts, "event_id": event_id, "kind": kind}
    ).scalar_one_or_none()
    if inserted is not None:
        return Claim(inserted, True, True, None, False, None, kind=kind)
    row = session.execute(
        select(SlackMessage).where(SlackMessage.channel == channel, SlackMessage.message_ts == message_ts)
    ).scalar_one()
    fresh = row.created_at > datetime.now(UTC) - timedelta(seconds=CLAIM_LEASE_S)
    enqueued = row.enqueued_at is not None
    return Claim(
        row.id,
        False,
        row.event_id == event_id,
        row.question_id,
        enqueued,
        row.reply_ts,
        in_progress=fresh and not enqueued,
        kind=row.kind,
    )


def link_question(session: Session, claim_id: int, question_id: int) -> None:
    session.execute(update(SlackMessage).where(SlackMessage.id == claim_id).values(question_id=question_id))


def mark_enqueued(settings: Settings, claim_id: int) -> None:
    with db.session(settings) as session:
        set_enqueued(session, claim_id)


def set_enqueued(session: Session, claim_id: int) -> None:
    session.execute(update(SlackMessage).where(SlackMessage.id == claim_id).values(enqueued_at=datetime.now(UTC)))


def confirm_upload(settings: Settings, claim_id: int, channel: str, admin: str | None) -> SlackMessage | None:
    """Record that `admin` confirmed the files of a claimed message as policy documents (None:
    take a confirmation back, its upload could not be queued). The claim, or None when it is not
    in `channel` or was confirmed already (a second click): the first confirmation wins."""
    with db.session(settings) as session:
        confirmed = SlackMessage.confirmed_by.is_(None) if admin else SlackMessage.confirmed_by.is_not(None)
        return session.execute(
            update(SlackMessage)
            .where(SlackMessage.id == claim_id, SlackMessage.channel == channel, confirmed)
            .values(confirmed_by=admin)
            .returning(SlackMessage)
        ).scalar_one_or_none()


def set_reply_ts(settings: Settings, claim_id: int, reply_ts: str) -> None:
    with db.session(settings) as session:
        session.execute(update(SlackMessage).where(SlackMessage.id == claim_id).values(reply_ts=reply_ts))


def get_claim(settings: Settings, claim_id: int) -> SlackMessage | None:
    with db.session(settings) as session:
        return session.get(SlackMessage, claim_id)


def earlier_question_id(session: Session, channel: str, thread_ts: str) -> int | None:
    """The latest question already asked in this thread (our own log, not Slack's history)."""
    return session.execute(
        select(Question.id)
        .where(Question.channel == channel, Question.thread_ts == thread_ts)
        .order_by(Question.id.desc())
        .limit(1)
    ).scalar_one_or_none()


def mark_greeted(settings: Settings, user_id: str) -> bool:
    """True the first time for a user (then greet them), False afterwards."""
    with db.session(settings) as session:
        inserted = session.execute(
            insert(SlackUser)
            .values(user_id=user_id, greeted_at=datetime.now(UTC))
            .on_conflict_do_nothing(index_elements=["user_id"])
            .returning(SlackUser.user_id)
        ).scalar_one_or_none()
        return inserted is not None


def remember_assistant_thread(
    settings: Settings, channel: str, thread_ts: str, user_id: str | None, context: dict[str, Any] | None
) -> bool:
    """Record an agent-view thread; True when it is new."""
    with db.session(settings) as session:
        inserted = session.execute(
            insert(SlackAssistantThread)
            .values(channel=channel, thread_ts=thread_ts, user_id=user_id, context=context or None)
            .on_conflict_do_nothing(index_elements=["channel", "thread_ts"])
            .returning(SlackAssistantThread.channel)
        ).scalar_one_or_none()
        return inserted is not None


def is_assistant_thread(settings: Settings, channel: str, thread_ts: str | None) -> bool:
    if not thread_ts:
        return False
    with db.session(settings) as session:
        return session.get(SlackAssistantThread, (channel, thread_ts)) is not None
