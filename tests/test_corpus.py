"""The policy-qa corpus (datasets/policy-qa/) and its validator (application/corpus.py).

The first test checks the shipped corpus as a whole; the others build tiny organisations
and show that each check catches what it is for.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from application.corpus import load_corpus, section_text, validate

from support.corpus import GOOD, write_org


def test_shipped_corpus_is_valid() -> None:
    corpus, problems = load_corpus()
    problems += validate(corpus, whole=True)
    assert problems == [], "\n".join(problems[:50])


def test_a_well_formed_organisation_passes_in_every_format(tmp_path: Path) -> None:
    write_org(tmp_path, "maple-tech", "train", GOOD)
    corpus, problems = load_corpus(tmp_path)
    problems += validate(corpus)
    assert problems == []
    org = corpus.organisations[0]
    assert set(org.loaded) == {
        "kb/leave.md",
        "kb/travel.html",
        "kb/remote.txt",
        "kb/conduct.pdf",
        "fallback/contacts.docx",
    }
    assert [q.label for q in corpus.questions()] == [q["label"] for q in GOOD]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"phrases": ["10 days"]}, "not under 'Carry-over'"),  # a phrase outside its section
        ({"section": "4.3 Sick days"}, "not under '4.3 Sick days'"),  # the phrase stands elsewhere in the document
        ({"section": "Parental leave"}, "no heading 'Parental leave'"),
        ({"document": "kb/missing.md"}, "no document kb/missing.md"),
        ({"document": "fallback/contacts.docx"}, "must name a kb/ document"),
        ({"label": "none-off-topic"}, "names no document"),
        ({"section": None}, "needs 'section'"),
    ],
)
def test_a_wrong_label_is_reported(tmp_path: Path, change: dict, expected: str) -> None:
    write_org(tmp_path, "maple-tech", "train", [{**GOOD[0], **change}, *GOOD[1:]])
    corpus, problems = load_corpus(tmp_path)
    problems += validate(corpus)
    assert len(problems) == 1 and expected in problems[0], problems


def test_repeats_and_near_copies_across_splits_are_reported(tmp_path: Path) -> None:
    repeated = [
        *GOOD,
        {"question": "How many days can I roll over?", "label": "none-off-topic"},
        {
            "question": "Can I carry unused vacation days into next year if my manager approves?",
            "label": "none-on-topic",
        },
    ]
    write_org(tmp_path, "maple-tech", "train", repeated)
    write_org(
        tmp_path,
        "birch-labs",
        "test",
        [
            {
                "question": "can i carry my unused vacation days into the next year if my manager approves it",
                "label": "none-on-topic",
            }
        ],
        prefix="brc",
    )
    corpus, problems = load_corpus(tmp_path)
    problems += validate(corpus)
    assert any("tst-8: the same question as tst-1" in p for p in problems), problems
    assert any(p.startswith("near-copy across splits: ") and "brc-1" in p for p in problems), problems
    assert any(p.startswith("paragraph in ") for p in problems), problems  # both share leave.md word for word


def test_the_whole_corpus_checks_its_size_and_label_shares(tmp_path: Path) -> None:
    write_org(tmp_path, "maple-tech", "train", GOOD)
    corpus, problems = load_corpus(tmp_path)
    problems += validate(corpus, whole=True)
    assert "corpus: 1 organisations (at least 24 wanted)" in problems
    assert "corpus: no organisation in the test split" in problems
    assert any(p.startswith("corpus: 14.3% none-on-topic") for p in problems)


def test_section_text_takes_subsections_and_numbering() -> None:
    text = "# Leave\n\n## 3 Parental\n\nIntro.\n\n### 3.1 Birth parent\n\n16 weeks paid.\n"
    assert "16 weeks" in (section_text(text, "Parental") or "")
    assert "16 weeks" in (section_text(text, "3.1 Birth parent") or "")
    assert section_text(text, "Adoption") is None
