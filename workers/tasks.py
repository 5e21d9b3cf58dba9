"""Celery tasks: answer a recorded question in its Slack thread; ingest an admin's upload; train the evaluator.

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
  memory, say) is not run again: the question gets the apology, the upload or job the usual
  failure reply, and one error line in the log (`delivered_too_often`).
- A database that goes away (a PostgreSQL restart) is waited for, DATABASE_WAITS_S in turn,
  wherever the task meets it; a reply posted just before keeps its ts for the next try.
- Each reply owed (the answer, or the apology) is an outbox row in PostgreSQL whose due time
  the task pushes as it moves the reply on; the bot's sweep queues the question again once that
  time passes (a Redis that lost the task), and posting goes through `outbox.post_once`, so a
  second delivery never posts twice (application/outbox.py).

The tests' hooks (a slow or failing answer on purpose) are not here: devtools/test_worker_app.py.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from psycopg import OperationalError as PsycopgOperationalError
from slack_sdk.errors import SlackApiError
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from application import jobs, outbox
from application.answering import answer_question, get_question, mark_failed, question_lock
from application.outbox import UnsavedPost, mark_posted
from application.uploads import UploadRefused, check_size, checked_name
from core.config import get_settings, secret_value
from core.errors import UserError
from crag.followups import continues_earlier
from slack_outbound import blocks, state
from slack_outbound.apology import apologise
from slack_outbound.askers import SLACK_USERS
from slack_outbound.audience import answer_place, note_private_answer
from slack_outbound.client import (
    MAX_RETRY_AFTER_S,
    SLACK_PERMANENT_ERRORS,
    describe_error,
    is_rate_limited,
    retry_after_s,
    slack_error_of,
    slack_failed_for_now,
    web_client,
)
from slack_outbound.progress import clear_progress
from workers.celery_app import (
    ANSWER_HARD_LIMIT_S,
    ANSWER_SOFT_LIMIT_S,
    INGEST_HARD_LIMIT_S,
    INGEST_SOFT_LIMIT_S,
    MAX_DELIVERIES,
    celery_app,
    delivered_too_often,
)

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from application.evaluators import Activation
    from core.config import Settings
    from core.models import Question

log = logging.getLogger(__name__)

ANSWER_RETRIES = 2  # three attempts in all
# Slack rate-limits a busy channel for seconds, not for good: a rate-limited answer is posted
# again after each Retry-After, up to this many times.
RATE_LIMITED_RETRIES = 10
# A reply Slack would not take for now (an apology, or a logged answer) is tried again after
# these waits (about 40 minutes in all; the worker holds each retry's message until it is due).
LATER_COUNTDOWNS_S = (5, 30, 120, 600, 1800)
RETRY_COUNTDOWNS_S = (1, 3, 6)
BUSY_RECHECK_S = 5  # another delivery holds the question's lock: look again this much later
MAX_CONTEXT_QUESTIONS = 3  # a chain of follow-ups reaches back at most this far


class DeliveredTooOften(RuntimeError):
    """The task's worker died during each of its first MAX_DELIVERIES deliveries."""

    def __init__(self) -> None:
        super().__init__(
            f"its worker stopped during each of {MAX_DELIVERIES} tries (killed, perhaps for memory); not tried again"
        )


def _log_given_up(task, what: str) -> None:
    log.error(
        "%s: the worker running task %s[%s] stopped during each of its %s deliveries; not running it again",
        what,
        task.name,
        task.request.id,
        MAX_DELIVERIES,
    )


def _settings() -> Settings:
    return get_settings()


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
        unsaved = _in_chain(error, UnsavedPost)  # under whatever the lock's release raised after it
        posted_ts = unsaved.ts if isinstance(unsaved, UnsavedPost) else posted_ts
        return _wait_for_database(
            self, f"question {question_id}", error, db_waits, {"waited_later": waited_later, "posted_ts": posted_ts}
        )


def _answer(task, question_id: int, waited_later: int, db_waits: int, posted_ts: str | None) -> str:

    settings = _settings()
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
            _log_given_up(task, f"question {question_id} (ref {row.reference})")
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
            # Asked where outsiders read: to the asker alone, as decided when it arrived (slack_outbound/audience.py).
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


# A database that went away (a restart, a failover) is waited for like any passing failure:
# about 4 minutes in all, then the outbox's due time brings the question back through the sweep.
DATABASE_WAITS_S = (2, 4, 8, 15, 30, 60, 60, 60)


def is_database_error(error: BaseException) -> bool:
    """Whether the database (not the statement) failed: a lost or refused connection, anywhere
    in the error's chain (LlamaIndex and our own helpers may wrap it)."""

    found = _in_chain(error, (UnsavedPost, OperationalError, InterfaceError, PsycopgOperationalError, DBAPIError))
    return found is not None and (
        not isinstance(found, DBAPIError)
        or found.connection_invalidated
        or isinstance(found, (OperationalError, InterfaceError))
    )


def _in_chain(
    error: BaseException, types: type[BaseException] | tuple[type[BaseException], ...]
) -> BaseException | None:
    """The first of `types` among an error and the errors it was raised from or during."""
    seen: BaseException | None = error
    for _ in range(10):  # a chain is short; a cycle is not followed for ever
        if seen is None or isinstance(seen, types):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _wait_for_database(task, what: str, error: BaseException, db_waits: int, kwargs: dict[str, Any]) -> str:
    """Retry a task after a database failure (with `kwargs`, its question ID staying in its
    arguments), or leave it to the sweep once the waits are spent."""
    if db_waits >= len(DATABASE_WAITS_S):
        log.error(
            "%s: the database is still unreachable (%s); the bot's sweep queues it again once it is back",
            what,
            describe_error(error),
        )
        return "database down"
    countdown = DATABASE_WAITS_S[db_waits]
    log.warning("%s: the database is unreachable (%s); trying again in %ss", what, describe_error(error), countdown)
    raise task.retry(
        exc=error,
        countdown=countdown,
        max_retries=task.request.retries + 1,
        kwargs={**kwargs, "db_waits": db_waits + 1},
    ) from None


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


@dataclass(frozen=True)
class Retry:
    countdown: int  # seconds before the next attempt
    waited_later: int  # how many of LATER_COUNTDOWNS_S the next attempt will have waited


def plan_retry(error: BaseException, retries: int, waited_later: int, *, answered: bool) -> Retry | None:
    """When to try a failed answer again after `retries` retries, or None to give up (the
    apology). A failure gets RETRY_COUNTDOWNS_S, a rate limit Slack's Retry-After up to
    RATE_LIMITED_RETRIES times; then a ready answer that Slack surely did not take waits
    LATER_COUNTDOWNS_S in turn, whatever fails in between, rather than be traded for an apology."""
    if slack_error_of(error) in SLACK_PERMANENT_ERRORS:
        return None  # Slack's answer will not change
    if waited_later == 0:
        if is_rate_limited(error):
            if retries < RATE_LIMITED_RETRIES:  # as long as Slack asks; without a Retry-After (a proxy's 429), back off
                return Retry(retry_after_s(error) or min(MAX_RETRY_AFTER_S, 2 ** (retries + 1)), 0)
        elif retries < ANSWER_RETRIES:
            return Retry(RETRY_COUNTDOWNS_S[min(retries, len(RETRY_COUNTDOWNS_S) - 1)], 0)
    if answered and slack_failed_for_now(error) and waited_later < len(LATER_COUNTDOWNS_S):
        return Retry(max(LATER_COUNTDOWNS_S[waited_later], retry_after_s(error)), waited_later + 1)
    return None


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
        return _wait_for_database(self, f"the apology for question {question_id}", error, db_waits, {})


def _apologise_again(task, question_id: int, db_waits: int) -> str:

    settings = _settings()
    if delivered_too_often(task):  # the question is marked failed already
        _log_given_up(task, f"the apology for question {question_id}")
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


# --------------------------------------------------------------------- ingest


class DownloadError(RuntimeError):
    pass


def _trusted_file_url(settings: Settings, url: str) -> bool:
    """Only send the bot token to Slack's own file hosts (or to the configured API host: a local fake)."""
    host = (urlsplit(url).hostname or "").lower()
    api_host = (urlsplit(settings.slack_api_url).hostname or "").lower()
    return urlsplit(url).scheme in ("https", "http") and (
        host == api_host or host == "slack.com" or host.endswith(".slack.com") or host.endswith(".slack-edge.com")
    )


def download_file(client: WebClient, settings: Settings, file_id: str, folder: Path) -> Path:
    """Fetch an uploaded file with the bot token into `folder` (same name: a re-upload updates the document)."""

    info: dict[str, Any] = client.files_info(file=file_id)["file"]
    name = checked_name(str(info.get("name") or info.get("title") or file_id))  # UploadRefused: not downloaded
    check_size(settings, name, int(info.get("size") or 0))
    url = str(info.get("url_private_download") or info.get("url_private") or "")
    if not url or not _trusted_file_url(settings, url):
        raise DownloadError(f"{name}: Slack gave no downloadable URL on a Slack host")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    partial = folder / f".{name}.part"
    with httpx.stream(
        "GET",
        url,
        headers={"Authorization": f"Bearer {secret_value(settings.slack_bot_token)}"},
        follow_redirects=True,
        timeout=60,
    ) as response:
        if response.status_code != 200:
            raise DownloadError(f"{name}: download failed with HTTP {response.status_code}")
        if "text/html" in response.headers.get("content-type", "") and target.suffix.lower() not in (".html", ".htm"):
            raise DownloadError(f"{name}: Slack returned a sign-in page; does the app have the files:read scope?")
        size = 0
        with partial.open("wb") as out:
            for chunk in response.iter_bytes():
                size += len(chunk)
                check_size(settings, name, size)
                out.write(chunk)
    partial.replace(target)
    return target


@celery_app.task(
    bind=True,
    name="policybot.ingest_files",
    max_retries=2,
    soft_time_limit=INGEST_SOFT_LIMIT_S,
    time_limit=INGEST_HARD_LIMIT_S,
)
def ingest_file_task(
    self,
    claim_id: int,
    file_ids: Sequence[str],
    channel: str,
    thread_ts: str,
    user: str,
    collection: str | None = None,
) -> str:
    """Ingest files an admin sent the bot in a DM and confirmed, into the collection the offer
    named, then say in the DM what happened; the 👀 goes whatever the outcome. `user`: who
    confirmed, as the bot saw it (the claim's record of it is what counts)."""

    settings = _settings()
    too_often = delivered_too_often(self)
    claim = state.get_claim(settings, claim_id)
    if claim is not None and claim.reply_ts:
        return "already replied"
    client = web_client(settings)
    # Who may add documents is the bot's decision (POLICYBOT_ADMINS there), recorded with the
    # message when an admin confirmed it: the worker does not decide again, nor trust the queue alone.
    if claim is None or not claim.confirmed_by:
        message, outcome = blocks.upload_refused_message(), "refused"
    elif too_often:
        _log_given_up(self, f"upload {claim_id}")
        message, outcome = blocks.upload_result_message([f"ingestion failed: {DeliveredTooOften()}"], False), "failed"
    else:
        log.info("ingesting upload %s, confirmed by admin %s", claim_id, claim.confirmed_by)
        try:
            lines, ok = _ingest_uploads(client, settings, file_ids, collection or settings.default_collection)
        except Exception as error:
            if self.request.retries < self.max_retries:
                raise self.retry(exc=error, countdown=RETRY_COUNTDOWNS_S[self.request.retries]) from None
            log.error("ingesting upload %s failed: %s", claim_id, describe_error(error), exc_info=True)
            lines, ok = [f"ingestion failed: {describe_error(error)}"], False
        message, outcome = blocks.upload_result_message(lines, ok), "ingested" if ok else "failed"
    try:
        posted = client.chat_postMessage(channel=channel, thread_ts=thread_ts, **message)
        if claim is not None:
            state.set_reply_ts(settings, claim_id, str(posted["ts"]))
    finally:
        clear_progress(
            client,
            "assistant" if state.is_assistant_thread(settings, channel, thread_ts) else "dm",
            channel,
            thread_ts,
            claim.message_ts if claim is not None else None,
        )
    return outcome


def _ingest_uploads(
    client: WebClient, settings: Settings, file_ids: Sequence[str], collection: str
) -> tuple[list[str], bool]:
    from ingestion.ingest import ingest_paths  # LlamaIndex: loaded by the tasks that ingest, not by whoever queues them

    folder = settings.home / "uploads" / collection
    paths: list[Path] = []
    lines: list[str] = []
    for file_id in file_ids:
        try:
            paths.append(download_file(client, settings, file_id, folder))
        except (DownloadError, UploadRefused) as error:
            lines.append(str(error))
    ok = not lines
    if paths:
        report = ingest_paths(settings, paths, collection=collection)
        for item in report.files:
            if item.status == "failed":
                ok = False
                lines.append(f"{item.document}: {item.detail}")
            elif item.status == "skipped":
                lines.append(f"{item.document}: skipped, {item.detail}")
            else:
                lines.append(f"{item.document}: {item.status}, {item.chunks} chunks in collection {collection}")
        if report.count("added") or report.count("updated"):
            lines.append("New questions are answered from it right away.")
            if _start_first_training(settings):
                lines.append(
                    "No evaluator is trained yet: training one in the background "
                    "(answers use cosine similarity until it is ready)."
                )
    return lines, ok


def _start_first_training(settings: Settings) -> bool:
    """After the first ingestion, train an evaluator on the ingest queue (POLICYBOT_AUTO_TRAIN)."""
    from application import evaluators  # torch: loaded by the tasks that train, not by whoever queues them

    if not settings.auto_train or evaluators.list_versions(settings):
        return False
    if len(evaluators.corpus_chunks(settings)) < evaluators.MIN_CHUNKS:
        return False
    train_evaluator_task.delay()
    return True


# --------------------------------------------------------------------- train

# Training runs under the ingest queue's time limit; the console refuses longer budgets.
MAX_TRAIN_MINUTES = (INGEST_SOFT_LIMIT_S - 60) / 60


@celery_app.task(
    bind=True, name="policybot.train_evaluator", soft_time_limit=INGEST_SOFT_LIMIT_S, time_limit=INGEST_HARD_LIMIT_S
)
def train_evaluator_task(
    self,
    minutes: float | None = None,
    activate: Activation = "if_better",
    job_id: int | None = None,
    with_reviews: bool = False,
    with_feedback: bool = False,
) -> dict[str, Any]:
    """Train an evaluator on the ingest queue (activated only if it beats cosine, unless told otherwise),
    optionally also on admins' reviews and askers' votes (as `policybot evaluator train --with-...`).

    With a `job_id` (the admin console), progress and the outcome are written to that job.
    Answer workers load the active evaluator when their process starts: restart them
    (or run `policybot worker` again) to use a newly activated version.
    """
    from application.evaluators import active_version, train_and_register  # torch: as above

    settings = _settings()
    if delivered_too_often(self):
        _log_given_up(self, "training" + (f" job {job_id}" if job_id is not None else ""))
        if job_id is not None:
            jobs.fail_job(settings, job_id, str(DeliveredTooOften()))
        return {"error": str(DeliveredTooOften())}
    budget_minutes = min(minutes or settings.train_minutes, MAX_TRAIN_MINUTES)
    progress = None
    if job_id is not None:
        jobs.update_job(settings, job_id, status="running", progress={"phase": "preparing"})
        report = jobs.progress_reporter(settings, job_id)

        def progress(event: dict) -> None:
            report(
                {
                    "phase": event.get("phase", ""),
                    "done": event.get("step", 0),
                    "total": event.get("total"),
                    "loss": event.get("loss"),
                }
            )

    try:
        result = train_and_register(
            settings,
            budget_s=budget_minutes * 60,
            activate=activate,
            progress=progress,
            with_reviews=with_reviews,
            with_feedback=with_feedback,
        )
    except Exception as error:
        if job_id is not None:
            jobs.fail_job(settings, job_id, str(error) if isinstance(error, UserError) else describe_error(error))
        if isinstance(error, UserError):
            log.warning("training refused: %s", error)
            return {"error": str(error)}
        raise
    active = active_version(settings)
    outcome = {
        "version": result.version,
        "beats_cosine": result.beats_cosine,
        "thresholds": result.thresholds,
        "activated": active is not None and active.version == result.version,
        "auc": result.evaluator.auc,
        "cosine_auc": result.cosine.auc,
    }
    if job_id is not None:
        jobs.update_job(settings, job_id, status="done", result=outcome)
    return outcome


# ----------------------------------------------------------- console ingest


@celery_app.task(
    bind=True,
    name="policybot.ingest_job",
    max_retries=0,
    soft_time_limit=INGEST_SOFT_LIMIT_S,
    time_limit=INGEST_HARD_LIMIT_S,
)
def ingest_job_task(self, job_id: int) -> str:
    """Ingest the files of a console job (uploads or a re-ingest), reporting progress per file."""
    from ingestion.ingest import ingest_paths  # LlamaIndex: loaded by the tasks that ingest, not by whoever queues them

    settings = _settings()
    too_often = delivered_too_often(self)
    job = jobs.get_job(settings, job_id)
    if job is None:
        log.warning("ingest job %s does not exist", job_id)
        return "missing"
    if job["status"] in ("done", "failed"):
        return "already finished"  # a redelivery after the job completed
    if too_often:
        _log_given_up(self, f"ingest job {job_id}")
        jobs.fail_job(settings, job_id, str(DeliveredTooOften()))
        return "failed"
    params = job["params"]
    paths = [Path(p) for p in params.get("paths", [])]
    total = len(paths)
    jobs.update_job(settings, job_id, status="running", progress={"done": 0, "total": total, "files": []})
    report_progress = jobs.progress_reporter(settings, job_id, every_s=0.5)
    files: list[dict[str, Any]] = []

    def show(step) -> None:
        files.append(
            {
                "document": step.result.document,
                "status": step.result.status,
                "chunks": step.result.chunks,
                "detail": step.result.detail,
            }
        )
        report_progress({"done": step.done, "total": step.total, "files": list(files)})

    try:
        report = ingest_paths(
            settings,
            paths,
            collection=params.get("collection"),
            access_channels=params.get("channels"),
            on_progress=show,
        )
    except Exception as error:
        message = str(error) if isinstance(error, UserError) else describe_error(error)
        log.error("ingest job %s failed: %s", job_id, message, exc_info=not isinstance(error, UserError))
        jobs.fail_job(settings, job_id, message)
        return "failed"
    result = report.as_json() | {"collection": report.collection, "seconds": round(report.seconds, 1)}
    if report.failed:
        jobs.update_job(
            settings,
            job_id,
            status="failed",
            result=result,
            error="; ".join(f"{Path(item.path).name}: {item.detail}" for item in report.failed),
        )
        return "failed"
    jobs.update_job(settings, job_id, status="done", result=result)
    return "ingested"
