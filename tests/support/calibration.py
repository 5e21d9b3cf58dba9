"""Stored evaluator versions with reviewed questions logged against them, for calibration tests."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from support.question_log import question_row

KB = {"document": "leave-policy.md", "section": "4.2", "origin": "kb", "source": "policies", "chunk_id": "n1"}
OTHER_KB = {
    "document": "travel-expenses.md",
    "section": "Deadlines",
    "origin": "kb",
    "source": "policies",
    "chunk_id": "n2",
}
FALLBACK = {"document": "hr-faq.md", "section": "Pets", "origin": "fallback", "source": "HR portal", "chunk_id": "f1"}
KB_CITE = {"n": 1, "origin": "kb", "document": "leave-policy.md"}
FB_CITE = {"n": 1, "origin": "fallback", "document": "hr-faq.md"}


def logged_question(action: str, found: bool = True, citations=(), top: float = 0.7, scores=None, **values):
    if scores is None:
        scores = [dict(KB, score=top), dict(OTHER_KB, score=top - 0.3), dict(FALLBACK, score=0.9)]
    return question_row(question="q?", action=action, found=found, citations=list(citations), scores=scores, **values)


PRESENT = [0.35 + 0.05 * i for i in range(12)]  # 0.35 .. 0.90
ABSENT = [-0.6 + 0.07 * i for i in range(12)]  # -0.60 .. 0.17


def seed_reviewed_version(settings, tmp_path: Path, n_present: int, n_absent: int) -> tuple[str, Path]:
    """A stored version with its folder, and reviewed questions logged with it."""
    from core import db
    from core.models import EvaluatorVersion, Review

    version = f"t5-calib-{uuid.uuid4().hex[:8]}"
    folder = tmp_path / version
    folder.mkdir()
    (folder / "metadata.json").write_text(
        json.dumps({"version": version, "thresholds": {"upper": 0.5, "lower": 0.1, "strip": 0.2}})
    )
    reviewed = []  # (question, [(reviewer, verdict, expected)])
    for score in PRESENT[:n_present]:
        reviewed.append((logged_question("correct", citations=[KB_CITE], top=score), [("ada", "right", None)]))
    for i, score in enumerate(ABSENT[:n_absent]):
        if i % 2:
            reviewed.append((logged_question("incorrect", found=False, top=score), [("ada", "right", None)]))
        else:
            reviewed.append((logged_question("correct", citations=[KB_CITE], top=score), [("ada", "wrong", None)]))
    # Skipped: a disagreement, an ambiguous case, and a question of another version.
    reviewed.append(
        (logged_question("correct", citations=[KB_CITE], top=0.99), [("ada", "right", None), ("bob", "wrong", None)])
    )
    reviewed.append((logged_question("incorrect", found=False, top=0.98), [("ada", "wrong", None)]))
    other = logged_question("correct", citations=[KB_CITE], top=-0.9)
    other.evaluator_version = "someone-else"
    reviewed.append((other, [("ada", "right", None)]))
    with db.session(settings) as session:
        session.add(
            EvaluatorVersion(
                version=version,
                kind="minilm_t5",
                path=str(folder),
                upper=0.5,
                lower=0.1,
                strip_threshold=0.2,
                metrics={},
                beats_cosine=True,
                active=False,
            )
        )
        for question, _ in reviewed:
            if question.evaluator_version != "someone-else":
                question.evaluator_version = version
            session.add(question)
        session.flush()
        for question, reviews in reviewed:
            for reviewer, verdict, expected in reviews:
                session.add(
                    Review(question_id=question.id, reviewer=reviewer, verdict=verdict, expected_document=expected)
                )
    return version, folder


def stored_thresholds(settings, version: str) -> tuple[float, float, float]:
    from sqlalchemy import select

    from core import db
    from core.models import EvaluatorVersion

    with db.session(settings) as session:
        row = session.execute(select(EvaluatorVersion).where(EvaluatorVersion.version == version)).scalar_one()
        return row.upper, row.lower, row.strip_threshold
