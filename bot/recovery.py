"""Slack events never carried out, and replies owed and never moved on, swept up.

The bot acks Slack's event first (Slack wants it within 3 seconds), then records the
question and queues it. A bot that stops in between (a crash, a deploy's restart) leaves a
recorded question that no worker will see, and Slack, having its ack, does not resend it.
A queue can also lose what it holds (a Redis restarted without persistence drops every queued
question and every delayed retry or apology), and a worker killed at its hard time limit drops
its question without a retry or an apology.

The bot stores each event before it acks it (bot/inbox.py): one still stored a while later
was acked by a bot that stopped before its listener was done, and is replayed. Every reply
owed is an outbox row in PostgreSQL (application/outbox.py) with a due time, pushed on by whoever moves
the reply on. Every bot process sweeps when it starts and every POLICYBOT_SWEEP_INTERVAL_S
seconds after: an overdue reply is queued again (MAX_SWEEPS times, each wait twice the last),
then given up with the apology, posted by the sweep itself, so nobody is left waiting in
silence. A reply is never posted twice (the worker's lock and `outbox.post_once`), so a sweep
that overlaps a slow listener or a slow queue costs a delivery that finds the work done.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from slack_sdk import WebClient
from sqlalchemy.exc import SQLAlchemyError

from application import outbox
from application.answering import get_question, mark_failed, question_lock
from bot import inbox
from bot.enqueuer import Enqueuer
from core import db
from core.config import Settings
from slack_shared.apology import apologise
from slack_shared.client import web_client

log = logging.getLogger(__name__)

# Older than this, a question is not queued any more: a reply days late helps nobody, and
# the log row stays pending for admins to see.
SWEEP_WITHIN = timedelta(days=1)
# Queued again this often without its reply moving on (the queue keeps losing it, or its
# workers keep dying): then the asker gets the apology. With POLICYBOT_REPLY_WAIT_S at 120 s,
# the waits are 2, 4, 8 and 16 minutes: the apology comes about half an hour after the
# question; an answer the queue lost once comes within a sweep of its due time.
MAX_SWEEPS = 3


class QuestionLost(RuntimeError):
    """The queue lost a question (or its worker was killed) more times than it was queued again."""


def sweep_outbox(settings: Settings, enqueuer: Enqueuer, client: WebClient) -> tuple[list[int], list[int]]:
    """Queue again every reply past its due time, or, once it has been queued MAX_SWEEPS times,
    give up on it with the apology; (IDs queued, IDs given up).

    Each is queued while its row is locked and counted in the same transaction. A queue that
    is down counts as a queue that lost it: the apology then comes without one. The apology
    is posted outside the transaction, under the question's own lock."""
    queued: list[int] = []
    hopeless: list[int] = []
    queue_down = False
    with db.session(settings) as session:
        for reply in outbox.lock_due(session, SWEEP_WITHIN):
            if reply.sweeps >= MAX_SWEEPS:
                hopeless.append(reply.question_id)
                continue
            if not queue_down:
                try:
                    enqueuer.enqueue_answer(reply.question_id)
                    queued.append(reply.question_id)
                except Exception as error:
                    log.warning("could not queue question %s again: %s", reply.question_id, type(error).__name__)
                    queue_down = True
            outbox.set_swept(session, reply.question_id, settings.reply_wait_s * 2 ** (reply.sweeps + 1))
    for question_id in queued:
        log.warning(
            "queued question %s again: its reply was due and had not moved on (the bot stopped before "
            "queuing it, the queue lost it, or its worker was killed)",
            question_id,
        )
    given_up = [question_id for question_id in hopeless if _give_up(settings, client, question_id)]
    return queued, given_up


def _give_up(settings: Settings, client: WebClient, question_id: int) -> bool:
    """Apologise and mark the question failed, unless a worker is answering it right now or it
    has its reply. An apology that cannot be posted for now (Slack is down) leaves the reply
    owed: the next sweep tries again."""
    with question_lock(settings, question_id) as locked:
        row = get_question(settings, question_id) if locked else None
        if row is None or row.answer_ts:
            return False
        error = QuestionLost(f"queued {MAX_SWEEPS + 1} times and never answered")
        log.error("question %s (ref %s) %s: apologising", question_id, row.reference, error)
        if row.status != "failed":
            mark_failed(settings, question_id, error, apology_due=True)
        return apologise(client, settings, row) != "not_posted"


def replay_unhandled_events(settings: Settings, replay: Callable[[dict[str, Any]], None]) -> list[str]:
    """Replay every Slack event stored before its ack and never carried out (its bot stopped in
    between); the IDs replayed. One whose replays all failed is dropped with an error line."""
    inbox.clear_carried_out(settings)
    replaying: list[inbox.StoredEvent] = []
    with db.session(settings) as session:
        for stored in inbox.lock_unhandled(session, inbox.replay_after_s(settings), SWEEP_WITHIN):
            if stored.replays >= inbox.MAX_REPLAYS:
                log.error(
                    "Slack event %s was replayed %s times and never carried out; dropping it",
                    stored.event_id,
                    stored.replays,
                )
                inbox.drop(session, stored.event_id)
                continue
            inbox.set_replayed(session, stored.event_id)
            replaying.append(stored)
    for stored in replaying:  # after the commit: the listener clears the event when it is done
        log.warning(
            "replaying Slack event %s: it was acknowledged but never carried out (the bot stopped)", stored.event_id
        )
        replay(stored.body)
    return [stored.event_id for stored in replaying]


class QuestionSweeper:
    """A daemon thread replaying Slack events never carried out and sweeping the outbox, now and
    every POLICYBOT_SWEEP_INTERVAL_S seconds, for the length of a `with` block (the bot's
    serving loop)."""

    def __init__(
        self,
        settings: Settings,
        enqueuer: Enqueuer,
        client: WebClient | None = None,
        replay: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.settings = settings
        self.replay = replay  # runs a stored Slack event through the bot's app (bot.app.replay_event)
        self.enqueuer = enqueuer
        self.client = client or web_client(settings)
        self.interval_s = settings.sweep_interval_s
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="policybot-sweep", daemon=True)

    def __enter__(self) -> QuestionSweeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                if self.replay is not None:
                    replay_unhandled_events(self.settings, self.replay)
                sweep_outbox(self.settings, self.enqueuer, self.client)
            except SQLAlchemyError as error:  # the database is down: the listeners say so to users
                log.warning("could not sweep the replies owed: %s", type(error).__name__)
            except Exception:
                log.exception("could not sweep the replies owed")
            self._stopping.wait(self.interval_s)
