"""Slack events stored before they are acknowledged (issue #26), so that none is lost.

Bolt acks an event first and runs the listener after; Slack, having its ack, never sends it
again. A bot killed in between (a deploy, the OOM killer) would lose the question. So every
verified `app_mention` and `message` event is inserted here before the ack (one statement,
about a millisecond: bench.ack), and deleted once its listener has carried it out. The bot's
sweep (bot/recovery.py) replays an event still here `replay_after_s` later through the same
listeners; the message's claim (slack_shared/state.py) keeps a replay from answering twice.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from core import db
from core.config import Settings
from core.models import SlackInbox

log = logging.getLogger(__name__)

STORED_EVENTS = frozenset({"app_mention", "message"})  # the events that may carry a question
MAX_REPLAYS = 3  # an event whose listener fails every time is then dropped, with an error line

# As text, compiled once: it runs on every event, before the ack (see slack_shared/state.py's _CLAIM).
_STORE = text(
    "INSERT INTO slack_inbox (event_id, body) VALUES (:event_id, CAST(:body AS jsonb)) "
    "ON CONFLICT (event_id) DO NOTHING"
)


def replay_after_s(settings: Settings) -> float:
    """Still here this long after it came (60 s by default), an event's listener never finished:
    its bot stopped. Far past a slow listener (Slack lookups of 3 s, a post of 15 s, each retried)."""
    return settings.reply_wait_s / 2


def event_id_to_store(body: Mapping[str, Any]) -> str | None:
    """The event ID of a body worth storing (an event callback that may carry a question)."""
    event = body.get("event") or {}
    if body.get("type") != "event_callback" or event.get("type") not in STORED_EVENTS:
        return None
    event_id = body.get("event_id")
    return str(event_id) if event_id else None


def store(settings: Settings, event_id: str, body: Mapping[str, Any]) -> None:
    with db.session(settings) as session:
        session.execute(_STORE, {"event_id": event_id, "body": json.dumps(body)})


# Events this process carried out but could not clear (the database was down just then; the
# listener told the asker so): cleared by this process's next sweep, before it replays any.
_uncleared: set[str] = set()
_uncleared_lock = threading.Lock()


def done(settings: Settings, event_id: str) -> None:
    """The event's listener carried it out (whatever it decided). If the database cannot take
    that now, the event is remembered here and the error raised."""
    try:
        with db.session(settings) as session:
            session.execute(delete(SlackInbox).where(SlackInbox.event_id == event_id))
    except SQLAlchemyError:
        with _uncleared_lock:
            _uncleared.add(event_id)
        raise


def clear_carried_out(settings: Settings) -> None:
    """Clear the events this process carried out while the database was down, so that no
    sweep replays them (a question told "can't take questions right now" is not answered later)."""
    with _uncleared_lock:
        pending = sorted(_uncleared)
    if not pending:
        return
    with db.session(settings) as session:
        session.execute(delete(SlackInbox).where(SlackInbox.event_id.in_(pending)))
    with _uncleared_lock:
        _uncleared.difference_update(pending)


@dataclass(frozen=True)
class StoredEvent:
    event_id: str
    body: dict[str, Any]
    replays: int


def lock_unhandled(session: Session, older_than_s: float, within: timedelta) -> list[StoredEvent]:
    """Events stored more than `older_than_s` seconds ago (by the database's clock) and never
    carried out, received within `within`; locked until the session ends, so of several bots
    sweeping at once only one replays each."""
    now = func.now()
    rows = session.execute(
        select(SlackInbox.event_id, SlackInbox.body, SlackInbox.replays)
        .where(SlackInbox.received_at < now - timedelta(seconds=older_than_s), SlackInbox.received_at > now - within)
        .order_by(SlackInbox.received_at)
        .limit(200)
        .with_for_update(skip_locked=True)
    ).all()
    return [StoredEvent(event_id, body, replays) for event_id, body, replays in rows]


def set_replayed(session: Session, event_id: str) -> None:
    """Count a replay and start the wait for its listener again."""
    session.execute(
        update(SlackInbox)
        .where(SlackInbox.event_id == event_id)
        .values(replays=SlackInbox.replays + 1, received_at=func.now())
    )


def drop(session: Session, event_id: str) -> None:
    session.execute(delete(SlackInbox).where(SlackInbox.event_id == event_id))
