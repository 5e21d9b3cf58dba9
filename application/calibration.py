"""Recalibrate an evaluator version's thresholds from admins' reviews of logged answers.

Admins label logged questions in the console (table `reviews`); askers vote 👍/👎 in Slack
(table `feedback`). The labels recalibrate a version's thresholds (below) and, through
`review_examples`, become training pairs for the next evaluator (`policybot evaluator
train --with-reviews --with-feedback`). The asker's own vote on a question, when asked
for, counts as one bare review (others' votes are shown, never counted): 👍 is "right", 👎 is
"wrong" without an expected document; an admin's review of the same question outranks it. Each label,
read together with what the pipeline did (the `questions` action log), says whether the knowledge base's
candidates held the answer ("present") or not ("absent"); the highest knowledge-base score of
each question is its set's score, and `crag.training.metrics.calibrate` turns the two score lists
into thresholds, as it does for the simulated sets of training. Only the upper and lower
thresholds are recalibrated: reviews say nothing about single strips, so the strip threshold
is kept.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import select

from application.thresholds import store_thresholds, stored_thresholds
from core import db
from core.config import Settings
from core.errors import UserError
from core.models import EvaluatorVersion, Feedback, Question, Review
from crag.training.metrics import calibrate
from crag.training.saving import update_metadata
from crag.types import Thresholds

Label = Literal["present", "absent"]
MIN_LABELS = 10  # per side: fewer present or absent sets give thresholds too noisy to trust


class CalibrationError(UserError):
    pass


def kb_max(scores: list[dict[str, Any]] | None) -> float | None:
    """The highest score among the question's knowledge-base candidates (None without any)."""
    values = [float(s["score"]) for s in scores or () if s.get("origin") == "kb" and s.get("score") is not None]
    return max(values) if values else None


def _cited_origins(question: Question) -> set[str]:
    return {str(c.get("origin")) for c in question.citations or ()}


def label_review(question: Question, verdict: str, expected_document: str | None) -> tuple[Label | None, str]:
    """Whether a reviewed question's knowledge-base candidates held the answer, and why.

    Returns ("present" | "absent", rule) or (None, reason it is skipped). The rules:

    verdict right (the bot did the right thing):
      * action correct and it answered: it answered from the knowledge base -> present.
      * action correct but it abstained: "right" may mean the evaluator's call (present) or the
        abstention (absent) -> skipped.
      * abstained (found false, any action): nothing should have been answered -> absent.
      * action incorrect and it answered: the answer came from the fallback only, rightly
        -> absent.
      * action ambiguous and it answered: citations only from the knowledge base -> present;
        only from the fallback -> absent; both or none -> skipped (which side answered is unknown).
    verdict wrong:
      * with an expected document that is a knowledge-base candidate (origin kb, same
        document name) -> present: the answer was among the candidates.
      * with an expected document that is not a knowledge-base candidate (a retrieval miss, or
        a fallback document) -> skipped: the label is about retrieval or sources, not scores.
      * without an expected document, when it answered with knowledge-base citations (action
        correct, or ambiguous citing the knowledge base) -> absent: it should have abstained.
      * without an expected document, when it abstained or answered from the fallback only
        -> skipped: the reviewer wanted something else, but not which document.
    Questions that were not answered (pending, failed) or have no knowledge-base candidate
    score are skipped.
    """
    if question.status != "answered" or question.action is None:
        return None, "not answered (pending or failed)"
    if kb_max(question.scores) is None:
        return None, "no knowledge-base candidate scores"
    action, found, cited = question.action, bool(question.found), _cited_origins(question)
    if verdict == "right":
        if not found:
            if action == "correct":
                return None, "right but abstained after a Correct action (which was right is unclear)"
            return "absent", "right abstention"
        if action == "correct":
            return "present", "right answer from the knowledge base"
        if action == "incorrect":
            return "absent", "right answer from the fallback only"
        if cited == {"kb"}:
            return "present", "right Ambiguous answer citing only the knowledge base"
        if cited == {"fallback"}:
            return "absent", "right Ambiguous answer citing only the fallback"
        return None, "right Ambiguous answer citing both sides or none"
    if verdict == "wrong":
        if expected_document:
            kb_documents = {s.get("document") for s in question.scores or () if s.get("origin") == "kb"}
            if expected_document in kb_documents:
                return "present", "wrong; the expected document was a knowledge-base candidate"
            return None, "wrong; the expected document was not a knowledge-base candidate"
        if found and (action == "correct" or "kb" in cited):
            return "absent", "wrong answer from the knowledge base, no document expected (should have abstained)"
        return None, "wrong abstention or fallback answer without an expected document"
    return None, f"unknown verdict {verdict!r}"


@dataclass
class ReviewLabels:
    present: list[float] = field(default_factory=list)  # max knowledge-base score per question
    absent: list[float] = field(default_factory=list)
    labelled: dict[int, Label] = field(default_factory=dict)  # question id -> label
    skipped: Counter = field(default_factory=Counter)  # reason -> questions

    @property
    def n_reviews(self) -> int:
        return len(self.labelled)


@dataclass(frozen=True)
class LabelSources:
    """Where labels come from: admins' reviews, askers' 👍/👎 votes, or both."""

    reviews: bool = True
    feedback: bool = False

    def __post_init__(self) -> None:
        if not (self.reviews or self.feedback):
            raise ValueError("at least one label source is needed: reviews or feedback")

    def describe(self) -> str:
        return " and ".join(name for name, on in (("reviews", self.reviews), ("feedback", self.feedback)) if on)


REVIEWS = LabelSources()


def _labelled_questions(
    settings: Settings, version: str | None, sources: LabelSources = REVIEWS
) -> tuple[list[tuple[Question, Label, str | None]], Counter]:
    """(question, label, expected document) of every labelled question, one per question, and
    the skipped ones per reason. `version` None reads the questions of every version.

    A question reviewed by several admins counts once; when their labels disagree it is skipped.
    """
    per_question: dict[int, tuple[Question, list[tuple[Label | None, str, str | None]]]] = {}
    with db.session(settings) as session:
        if sources.reviews:
            query = select(Question, Review.verdict, Review.expected_document).join(
                Review, Review.question_id == Question.id
            )
            if version is not None:
                query = query.where(Question.evaluator_version == version)
            for question, verdict, expected in session.execute(query.order_by(Question.id, Review.id)).all():
                label, reason = label_review(question, verdict, expected)
                per_question.setdefault(question.id, (question, []))[1].append((label, reason, expected))
        if sources.feedback:
            # Only the asker's own vote: anyone in the channel can click, but only the asker knows
            # what was asked, and a label that trains the evaluator must not be anyone's to cast.
            votes = select(Question, Feedback.vote).join(
                Feedback, (Feedback.question_id == Question.id) & (Feedback.user_id == Question.asker)
            )
            if version is not None:
                votes = votes.where(Question.evaluator_version == version)
            for question, vote in session.execute(votes.order_by(Question.id)).all():
                if question.id in per_question:
                    continue  # an admin's review outranks the asker's vote
                label, reason = label_review(question, "right" if vote > 0 else "wrong", None)
                per_question[question.id] = (question, [(label, f"feedback: {reason}", None)])
    labelled: list[tuple[Question, Label, str | None]] = []
    skipped: Counter = Counter()
    for question, labels in sorted(per_question.values(), key=lambda item: item[0].id):
        decided = {label for label, _, _ in labels if label is not None}
        if len(decided) > 1:
            skipped["reviewers disagree"] += 1
        elif not decided:
            skipped[labels[0][1]] += 1
        else:
            label = decided.pop()
            expected = next((e for lab, _, e in labels if lab == label and e), None)
            labelled.append((question, label, expected))
    return labelled, skipped


def collect_labels(settings: Settings, version: str, sources: LabelSources = REVIEWS) -> ReviewLabels:
    """Label every reviewed (or voted-on) question logged with `version` (one label per question).

    Questions logged with the int8 variant (`VERSION+int8`) score slightly differently and
    are not included.
    """
    labelled, skipped = _labelled_questions(settings, version, sources)
    result = ReviewLabels(skipped=skipped)
    for question, label, _ in labelled:
        score = kb_max(question.scores)
        assert score is not None  # label_review skips questions without one
        result.labelled[question.id] = label
        (result.present if label == "present" else result.absent).append(score)
    return result


@dataclass(frozen=True)
class ReviewExample:
    """A reviewed question as training data: the chunks that hold its answer, or that do not."""

    question: str
    label: Label
    chunk_ids: tuple[str, ...]  # present: the chunk(s) that answer; absent: the top candidates, which do not


ABSENT_NEGATIVES = 3  # an answer-absent question's best-scored candidates become its negatives


def review_examples(settings: Settings, sources: LabelSources = REVIEWS) -> tuple[list[ReviewExample], Counter]:
    """Training examples from every labelled question, whatever evaluator version logged it.

    present: the best-scored knowledge-base candidate of the expected document, or (a right
    answer) of the documents the answer cited. absent: the best-scored knowledge-base
    candidates, none of which held the answer. Questions logged before candidates carried
    their chunk ids are skipped.
    """
    labelled, skipped = _labelled_questions(settings, None, sources)
    examples: list[ReviewExample] = []
    for question, label, expected in labelled:
        candidates = sorted(
            (s for s in question.scores or () if s.get("origin") == "kb" and s.get("chunk_id")),
            key=lambda s: -float(s["score"]),
        )
        if label == "present":
            documents = (
                {expected}
                if expected
                else {c.get("document") for c in question.citations or () if c.get("origin") == "kb"}
            )
            chosen = [s["chunk_id"] for s in candidates if s.get("document") in documents][:1]
        else:
            chosen = [s["chunk_id"] for s in candidates[:ABSENT_NEGATIVES]]
        if chosen:
            examples.append(ReviewExample(question.question, label, tuple(chosen)))
        else:
            skipped["no candidate chunk ids logged"] += 1
    return examples, skipped


@dataclass
class Proposal:
    version: str
    current: Thresholds
    proposed: Thresholds
    n_present: int
    n_absent: int
    skipped: dict[str, int]
    sources: LabelSources = REVIEWS

    @property
    def n_reviews(self) -> int:
        return self.n_present + self.n_absent

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "current": self.current.to_dict(),
            "proposed": self.proposed.to_dict(),
            "labels": {"present": self.n_present, "absent": self.n_absent},
            "skipped": self.skipped,
            "sources": self.sources.describe(),
        }


def _version_row(session, version: str | None) -> EvaluatorVersion:
    query = select(EvaluatorVersion).where(
        EvaluatorVersion.version == version if version else EvaluatorVersion.active.is_(True)
    )
    row = session.execute(query).scalar_one_or_none()
    if row is None:
        raise CalibrationError(
            f"no evaluator version {version!r} (see `policybot evaluator list`)"
            if version
            else "no active evaluator; name a VERSION (see `policybot evaluator list`)"
        )
    return row


def propose_from_reviews(
    settings: Settings, version: str | None = None, min_labels: int = MIN_LABELS, sources: LabelSources = REVIEWS
) -> Proposal:
    """Thresholds for `version` (default: the active one) calibrated on labelled questions."""
    with db.session(settings) as session:
        row = _version_row(session, version)
        version = row.version
        current = stored_thresholds(row)
    labels = collect_labels(settings, version, sources)
    n_present, n_absent = len(labels.present), len(labels.absent)
    if n_present < min_labels or n_absent < min_labels:
        more = "Review more answers in the console" + (
            "" if sources.feedback else ", or add askers' votes (--from-feedback)"
        )
        raise CalibrationError(
            f"too few labels ({sources.describe()}) for {version}: {n_present} answer-present and {n_absent} "
            f"answer-absent questions; calibration needs at least {min_labels} of each "
            f"({sum(labels.skipped.values())} labelled questions were skipped as ambiguous). {more}."
        )
    proposed = replace(calibrate(labels.present, labels.absent), strip=current.strip)  # reviews carry no strip labels
    return Proposal(version, current, proposed, n_present, n_absent, dict(labels.skipped), sources)


def apply_proposal(settings: Settings, proposal: Proposal) -> list[str]:
    """Store the proposed thresholds on the version's row and in its folder's metadata.

    Running workers keep the thresholds they loaded; they pick the new ones up on restart.
    Returns notes for the admin (e.g. a missing folder).
    """
    # application/runtime.py loads LlamaIndex and the retriever (seconds): only to store, not for a dry run
    from application.runtime import reset_runtime

    notes: list[str] = []
    source = {
        "source": proposal.sources.describe(),
        "n_reviews": proposal.n_reviews,
        "present": proposal.n_present,
        "absent": proposal.n_absent,
        "previous": proposal.current.to_dict(),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with db.session(settings) as session:
        row = _version_row(session, proposal.version)
        store_thresholds(row, proposal.proposed)
        row.metrics = {**(row.metrics or {}), "thresholds_calibration": source}
        folder = Path(row.path)
    if folder.is_dir():
        update_metadata(folder, {"thresholds": proposal.proposed.to_dict(), "thresholds_calibration": source})
    else:
        notes.append(f"{folder} does not exist: only the database row was updated")
    reset_runtime()  # this process; other workers on restart
    return notes
