"""Questions the bot recorded but never queued, queued by a sweep.

The bot acks Slack's event first (Slack wants it within 3 seconds), then records the
question and queues it. A bot that stops in between (a crash, a deploy's restart) leaves a
recorded question that no worker will see, and Slack, having its ack, does not resend it.
Every bot process sweeps for such questions when it starts and once a minute after, and
queues them: the answer comes late, but it comes. A question is never answered twice (the
worker's lock and the posted answer's timestamp), so a sweep that overlaps a slow listener
costs nothing but a look.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from sqlalchemy.exc import SQLAlchemyError

from bot import state
from bot.listeners import CeleryEnqueuer, Enqueuer
from policybot import db
from policybot.config import Settings

log = logging.getLogger(__name__)

SWEEP_INTERVAL_S = 60.0
# Claimed longer ago than this and still not queued: the bot that claimed it stopped. Well
# past a slow listener's worst case (Slack calls of 15 s, retried, before the enqueue).
SWEEP_AFTER_S = 120.0
# Older than this, a question is not queued any more: a reply days late helps nobody, and
# the log row stays pending for admins to see.
SWEEP_WITHIN = timedelta(days=1)


def queue_unqueued_questions(settings: Settings, enqueuer: Enqueuer) -> list[int]:
    """Queue every question recorded but never queued; the IDs queued.

    Each is queued while its claim is locked and marked queued in the same transaction: a
    sweep that stops halfway leaves the rest unmarked for the next one (a question queued
    twice is answered once)."""
    queued: list[int] = []
    with db.session(settings) as session:
        for claim_id, question_id in state.lock_unqueued_questions(session, SWEEP_AFTER_S, SWEEP_WITHIN):
            try:
                enqueuer.answer(question_id)
            except Exception as error:  # the queue is down: the next sweep tries again
                log.warning("could not queue question %s, recorded but never queued: %s", question_id,
                            type(error).__name__)
                break
            state.set_enqueued(session, claim_id)
            log.warning("queued question %s: it was recorded but never queued (the bot stopped before queuing it)",
                        question_id)
            queued.append(question_id)
    return queued


class UnqueuedQuestionSweeper:
    """A daemon thread running queue_unqueued_questions now and every `interval_s`, for the
    length of a `with` block (the bot's serving loop)."""

    def __init__(self, settings: Settings, enqueuer: Enqueuer | None = None,
                 interval_s: float = SWEEP_INTERVAL_S) -> None:
        self.settings = settings
        self.enqueuer = enqueuer or CeleryEnqueuer()
        self.interval_s = interval_s
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="policybot-sweep", daemon=True)

    def __enter__(self) -> UnqueuedQuestionSweeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                queue_unqueued_questions(self.settings, self.enqueuer)
            except SQLAlchemyError as error:  # the database is down: the listeners say so to users
                log.warning("could not look for unqueued questions: %s", type(error).__name__)
            except Exception:
                log.exception("could not look for unqueued questions")
            self._stopping.wait(self.interval_s)
