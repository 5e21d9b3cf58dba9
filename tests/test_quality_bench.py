"""bench/quality.py's arithmetic: what counts as right, wrong and abstained per category, what the
replies chose (answer, fallback and document choice), the worst seed taken column by column, and
the issue's targets judged on it."""

from __future__ import annotations

import json

from application.corpus import QuestionRecord
from bench.quality import (
    CORPUS_CATEGORIES,
    KEPT_VERSION,
    Outcome,
    SystemResult,
    Target,
    _keep,
    _read_kept,
    choice_columns,
    columns,
    sample_choice,
    table,
    targets_table,
)
from bench.replies import judge
from crag.types import Citation


def _result(name: str, kb_right: int, kb_wrong: int, kb_abstained: int, off_topic_answered: int) -> SystemResult:
    result = SystemResult(name, CORPUS_CATEGORIES)
    result.outcomes["kb"] = (
        [Outcome(True, True, "correct", 0.1, True, 30)] * kb_right
        + [Outcome(True, False, "correct", 0.1, False, 90)] * kb_wrong
        + [Outcome(False, False, "incorrect", 0.1)] * kb_abstained
    )
    result.outcomes["none-off-topic"] = [Outcome(True, False, "correct", 0.1, False, 40)] * off_topic_answered + [
        Outcome(False, False, "incorrect", 0.1)
    ] * (4 - off_topic_answered)
    return result


def _kb(
    action: str, right: bool, first_line: bool = False, first: tuple[str, str] = ("a.md", "kb"), found: bool = True
) -> Outcome:
    """A KB question's outcome; its labelled document is a.md. first: the first citation (document, origin)."""
    return Outcome(
        found,
        right,
        action,
        0.1,
        first_line,
        30,
        first_line_cited=first_line,
        first_document=first[0] if found else "",
        first_origin=first[1] if found else "",
        expected_document="a.md",
    )


def _fallback(found: bool, right: bool, from_fallback: bool, first_line: bool = False) -> Outcome:
    action = "incorrect" if from_fallback or not found else "correct"
    return Outcome(found, right, action, 0.1, first_line, 30, first_line_cited=first_line, from_fallback=from_fallback)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_rates_per_category() -> None:
    result = _result("x", kb_right=6, kb_wrong=2, kb_abstained=2, off_topic_answered=1)

    assert result.rate("kb", "right") == 0.6
    assert result.rate("kb", "wrong") == 0.2
    assert result.rate("kb", "abstained") == 0.2
    assert result.rate("none-off-topic", "right") == 0.75  # abstaining is right when nothing answers it
    assert result.rate("none-off-topic", "wrong") == 0.25
    # 6 + 2 kb routed Correct, 3 off-topic not: (8 + 3) / 14
    assert result.routing_accuracy() == 11 / 14
    assert result.median_kb_words() == 30


def test_answer_choice_counts_only_kb_questions_routed_correct() -> None:
    result = SystemResult("x", CORPUS_CATEGORIES)
    result.outcomes["kb"] = [
        _kb("correct", right=True, first_line=True),
        _kb("correct", right=True, first_line=True),
        _kb("correct", right=True, first_line=True),
        _kb("correct", right=True),  # the answer stands in the second line
        _kb("correct", right=False),  # the wrong sentence
        _kb("correct", right=False, found=False),  # routed Correct, yet no strip kept: no answer chosen
        _kb("ambiguous", right=True),  # right, but not routed Correct: not the answer choice's
        _kb("incorrect", right=False, found=False),
    ]

    assert result.answer_choice() == 4 / 6
    assert result.answer_choice(first_line=True) == 3 / 6
    assert result.kb_right_first_line() == 3 / 5  # of the 5 right KB replies, whatever their routing


def test_fallback_choice_counts_only_fallback_only_questions_answered_from_the_fallback() -> None:
    result = SystemResult("x", CORPUS_CATEGORIES)
    result.outcomes["fallback"] = [
        _fallback(True, True, from_fallback=True, first_line=True),
        _fallback(True, True, from_fallback=True),
        _fallback(True, False, from_fallback=True),
        _fallback(True, False, from_fallback=False),  # answered from the knowledge base
        _fallback(False, False, from_fallback=False),  # abstained
    ]

    assert result.fallback_choice() == 2 / 3
    assert result.fallback_choice(first_line=True) == 1 / 3


def test_document_choice_is_the_first_citation_of_answered_kb_questions() -> None:
    result = SystemResult("x", CORPUS_CATEGORIES)
    result.outcomes["kb"] = [
        _kb("correct", right=True, first=("a.md", "kb")),
        _kb("ambiguous", right=False, first=("a.md", "kb")),  # the right document, the wrong sentence
        _kb("correct", right=False, first=("b.md", "kb")),  # another document
        _kb("incorrect", right=False, first=("a.md", "fallback")),  # a fallback page of the same name
        _kb("incorrect", right=False, found=False),  # not answered: not counted
    ]

    assert result.document_choice() == 2 / 4


def test_the_worst_seed_is_the_worst_value_of_each_column() -> None:
    seeds = {
        "seed 0": _result("seed 0", kb_right=8, kb_wrong=2, kb_abstained=0, off_topic_answered=0),
        "seed 1": _result("seed 1", kb_right=7, kb_wrong=0, kb_abstained=3, off_topic_answered=2),
    }

    lines = table(seeds, list(seeds), columns(CORPUS_CATEGORIES))

    header = _cells(lines[0])
    worst = dict(zip(header, _cells(lines[-1]), strict=True))
    mean = dict(zip(header, _cells(lines[-2]), strict=True))
    assert worst["KB: right + citation"] == "70%"  # the lower of 80% and 70%
    assert worst["KB: wrong"] == "20%"  # the higher of 20% and 0%
    assert worst["off-topic: abstained"] == "50%"
    assert mean["KB: right + citation"] == "75%"


def test_the_worst_seed_of_the_choice_figures_is_their_lowest() -> None:
    seed_0 = SystemResult("seed 0", CORPUS_CATEGORIES)
    seed_0.outcomes["kb"] = [_kb("correct", right=True, first_line=True)] * 3 + [
        _kb("correct", right=False, first=("b.md", "kb"))
    ]
    seed_0.outcomes["fallback"] = [_fallback(True, True, from_fallback=True)] * 2
    seed_1 = SystemResult("seed 1", CORPUS_CATEGORIES)
    seed_1.outcomes["kb"] = [_kb("correct", right=True, first_line=True)] + [_kb("correct", right=True)] * 3
    seed_1.outcomes["fallback"] = [_fallback(True, True, from_fallback=True, first_line=True)] + [
        _fallback(True, False, from_fallback=True)
    ]
    seeds = {"seed 0": seed_0, "seed 1": seed_1}

    lines = table(seeds, list(seeds), choice_columns())

    header = _cells(lines[0])
    worst = dict(zip(header, _cells(lines[-1]), strict=True))
    mean = dict(zip(header, _cells(lines[-2]), strict=True))
    assert worst["answer choice: KB routed Correct, reply holds the answer"] == "75%"  # 75% and 100%
    assert worst["answer choice: KB routed Correct, first line holds it"] == "25%"  # 75% and 25%
    assert worst["right KB replies whose first line holds it"] == "25%"  # 100% and 25%
    assert worst["fallback choice: from the fallback, reply holds the answer"] == "50%"  # 100% and 50%
    assert worst["fallback choice: from the fallback, first line holds it"] == "0%"  # 0% and 50%
    assert worst["document choice: answered KB, first citation the gold document"] == "75%"  # 75% and 100%
    assert mean["answer choice: KB routed Correct, first line holds it"] == "50%"


def test_targets_are_met_or_short_by_points_at_the_worst_seed() -> None:
    seeds = {
        "seed 0": _result("seed 0", kb_right=8, kb_wrong=1, kb_abstained=1, off_topic_answered=0),
        "seed 1": _result("seed 1", kb_right=9, kb_wrong=0, kb_abstained=1, off_topic_answered=1),
    }
    targets = [
        Target("KB right", lambda r: r.rate("kb", "right"), 0.80, True),  # worst 80%: met at the bound
        Target("KB right, higher", lambda r: r.rate("kb", "right"), 0.85, True),  # worst 80%: 5 short
        Target("KB wrong", lambda r: r.rate("kb", "wrong"), 0.05, False),  # worst 10% (not 0%): 5 short
        Target("off-topic abstained", lambda r: r.rate("none-off-topic", "right"), 0.70, True),  # worst 75%
        Target("off-topic answered", lambda r: r.rate("none-off-topic", "wrong"), 0.10, False),  # worst 25%
    ]

    lines = targets_table(seeds, list(seeds), targets)

    rows = {cells[0]: cells[1:] for cells in map(_cells, lines[2:])}
    assert rows["KB right"] == ["80.0%", "≥ 80%", "met"]
    assert rows["KB right, higher"] == ["80.0%", "≥ 85%", "short by 5 points"]
    assert rows["KB wrong"] == ["10.0%", "≤ 5%", "short by 5 points"]
    assert rows["off-topic abstained"] == ["75.0%", "≥ 70%", "met"]
    assert rows["off-topic answered"] == ["25.0%", "≤ 10%", "short by 15 points"]


def test_kept_answers_come_back_and_stale_ones_are_asked_again(tmp_path) -> None:
    result = SystemResult("x", CORPUS_CATEGORIES)
    result.outcomes["kb"] = [_kb("correct", right=True, first_line=True, first=("b.md", "kb"))]
    path = tmp_path / "corpus-60-x.json"

    _keep(path, result, ["q1 (incorrect, found=False)"], 3)
    read = _read_kept(path, "x")

    assert read is not None
    again, missed, orgs = read
    assert again.outcomes == result.outcomes and missed == ["q1 (incorrect, found=False)"] and orgs == 3
    stale = json.loads(path.read_text())
    stale["version"] = KEPT_VERSION - 1
    path.write_text(json.dumps(stale))
    assert _read_kept(path, "x") is None
    del stale["version"]  # kept before versions
    path.write_text(json.dumps(stale))
    assert _read_kept(path, "x") is None


def _citation(n: int, document: str, section: str, origin: str = "kb") -> Citation:
    return Citation(n, origin, "", document, "", section, None, 0.0)  # type: ignore[arg-type]


def test_the_first_line_holds_the_answer_only_with_its_own_citation_right() -> None:
    record = QuestionRecord(
        id="q", question="How long?", label="kb", document="org/kb/leave.md", section="Parental", phrases=["16 weeks"]
    )
    gold, other = _citation(1, "leave.md", "Leave > Parental"), _citation(2, "leave.md", "Leave > Sick")
    cited_right = "Primary caregivers get 16 weeks. [1]\n\nSick leave is 10 days. [2]"
    cited_wrong = "Primary caregivers get 16 weeks. [2]\n\nParental leave is paid. [1]"

    right = judge(record, cited_right, True, [gold, other])
    wrong_section = judge(record, cited_wrong, True, [gold, other])
    second_line = judge(record, "Parental leave is paid. [1]\n\nIt lasts 16 weeks. [2]", True, [gold, other])

    assert right.right and right.first_line_cited
    assert (right.first_document, right.first_origin) == ("leave.md", "kb")
    assert wrong_section.right and not wrong_section.first_line_cited  # its line cites the Sick section
    assert second_line.right and not second_line.first_line_cited
    assert not right.from_fallback


def test_a_sample_reply_s_choice_facts() -> None:
    item = {"category": "fallback", "expected_document": "benefits.md", "expected_phrases": ["$500"]}
    portal = _citation(1, "benefits.md", "", "fallback")
    kb = _citation(2, "benefits.md", "")

    led = sample_choice(item, "The stipend is $500. [1]\n\nAsk HR. [2]", True, [portal, kb])
    cited_from_kb = sample_choice(item, "The stipend is $500. [2]\n\nSee the portal. [1]", True, [portal, kb])

    assert led["first_line_cited"] and led["from_fallback"]
    assert (led["first_document"], led["first_origin"]) == ("benefits.md", "fallback")
    assert not cited_from_kb["first_line_cited"]  # the first line's citation is the knowledge base's
    assert sample_choice(item, "", False, []) == {"expected_document": "benefits.md"}
