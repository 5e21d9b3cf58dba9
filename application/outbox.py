"""Replies owed in Slack: one outbox row per Slack question, in PostgreSQL (issue #26).

Every obligation to post (the answer, not yet posted; the apology, once a question is given
up) is a row with its due time. Whoever moves the reply on pushes the time: the listener when
it queues the question, a worker when it takes it (its time limit) or schedules a retry (the
countdown). The bot's sweep (bot/recovery.py) queues again whatever is overdue, so a Redis that
dropped every message (a restart without persistence) holds nothing that cannot be rebuilt.

Posting is idempotent per question: `post_once` marks the row before the post and closes it
with the post's ts in one transaction with the question's `answer_ts`. A second delivery finds
the row closed, or marked by a post whose outcome nobody saw (the worker died inside the
call), and does not post again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, Protocol, cast

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from core import db
from core.config import Settings
from core.models import Outbox, Question, SlackMessage

log = logging.getLogger(__name__)

Kind = Literal["answer", "apology"]


def margin_s(settings: Settings) -> int:
    """Slack past a due time before the sweep takes a reply for lost: a busy queue's delay."""
    return max(1, settings.reply_wait_s // 2)


# As text, compiled once: the listener runs it on every question (see slack_shared/state.py's _CLAIM).
_ADD = text(
    "INSERT INTO outbox (question_id, due_at) VALUES (:question_id, now() + make_interval(secs => :due_in_s)) "
    "ON CONFLICT (question_id) DO NOTHING"
)


def add(session: Session, question_id: int, due_in_s: float) -> None:
    """Owe the question's answer, due in `due_in_s` seconds (in the caller's transaction)."""
    session.execute(_ADD, {"question_id": question_id, "due_in_s": due_in_s})


def due_in(settings: Settings, question_id: int, seconds: float) -> None:
    """The reply is being moved on: the sweep leaves it alone for `seconds` more, plus the margin."""
    with db.session(settings) as session:
        session.execute(
            update(Outbox)
            .where(Outbox.question_id == question_id, Outbox.closed_at.is_(None))
            .values(due_at=func.now() + timedelta(seconds=seconds + margin_s(settings)))
        )


def state(settings: Settings, question_id: int) -> Kind | Literal["closed"]:
    """What the question is owed: its answer (also when it has no row: asked before the outbox
    existed), the apology, or nothing any more."""
    with db.session(settings) as session:
        row = session.get(Outbox, question_id)
    if row is None:
        return "answer"
    return "closed" if row.closed_at is not None else cast(Kind, row.kind)  # the column holds a Kind


_START_POST = text(
    "INSERT INTO outbox (question_id, posting_since) VALUES (:question_id, now()) "
    "ON CONFLICT (question_id) DO UPDATE SET posting_since = now() "
    "WHERE outbox.closed_at IS NULL AND outbox.posting_since IS NULL RETURNING question_id"
)


class UnsavedPost(Exception):
    """Slack took the reply but its ts could not be saved (the database went away): the task
    saves `ts` on its next try instead of posting again."""

    def __init__(self, question_id: int, ts: str) -> None:
        super().__init__(f"the reply to question {question_id} is posted (ts {ts}) but not saved")
        self.question_id = question_id
        self.ts = ts


class PostedReply(Protocol):
    """What post_once reads of a posted reply: slack_sdk's SlackResponse, or a plain dict."""

    def __getitem__(self, key: str) -> Any: ...


def post_once(settings: Settings, question_id: int, post: Callable[[], PostedReply]) -> str | None:
    """Post a question's reply unless a delivery before this one did or may have; the ts, or None.

    The mark goes in before the call: a delivery killed inside it leaves the mark, and the
    next delivery closes the row instead of posting: the reply is never posted twice (nor, if
    Slack never got it, at all: the one window, a single HTTP call, where at-most-once wins). A call that fails here surely ended, so the
    mark is lifted and the caller's retry may post. A ts that cannot be saved raises
    UnsavedPost, for the caller's retry to save."""
    with db.session(settings) as session:
        if session.execute(_START_POST, {"question_id": question_id}).first() is None:
            close(session, question_id)  # marked by a delivery that stopped inside its post: owed no more
            return None
    try:
        posted = post()
    except Exception:
        with db.session(settings) as session:
            session.execute(update(Outbox).where(Outbox.question_id == question_id).values(posting_since=None))
        raise
    ts = str(posted["ts"])
    try:
        mark_posted(settings, question_id, ts)
    except Exception as error:
        raise UnsavedPost(question_id, ts) from error
    return ts


def mark_posted(settings: Settings, question_id: int, answer_ts: str) -> None:
    """The reply is in the thread: its ts on the question, and nothing more owed."""
    with db.session(settings) as session:
        row = session.get(Question, question_id, with_for_update=True)
        if row is not None:
            row.answer_ts = answer_ts
            close(session, question_id)


def close(session: Session, question_id: int) -> None:
    """Nothing more to post (posted, or never postable), in the caller's transaction."""
    session.execute(
        update(Outbox)
        .where(Outbox.question_id == question_id, Outbox.closed_at.is_(None))
        .values(closed_at=func.now(), posting_since=None)
    )


def close_now(settings: Settings, question_id: int) -> None:
    with db.session(settings) as session:
        close(session, question_id)


def owe_apology(session: Session, question_id: int) -> None:
    """The question is given up: its reply is now the apology (in the caller's transaction)."""
    session.execute(
        update(Outbox).where(Outbox.question_id == question_id, Outbox.closed_at.is_(None)).values(kind="apology")
    )


@dataclass(frozen=True)
class DueReply:
    question_id: int
    kind: Kind
    sweeps: int  # times a sweep queued it already


def lock_due(session: Session, within: timedelta, limit: int = 200) -> list[DueReply]:
    """Open replies past their due time (by the database's clock) for questions asked within
    `within`. Their rows stay locked until the session ends, so of several bots sweeping at
    once only one takes each."""
    rows = session.execute(
        select(Outbox.question_id, Outbox.kind, Outbox.sweeps)
        .join(Question, Question.id == Outbox.question_id)
        .where(Outbox.closed_at.is_(None), Outbox.due_at < func.now(), Question.created_at > func.now() - within)
        .order_by(Outbox.due_at)
        .limit(limit)
        .with_for_update(of=Outbox, skip_locked=True)
    ).all()
    return [DueReply(int(question_id), kind, sweeps) for question_id, kind, sweeps in rows]


def set_swept(session: Session, question_id: int, due_in_s: float) -> None:
    """Count a sweep's queuing of the question and give it `due_in_s` seconds; its claim, if
    the bot stopped before queuing it, now counts as queued."""
    session.execute(
        update(Outbox)
        .where(Outbox.question_id == question_id)
        .values(sweeps=Outbox.sweeps + 1, due_at=func.now() + timedelta(seconds=due_in_s))
    )
    session.execute(
        update(SlackMessage)
        .where(SlackMessage.question_id == question_id, SlackMessage.enqueued_at.is_(None))
        .values(enqueued_at=func.now())
    )
