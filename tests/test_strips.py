import re
from collections.abc import Sequence

import pytest

from crag.strips import (
    applicability_sentences,
    context_scope,
    decompose,
    is_applicability_sentence,
    join_sentences,
    recompose,
    refine,
    strip_text_for_scoring,
)
from crag.text import plain_text, split_sentences
from crag.types import Strip

from support.travel_example import DEADLINE, NEGATION, QUESTION, SCOPE, TRAVEL_TEXT, travel_passage

_STOPWORDS = {"how", "many", "do", "i", "have", "to", "the", "a", "in", "is", "are", "for", "my", "what"}


def _stems(text: str) -> set[str]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words if w not in _STOPWORDS}


class WordOverlapEvaluator:
    """Deterministic toy evaluator: share of the question's content words found, in [-1, 1]."""

    version = "toy-overlap"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        self.calls.append((question, list(passages)))
        wanted = _stems(question)
        return [2.0 * len(wanted & _stems(p)) / len(wanted) - 1.0 for p in passages]


class KeywordEvaluator:
    """Deterministic toy evaluator: a fixed score for the first keyword a text contains."""

    version = "toy-keywords"

    def __init__(self, scores: dict[str, float], default: float = -1.0) -> None:
        self.scores = scores
        self.default = default
        self.calls = 0

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        self.calls += 1
        return [next((s for k, s in self.scores.items() if k in p), self.default) for p in passages]


# --- split_sentences -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Mr. Smith works in the U.S. office. He travels often.",
            ["Mr. Smith works in the U.S. office.", "He travels often."],
        ),
        (
            "Meals cost $1,250.50 in total. Leave accrues at 2.5 days per month.",
            ["Meals cost $1,250.50 in total.", "Leave accrues at 2.5 days per month."],
        ),
        (
            "The policy took effect on Jan. 5, 2026. Contact HR, e.g. via the portal.",
            ["The policy took effect on Jan. 5, 2026.", "Contact HR, e.g. via the portal."],
        ),
        (
            "See form No. 12 for details. Approvals (i.e. manager sign-off) are needed.",
            ["See form No. 12 for details.", "Approvals (i.e. manager sign-off) are needed."],
        ),
        ("Is this allowed? Yes! It is.", ["Is this allowed?", "Yes!", "It is."]),
        ('He said "stop." Then he left.', ['He said "stop."', "Then he left."]),
        ("We operate in the U.S. The rules differ abroad.", ["We operate in the U.S.", "The rules differ abroad."]),
        ("Call ext. 1234 for help. Approx. 30 people came.", ["Call ext. 1234 for help.", "Approx. 30 people came."]),
        ("Version 2.0 is live. Section 3.1.2 applies.", ["Version 2.0 is live.", "Section 3.1.2 applies."]),
    ],
)
def test_split_sentences_handles_abbreviations_numbers_and_dates(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_each_bullet_is_its_own_sentence() -> None:
    text = (
        "Reimbursable expenses:\n"
        "- Flights in economy class\n"
        "- Hotels up to $200 per night\n"
        "  when booked via the desk\n"
        "* Meals, etc.\n"
        "\n"
        "1. Book via the portal.\n"
        "2. Submit receipts.\n"
        "## Approvals\n"
        "Managers approve\nclaims weekly."
    )
    assert split_sentences(text) == [
        "Reimbursable expenses:",
        "- Flights in economy class",
        "- Hotels up to $200 per night when booked via the desk",
        "* Meals, etc.",
        "1. Book via the portal.",
        "2. Submit receipts.",
        "## Approvals",
        "Managers approve claims weekly.",
    ]


def test_a_heading_is_one_line_whatever_its_punctuation() -> None:
    text = "## 2. Travel\n\nBook early. Fly economy.\n\n### Lost a receipt? Read on\nFile the form."
    assert split_sentences(text) == [
        "## 2. Travel",
        "Book early.",
        "Fly economy.",
        "### Lost a receipt? Read on",
        "File the form.",
    ]


def test_a_thematic_break_is_no_sentence() -> None:
    """A thematic break ("---") between sections of a Markdown handbook was read as a sentence
    and quoted after the answer ("…longer than 30 days. ---."); a bullet list, a table rule and
    a word stay."""
    text = (
        "Unpaid leave pauses vesting after 30 days.\n\n---\n\n*Questions?* Ask in #ask-people.\n"
        " * * *\n- Laptops\n___\n| a | b |\n| --- | --- |\n| 1 | 2 |\n\n----- end -----"
    )
    assert split_sentences(text) == [
        "Unpaid leave pauses vesting after 30 days.",
        "*Questions?*",
        "Ask in #ask-people.",
        "- Laptops",
        "| a: 1 | b: 2 |",
        "----- end -----",
    ]


def test_a_sentence_may_open_and_close_with_emphasis() -> None:
    """An emphasised footer ends and starts sentences like plain text; "e.g." and "2.5" inside
    emphasis still do not."""
    text = (
        "Vesting pauses after 30 days. *Questions? Ask in #ask-people or open an issue.* Last edit: May. "
        "**All** claims need receipts, e.g. *Dr. Lee's* taxi. Pay is 2.5 *times* base."
    )
    assert split_sentences(text) == [
        "Vesting pauses after 30 days.",
        "*Questions?",
        "Ask in #ask-people or open an issue.*",
        "Last edit: May.",
        "**All** claims need receipts, e.g. *Dr. Lee's* taxi.",
        "Pay is 2.5 *times* base.",
    ]
    assert " ".join(split_sentences(text)) == text


def test_a_bullet_wrapped_mid_sentence_stays_one_sentence() -> None:
    """Hard-wrapped items (PDF exports): the limit and the negation keep their subject."""
    text = (
        "- Hotels are reimbursed up to\n200 USD per night.\n- Contractors are\nNot eligible for the bonus.\n"
        "- Taxis.\nThe rest is not covered."
    )
    assert split_sentences(text) == [
        "- Hotels are reimbursed up to 200 USD per night.",
        "- Contractors are Not eligible for the bonus.",
        "- Taxis.",
        "The rest is not covered.",  # the item had ended its sentence: a new paragraph
    ]


def test_split_sentences_never_loses_text() -> None:
    text = TRAVEL_TEXT + " Dr. Lee, No. 4, approved 2.5 days on Jan. 5, 2026, i.e. early."
    assert " ".join(split_sentences(text)) == text


def test_a_table_row_is_a_sentence_with_its_column_names() -> None:
    text = (
        "Call us any time.\n\n| Office | Role | Phone |\n| :--- | --- | ---: |\n"
        "| Belfast | DSO | 028 9055 0177 |\n| Cork | | 021 555 0191 |\n\nAfter the table."
    )
    sentences = split_sentences(text)
    assert (
        sentences
        == [
            "Call us any time.",
            "| Office: Belfast | Role: DSO | Phone: 028 9055 0177 |",  # read, scored and quoted alone, it still says what it is
            "| Office: Cork | Phone: 021 555 0191 |",
            "After the table.",
        ]
    )
    assert split_sentences(join_sentences(sentences)) == sentences  # a strip splits back as it was
    # Rows without a header rule, and a table headed down its first column, read as written.
    assert split_sentences("| a | b |\n| c | d |") == ["| a | b |", "| c | d |"]
    assert split_sentences("| | |\n| --- | --- |\n| Hotel cap | 150 EUR |") == ["| Hotel cap | 150 EUR |"]
    # A cell of two sentences stays in its row, with its column names.
    two = "| Form | Where it goes |\n| --- | --- |\n| KS2 | Upload in PayShed. You can change it every 3 months. |"
    assert split_sentences(two) == [
        "| Form: KS2 | Where it goes: Upload in PayShed. You can change it every 3 months. |"
    ]


MARKDOWN_SENTENCES = [
    "We observe [11 local holidays. See the list!](https://example.com/holidays_(2026)?v=1.2) every year.",
    "Desks come from [Amazon](https://www.amazon.com/s?k=desk&sprefix=standing%2Caps%2C136&sr=8-1).",
    "Run `git commit -m 'Fix it. Then push'` before you leave.",
    "Version v1.2.3 of the form costs 1,250.50 USD or 2.5 days.",
    "The kit list is at https://example.com/kit.v2.html?items=desk%2Cchair.",
    'Ask [Dr. Lee. She knows](mailto:lee@example.com "Write to Dr. Lee. Today").',
    "Then wait.",
]


def test_split_sentences_never_cuts_a_link_url_code_or_number() -> None:
    text = " ".join(MARKDOWN_SENTENCES)
    assert split_sentences(text) == MARKDOWN_SENTENCES
    assert " ".join(split_sentences(text)) == text
    listed = "- " + "\n- ".join(MARKDOWN_SENTENCES)
    assert split_sentences(listed) == [f"- {sentence}" for sentence in MARKDOWN_SENTENCES]


@pytest.mark.parametrize(
    ("markdown", "plain"),
    [
        ('See [11 local holidays](https://x.example/h_(1)?a=1.2 "Title") now.', "See 11 local holidays now."),
        ("[**Bold** `code`](https://x.example) and ![alt](a.png)", "Bold code and alt"),
        ("[![build](https://img.shields.io/b.svg)](https://ci.example)", "build"),
        ("**a** __b__ *c* _d_ ***e*** and **f _g_ h**", "a b c d e and f g h"),
        ("*a *b* c* and _d **e** f_", "a b c and d e f"),  # emphasis inside emphasis of the same mark
        ("Keep snake_case, 2*3*4, a * b, `__init__` and `*x*`.", "Keep snake_case, 2*3*4, a * b, __init__ and *x*."),
        ("At https://x.example/a__b_c_/*d*.html or www.example.com/_e_ now", None),
        ("- item one\n* item two\n## Heading\n| a | b |", None),
        ("Plain text. No marks at all, 2.5 days.", None),
    ],
)
def test_plain_text_shows_links_as_text_and_drops_marks(markdown: str, plain: str | None) -> None:
    assert plain_text(markdown) == (markdown if plain is None else plain)


def test_strips_keep_bullets_and_headings_apart() -> None:
    text = (
        "## Meals\nDinner is covered.\n- Up to $75\n- Receipts over $25 are needed. Keep them.\nLunch is not covered."
    )
    passage = travel_passage(text=text)
    sentences = split_sentences(text)
    assert len(sentences) == 6
    for size in (1, 2, 3, 6):
        strips = decompose(passage, sentences_per_strip=size)
        assert [s for strip in strips for s in split_sentences(strip.text)] == sentences
    assert decompose(passage, sentences_per_strip=6)[0].text == (
        "## Meals\nDinner is covered.\n- Up to $75\n- Receipts over $25 are needed.\nKeep them. Lunch is not covered."
    )


def test_a_code_block_is_lines_of_code_without_its_fences() -> None:
    """A reply quotes a command, never "```bash"; "# comment" in code is no heading; a fence
    that never closes (a chunk cut inside the block) is text, not code swallowing what follows."""
    text = "Connect first:\n\n```bash\n# the office VPN\nvpn connect --profile eu. Then x\n```\nUse `a` b.\n"
    assert split_sentences(text) == [
        "Connect first:",
        "`# the office VPN`",
        "`vpn connect --profile eu. Then x`",
        "Use `a` b.",
    ]
    assert [plain_text(s) for s in split_sentences("```\nmake ``all``\n```")] == ["make ``all``"]
    assert split_sentences("vpn connect\n```\n\nBooks are covered. Claim them.") == [
        "vpn connect ```",
        "Books are covered.",
        "Claim them.",
    ]


def test_split_sentences_of_empty_text() -> None:
    assert split_sentences("   \n\n ") == []


# --- applicability sentences -------------------------------------------------------------


@pytest.mark.parametrize(
    "sentence",
    [
        SCOPE,
        "This policy applies to all full-time employees.",
        "The section covers travel within the EU.",
        "Contractors may only claim pre-approved costs.",
        "This benefit does not apply to interns.",
        "Eligible employees receive 25 days of leave.",
        "Effective March 1, 2026, the limit is $75.",
        "Unless your manager agrees, trips are limited to 5 days.",
        "Except in emergencies, book 14 days ahead.",
    ],
)
def test_scope_sentences_are_recognised(sentence: str) -> None:
    assert is_applicability_sentence(sentence)


@pytest.mark.parametrize("sentence", [DEADLINE, NEGATION, "Book flights through the booking portal."])
def test_rule_sentences_are_not_scope(sentence: str) -> None:
    assert not is_applicability_sentence(sentence)


def test_applicability_sentences_of_the_travel_passage() -> None:
    assert applicability_sentences(travel_passage()) == [SCOPE]


# --- decompose ----------------------------------------------------------------------------


def test_decompose_by_sentences_groups_three_whole_sentences() -> None:
    strips = decompose(travel_passage(), mode="sentences", sentences_per_strip=3)
    assert [len(split_sentences(s.text)) for s in strips] == [3, 3, 2]
    assert [s.index for s in strips] == [0, 1, 2]
    assert " ".join(s.text for s in strips) == TRAVEL_TEXT


def test_decompose_context_has_section_and_scope_but_not_the_strip_itself() -> None:
    first, second, third = decompose(travel_passage())
    assert SCOPE in first.text
    assert first.context == "Travel > Domestic travel"  # its scope sentence is already in the strip
    assert second.context == f"Travel > Domestic travel: {SCOPE}"
    assert third.context == f"Travel > Domestic travel: {SCOPE}"
    assert context_scope(second) == [SCOPE]
    assert context_scope(first) == []


def test_decompose_by_words_snaps_to_sentence_boundaries() -> None:
    passage = travel_passage()
    sentences = split_sentences(passage.text)
    strips = decompose(passage, mode="words", words_per_strip=20)
    assert len(strips) > 2
    for strip in strips:
        strip_sentences = split_sentences(strip.text)
        assert all(s in sentences for s in strip_sentences)  # whole sentences only
        assert len(strip.text.split()) <= 20 or len(strip_sentences) == 1
    assert " ".join(s.text for s in strips) == passage.text


def test_decompose_by_words_keeps_a_long_sentence_whole() -> None:
    long_sentence = "Employees " + " ".join(["must"] * 60) + " comply."
    passage = travel_passage(text=f"Short one. {long_sentence} Another short one.")
    strips = decompose(passage, mode="words", words_per_strip=50)
    assert [s.text for s in strips] == ["Short one.", long_sentence, "Another short one."]


@pytest.mark.parametrize("mode", ["sentences", "words"])
@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_negations_dates_and_units_are_never_cut(mode: str, size: int) -> None:
    strips = decompose(travel_passage(), mode=mode, sentences_per_strip=size, words_per_strip=size * 8)  # type: ignore[arg-type]
    joined = [s.text for s in strips]
    assert sum(NEGATION in t for t in joined) == 1
    assert sum(DEADLINE in t for t in joined) == 1
    assert sum(SCOPE in t for t in joined) == 1
    assert not any("Receipts are" in t and NEGATION not in t for t in joined)


def test_decompose_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="strip mode"):
        decompose(travel_passage(), mode="paragraphs")  # type: ignore[arg-type]


# --- refine: the seed travel example -------------------------------------------------------


def test_refine_keeps_the_deadline_with_its_scope() -> None:
    evaluator = WordOverlapEvaluator()
    kept = refine(QUESTION, [travel_passage()], evaluator, strip_threshold=-0.2, top_n=5)

    deadline_strips = [s for s in kept if "30 calendar days" in s.text]
    assert len(deadline_strips) == 1
    deadline_strip = deadline_strips[0]
    assert "30 calendar days after the trip" in deadline_strip.text
    assert "domestic travel in 2026" in deadline_strip.context
    assert "Travel > Domestic travel" in deadline_strip.context
    assert deadline_strip.score == pytest.approx(1.0)

    negation_strips = [s for s in kept if "Receipts" in s.text]
    assert len(negation_strips) == 1 and NEGATION in negation_strips[0].text

    # Strip 0 (scope, desk hours, booking) scores -0.5 and is dropped; the rest stay in order.
    assert [s.index for s in kept] == [1, 2]
    assert all(s.score is not None for s in kept)


def test_refine_scores_every_strip_once_against_the_original_question_with_context() -> None:
    evaluator = WordOverlapEvaluator()
    passages = [travel_passage(), travel_passage(id="travel-2", section="Travel > Other")]
    refine(QUESTION, passages, evaluator, strip_threshold=-1.0)

    assert len(evaluator.calls) == 1  # one batched call
    question, texts = evaluator.calls[0]
    assert question == QUESTION
    assert len(texts) == 6  # 3 strips per passage
    expected = [strip_text_for_scoring(s) for p in passages for s in decompose(p)]
    assert texts == expected
    assert texts[1].startswith(f"Travel > Domestic travel: {SCOPE}\n")


def test_refine_returns_document_order_within_a_passage() -> None:
    # The last strip scores best, the first second best: output is still by strip index.
    evaluator = KeywordEvaluator({"Approved reports": 0.9, "desk is open": 0.4})
    kept = refine(QUESTION, [travel_passage()], evaluator, strip_threshold=0.0)
    assert [s.index for s in kept] == [0, 2]
    assert [s.score for s in kept] == [pytest.approx(0.4), pytest.approx(0.9)]


def test_refine_orders_passages_by_their_best_strip() -> None:
    weaker = travel_passage(id="a", text="Alpha rule one. Alpha rule two. Alpha rule three. Alpha rule four.")
    stronger = travel_passage(id="b", text="Beta rule one. Beta rule two. Beta rule three. Beta rule four.")
    evaluator = KeywordEvaluator({"Alpha rule four": 0.3, "Alpha": 0.2, "Beta rule four": 0.8, "Beta": 0.1})
    kept = refine(QUESTION, [weaker, stronger], evaluator, strip_threshold=0.0)
    assert [(s.passage.id, s.index) for s in kept] == [("b", 0), ("b", 1), ("a", 0), ("a", 1)]


def test_refine_keeps_only_top_n_and_drops_below_threshold() -> None:
    evaluator = KeywordEvaluator({"Approved reports": 0.9, "desk is open": 0.4, "Hotel stays": -0.6})
    kept = refine(QUESTION, [travel_passage()], evaluator, strip_threshold=-0.5, top_n=1)
    assert [s.index for s in kept] == [2]
    kept_all = refine(QUESTION, [travel_passage()], evaluator, strip_threshold=-0.5, top_n=5)
    assert [s.index for s in kept_all] == [0, 2]  # "Hotel stays" strip (-0.6) is below -0.5


def test_refine_threshold_is_inclusive() -> None:
    evaluator = KeywordEvaluator({"desk is open": -0.5})
    kept = refine(QUESTION, [travel_passage()], evaluator, strip_threshold=-0.5)
    assert [s.index for s in kept] == [0]


def test_refine_deduplicates_repeated_passages() -> None:
    evaluator = WordOverlapEvaluator()
    refine(QUESTION, [travel_passage(), travel_passage()], evaluator, strip_threshold=-1.0)
    assert len(evaluator.calls[0][1]) == 3


def test_refine_without_passages_does_not_call_the_evaluator() -> None:
    evaluator = WordOverlapEvaluator()
    assert refine(QUESTION, [], evaluator, strip_threshold=0.0) == []
    assert evaluator.calls == []


def test_refine_rejects_a_wrong_number_of_scores() -> None:
    class ShortEvaluator:
        version = "short"

        def score(self, question: str, passages: Sequence[str]) -> list[float]:
            return [0.0]

    with pytest.raises(ValueError, match="1 scores for 3 strips"):
        refine(QUESTION, [travel_passage()], ShortEvaluator(), strip_threshold=0.0)


# --- recompose -------------------------------------------------------------------------------


def test_recompose_puts_the_context_line_once_before_each_passage() -> None:
    other = travel_passage(id="other", section="Leave", text="Eligible staff get 25 days. Carry over 5 days.")
    evaluator = KeywordEvaluator({"Approved": 0.9, "Hotel": 0.5, "Carry": 0.2})
    kept = refine(QUESTION, [travel_passage(), other], evaluator, strip_threshold=0.0)
    assert [s.passage.id for s in kept] == ["travel-1", "travel-1", "other"]
    text = recompose(kept)
    assert text == (
        f"Travel > Domestic travel: {SCOPE}\n"
        f"{kept[0].text}\n{kept[1].text}\n"
        "\n"
        "Leave\n"
        "Eligible staff get 25 days. Carry over 5 days."
    )
    assert text.count(SCOPE) == 1


def test_recompose_does_not_repeat_a_scope_sentence_held_by_a_kept_strip() -> None:
    strips = decompose(travel_passage())
    text = recompose([strips[0], strips[1]])
    assert text.count(SCOPE) == 1
    assert text.startswith("Travel > Domestic travel\n" + strips[0].text)


def test_recompose_without_section_or_scope() -> None:
    passage = travel_passage(section="", text="Book early. Pay late.")
    assert recompose(decompose(passage)) == "Book early. Pay late."
    assert recompose([]) == ""


def test_the_evaluator_reads_a_strip_as_plain_text() -> None:
    passage = travel_passage(text="Claims go through [the portal](https://x.example/claims?a=1.2) within **30 days**.")
    [strip] = decompose(passage)
    assert strip_text_for_scoring(strip).endswith("Claims go through the portal within 30 days.")


def test_strip_text_for_scoring_without_context() -> None:
    strip = Strip(passage=travel_passage(), index=0, text="Book early.")
    assert strip_text_for_scoring(strip) == "Book early."
