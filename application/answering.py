"""Questions and the action log: record a question, answer it through CRAG, log what happened.

The CLI (`policybot ask`) and the Celery `answer` task both go through here, so every
question, from any surface, leaves exactly one action-log row. A follow-up asked with no
earlier question ("What about parking?" alone) is not answered here, on any surface: its reply
asks what it follows (`lone_follow_up`).
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from application import outbox
from core import db
from core.config import Settings
from core.models import Feedback, Question
from core.names import new_reference
from core.wording import FOLLOW_UP_CLASS
from crag.followups import needs_earlier
from crag.pipeline import AskContext
from crag.text import plain_text
from crag.types import Action, Answer

log = logging.getLogger(__name__)

LOCK_NAMESPACE = 0x5042  # first key of pg_try_advisory_lock(int, int); the second is the question id


@dataclass(frozen=True)
class RecordedQuestion:
    id: int
    reference: str
    created: bool  # False when this Slack event was already recorded (a retried delivery)


# As text, compiled once: SQLAlchemy never caches its PostgreSQL INSERT construct
# (`inherit_cache = False`), and the Slack listener runs this on every event.
_QUESTION_COLUMNS = (
    "question",
    "surface",
    "asker",
    "channel",
    "thread_ts",
    "message_ts",
    "event_id",
    "parent_id",
    "reference",
    "status",
    "private_reply",
)
_INSERT_QUESTION_ONCE = text(
    f"INSERT INTO questions ({', '.join(_QUESTION_COLUMNS)}) VALUES ({', '.join(':' + c for c in _QUESTION_COLUMNS)}) "
    "ON CONFLICT (event_id) DO NOTHING RETURNING id, reference"
)


def record_question(
    session: Session,
    question: str,
    *,
    surface: str,
    asker: str | None = None,
    channel: str | None = None,
    thread_ts: str | None = None,
    message_ts: str | None = None,
    event_id: str | None = None,
    parent_id: int | None = None,
    private_reply: bool = False,
) -> RecordedQuestion:
    """Insert a pending question in the caller's transaction (the Slack listener claims the
    message in the same one); a second insert with the same Slack event_id is a no-op.
    `private_reply`: the answer goes to the asker alone (slack_shared/audience.py)."""
    values = dict(
        question=question,
        surface=surface,
        asker=asker,
        channel=channel,
        thread_ts=thread_ts,
        message_ts=message_ts,
        event_id=event_id,
        parent_id=parent_id,
        reference=new_reference(),
        status="pending",
        private_reply=private_reply,
    )
    if event_id is None:
        row = Question(**values)
        session.add(row)
        session.flush()
        return RecordedQuestion(row.id, row.reference, True)
    inserted = session.execute(_INSERT_QUESTION_ONCE, values).first()
    if inserted is not None:
        return RecordedQuestion(inserted[0], inserted[1], True)
    existing = session.execute(select(Question.id, Question.reference).where(Question.event_id == event_id)).one()
    return RecordedQuestion(existing[0], existing[1], False)


def get_question(settings: Settings, question_id: int) -> Question | None:
    with db.session(settings) as session:
        return session.get(Question, question_id)


def answer_question(
    settings: Settings, question_id: int, pipeline_question: str | None = None, asker_names: tuple[str, ...] = ()
) -> Answer:
    """Run CRAG for a recorded question and write the action-log fields.

    `pipeline_question` is what the pipeline sees (e.g. with the thread's earlier question
    for context); the row keeps the question as asked. Without it the question is asked alone,
    and one that cannot be answered alone (crag.followups.needs_earlier) gets `lone_follow_up`'s
    reply instead of an answer, logged like an abstention (found false, nothing retrieved).
    """
    row = get_question(settings, question_id)
    if row is None:
        raise LookupError(f"question {question_id} does not exist")
    if pipeline_question is None and needs_earlier(row.question):
        started = time.perf_counter()
        answer = lone_follow_up(row.question, row.surface)
        latency_ms = (time.perf_counter() - started) * 1000
        answer.timings_ms = {"total": round(latency_ms, 1)}
        log_answer(settings, question_id, answer, latency_ms=latency_ms)
        log.info("question %s (ref %s) reads as a follow-up asked alone: asked what it follows", row.id, row.reference)
        return answer
    # torch, transformers and LlamaIndex (application/runtime.py): the bot imports this module to record
    # questions and must not load them; only the worker that answers does
    from application.runtime import get_runtime

    runtime = get_runtime(settings)
    started = time.perf_counter()
    try:
        answer = runtime.pipeline(row.channel).answer(
            pipeline_question or row.question, AskContext(asker=row.asker, asker_names=asker_names, channel=row.channel)
        )
    except Exception as error:
        mark_failed(settings, question_id, error)
        raise
    answer.question = row.question
    log_answer(
        settings,
        question_id,
        answer,
        latency_ms=(time.perf_counter() - started) * 1000,
        evaluator_description=runtime.loaded.description,
    )
    return answer


FOLLOW_UP_EXAMPLE = 'e.g. "How many PTO days carry over for part-time staff?" rather than "And for part-time staff?"'
FOLLOW_UP_NOTE = (
    "asked with no earlier question, it reads as a follow-up: the reply asks what it follows; nothing retrieved"
)


def lone_follow_up(question: str, surface: str) -> Answer:
    """The reply to a follow-up asked with no earlier question ("What about on international
    trips?"): it asks what the question follows, where an answer would be a passage about
    whatever retrieval guessed. Logged like an abstention (found false, action incorrect: no
    evidence at all), with question_class FOLLOW_UP_CLASS and a note saying why."""
    if surface == "cli":  # `policybot ask` takes each question alone: there is no thread to ask in
        where = "Each question here is asked on its own: ask it in full"
    else:
        where = "Ask it in the thread of that question, or ask it in full"
    return Answer(
        question=question,
        action=Action.INCORRECT,
        found=False,
        text=f"This looks like a follow-up to an earlier question. {where}, {FOLLOW_UP_EXAMPLE}.",
        evaluator_version="",
        question_class=FOLLOW_UP_CLASS,
        notes=[FOLLOW_UP_NOTE],
    )


def log_answer(
    settings: Settings, question_id: int, answer: Answer, latency_ms: float, evaluator_description: str = ""
) -> None:
    with db.session(settings) as session:
        row = session.get(Question, question_id, with_for_update=True)
        assert row is not None
        row.status = "answered"
        row.action = answer.action.value
        row.found = answer.found
        row.question_class = answer.question_class
        row.answer = answer.text
        row.citations = [citation_json(c) for c in answer.citations]
        row.scores = [
            {
                "document": s.passage.document,
                "section": s.passage.section,
                "origin": s.passage.origin,
                "source": s.passage.source,
                "chunk_id": s.passage.id,
                "score": round(s.score, 4),
            }
            for s in answer.scores
        ]
        row.strips = [
            {
                "document": s.passage.document,
                "section": s.passage.section,
                "origin": s.passage.origin,
                "text": s.text,
                "context": s.context,
                "score": round(s.score or 0.0, 4),
            }
            for s in answer.strips
        ]
        row.sources_used = list(answer.sources_used)
        row.fallback_queries = list(answer.fallback_queries)
        row.evaluator_version = answer.evaluator_version or None  # None: no evaluator ran (lone_follow_up)
        row.upper = answer.thresholds.upper if answer.thresholds else None
        row.lower = answer.thresholds.lower if answer.thresholds else None
        timings: dict[str, float | list[str]] = dict(answer.timings_ms)
        if answer.notes:
            timings["notes"] = list(answer.notes)  # why a source was skipped or failed
        row.timings_ms = timings
        row.latency_ms = round(latency_ms, 1)
        row.error = None
        row.answered_at = datetime.now(UTC)


@contextmanager
def question_lock(settings: Settings, question_id: int) -> Iterator[bool]:
    """A session-level advisory lock on one question, held while it is answered or given up
    on; yields whether it was acquired (the lock dies with a killed worker's connection)."""
    with db.engine(settings).connect() as connection:
        got = bool(
            connection.execute(
                text("SELECT pg_try_advisory_lock(:a, :b)"), {"a": LOCK_NAMESPACE, "b": question_id}
            ).scalar()
        )
        connection.commit()
        try:
            yield got
        finally:
            if got:
                connection.execute(text("SELECT pg_advisory_unlock(:a, :b)"), {"a": LOCK_NAMESPACE, "b": question_id})
                connection.commit()


def mark_failed(settings: Settings, question_id: int, error: BaseException, *, apology_due: bool = False) -> None:
    """The question failed (for now, or for good); `apology_due`: given up, the asker is owed
    the apology instead of the answer (in the same transaction, application/outbox.py)."""
    detail = "".join(traceback.format_exception_only(type(error), error)).strip()
    with db.session(settings) as session:
        row = session.get(Question, question_id, with_for_update=True)
        if row is not None:
            row.status = "failed"
            row.error = detail[:4000]
            if apology_due:
                outbox.owe_apology(session, question_id)


def record_feedback(settings: Settings, question_id: int, user_id: str, vote: int) -> None:
    """One vote per user and answer; a second click changes it."""
    if vote not in (-1, 1):
        raise ValueError("vote must be +1 or -1")
    with db.session(settings) as session:
        session.execute(
            insert(Feedback)
            .values(question_id=question_id, user_id=user_id, vote=vote)
            .on_conflict_do_update(
                constraint="uq_feedback_question_user",
                set_={"vote": vote, "updated_at": datetime.now(UTC)},
            )
        )


def citation_json(citation: Any) -> dict[str, Any]:
    return {
        "n": citation.n,
        "origin": citation.origin,
        "source": citation.source,
        "document": citation.document,
        "title": citation.title,
        "section": citation.section,
        "url": citation.url,
        "score": round(citation.score, 4),
    }


def answer_json(answer: Answer) -> dict[str, Any]:
    """The `policybot ask --json` contract."""
    thresholds = answer.thresholds
    return {
        "question": answer.question,
        "action": answer.action.value,
        "found": answer.found,
        "answer": plain_text(answer.text),  # a link as its text; Slack gets it as a link (slack_shared/blocks.py)
        "citations": [citation_json(c) for c in answer.citations],
        "evaluator": {
            "version": answer.evaluator_version,
            "upper": thresholds.upper if thresholds else None,
            "lower": thresholds.lower if thresholds else None,
        },
        "scores": [
            {"document": s.passage.document, "section": s.passage.section, "score": round(s.score, 4)}
            for s in answer.scores
            if s.passage.origin == "kb"
        ],
        "timings_ms": {
            key: answer.timings_ms.get(key, 0.0) for key in ("retrieve", "evaluate", "refine", "fallback", "total")
        },
    }
