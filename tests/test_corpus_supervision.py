"""The policy-qa corpus as training, gating and calibration data (application/corpus_supervision.py),
asked through real retrieval on a database of its own."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select

from application.corpus_supervision import corpus_settings, labelled_data
from application.evaluators import corpus_chunks
from core import db
from core.models import Document
from crag.training.train import LabelledData

from support.corpus import GOOD, write_org

DEV = [  # the dev organisation's questions, worded apart from the train ones
    {
        "question": "what's the nightly hotel limit for Toronto trips",
        "label": "kb",
        "document": "kb/travel.html",
        "section": "Hotels",
        "phrases": ["CAD 240"],
    },
    {
        "question": "Is there an allowance for home internet?",
        "label": "kb",
        "document": "kb/remote.txt",
        "section": "1. Stipend",
        "phrases": ["CAD 60"],
    },
    {
        "question": "payroll phone extension?",
        "label": "fallback",
        "document": "fallback/contacts.docx",
        "phrases": ["ext. 4410"],
    },
    {"question": "what's the hotel limit in Vancouver", "label": "none-on-topic"},
    {"question": "who won the hockey game last night", "label": "none-off-topic"},
]


def tiny_corpus(root: Path) -> Path:
    write_org(root, "maple-tech", "train", GOOD, prefix="mpl")
    write_org(root, "birch-labs", "dev", DEV, prefix="brc")
    write_org(
        root,
        "cedar-co",
        "test",
        [
            {
                "question": "hotel cap in Toronto please",
                "label": "kb",
                "document": "kb/travel.html",
                "section": "Hotels",
                "phrases": ["CAD 240"],
            }
        ],
        prefix="cdr",
    )
    return root


def test_corpus_questions_are_asked_through_real_retrieval(knowledge_base, tmp_path: Path) -> None:
    settings = knowledge_base.model_copy(update={"corpus": str(tiny_corpus(tmp_path / "corpus"))})
    kb_chunks = {c.id for c in corpus_chunks(settings)}

    data = labelled_data(settings)
    assert isinstance(data, LabelledData)

    # Train split: each answerable question's answer chunk is a positive, beside retrieved negatives.
    positives = {(p.question, p.passage) for p in data.train_pairs if p.label == 1}
    # The chunk as the evaluator reads it at run time: plain text, no "**".
    assert ("how many days can i roll over??", "You may carry 5 days forward into the next year.") in positives
    assert any(
        q == "who do I call about my payslip" and "ext. 4410" in text for q, text in positives
    )  # the portal's answer
    negatives = [p for p in data.train_pairs if p.label == 0]
    assert {p.question for p in negatives} >= {"hotel cap in Montreal?", "best poutine near the office?"}
    assert all("5 days" not in p.passage for p in negatives if p.question == "how many days can i roll over??")

    # ... and at the sentence (crag/evidence.py): the answer's own sentence, read with its context
    # line, is a positive; the sentences beside it in its chunk are hard negatives.
    def sentence(text: str) -> str:
        return text.rsplit("\n", 1)[-1]

    toronto = [p for p in data.train_pairs if p.question == "Hotel cap in Toronto?"]
    answer = [p for p in toronto if p.label == 1 and p.passage.startswith("Travel > Hotels\n")]
    assert [sentence(p.passage) for p in answer] == ["| City: Toronto | Cap: CAD 240 |"]
    # (read with the section it stands under: "Travel > Hotels")
    beside = [p for p in toronto if p.label == 0 and p.chunk_id == answer[0].chunk_id]
    assert beside and all("CAD 240" not in sentence(p.passage) for p in beside)
    assert any("travel desk" in sentence(p.passage) for p in beside)
    assert not any(sentence(p.passage).startswith("| City |") for p in toronto)  # the header labels the row instead
    unanswerable = [p for p in data.train_pairs if p.question == "hotel cap in Montreal?"]
    assert any("\n" in p.passage for p in unanswerable) and all(p.label == 0 for p in unanswerable)

    # Dev split: one retrieval set per question, answer-present only where the knowledge base answers it.
    sets = {s.question: s for s in data.held_out.calibration_sets}
    assert set(sets) == {q["question"] for q in DEV}
    assert sets[DEV[0]["question"]].present and sets[DEV[1]["question"]].present
    assert not any(sets[q["question"]].present for q in DEV[2:])
    # Each present set names the candidates that answer (calibration: which one leads); no other set does.
    toronto_set = sets[DEV[0]["question"]]
    assert toronto_set.answer_ids and set(toronto_set.answer_ids) < set(toronto_set.chunk_ids)
    answering = [
        t for i, t in zip(toronto_set.chunk_ids, toronto_set.passages, strict=True) if i in toronto_set.answer_ids
    ]
    assert all("CAD 240" in text for text in answering)
    assert not any(sets[q["question"]].answer_ids for q in DEV[2:])
    strips = [e for e in data.held_out.strip_examples if e.question == DEV[0]["question"]]
    assert [sentence(e.text) for e in strips if e.label == 1] == ["| City: Toronto | Cap: CAD 240 |"]
    assert any(e.label == 0 and "travel desk" in e.text for e in strips)  # a neighbour, not the answer
    # The fallback's bar: the portal's candidates of fallback-only questions against unanswerable ones'.
    assert {s.question: s.present for s in data.held_out.fallback_sets} == {
        DEV[2]["question"]: True,
        DEV[3]["question"]: False,
        DEV[4]["question"]: False,
    }
    assert all(bool(s.answer_ids) == s.present for s in data.held_out.fallback_sets)
    assert all(p.query_kind == "corpus" for p in data.held_out.val_pairs)
    assert data.description == (
        "the policy-qa corpus: 7 questions of its train organisations (1), "
        "5 of its dev organisations (1) through real retrieval"
    )

    # The corpus lives in its own database: the knowledge base never sees it, and the test split is never read.
    assert {c.id for c in corpus_chunks(settings)} == kb_chunks
    with db.session(corpus_settings(settings)) as session:
        collections = set(session.execute(select(Document.collection).distinct()).scalars())
    assert collections == {"qa-maple-tech", "qa-maple-tech-portal", "qa-birch-labs", "qa-birch-labs-portal"}

    # Retrieval is cached per organisation: a second run reads it back and gives the same sets.
    cached = sorted((settings.home / "corpus").glob("*.json"))
    assert [f.name.split("-")[0] for f in cached] == ["birch", "maple"]
    assert len(json.loads(cached[0].read_text())) == 2 * len(DEV)  # the knowledge base's and the portal's
    again = labelled_data(settings)
    assert again.held_out.calibration_sets == data.held_out.calibration_sets


def test_switched_off_corpus_gives_no_labelled_data(settings) -> None:
    assert labelled_data(settings.model_copy(update={"corpus": "off"})) is None


def test_an_evaluator_gated_on_weak_supervision_alone_for_want_of_budget_keeps_cosine() -> None:
    """A budget too short for the corpus gates on pseudo-queries alone: beating cosine there does
    not activate it (the demo's case), unless asked for; with the corpus, beating cosine does."""
    from application.evaluators import MIN_CORPUS_BUDGET_S, activation_decision

    assert activation_decision("if_better", True, short_of_the_corpus=False) == (True, None)
    activate, why_not = activation_decision("if_better", True, short_of_the_corpus=True)
    assert not activate and why_not is not None
    assert why_not.startswith("not activated: gated on weak supervision alone")
    assert f"{MIN_CORPUS_BUDGET_S // 60} minutes or more" in why_not
    assert activation_decision("always", False, short_of_the_corpus=True) == (True, None)
    assert activation_decision("if_better", False, short_of_the_corpus=False) == (False, None)
    assert activation_decision("never", True, short_of_the_corpus=False) == (False, None)
