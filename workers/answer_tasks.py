"""The answer's Celery tasks: answer a recorded question in its Slack thread, and post the
apology Slack would not take at the time.

Tasks take plain IDs and are idempotent, because delivery is at least once (acks_late):

- `answer_question_task(question_id)` does nothing when the question already has an
  `answer_ts` (the posted reply's Slack ts). A per-question PostgreSQL advisory lock keeps
  two deliveries of the same question from answering at once (the lock dies with a killed
  worker's connection). An answer that was logged but not posted is posted from the log
  without running the pipeline again.
- After the last retry fails, the user gets a short apology carrying the question's
  reference ID, the log row says `failed` with the error, and the apology's ts is stored
  as `answer_ts`, so a redelivery never apologises twice. An apology Slack does not take
  is posted later by `apologise_task`.
- An answer that is ready but that Slack surely did not take (an outage, a rate limit that
  outlasts the retries) is not traded for an apology: its post is retried for about 40
  minutes more (LATER_COUNTDOWNS_S), from the log, before the apology.
- A task whose worker died during each of its first MAX_DELIVERIES deliveries (killed for
  memory, say) is not run again: the question gets the apology, and one error line goes in the
  log (`delivered_too_often`).
- A database that goes away (a PostgreSQL restart) is waited for, DATABASE_WAITS_S in turn,
  wherever the task meets it; a reply posted just before keeps its ts for the next try.
- Each reply owed (the answer, or the apology) is an outbox row in PostgreSQL whose due time
  the task pushes as it moves the reply on; the bot's sweep queues the question again once that
  time passes (a Redis that lost the task), and posting goes through `outbox.post_once`, so a
  second delivery never posts twice (application/outbox.py).

When to try again, and how long a database is waited for: workers/retries.py.
The tests' hooks (a slow or failing answer on purpose) are not here: devtools/test_worker_app.py.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackApiError

from application import outbox
from application.answering import answer_question, get_question, mark_failed, question_lock
from application.outbox import UnsavedPost, mark_posted
from core.config import get_settings
from crag.followups import continues_earlier
from slack_shared import blocks
from slack_shared.apology import apologise
from slack_shared.askers import SLACK_USERS
from slack_shared.audience import answer_place, note_private_answer
from slack_shared.client import SLACK_PERMANENT_ERRORS, describe_error, slack_error_of, web_client
from slack_shared.progress import clear_progress
from workers.celery_app import (
    ANSWER_HARD_LIMIT_S,
    ANSWER_SOFT_LIMIT_S,
    DeliveredTooOften,
    celery_app,
    delivered_too_often,
    log_given_up,
)
from workers.retries import (
    ANSWER_RETRIES,
    LATER_COUNTDOWNS_S,
    in_chain,
    is_database_error,
    plan_retry,
    wait_for_database,
)

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from core.config import Settings
    from core.models import Question

log = logging.getLogger(__name__)

BUSY_RECHECK_S = 5  # another delivery holds the question's lock: look again this much later
MAX_CONTEXT_QUESTIONS = 3  # a chain of follow-ups reaches back at most this far


def earlier_questions_for(settings: Settings, row: Question) -> list:
    """The thread's earlier questions this one continues, oldest first: none when it stands
    alone; "What about contractors?" then "And interns?" reach back to the question they follow."""

    earlier: list = []
    current = row
    while (
        current.parent_id is not None and continues_earlier(current.question) and len(earlier) < MAX_CONTEXT_QUESTIONS
    ):
        parent = get_question(settings, current.parent_id)
        if parent is None:
            break
        earlier.insert(0, parent)
        current = parent
    return earlier


@celery_app.task(
    bind=True,
    name="policybot.answer_question",
    max_retries=ANSWER_RETRIES,
    soft_time_limit=ANSWER_SOFT_LIMIT_S,
    time_limit=ANSWER_HARD_LIMIT_S,
)
def answer_question_task(
    self,
    question_id: int,
    waited_later: int = 0,
    db_waits: int = 0,
    posted_ts: str | None = None,
) -> str:
    """Answer a recorded question through CRAG and post it in the question's Slack thread
    (`waited_later`: how many of LATER_COUNTDOWNS_S a ready answer has waited, see plan_retry;
    `db_waits`: how many of DATABASE_WAITS_S it has waited; `posted_ts`: the reply is posted,
    only its ts is still to be saved)."""
    try:
        return _answer(self, question_id, waited_later, db_waits, posted_ts)
    except Exception as error:
        if not is_database_error(error):
            raise
        unsaved = in_chain(error, UnsavedPost)  # under whatever the lock's release raised after it
        posted_ts = unsaved.ts if isinstance(unsaved, UnsavedPost) else posted_ts
        return wait_for_database(
            self, f"question {question_id}", error, db_waits, {"waited_later": waited_later, "posted_ts": posted_ts}
        )


def _answer(task, question_id: int, waited_later: int, db_waits: int, posted_ts: str | None) -> str:

    settings = get_settings()
    too_often = delivered_too_often(task)
    if posted_ts:  # posted by the try before this one, which could not save it
        mark_posted(settings, question_id, posted_ts)
        row = get_question(settings, question_id)
        if row is not None:
            clear_progress(web_client(settings), row.surface, row.channel, row.thread_ts, row.message_ts)
        log.info(
            "question %s: saved the ts %s of its reply, posted before the database went away", question_id, posted_ts
        )
        return "posted"
    row = get_question(settings, question_id)
    if row is None:
        log.warning("question %s does not exist; nothing to answer", question_id)
        return "missing"
    if row.answer_ts:
        return "already posted"
    with question_lock(settings, question_id) as locked:
        if not locked:
            log.info(
                "question %s is being answered by another delivery; checking again in %ss", question_id, BUSY_RECHECK_S
            )
            answer_question_task.apply_async((question_id,), countdown=BUSY_RECHECK_S)
            return "busy"
        row = get_question(settings, question_id)
        owed = outbox.state(settings, question_id)
        if row is None or row.answer_ts or owed == "closed":
            return "already posted"
        client = web_client(settings)
        # The answer's post is retried by Celery after Retry-After, not slept on inside the task.
        poster = web_client(settings, wait_out_rate_limits=False)
        attempt = task.request.retries + 1
        if too_often:
            log_given_up(task, f"question {question_id} (ref {row.reference})")
            return _fail_question(settings, poster, row, DeliveredTooOften())
        if owed == "apology":  # given up before (the sweep queued it again, or the database went away)
            _apologise(settings, poster, row)
            return "failed"
        outbox.due_in(settings, question_id, ANSWER_HARD_LIMIT_S)  # this delivery has it until its time limit
        try:
            if row.status != "answered":
                log.info("answering question %s (ref %s), attempt %s", question_id, row.reference, attempt)
                context = [*earlier_questions_for(settings, row), row]
                # Earlier questions may be someone else's: their names are redacted too.
                askers = dict.fromkeys(question.asker for question in context)
                answer_question(
                    settings,
                    question_id,
                    pipeline_question=" ".join(question.question for question in context) if len(context) > 1 else None,
                    asker_names=tuple(name for asker in askers for name in SLACK_USERS.names(client, asker)),
                )
                answered_row = get_question(settings, question_id)
                assert answered_row is not None
                row = answered_row
            # Asked where outsiders read: to the asker alone, as decided when it arrived (slack_shared/audience.py).
            lead = blocks.private_answer_lead(row.channel, row.question) if row.private_reply else None
            message = blocks.answer_message(blocks.AnswerView.from_row(row), lead)
            answered = row
            ts = outbox.post_once(
                settings,
                question_id,
                lambda: poster.chat_postMessage(
                    **answer_place(answered), unfurl_links=False, unfurl_media=False, **message
                ),
            )
        except Exception as error:
            if is_database_error(error):
                raise
            retry = plan_retry(error, task.request.retries - db_waits, waited_later, answered=row.status == "answered")
            if retry is not None:
                log.warning(
                    "question %s (ref %s) attempt %s failed, retrying in %ss: %s",
                    question_id,
                    row.reference,
                    attempt,
                    retry.countdown,
                    describe_error(error),
                )
                outbox.due_in(settings, question_id, retry.countdown)
                raise task.retry(
                    exc=error,
                    countdown=retry.countdown,
                    max_retries=task.request.retries + 1,
                    kwargs={"waited_later": retry.waited_later, "db_waits": db_waits},
                ) from None
            log.error(
                "question %s (ref %s) failed after %s attempts: %s",
                question_id,
                row.reference,
                attempt,
                describe_error(error),
                exc_info=not isinstance(error, SlackApiError),
            )
            return _fail_question(settings, poster, row, error)
        if ts is None:
            log.error(
                "question %s (ref %s): an earlier delivery was posting its answer when it stopped; not posting "
                "it again, so that it never shows twice",
                question_id,
                row.reference,
            )
            return "posted before"
        if row.private_reply:
            note_private_answer(poster, row)
        clear_progress(client, row.surface, row.channel, row.thread_ts, row.message_ts)
        log.info("question %s (ref %s) answered in %s, ts %s", question_id, row.reference, row.channel, ts)
        return "posted"


def _fail_question(settings: Settings, poster: WebClient, row: Question, error: BaseException) -> str:
    """A question given up: the log row says failed, and the asker is owed the apology."""

    mark_failed(settings, row.id, error, apology_due=True)
    # Slack's answer will not change for these: apologising in the same place only fails
    # again. The answer stays in the log for admins.
    if slack_error_of(error) in SLACK_PERMANENT_ERRORS:
        outbox.close_now(settings, row.id)
        return "failed"
    _apologise(settings, poster, row)
    return "failed"


def _apologise(settings: Settings, poster: WebClient, row: Question) -> None:

    if apologise(poster, settings, row) == "not_posted":  # Slack is down: apologise_task waits
        _apologise_later(settings, row.id)


def _apologise_later(settings: Settings, question_id: int) -> None:

    outbox.due_in(settings, question_id, LATER_COUNTDOWNS_S[0])
    try:
        apologise_task.apply_async((question_id,), countdown=LATER_COUNTDOWNS_S[0])
    except Exception as error:  # the queue went down too: the sweep queues it from the outbox
        log.error("could not queue the apology for question %s: %s", question_id, describe_error(error))


@celery_app.task(
    bind=True,
    name="policybot.apologise",
    max_retries=len(LATER_COUNTDOWNS_S) - 1,
    soft_time_limit=ANSWER_SOFT_LIMIT_S,
    time_limit=ANSWER_HARD_LIMIT_S,
)
def apologise_task(self, question_id: int, db_waits: int = 0) -> str:
    """Post the apology for a failed question that Slack would not take at the time (it was
    down, or rate-limited the thread): tried again later, so the asker is not left in silence."""
    try:
        return _apologise_again(self, question_id, db_waits)
    except Exception as error:
        if not is_database_error(error):
            raise
        return wait_for_database(self, f"the apology for question {question_id}", error, db_waits, {})


def _apologise_again(task, question_id: int, db_waits: int) -> str:

    settings = get_settings()
    if delivered_too_often(task):  # the question is marked failed already
        log_given_up(task, f"the apology for question {question_id}")
        return "gave up"
    with question_lock(settings, question_id) as locked:
        row = get_question(settings, question_id)
        if row is None or row.answer_ts:
            return "already posted"
        outcome = apologise(web_client(settings, wait_out_rate_limits=False), settings, row) if locked else "not_posted"
    retries = task.request.retries - db_waits
    if outcome == "not_posted" and retries < task.max_retries:
        countdown = LATER_COUNTDOWNS_S[retries + 1]
        outbox.due_in(settings, question_id, countdown)
        raise task.retry(countdown=countdown, max_retries=task.request.retries + 1, kwargs={"db_waits": db_waits})
    return outcome
