"""The policy-qa corpus (datasets/policy-qa/) and its validator (policybot/corpus.py).

The first test checks the shipped corpus as a whole; the others build tiny organisations
and show that each check catches what it is for.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from policybot.corpus import CORPUS_ROOT, load_corpus, section_text, validate

sys.path.insert(0, str(CORPUS_ROOT))
import build  # noqa: E402  (datasets/policy-qa/build.py)


def test_shipped_corpus_is_valid() -> None:
    corpus, problems = load_corpus()
    problems += validate(corpus, whole=True)
    assert problems == [], "\n".join(problems[:50])


def _org(root: Path, org_id: str, split: str, questions: list[dict], prefix: str = "tst") -> Path:
    folder = root / "orgs" / org_id
    for sub in ("kb", "fallback", "src"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    (folder / "org.yaml").write_text(yaml.safe_dump(
        {"id": org_id, "name": org_id.title(), "kind": "startup", "country": "Canada", "size": "40",
         "tone": "casual", "split": split}))
    (folder / "kb" / "leave.md").write_text(
        "# Leave\n\n## 4.2 Carry-over\n\nYou may carry **5 days** forward into the next year.\n\n"
        "## 4.3 Sick days\n\nTen paid sick days a year.\n")
    (folder / "kb" / "travel.html").write_text(
        "<html><head><title>Travel</title></head><body><h1>Travel</h1><h2>Hotels</h2>"
        "<table><tr><th>City</th><th>Cap</th></tr><tr><td>Toronto</td><td>CAD 240</td></tr></table></body></html>")
    (folder / "kb" / "remote.txt").write_text("REMOTE WORK\n\n1. Stipend\n\nStaff get CAD 60 a month for internet.\n")
    (folder / "src" / "conduct.pdf.md").write_text("# Conduct\n\n## 1. Gifts\n\nGifts up to CAD 50 are fine.\n")
    (folder / "src" / "fallback--contacts.docx.md").write_text("# Contacts\n\nPayroll: ext. 4410.\n")
    (folder / "questions.yaml").write_text(yaml.safe_dump(
        [{"id": f"{prefix}-{i}", **q} for i, q in enumerate(questions, 1)], allow_unicode=True))
    build.build(folder)
    return folder


GOOD = [
    {"question": "how many days can i roll over??", "label": "kb", "document": "kb/leave.md",
     "section": "Carry-over", "phrases": ["5 days"]},
    {"question": "Hotel cap in Toronto?", "label": "kb", "document": "kb/travel.html", "section": "Hotels",
     "phrases": ["CAD 240"]},
    {"question": "do we get money for wifi at home", "label": "kb", "document": "kb/remote.txt",
     "section": "1. Stipend", "phrases": ["CAD 60"]},
    {"question": "can I keep a $40 bottle of wine from a vendor?", "label": "kb", "document": "kb/conduct.pdf",
     "section": "Gifts", "phrases": ["CAD 50"]},
    {"question": "who do I call about my payslip", "label": "fallback", "document": "fallback/contacts.docx",
     "phrases": ["ext. 4410"]},
    {"question": "hotel cap in Montreal?", "label": "none-on-topic", "variant_of": "tst-2",
     "note": "only Toronto has a rate"},
    {"question": "best poutine near the office?", "label": "none-off-topic"},
]


def test_a_well_formed_organisation_passes_in_every_format(tmp_path: Path) -> None:
    _org(tmp_path, "maple-tech", "train", GOOD)
    corpus, problems = load_corpus(tmp_path)
    problems += validate(corpus)
    assert problems == []
    org = corpus.organisations[0]
    assert set(org.loaded) == {"kb/leave.md", "kb/travel.html", "kb/remote.txt", "kb/conduct.pdf",
                               "fallback/contacts.docx"}
    assert [q.label for q in corpus.questions()] == [q["label"] for q in GOOD]


@pytest.mark.parametrize(("change", "expected"), [
    ({"phrases": ["10 days"]}, "not under 'Carry-over'"),  # a phrase outside its section
    ({"section": "4.3 Sick days"}, "not under '4.3 Sick days'"),  # the phrase stands elsewhere in the document
    ({"section": "Parental leave"}, "no heading 'Parental leave'"),
    ({"document": "kb/missing.md"}, "no document kb/missing.md"),
    ({"document": "fallback/contacts.docx"}, "must name a kb/ document"),
    ({"label": "none-off-topic"}, "names no document"),
    ({"section": None}, "needs 'section'"),
])
def test_a_wrong_label_is_reported(tmp_path: Path, change: dict, expected: str) -> None:
    _org(tmp_path, "maple-tech", "train", [{**GOOD[0], **change}, *GOOD[1:]])
    corpus, problems = load_corpus(tmp_path)
    problems += validate(corpus)
    assert len(problems) == 1 and expected in problems[0], problems


def test_repeats_and_near_copies_across_splits_are_reported(tmp_path: Path) -> None:
    repeated = [*GOOD, {"question": "How many days can I roll over?", "label": "none-off-topic"},
                {"question": "Can I carry unused vacation days into next year if my manager approves?",
                 "label": "none-on-topic"}]
    _org(tmp_path, "maple-tech", "train", repeated)
    _org(tmp_path, "birch-labs", "test",
         [{"question": "can i carry my unused vacation days into the next year if my manager approves it",
           "label": "none-on-topic"}], prefix="brc")
    corpus, problems = load_corpus(tmp_path)
    problems += validate(corpus)
    assert any("tst-8: the same question as tst-1" in p for p in problems), problems
    assert any(p.startswith("near-copy across splits: ") and "brc-1" in p for p in problems), problems
    assert any(p.startswith("paragraph in ") for p in problems), problems  # both share leave.md word for word


def test_the_whole_corpus_checks_its_size_and_label_shares(tmp_path: Path) -> None:
    _org(tmp_path, "maple-tech", "train", GOOD)
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
