"""Questions the bot recorded but never queued, or queued and never answered, swept up.

The bot acks Slack's event first (Slack wants it within 3 seconds), then records the
question and queues it. A bot that stops in between (a crash, a deploy's restart) leaves a
recorded question that no worker will see, and Slack, having its ack, does not resend it.
A queue can also lose a question it holds (a Redis restarted without persistence), and a
worker killed at its hard time limit drops its question without a retry or an apology.

Every bot process sweeps when it starts and once a minute after. It queues questions never
queued, and queues again (twice at most) questions queued long ago and still not answered;
after that it gives up on them with the apology a failed answer gets, so nobody is left
waiting in silence. The answer comes late, but something comes. A question is never answered
twice (the worker's lock and the posted answer's timestamp), so a sweep that overlaps a slow
listener or a slow queue costs a look, or a delivery that finds the answer already posted.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from typing import Any, Literal

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from sqlalchemy.exc import SQLAlchemyError

from bot import blocks, state
from bot.app import web_client
from bot.listeners import CeleryEnqueuer, Enqueuer, clear_progress
from policybot import db
from policybot.answering import get_question, mark_failed, mark_posted, question_lock
from policybot.config import Settings
from policybot.errors import describe_error
from workers.celery_app import ANSWER_HARD_LIMIT_S
from workers.tasks import ANSWER_RETRIES, SLACK_CHANNEL_ERRORS

log = logging.getLogger(__name__)

SWEEP_INTERVAL_S = 60.0
# Claimed longer ago than this and still not queued: the bot that claimed it stopped. Well
# past a slow listener's worst case (Slack calls of 15 s, retried, before the enqueue).
SWEEP_AFTER_S = 120.0
# Older than this, a question is not queued any more: a reply days late helps nobody, and
# the log row stays pending for admins to see.
SWEEP_WITHIN = timedelta(days=1)
MAX_REQUEUES = 2  # then the asker gets the apology instead of a third wait
LOST_MARGIN_S = 600.0


class QuestionLost(RuntimeError):
    """The queue lost a question (or its worker was killed) more times than it was requeued."""


def lost_after_s(settings: Settings) -> float:
    """Queued and still unanswered this long, a question is lost: past the broker's own
    redelivery of a task whose worker died (the visibility timeout) and every attempt the
    task makes at its hard time limit, with a margin. A longer queue (workers down for an
    hour) looks lost too; queuing it again costs a delivery that finds it answered."""
    return settings.celery_visibility_timeout + (ANSWER_RETRIES + 1) * ANSWER_HARD_LIMIT_S + LOST_MARGIN_S


# What became of an apology: posted; not posted for now (Slack is down or rate-limits, the
# token is being replaced); or never postable (a question from the CLI, a channel the bot
# cannot post in).
Apology = Literal["posted", "not_posted", "refused"]


def apologise(client: WebClient, settings: Settings, row: Any) -> Apology:
    """Never leave the user without a reply: a short apology with the reference ID, stored
    as the question's reply so that a later delivery never answers or apologises again."""
    if not row.channel:
        return "refused"  # a question from the CLI: nobody to tell in Slack
    try:
        posted = client.chat_postMessage(channel=row.channel, thread_ts=row.thread_ts, **blocks.apology_message(row.reference))
    except Exception as error:
        log.error("could not post the apology for question %s (ref %s): %s", row.id, row.reference, describe_error(error))
        gone = isinstance(error, SlackApiError) and error.response.get("error") in SLACK_CHANNEL_ERRORS
        return "refused" if gone else "not_posted"
    mark_posted(settings, row.id, str(posted["ts"]))
    clear_progress(client, row.surface, row.channel, row.thread_ts, row.message_ts)
    return "posted"


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


def queue_lost_questions(settings: Settings, enqueuer: Enqueuer, client: WebClient) -> tuple[list[int], list[int]]:
    """Queue again every question queued long ago and still unanswered, or, once it has been
    requeued MAX_REQUEUES times, give up on it with an apology; (IDs requeued, IDs given up).

    One claim per transaction, so that a sweep stopped halfway has counted every requeue it
    made; the apology is posted outside it, under the question's own lock."""
    requeued: list[int] = []
    hopeless: list[int] = []
    passed: list[int] = []
    queue_down = False
    waited_min = round(lost_after_s(settings) / 60)
    while True:
        with db.session(settings) as session:
            lost = state.lock_lost_question(session, lost_after_s(settings), SWEEP_WITHIN, passed)
            if lost is None:
                break
            passed.append(lost.claim_id)
            if lost.requeues >= MAX_REQUEUES:  # giving up needs no queue
                hopeless.append(lost.question_id)
                continue
            if queue_down:
                continue
            try:
                enqueuer.answer(lost.question_id)
            except Exception as error:  # the queue is down: the next sweep tries again
                log.warning("could not queue question %s again: %s", lost.question_id, type(error).__name__)
                queue_down = True
                continue
            state.set_requeued(session, lost.claim_id)
        log.warning("queued question %s again: it was queued over %s minutes ago and never answered "
                    "(the queue lost it, or its worker was killed)", lost.question_id, waited_min)
        requeued.append(lost.question_id)
    given_up = [question_id for question_id in hopeless if _give_up(settings, client, question_id)]
    return requeued, given_up


def _give_up(settings: Settings, client: WebClient, question_id: int) -> bool:
    """Apologise and mark the question failed, unless a worker is answering it right now or it
    has its reply. An apology that cannot be posted for now (Slack is down) leaves it pending:
    the next sweep tries again."""
    with question_lock(settings, question_id) as locked:
        row = get_question(settings, question_id) if locked else None
        if row is None or row.answer_ts or row.status != "pending":
            return False
        error = QuestionLost(f"queued {MAX_REQUEUES + 1} times and never answered")
        log.error("question %s (ref %s) %s: apologising", question_id, row.reference, error)
        if apologise(client, settings, row) == "not_posted":
            return False
        mark_failed(settings, question_id, error)
        return True


class QuestionSweeper:
    """A daemon thread sweeping now and every `interval_s` for questions never queued and
    questions the queue lost, for the length of a `with` block (the bot's serving loop)."""

    def __init__(self, settings: Settings, enqueuer: Enqueuer | None = None, client: WebClient | None = None,
                 interval_s: float = SWEEP_INTERVAL_S) -> None:
        self.settings = settings
        self.enqueuer = enqueuer or CeleryEnqueuer()
        self.client = client or web_client(settings)
        self.interval_s = interval_s
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
                queue_unqueued_questions(self.settings, self.enqueuer)
                queue_lost_questions(self.settings, self.enqueuer, self.client)
            except SQLAlchemyError as error:  # the database is down: the listeners say so to users
                log.warning("could not look for unqueued or lost questions: %s", type(error).__name__)
            except Exception:
                log.exception("could not look for unqueued or lost questions")
            self._stopping.wait(self.interval_s)
