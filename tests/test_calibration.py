"""`policybot evaluator calibrate --from-reviews`: review labels become upper/lower thresholds."""

from __future__ import annotations

import json
import uuid

import pytest

from crag.types import Thresholds

from support.calibration import (
    ABSENT,
    FALLBACK,
    FB_CITE,
    KB,
    KB_CITE,
    OTHER_KB,
    PRESENT,
    logged_question,
    seed_reviewed_version,
    stored_thresholds,
)
from support.cli import policybot
from support.question_log import question_row

# ------------------------------------------------------------------ the labelling rule (no database)


@pytest.mark.parametrize(
    ("question", "verdict", "expected", "label"),
    [
        # right
        (logged_question("correct", citations=[KB_CITE]), "right", None, "present"),
        (logged_question("correct", found=False), "right", None, None),  # the call or the abstention?
        (logged_question("incorrect", found=False), "right", None, "absent"),
        (logged_question("ambiguous", found=False), "right", None, "absent"),
        (logged_question("incorrect", citations=[FB_CITE]), "right", None, "absent"),
        (logged_question("ambiguous", citations=[KB_CITE]), "right", None, "present"),
        (logged_question("ambiguous", citations=[FB_CITE]), "right", None, "absent"),
        (logged_question("ambiguous", citations=[KB_CITE, dict(FB_CITE, n=2)]), "right", None, None),
        # wrong, with an expected document
        (logged_question("incorrect", found=False), "wrong", "leave-policy.md", "present"),
        (logged_question("correct", citations=[KB_CITE]), "wrong", "travel-expenses.md", "present"),
        (
            logged_question("incorrect", citations=[FB_CITE]),
            "wrong",
            "hr-faq.md",
            None,
        ),  # a fallback document, not a KB candidate
        (logged_question("incorrect", found=False), "wrong", "remote-work.md", None),  # not retrieved at all
        # wrong, without an expected document
        (logged_question("correct", citations=[KB_CITE]), "wrong", None, "absent"),
        (logged_question("ambiguous", citations=[KB_CITE]), "wrong", None, "absent"),
        (logged_question("ambiguous", citations=[FB_CITE]), "wrong", None, None),
        (logged_question("incorrect", found=False), "wrong", None, None),
        (logged_question("incorrect", citations=[FB_CITE]), "wrong", None, None),
        # not labellable
        (question_row(question="q?", status="failed", action=None, found=None), "right", None, None),
        (
            logged_question("incorrect", found=False, scores=[dict(FALLBACK, score=0.2)]),
            "right",
            None,
            None,
        ),  # no KB candidate
    ],
)
def test_label_rule(question, verdict, expected, label) -> None:
    from application.calibration import label_review

    got, reason = label_review(question, verdict, expected)
    assert got == label, reason
    assert reason


def test_kb_max_ignores_fallback_candidates() -> None:
    from application.calibration import kb_max

    assert kb_max(logged_question("correct", top=0.4).scores) == pytest.approx(0.4)  # the fallback scored 0.9
    assert kb_max([dict(FALLBACK, score=0.3)]) is None


# ------------------------------------------------------------------ with the database and the CLI


def test_collect_labels_and_proposal(settings, tmp_path) -> None:
    from application.calibration import collect_labels, propose_from_reviews
    from crag.training.metrics import calibrate

    version, _ = seed_reviewed_version(settings, tmp_path, 12, 12)
    labels = collect_labels(settings, version)
    assert sorted(labels.present) == pytest.approx(PRESENT) and sorted(labels.absent) == pytest.approx(ABSENT)
    assert labels.skipped == {
        "reviewers disagree": 1,
        "wrong abstention or fallback answer without an expected document": 1,
    }
    proposal = propose_from_reviews(settings, version)
    expected = calibrate(PRESENT, ABSENT)
    assert proposal.proposed.upper == pytest.approx(expected.upper)
    assert proposal.proposed.lower == pytest.approx(expected.lower)
    assert proposal.proposed.strip == 0.2  # kept: no strip labels
    assert proposal.current == Thresholds(upper=0.5, lower=0.1, strip=0.2)
    assert (proposal.n_present, proposal.n_absent) == (12, 12)


def test_too_few_labels_is_a_clear_error(settings, policybot_home, tmp_path) -> None:
    from application.calibration import CalibrationError, propose_from_reviews

    version, _ = seed_reviewed_version(settings, tmp_path, 9, 12)
    with pytest.raises(CalibrationError, match=r"9 answer-present and 12 answer-absent.*at least 10 of each"):
        propose_from_reviews(settings, version)
    result = policybot(policybot_home, "evaluator", "calibrate", version, "--from-reviews")
    message = " ".join(result.stderr.split())  # rich wraps long errors
    assert result.returncode == 1 and "at least 10 of each" in message and "Traceback" not in message
    missing = policybot(policybot_home, "evaluator", "calibrate", "no-such-version", "--from-reviews")
    assert missing.returncode == 1 and "no evaluator version" in missing.stderr
    not_stored = policybot(policybot_home, "evaluator", "eval", "no-such-version")
    assert not_stored.returncode == 1 and "no evaluator version 'no-such-version'" in not_stored.stderr
    assert stored_thresholds(settings, version) == (0.5, 0.1, 0.2)


def test_dry_run_changes_nothing_and_apply_stores(settings, policybot_home, tmp_path) -> None:
    from crag.training.metrics import calibrate

    version, folder = seed_reviewed_version(settings, tmp_path, 12, 12)
    metadata_before = (folder / "metadata.json").read_text()
    expected = calibrate(PRESENT, ABSENT)

    dry = policybot(policybot_home, "evaluator", "calibrate", version, "--from-reviews", "--json")
    assert dry.returncode == 0, dry.stderr
    shown = json.loads(dry.stdout)
    assert shown["applied"] is False and shown["labels"] == {"present": 12, "absent": 12}
    assert shown["proposed"]["upper"] == pytest.approx(expected.upper)
    assert stored_thresholds(settings, version) == (0.5, 0.1, 0.2)
    assert (folder / "metadata.json").read_text() == metadata_before

    table = policybot(policybot_home, "evaluator", "calibrate", version, "--from-reviews")
    assert table.returncode == 0 and "dry run" in table.stdout and "12 answer-present" in table.stdout
    assert stored_thresholds(settings, version) == (0.5, 0.1, 0.2)

    applied = policybot(policybot_home, "evaluator", "calibrate", version, "--from-reviews", "--apply")
    assert applied.returncode == 0, applied.stderr
    assert "from 24 labelled questions" in applied.stdout and "restart" in applied.stdout
    upper, lower, strip = stored_thresholds(settings, version)
    assert (upper, lower) == (pytest.approx(expected.upper), pytest.approx(expected.lower)) and strip == 0.2
    assert (upper, lower) != (0.5, 0.1)
    metadata = json.loads((folder / "metadata.json").read_text())
    assert metadata["thresholds"]["upper"] == pytest.approx(expected.upper)
    assert metadata["thresholds_calibration"]["n_reviews"] == 24
    assert metadata["version"] == version  # merged, not replaced

    unlabelled = policybot(policybot_home, "evaluator", "calibrate", version)
    assert unlabelled.returncode == 1 and "--from-reviews" in unlabelled.stderr


# ------------------------------------------------------------------ review labels as training pairs


def test_reviewed_questions_become_training_pairs(settings) -> None:
    from application.evaluators import TrainingError, review_pairs
    from core import db
    from core.models import Review
    from crag.training.weak_supervision import CorpusChunk

    tag = uuid.uuid4().hex[:8]
    ids = {name: f"{name}-{tag}" for name in ("carryover", "sick", "hotel", "gone")}
    scores = [
        {
            "document": "leave-policy.md",
            "section": "PTO",
            "origin": "kb",
            "source": "policies",
            "chunk_id": ids["carryover"],
            "score": 0.4,
        },
        {
            "document": "leave-policy.md",
            "section": "Sick",
            "origin": "kb",
            "source": "policies",
            "chunk_id": ids["sick"],
            "score": 0.6,
        },
        {
            "document": "travel-expenses.md",
            "section": "Hotels",
            "origin": "kb",
            "source": "policies",
            "chunk_id": ids["hotel"],
            "score": 0.5,
        },
        {
            "document": "hr-faq.md",
            "section": "Pets",
            "origin": "fallback",
            "source": "HR portal",
            "chunk_id": "f1",
            "score": 0.9,
        },
    ]
    answered_right = question_row(
        question=f"How many PTO days roll over? {tag}", action="correct", citations=[KB_CITE], scores=scores
    )
    should_have = question_row(
        question=f"Is there a hotel cap? {tag}", action="incorrect", found=False, citations=[], scores=scores
    )
    should_abstain = question_row(
        question=f"Can I bring my dog? {tag}", action="correct", citations=[KB_CITE], scores=scores
    )
    removed_chunk = question_row(
        question=f"Old question {tag}",
        action="correct",
        citations=[KB_CITE],
        scores=[dict(scores[0], chunk_id=ids["gone"])],
    )
    with db.session(settings) as session:
        session.add_all([answered_right, should_have, should_abstain, removed_chunk])
        session.flush()
        session.add_all(
            [
                Review(question_id=answered_right.id, reviewer="ada", verdict="right"),
                Review(
                    question_id=should_have.id, reviewer="ada", verdict="wrong", expected_document="travel-expenses.md"
                ),
                Review(question_id=should_abstain.id, reviewer="ada", verdict="wrong"),
                Review(question_id=removed_chunk.id, reviewer="ada", verdict="right"),
            ]
        )
    chunks = [
        CorpusChunk(id=ids[name], text=f"{name} text", document="d", section="s")
        for name in ("carryover", "sick", "hotel")
    ]

    pairs = {(p.question, p.passage, p.label) for p in review_pairs(settings, chunks) if tag in p.question}
    assert pairs == {
        (answered_right.question, "sick text", 1),  # the best-scored chunk of the cited document
        (should_have.question, "hotel text", 1),  # the reviewer's expected document
        (should_abstain.question, "sick text", 0),  # answered but should have abstained: its top candidates
        (should_abstain.question, "hotel text", 0),
        (should_abstain.question, "carryover text", 0),
    }  # the removed chunk's question gives nothing (its text is gone), and fallback results are never used

    with pytest.raises(TrainingError, match="training on reviews: no labelled question gives a training pair"):
        review_pairs(settings, [])


# ------------------------------------------------------------------ askers' 👍/👎 votes as labels


def _voted(settings, tag: str) -> tuple[str, dict[str, object]]:
    """Questions of a fresh version with votes (and one admin review), by name."""
    from core import db
    from core.models import EvaluatorVersion, Feedback, Review

    version = f"t5-votes-{tag}"
    scores = [dict(KB, score=0.61, chunk_id=f"n1-{tag}"), dict(OTHER_KB, score=0.2, chunk_id=f"n2-{tag}")]
    answered = dict(action="correct", citations=[KB_CITE], scores=scores)
    questions = {
        "liked": question_row(question=f"liked {tag}", **answered),
        "disliked": question_row(question=f"disliked {tag}", **answered),
        "others_only": question_row(question=f"others {tag}", **answered),
        "reviewed": question_row(question=f"reviewed {tag}", **answered),
        "disliked_abstention": question_row(
            question=f"abstained {tag}", action="incorrect", found=False, scores=scores
        ),
    }
    # Voters by name: the asker (question_row's default) and two onlookers, whose votes are shown
    # in the log but never label anything.
    asker = questions["liked"].asker
    votes = {
        "liked": [(asker, 1), ("U1", -1), ("U2", -1)],
        "disliked": [(asker, -1)],
        "others_only": [("U1", 1), ("U2", 1)],
        "reviewed": [(asker, -1), ("U1", -1)],
        "disliked_abstention": [(asker, -1)],
    }
    with db.session(settings) as session:
        session.add(
            EvaluatorVersion(
                version=version,
                kind="minilm_t5",
                path=f"/nonexistent/{version}",
                upper=0.5,
                lower=0.1,
                strip_threshold=0.2,
                metrics={},
                beats_cosine=True,
                active=False,
            )
        )
        for question in questions.values():
            question.evaluator_version = version
            session.add(question)
        session.flush()
        for name, values in votes.items():
            session.add_all(Feedback(question_id=questions[name].id, user_id=user, vote=vote) for user, vote in values)
        session.add(Review(question_id=questions["reviewed"].id, reviewer="ada", verdict="right"))
    return version, questions


def test_votes_become_labels_and_an_admin_review_outranks_them(settings) -> None:
    from application.calibration import LabelSources, collect_labels

    version, questions = _voted(settings, uuid.uuid4().hex[:8])
    ids = {name: q.id for name, q in questions.items()}

    both = collect_labels(settings, version, LabelSources(reviews=True, feedback=True))
    assert both.labelled == {ids["liked"]: "present", ids["disliked"]: "absent", ids["reviewed"]: "present"}
    assert both.skipped == {"feedback: wrong abstention or fallback answer without an expected document": 1}
    assert sorted(both.present) == pytest.approx([0.61, 0.61]) and both.absent == pytest.approx([0.61])

    votes_only = collect_labels(settings, version, LabelSources(reviews=False, feedback=True))
    assert votes_only.labelled[ids["reviewed"]] == "absent"  # no review asked for: the asker's 👎 decides
    assert ids["others_only"] not in votes_only.labelled and votes_only.labelled[ids["liked"]] == "present"
    reviews_only = collect_labels(settings, version)
    assert reviews_only.labelled == {ids["reviewed"]: "present"}

    with pytest.raises(ValueError, match="at least one label source"):
        LabelSources(reviews=False, feedback=False)


def test_votes_become_training_pairs(settings) -> None:
    from application.calibration import LabelSources
    from application.evaluators import review_pairs
    from crag.training.weak_supervision import CorpusChunk

    tag = uuid.uuid4().hex[:8]
    _voted(settings, tag)
    chunks = [
        CorpusChunk(id=f"n1-{tag}", text=f"carry-over rule {tag}", document="d", section="s"),
        CorpusChunk(id=f"n2-{tag}", text=f"hotel rule {tag}", document="d", section="s"),
    ]
    pairs = {
        (p.question.split()[0], p.passage.split()[0], p.label)
        for p in review_pairs(settings, chunks, LabelSources(reviews=False, feedback=True))
        if tag in p.question
    }
    assert pairs == {
        ("liked", "carry-over", 1),  # the cited document's best candidate
        ("disliked", "carry-over", 0),
        ("disliked", "hotel", 0),  # answered, should have abstained
        ("reviewed", "carry-over", 0),
        ("reviewed", "hotel", 0),
    }


def test_calibrate_from_feedback_on_the_command_line(settings, policybot_home, tmp_path) -> None:
    version, _ = _voted(settings, uuid.uuid4().hex[:8])
    few = policybot(policybot_home, "evaluator", "calibrate", version, "--from-feedback")
    assert few.returncode == 1 and "Traceback" not in few.stderr
    message = " ".join(few.stderr.split())
    assert "too few labels (feedback)" in message and "1 answer-present and 2 answer-absent" in message
    both = policybot(policybot_home, "evaluator", "calibrate", version, "--from-reviews", "--from-feedback")
    message = " ".join(both.stderr.split())
    assert both.returncode == 1 and "too few labels (reviews and feedback)" in message
    assert "2 answer-present and 1 answer-absent" in message
    neither = policybot(policybot_home, "evaluator", "calibrate", version)
    assert neither.returncode == 1 and "--from-feedback" in neither.stderr
