"""Reviewing the action log: the queries behind `policybot logs|stats`, the bot's admin `stats`
reply and the admin console, so all three show the same rows and the same numbers.

- `query_logs` / `count_logs`: logged questions, newest first, filtered (application/action_log.py's
  `LogFilters`);
- `asker_outcome` / `reply_delivery`: what happened to the asker, and where their Slack reply is,
  derived from what is stored (the question's state, found flag and reply ts, and its outbox row);
- `logged_evaluator_versions`: the evaluator versions found in the log (a filter's choices);
- `find_record`, `log_record`: one row as the plain dict of `logs --json` (and the console's record view);
- `daily_stats` / `stats_summary`: per-day action rates, abstention, feedback, latency;
- `set_review` / `reviews_for`: admins' right/wrong labels (later evaluator training data);
- `incorrect_alert`, `misses`: the health gauges of the knowledge base.

What needs no database (the filters' values, `parse_since`, the exports) is in
application/action_log.py, which the CLI imports before checking its options: `--help` must not
load SQLAlchemy (tests/test_cli_startup.py), and the CLI imports this module only in the commands
that query.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import case, exists, func, or_, select, text
from sqlalchemy.orm import Session

from application.action_log import ACTIONS, VERDICTS, LogFilters, record_id
from core import db
from core.errors import NotFound, UserError
from core.models import Document, Feedback, Outbox, Question, Review
from core.wording import FOLLOW_UP_CLASS, describe_action

if TYPE_CHECKING:
    from core.config import Settings


def _outbox_says(*conditions: Any):
    """Whether the question's outbox row (its Slack reply) meets `conditions`."""
    return exists().where(Outbox.question_id == Question.id, *conditions)


# What happened to the asker (action_log.STATUSES), from what is stored: the stored status is the
# pipeline's (pending | answered | failed) and says nothing of abstentions or apologies.
# - answered / abstained: the pipeline answered, from a source or with the abstention (found false);
# - apologised: given up, and the apology with the reference is the reply (posted, or owed while Slack
#   is down); a failed question's posted reply is always its apology (workers/tasks.py, bot/recovery.py);
# - pending: not answered yet, or failed for now with the answer still owed (a retry is due);
# - failed: given up with no reply in Slack (asked from the CLI, the apology refused, the bot could not queue it).
asker_outcome = case(
    (Question.status == "answered", case((Question.found.is_(False), "abstained"), else_="answered")),
    (
        Question.status == "failed",
        case(
            (Question.answer_ts.is_not(None), "apologised"),
            (_outbox_says(Outbox.closed_at.is_(None), Outbox.kind == "apology"), "apologised"),
            (_outbox_says(Outbox.closed_at.is_(None)), "pending"),
            else_="failed",
        ),
    ),
    else_="pending",
)

# Where the Slack reply is, apart from what it says: posted, owed (due: a worker or the sweep posts it),
# or not posted (Slack refused it, or the bot could not queue the question); None without one (the CLI).
reply_delivery = case(
    (Question.answer_ts.is_not(None), "posted"),
    (_outbox_says(Outbox.closed_at.is_(None)), "owed"),
    (_outbox_says(), "not posted"),
    else_=None,
)


def _filtered(query, filters: LogFilters):
    """`query` narrowed to the rows `filters` shows."""
    if filters.since is not None:
        query = query.where(Question.created_at >= filters.since)
    if filters.until is not None:
        query = query.where(Question.created_at < filters.until)
    if filters.action:
        query = query.where(Question.action == filters.action)
    if filters.found is not None:
        query = query.where(Question.found.is_(filters.found))
    if filters.status:
        query = query.where(asker_outcome == filters.status)
    if filters.channel:
        query = query.where(Question.channel == filters.channel)
    if filters.evaluator_version:
        query = query.where(Question.evaluator_version == filters.evaluator_version)
    if filters.text:
        escaped = filters.text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where(Question.question.ilike(f"%{escaped}%", escape="\\"))
    votes: dict[str, Any] = {"up": Feedback.vote > 0, "down": Feedback.vote < 0, "any": True}
    if filters.feedback in votes:
        query = query.where(exists().where(Feedback.question_id == Question.id, votes[filters.feedback]))
    elif filters.feedback == "none":
        query = query.where(~exists().where(Feedback.question_id == Question.id))
    if filters.reviewed in VERDICTS:
        query = query.where(exists().where(Review.question_id == Question.id, Review.verdict == filters.reviewed))
    elif filters.reviewed == "any":
        query = query.where(exists().where(Review.question_id == Question.id))
    elif filters.reviewed == "none":
        query = query.where(~exists().where(Review.question_id == Question.id))
    return query


def _feedback_counts(session: Session, question_ids: list[int]) -> dict[int, tuple[int, int]]:
    if not question_ids:
        return {}
    rows = session.execute(
        select(Feedback.question_id, func.count(case((Feedback.vote > 0, 1))), func.count(case((Feedback.vote < 0, 1))))
        .where(Feedback.question_id.in_(question_ids))
        .group_by(Feedback.question_id)
    ).all()
    return {qid: (int(up), int(down)) for qid, up, down in rows}


def _latest_reviews(session: Session, question_ids: list[int]) -> dict[int, dict[str, Any]]:
    if not question_ids:
        return {}
    rows = (
        session.execute(select(Review).where(Review.question_id.in_(question_ids)).order_by(Review.updated_at))
        .scalars()
        .all()
    )
    return {row.question_id: review_json(row) for row in rows}  # the latest one wins


def query_logs(
    settings,
    filters: LogFilters | None = None,
    *,
    limit: int | None = 100,
    offset: int = 0,
    **legacy: Any,
) -> list[dict[str, Any]]:
    """Logged questions, newest first, as plain dicts (the `logs --json` records).

    Keyword filters (`since=`, `action=`, ...) are accepted as well as a `LogFilters`.
    """
    filters = filters or LogFilters(**legacy)
    query = _filtered(select(Question, asker_outcome, reply_delivery), filters).order_by(Question.id.desc())
    if limit:
        query = query.limit(limit)
    if offset:
        query = query.offset(offset)
    with db.session(settings) as session:
        rows = session.execute(query).all()
        ids = [row.id for row, _, _ in rows]
        votes = _feedback_counts(session, ids)
        reviews = _latest_reviews(session, ids)
    return [
        log_record(row, outcome, delivery, votes.get(row.id, (0, 0)), reviews.get(row.id))
        for row, outcome, delivery in rows
    ]


def count_logs(settings: Settings, filters: LogFilters) -> int:
    with db.session(settings) as session:
        return int(session.execute(_filtered(select(func.count()).select_from(Question), filters)).scalar_one())


def logged_evaluator_versions(settings: Settings) -> list[str]:
    """The evaluator versions that answered logged questions (the console's evaluator filter)."""
    with db.session(settings) as session:
        versions = session.execute(
            select(Question.evaluator_version).distinct().where(Question.evaluator_version.is_not(None))
        ).scalars()
        return [version for version in versions if version is not None]  # none are: the query says so


def find_record(settings: Settings, ref: str) -> dict[str, Any] | None:
    """One logged question by the reference users quote (e.g. Q7K2M9) or by row id (`record_id`)."""
    ref = ref.strip()
    row_id = record_id(ref)
    query = select(Question, asker_outcome, reply_delivery)
    if row_id is not None:
        query = query.where(Question.id == row_id)
    else:
        query = query.where(func.upper(Question.reference) == ref.upper()).order_by(Question.id.desc()).limit(1)
    with db.session(settings) as session:
        found = session.execute(query).first()
        if found is None:
            return None
        row, outcome, delivery = found
        votes = _feedback_counts(session, [row.id])
        reviews = _latest_reviews(session, [row.id])
    return log_record(row, outcome, delivery, votes.get(row.id, (0, 0)), reviews.get(row.id))


def log_record(
    row, outcome: str, delivery: str | None, votes: tuple[int, int] = (0, 0), review: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One row as a plain dict; `outcome` and `delivery`: asker_outcome and reply_delivery, selected with it."""
    scores = row.scores or []
    return {
        "id": row.id,
        "reference": row.reference,
        "created_at": row.created_at.isoformat() if row.created_at else None,
        "surface": row.surface,
        "asker": row.asker,
        "channel": row.channel,
        "thread_ts": row.thread_ts,
        "parent_id": row.parent_id,
        "question": row.question,
        "status": outcome,
        "delivery": delivery,
        "action": row.action,
        "action_text": describe_action(row.action, bool(row.found), list(row.sources_used or []), row.question_class)
        if row.action
        else None,
        "found": row.found,
        "top_score": max((s.get("score", 0.0) for s in scores), default=None),
        "scores": scores,
        "strips": row.strips or [],
        "sources_used": row.sources_used or [],
        "fallback_queries": row.fallback_queries or [],
        "citations": row.citations or [],
        "answer": row.answer,
        "feedback": {"up": votes[0], "down": votes[1]},
        "evaluator_version": row.evaluator_version,
        "thresholds": {"upper": row.upper, "lower": row.lower},
        "latency_ms": row.latency_ms,
        "timings_ms": row.timings_ms or {},
        "error": row.error,
        "answer_ts": row.answer_ts,
        "answered_at": row.answered_at.isoformat() if row.answered_at else None,
        "review": review,
    }


# ------------------------------------------------------------------ reviews


def review_json(row) -> dict[str, Any]:
    return {
        "verdict": row.verdict,
        "expected_document_id": row.expected_document_id,
        "expected_document": row.expected_document,
        "note": row.note,
        "reviewer": row.reviewer,
        "updated_at": row.updated_at.isoformat() if row.updated_at else None,
    }


class ReviewError(UserError):
    """A review the console refuses (400): a verdict or expected document that is not one."""


class ReviewNotFound(ReviewError, NotFound):
    """The logged question to review does not exist (404)."""


def set_review(
    settings,
    question_id: int,
    reviewer: str,
    verdict: str,
    expected_document_id: int | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """Store (or replace) one reviewer's label for a logged question."""
    if verdict not in VERDICTS:
        raise ReviewError(f"verdict must be one of {', '.join(VERDICTS)}")
    note = (note or "").strip()[:2000] or None
    with db.session(settings) as session:
        if session.get(Question, question_id) is None:
            raise ReviewNotFound(f"no logged question {question_id}")
        expected_name = None
        if expected_document_id is not None:
            document = session.get(Document, expected_document_id)
            if document is None:
                raise ReviewError(f"no document {expected_document_id}")
            expected_name = document.name
        row = session.execute(
            select(Review).where(Review.question_id == question_id, Review.reviewer == reviewer)
        ).scalar_one_or_none()
        if row is None:
            row = Review(question_id=question_id, reviewer=reviewer)
            session.add(row)
        row.verdict = verdict
        row.expected_document_id = expected_document_id
        row.expected_document = expected_name
        row.note = note
        row.updated_at = datetime.now(UTC)
        session.flush()
        return review_json(row)


def reviews_for(settings: Settings, question_id: int) -> list[dict[str, Any]]:
    with db.session(settings) as session:
        rows = (
            session.execute(select(Review).where(Review.question_id == question_id).order_by(Review.updated_at.desc()))
            .scalars()
            .all()
        )
        return [review_json(row) for row in rows]


# ------------------------------------------------------------------ stats

_DAILY_SQL = """
SELECT (q.created_at AT TIME ZONE 'UTC')::date AS day,
       count(*) AS questions,
       count(*) FILTER (WHERE q.status = 'answered') AS answered,
       count(*) FILTER (WHERE q.status = 'failed') AS failed,
       count(*) FILTER (WHERE q.status = 'answered' AND q.action = 'correct') AS correct,
       count(*) FILTER (WHERE q.status = 'answered' AND q.action = 'ambiguous') AS ambiguous,
       count(*) FILTER (WHERE q.status = 'answered' AND q.action = 'incorrect') AS incorrect,
       count(*) FILTER (WHERE q.status = 'answered' AND q.found IS FALSE) AS abstained,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY q.latency_ms) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY q.latency_ms) AS p95,
       coalesce(sum(f.up), 0) AS up,
       coalesce(sum(f.down), 0) AS down
FROM questions q
LEFT JOIN (SELECT question_id, count(*) FILTER (WHERE vote > 0) AS up, count(*) FILTER (WHERE vote < 0) AS down
           FROM feedback GROUP BY question_id) f ON f.question_id = q.id
WHERE q.created_at >= :since AND q.created_at < :until
GROUP BY GROUPING SETS (((q.created_at AT TIME ZONE 'UTC')::date), ())
ORDER BY 1 NULLS LAST
"""


def _rates(row: Any) -> dict[str, Any]:
    answered = int(row.answered or 0)
    return {
        "questions": int(row.questions or 0),
        "answered": answered,
        "failed": int(row.failed or 0),
        "actions": {name: int(getattr(row, name) or 0) for name in ACTIONS},
        "action_rates": {name: (int(getattr(row, name) or 0) / answered if answered else 0.0) for name in ACTIONS},
        "abstained": int(row.abstained or 0),
        "abstention_rate": (int(row.abstained or 0) / answered) if answered else 0.0,
        "feedback_up": int(row.up or 0),
        "feedback_down": int(row.down or 0),
        "latency_p50_ms": round(float(row.p50), 1) if row.p50 is not None else None,
        "latency_p95_ms": round(float(row.p95), 1) if row.p95 is not None else None,
    }


def _day_start(day) -> datetime:
    return datetime.combine(day, datetime.min.time(), tzinfo=UTC)


def daily_stats(settings: Settings, days: int = 7, now: datetime | None = None) -> dict[str, Any]:
    """Per-day and total action rates, abstention rate, feedback and latency percentiles."""
    now = now or datetime.now(UTC)
    start = _day_start(now.date() - timedelta(days=days - 1))
    until = _day_start(now.date() + timedelta(days=1))
    with db.session(settings) as session:
        rows = session.execute(text(_DAILY_SQL), {"since": start, "until": until}).all()
    per_day = [{"day": row.day.isoformat()} | _rates(row) for row in rows if row.day is not None]
    total_row = next((row for row in rows if row.day is None), None)
    empty = {
        "questions": 0,
        "answered": 0,
        "failed": 0,
        "actions": {a: 0 for a in ACTIONS},
        "action_rates": {a: 0.0 for a in ACTIONS},
        "abstained": 0,
        "abstention_rate": 0.0,
        "feedback_up": 0,
        "feedback_down": 0,
        "latency_p50_ms": None,
        "latency_p95_ms": None,
    }
    total = _rates(total_row) if total_row is not None and total_row.questions else empty
    return {"days": days, "since": start.date().isoformat(), "total": total, "per_day": per_day}


def stats_summary(settings: Settings, days: int = 7) -> dict[str, Any]:
    """The totals of `daily_stats`, flat (what the bot's admin `stats` reply shows)."""
    return {"days": days} | daily_stats(settings, days)["total"]


# ------------------------------------------------------------------ health

ALERT_MIN_RECENT = 5  # answered questions in the last 7 days before the alert can fire
ALERT_MIN_PRIOR = 10  # and in the 28 days before them (no baseline, no rise to measure)


def _incorrect_share(session: Session, since: datetime, until: datetime) -> tuple[int, int]:
    row = session.execute(
        text(
            "SELECT count(*) AS answered, count(*) FILTER (WHERE action = 'incorrect') AS incorrect FROM questions "
            "WHERE status = 'answered' AND created_at >= :since AND created_at < :until "
            "AND question_class IS DISTINCT FROM :follow_up"  # a follow-up asked alone was never looked up
        ),
        {"since": since, "until": until, "follow_up": FOLLOW_UP_CLASS},
    ).one()
    return int(row.incorrect), int(row.answered)


def incorrect_alert(settings: Settings, margin: float, now: datetime | None = None) -> dict[str, Any]:
    """Incorrect share of the last 7 days against the 28 days before them; `alert` when it rose by > margin."""
    now = now or datetime.now(UTC)
    recent_start, prior_start = now - timedelta(days=7), now - timedelta(days=35)
    with db.session(settings) as session:
        recent = _incorrect_share(session, recent_start, now)
        prior = _incorrect_share(session, prior_start, recent_start)
    recent_share = recent[0] / recent[1] if recent[1] else 0.0
    prior_share = prior[0] / prior[1] if prior[1] else 0.0
    return {
        "recent_share": recent_share,
        "recent_incorrect": recent[0],
        "recent_answered": recent[1],
        "prior_share": prior_share,
        "prior_incorrect": prior[0],
        "prior_answered": prior[1],
        "margin": margin,
        "alert": recent[1] >= ALERT_MIN_RECENT and prior[1] >= ALERT_MIN_PRIOR and recent_share > prior_share + margin,
    }


def _misses(settings: Settings, since: datetime) -> Sequence[Any]:
    with db.session(settings) as session:
        return session.execute(
            select(Question.question, Question.scores).where(
                Question.status == "answered",
                Question.created_at >= since,
                or_(Question.action == "incorrect", Question.found.is_(False)),
                # A follow-up asked alone was not looked up: it says nothing of what the policies lack.
                Question.question_class.is_distinct_from(FOLLOW_UP_CLASS),
            )
        ).all()


def misses(settings: Settings, since: datetime, limit: int = 10) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """What lies behind Incorrect/abstained questions, from one read of them:

    - documents: the knowledge-base document that ranked first (likely stale there);
    - topics: the keywords a fallback would have been sent (redacted).
    """
    # LlamaIndex (application/vocabulary.py reads ingestion/store.py) and wordfreq (crag/redaction.py):
    # only for the gauges, not in every process that imports this module (the bot's `stats` reply, the
    # console): what `serve` imports loads no model (tests/test_import_weight.py)
    from application.vocabulary import organisation_vocabulary
    from crag.redaction import keyword_query, redact

    vocabulary = organisation_vocabulary(settings)  # as the fallback rewrite reads them
    documents: Counter[str] = Counter()
    topics: Counter[str] = Counter()
    for question, scores in _misses(settings, since):
        kb = [s for s in scores or [] if s.get("origin", "kb") == "kb" and s.get("document")]
        if kb:
            documents[max(kb, key=lambda s: s.get("score", 0.0))["document"]] += 1
        for word in set(keyword_query(redact(question), vocabulary=vocabulary).split()):
            topics[word] += 1
    return documents.most_common(limit), topics.most_common(limit)
