import re
from collections.abc import Sequence
from dataclasses import replace

import pytest

from crag.compose import (
    ReplyShape,
    abstention_text,
    compose_extractive,
    is_breadcrumb,
    section_name,
    tidy_sentence,
)
from crag.strips import decompose, refine
from crag.text import content_words, plain_text, reader_text, split_sentences
from crag.types import Citation, Passage, Strip

from support.travel_example import DEADLINE, NEGATION, QUESTION, SCOPE, travel_passage

DOMESTIC = travel_passage()

# Every kept strip follows the first line, in the order given: for tests of numbering, scope and
# tidying across lines (the product's REPLY_SHAPE keeps only the closest).
EVERY_STRIP = ReplyShape(lead_share=1.0, follow_share=0.0, other_share=0.0, max_following=10, on_topic_only=False)

INTERNATIONAL = Passage(
    id="travel-2",
    text="This rule covers international travel. Submit international expense claims within 45 days.",
    origin="fallback",
    source="intranet-wiki",
    document="International travel FAQ",
    title="International travel FAQ",
    url="https://wiki.example/intl",
)


class WordOverlapEvaluator:
    """Deterministic toy evaluator: share of the question's content words found, in [-1, 1]."""

    version = "toy-overlap"

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        wanted = content_words(question)
        return [2.0 * len(wanted & content_words(p)) / len(wanted) - 1.0 for p in passages]


def policy_passage(passage_id: str, section: str, text: str) -> Passage:
    """Another passage of the travel example's source, with its own section and text."""
    return replace(DOMESTIC, id=passage_id, section=section, text=text)


def scored(passage: Passage, scores: Sequence[float]) -> list[Strip]:
    return [replace(strip, score=score) for strip, score in zip(decompose(passage), scores, strict=True)]


def judged_sentences(passage: Passage, best: str) -> list[Strip]:
    """One strip per sentence, as a sentence judge leaves them: `best` scores 0.9, the rest 0.1."""
    sentences = split_sentences(passage.text)
    assert best in sentences, f"{best!r} is not one of the passage's sentences"
    return [Strip(passage=passage, index=i, text=s, score=0.9 if s == best else 0.1) for i, s in enumerate(sentences)]


def test_seed_example_leads_with_the_deadline_and_keeps_its_scope() -> None:
    strips = refine(QUESTION, [DOMESTIC], WordOverlapEvaluator(), strip_threshold=-0.2)
    text, citations = compose_extractive(QUESTION, strips, EVERY_STRIP)  # the negation survives refinement

    lead = text.split("\n")[0]
    assert lead == f"{DEADLINE} {SCOPE} [1]"
    assert NEGATION in text
    assert text.count(SCOPE) == 1
    assert citations == [
        Citation(
            n=1,
            origin="kb",
            source="policies",
            document="travel.md",
            title="Travel policy",
            section="Travel > Domestic travel",
            url=None,
            score=pytest.approx(1.0),  # type: ignore[arg-type]
        )
    ]


def test_every_line_ends_with_a_citation_marker() -> None:
    strips = scored(DOMESTIC, [0.2, 0.9, 0.4]) + scored(INTERNATIONAL, [0.5])
    text, citations = compose_extractive(QUESTION, strips, EVERY_STRIP)
    lines = [line for line in text.split("\n") if line]
    assert len(lines) == 5  # lead, rest of the lead strip, strip 0, strip 2, international
    assert all(re.search(r"\S \[[12]\]$", line) for line in lines)
    assert [c.n for c in citations] == [1, 2]


def test_citations_are_numbered_in_order_of_first_use() -> None:
    # The international strip scores best, so it leads and becomes [1] though it comes last.
    strips = scored(DOMESTIC, [0.2, 0.3, -0.1]) + scored(INTERNATIONAL, [0.8])
    text, citations = compose_extractive("When are international expense claims due?", strips, EVERY_STRIP)

    assert text.startswith(
        "Submit international expense claims within 45 days. This rule covers international travel. [1]"
    )
    assert [(c.n, c.document, c.origin, c.url) for c in citations] == [
        (1, "International travel FAQ", "fallback", "https://wiki.example/intl"),
        (2, "travel.md", "kb", None),
    ]
    assert [c.score for c in citations] == [pytest.approx(0.8), pytest.approx(0.3)]  # best strip per passage


def test_scope_travels_with_evidence_from_another_passage() -> None:
    strips = scored(DOMESTIC, [0.1, 0.9, 0.2]) + scored(INTERNATIONAL, [0.0])
    text, _ = compose_extractive(QUESTION, strips, EVERY_STRIP)
    assert "This rule covers international travel. Submit international expense claims within 45 days. [2]" in text


def test_rest_follows_the_given_order_without_repeating_sentences() -> None:
    strips = scored(DOMESTIC, [0.1, 0.9, 0.2])
    text, _ = compose_extractive(QUESTION, strips, EVERY_STRIP)
    lines = text.split("\n")
    assert lines[0] == f"{DEADLINE} {SCOPE} [1]"
    assert lines[1] == ""
    assert lines[2] == (
        "Hotel stays are arranged by the desk. The booking system is down for maintenance every Sunday. [1]"
    )
    assert lines[3] == (
        "The travel desk is open Monday to Friday. Book flights through the booking portal. [1]"
    )  # strip 0 without its scope sentence, which already leads
    assert lines[4] == f"{NEGATION} Approved reports are paid within 5 business days. [1]"
    for sentence in [SCOPE, DEADLINE, NEGATION]:
        assert text.count(sentence) == 1


def test_lead_sentence_is_the_best_overlap_within_the_best_strip() -> None:
    passage = policy_passage(
        "leave",
        "Leave",
        "Leave requests go to your manager. Unused PTO days carry over until March. PTO is paid.",
    )
    strip = Strip(passage=passage, index=0, text=passage.text, score=0.7)
    text, _ = compose_extractive("Do unused PTO days carry over?", [strip])
    assert text.startswith("Unused PTO days carry over until March. [1]")


def test_markdown_is_tidied() -> None:
    passage = replace(
        DOMESTIC,
        id="md",
        text="## Meals\n- Dinner is   covered up to **$75**\n* Alcohol is `not` reimbursed.\n1. Keep receipts.",
    )
    first, second = decompose(passage, sentences_per_strip=2)
    strips = [replace(first, score=0.9), replace(second, score=0.1)]
    text, _ = compose_extractive("Is dinner covered?", strips, EVERY_STRIP)
    assert text == ("Dinner is covered up to $75. [1]\n\nMeals: [1]\nAlcohol is not reimbursed. Keep receipts. [1]")
    assert not re.search(r"[#*`]", text)


@pytest.mark.parametrize(
    ("raw", "tidy"),
    [
        ("- Flights in economy class", "Flights in economy class."),
        ("### Approvals", "Approvals:"),
        ("  Submit   within\n30 days. ", "Submit within 30 days."),
        ("• Receipts: required", "Receipts: required."),
        ("3. If you are ill, call your manager.", "If you are ill, call your manager."),  # numbers go too
        ("(b) Keep receipts", "Keep receipts."),
        ("12) Submit within 30 days.", "Submit within 30 days."),
        ("2026 is the plan year.", "2026 is the plan year."),  # a figure is not a marker
        ("b. Alcohol is never reimbursed.", "Alcohol is never reimbursed."),
        ("J. Smith approves overtime.", "J. Smith approves overtime."),  # nor is an initial
        ("A. Okafor runs payroll.", "A. Okafor runs payroll."),
        ("Reimbursable expenses:", "Reimbursable expenses:"),
        ("**  **", ""),
        ("| --- | :---: |", ""),  # a table's separator line
        ("| | |", ""),  # the empty header of a table headed down its first column
        ("| Staff | $200 |", "Staff; $200."),  # a table row reads as its cells
        (
            "- Use [the **claims** form](https://x.example/claims__v2?a=1.2)",
            "Use [the claims form](https://x.example/claims__v2?a=1.2).",
        ),
        ("See https://x.example/my__file for `details`", "See https://x.example/my__file for details."),
        ("*Questions?", "Questions?"),  # an emphasised footer cut into sentences
        ("Ask in #ask-people or open an issue.*", "Ask in #ask-people or open an issue."),
        ("_Last reviewed in May_", "_Last reviewed in May_."),  # whole, it is left to the surfaces
        ("Rates are 2*3 and up*", "Rates are 2*3 and up*."),
        ("Use the file_name_", "Use the file_name_."),
    ],
)
def test_tidy_sentence(raw: str, tidy: str) -> None:
    assert tidy_sentence(raw) == tidy


def test_a_link_url_adds_no_words_to_the_choice_of_lead_and_the_reply_keeps_the_link() -> None:
    """ "hotel-cap-2026" in a URL neither answers "What is the hotel cap?" nor holds a figure;
    the sentence that leads keeps its link for the surfaces to show their way."""
    portal = policy_passage(
        "p-portal", "Travel > Hotels", "Book hotels through [the travel portal](https://travel.example/hotel-cap-2026)."
    )
    cap = policy_passage("p-cap", "Travel > Hotels", "The hotel cap is 200 USD a night.")
    strips = scored(portal, [0.9]) + scored(cap, [0.85])
    text, _ = compose_extractive("What is the hotel cap?", strips, floor=0.0)
    assert text.startswith("The hotel cap is 200 USD a night. [1]")
    text, _ = compose_extractive("How do I book hotels?", strips, floor=0.0)
    assert text.startswith("Book hotels through [the travel portal](https://travel.example/hotel-cap-2026). [1]")


def test_unscored_strips_still_compose() -> None:
    strip = Strip(passage=DOMESTIC, index=0, text=DEADLINE)
    text, citations = compose_extractive(QUESTION, [strip])
    assert text == f"{DEADLINE} [1]"
    assert citations[0].score == 0.0


def test_no_strips_is_an_error() -> None:
    with pytest.raises(ValueError, match="abstain"):
        compose_extractive(QUESTION, [])
    with pytest.raises(ValueError):
        compose_extractive(QUESTION, [Strip(passage=DOMESTIC, index=0, text="   ")])


def test_abstention_names_where_to_ask_and_cites_nothing() -> None:
    text = abstention_text("#ask-hr or hr@example.com")
    assert text == "I couldn't find this in the approved policy sources. Please ask #ask-hr or hr@example.com."
    assert not re.search(r"\[\d+\]", text)
    assert abstention_text("  ") == (
        "I couldn't find this in the approved policy sources. Please ask your manager or the policy owner."
    )


def test_an_abstention_names_the_closest_section_unquoted() -> None:
    closest = Passage(
        id="kb-hotels",
        text="Hotel rates are capped at $250 a night in New York and $180 elsewhere.",
        origin="kb",
        source="policies",
        document="travel.md",
        title="Travel policy",
        section="Travel > Hotels",
    )
    text = abstention_text("#ask-hr", closest)
    assert text == (
        "I couldn't find this in the approved policy sources. The closest section I found is "
        "“Travel › Hotels” in Travel policy; it may not answer this. Please ask #ask-hr."
    )
    assert "$250" not in text and not re.search(r"\[\d+\]", text)  # named, never quoted nor cited
    # A heading path under the document's own title names the title once.
    assert section_name(replace(closest, section="Travel policy > Hotels")) == "“Hotels” in Travel policy"
    untitled = replace(closest, title="", section="", url="https://intranet.example.com/travel")
    assert (
        section_name(untitled) == "[travel.md](https://intranet.example.com/travel)"
    )  # a link where it has an address


def test_a_section_link_survives_brackets_in_its_title_and_spaces_in_its_address() -> None:
    """A heading "Leave [UK]" and a SharePoint-style address with spaces and parentheses: the
    pointer is one link, shown as its text in `ask` and as one Slack link in Slack."""
    from slack_shared.blocks import answer_mrkdwn

    closest = Passage(
        id="kb-leave",
        text="Annual leave is 25 days.",
        origin="kb",
        source="policies",
        document="leave.md",
        title="Handbook",
        section="Leave [UK] > Carry-over",
        url="https://intranet.example.com/Shared Documents/Leave (UK).docx",
    )
    text = abstention_text("#ask-hr", closest)
    assert plain_text(text) == (
        "I couldn't find this in the approved policy sources. The closest section I found is "
        "“Leave [UK] › Carry-over” in Handbook; it may not answer this. Please ask #ask-hr."
    )
    assert (
        "<https://intranet.example.com/Shared%20Documents/Leave%20(UK).docx|“Leave [UK] › Carry-over” in Handbook>"
        in answer_mrkdwn(text)
    )


def test_reader_text_shows_emoji_shortcodes_as_emoji_but_not_in_code_or_urls() -> None:
    """GitHub handbooks write ":tada:": `ask`, `logs show` and the console show the emoji, and
    leave code spans, URLs, times and unknown names as written (the judge reads plain_text)."""
    assert reader_text("Ship it :rocket: on **Friday** :+1:") == "Ship it 🚀 on Friday 👍"
    assert plain_text("Ship it :rocket:") == "Ship it :rocket:"
    assert reader_text("Type `:tada:` to cheer :tada:") == "Type :tada: to cheer 🎉"
    assert reader_text("See [the guide](https://wiki.example/a:smile:b) at 10:30:00") == "See the guide at 10:30:00"
    assert reader_text("https://wiki.example/x:smile: and :not_an_emoji_name:") == (
        "https://wiki.example/x:smile: and :not_an_emoji_name:"
    )


def test_content_words_match_inflections() -> None:
    assert content_words("How many days do I have to submit travel expenses?") == content_words(
        "submitted expense travel day"
    )


def test_a_list_leads_with_its_items() -> None:
    passage = policy_passage(
        "referrals",
        "Referral bonus > Amounts",
        "If your referral is hired, you receive a referral bonus:\n- $3,000 for engineering roles;\n"
        "- $2,000 for all other roles.\nDrive bonuses are doubled.",
    )
    strip = Strip(passage=passage, index=0, text=passage.text, score=0.7)
    text, _ = compose_extractive("How much is the referral bonus?", [strip])
    assert text.split("\n")[0] == (
        "If your referral is hired, you receive a referral bonus: $3,000 for engineering roles; "
        "$2,000 for all other roles. [1]"
    )
    assert text.count("$3,000") == 1


@pytest.mark.parametrize("lead_by_score", [False, True])
def test_a_lead_in_leads_with_the_sentence_it_introduces(lead_by_score: bool) -> None:
    """ "Lost a receipt?" alone quotes the question back; the answer is the sentence after it."""
    passage = policy_passage(
        "receipts",
        "Deadlines and receipts",
        "Submit claims within 30 days.\n- Lost a receipt? File the missing-receipt declaration. "
        "You get two a year.\n- Every claim needs a receipt:\nScan it into the expense tool.\n## Approvals\n"
        "Leads approve claims up to EUR 250. Need an exception?\n## Travel\nBook through the agency.",
    )
    sentences = split_sentences(passage.text)

    def lead(sentence: str) -> str:
        strip = Strip(passage=passage, index=sentences.index(sentence), text=sentence, score=0.9)
        others = [Strip(passage=passage, index=i, text=s, score=0.1) for i, s in enumerate(sentences) if s != sentence]
        text, _ = compose_extractive("lost my receipt, what now", [strip, *others], lead_by_score=lead_by_score)
        return text.split("\n")[0]

    if lead_by_score:  # the judge picked the lead-in: the line goes on to what it introduces
        assert lead("- Lost a receipt?") == "Lost a receipt? File the missing-receipt declaration. [1]"
        assert (
            lead("- Every claim needs a receipt:") == "Every claim needs a receipt: Scan it into the expense tool. [1]"
        )
        assert lead("Need an exception?") == "Need an exception? [1]"  # a heading after it is another section
    else:  # by shared words (a strip of whole sentences), the lead-in naming a lost receipt leads with its answer
        whole = Strip(passage=passage, index=0, text=passage.text, score=0.9)
        text, _ = compose_extractive("lost my receipt, what now", [whole])
        assert text.startswith("Lost a receipt? File the missing-receipt declaration. [1]")


def test_a_lead_in_carries_one_sentence_not_a_run_of_labels() -> None:
    passage = policy_passage("contacts", "Contacts", "Need help?\nWrite to us:\nBy phone:\nBy email:\nAny time.")
    text, _ = compose_extractive("where do I get help", judged_sentences(passage, "Need help?"), lead_by_score=True)
    assert text.split("\n")[0] == "Need help? Write to us: [1]"


@pytest.mark.parametrize("lead_by_score", [False, True])
@pytest.mark.parametrize(
    ("section", "text", "item", "question", "first_line"),
    [
        (  # "either founder." alone says nothing; with its list's opening line it answers
            "Telling someone",
            "Tell whoever you're most comfortable with:\n- People Ops in Lisbon\n- either founder\n"
            "- or anonymously, through the speak-up line\n\nYou can bring a friend.",
            "- either founder",
            "can I tell a founder?",
            "Tell whoever you're most comfortable with: either founder. [1]",
        ),
        (  # and its number goes: "Three rules: 3. If you're ill …" reads as a stray figure
            "Sick days",
            "Three rules:\n1. Book leave in the portal.\n2. Tell your team.\n3. If you're ill, text your manager by 9am.",
            "3. If you're ill, text your manager by 9am.",
            "what if I'm ill",
            "Three rules: If you're ill, text your manager by 9am. [1]",
        ),
    ],
)
def test_a_list_item_leads_after_its_lists_opening_line(
    section: str, text: str, item: str, question: str, first_line: str, lead_by_score: bool
) -> None:
    passage = policy_passage("list", section, text)
    strips = judged_sentences(passage, item)
    if not lead_by_score:  # by shared words, of strips of whole sentences
        strips = [Strip(passage=passage, index=0, text=passage.text, score=0.9)]
    reply, _ = compose_extractive(question, strips, lead_by_score=lead_by_score)
    assert reply.split("\n")[0] == first_line


def test_a_page_header_never_leads_when_a_rule_answers() -> None:
    passage = policy_passage(
        "helpdesk",
        "IT Helpdesk",
        "HR Portal > Tools and IT > IT Helpdesk. Maintained by IT Support. "
        "The Helpdesk phone is internal extension 4357.",
    )
    header, rule = decompose(passage, sentences_per_strip=2)
    strips = [replace(header, score=0.9), replace(rule, score=0.6)]  # the evaluator likes the header best
    text, _ = compose_extractive("what's the IT helpdesk extension?", strips)
    assert text.startswith("The Helpdesk phone is internal extension 4357. [1]")
    assert "HR Portal > Tools and IT > IT Helpdesk." in text  # still quoted, just not first


@pytest.mark.parametrize(
    ("sentence", "breadcrumb"),
    [
        ("HR Portal > Tools and IT > IT Helpdesk.", True),
        ("Benefits > Health plans", True),
        ("Payslips are available in Workday under Pay > Payslips 2 business days before each pay date.", False),
        ("Amounts over $500 need approval.", False),
        ("Claims > 500 USD need approval.", False),  # a comparison, not a path
        ("Claims > USD 500 need approval.", False),
        ("Hotel rate > cap requires approval.", False),
        ("Expenses > Manager Limit need VP approval.", False),
        ("Benefits > 2025 Open Enrollment", True),
        ("HR Portal > eLearning > iPhone Setup", True),
        ("Intranet > how-to guides", True),
        ("IT Portal > Get Help", True),
        ("Home > HR > Leave > How to apply", True),
        ("Gifts > 50 EUR: declare them.", False),
        ("Trips > 5 days: VP sign-off.", False),
        ("Orders > 5,000 EUR go to procurement.", False),
        ("Orders > 5000 EUR go to procurement.", False),
        ("Spend > budget gets escalated to Finance.", False),
        ("Hotel > cap has no exceptions.", False),
        ("HR Portal > Pay > Payroll Calendar > May 2026.", True),
        ("HR Portal > Benefits > Will Writing Service.", True),
        ("HR Portal > Benefits > 2026 HSA Limits.", True),
        ("Orders > 2000 EUR go to procurement.", False),
    ],
)
def test_breadcrumbs(sentence: str, breadcrumb: bool) -> None:
    assert is_breadcrumb(sentence) is breadcrumb


def test_without_any_rule_the_best_strip_still_leads() -> None:
    passage = policy_passage("misc", "Misc", "Lockers are emptied on Fridays. Desks are hot desks.")
    first, second = decompose(passage, sentences_per_strip=1)
    text, _ = compose_extractive("Where is the gym?", [replace(first, score=0.2), replace(second, score=0.5)])
    assert text.startswith("Desks are hot desks. [1]")


LODGING = policy_passage(
    "lodging",
    "Travel > Lodging",
    "The nightly hotel cap is $250 before taxes. In high-cost cities (New York, San Francisco, Boston, "
    "Seattle and Washington, DC) the cap is $350 before taxes.",
)


@pytest.mark.parametrize("city", ["New York", "Boston"])
def test_the_sentence_naming_the_city_leads(city: str) -> None:
    strip = Strip(passage=LODGING, index=0, text=LODGING.text, score=0.6)
    text, _ = compose_extractive(f"What's the hotel cap in {city}?", [strip])
    assert text.startswith("In high-cost cities"), text
    assert "$250" not in text.split("\n")[0]


def test_a_better_answer_in_a_nearly_as_good_strip_leads() -> None:
    first, second = decompose(LODGING, sentences_per_strip=1)
    strips = [replace(first, score=0.62), replace(second, score=0.6)]  # the general cap scores a little better
    text, _ = compose_extractive("What's the hotel cap in Boston?", strips, floor=0.35)
    assert text.startswith("In high-cost cities"), text


CLOSE = ReplyShape(lead_share=0.5, follow_share=0.5, other_share=0.9, max_following=1, on_topic_only=True)


def test_weak_evidence_from_another_section_does_not_follow() -> None:
    deadline = policy_passage(
        "deadline",
        "Travel > Expense report deadline",
        "Submit your expense report within 30 calendar days after the trip ends.",
    )
    relatives = policy_passage(
        "relatives",
        "Conduct > Relatives at work",
        "Tell People Operations within 30 days when a relative reports to you.",
    )
    strips = [
        Strip(passage=deadline, index=0, text=deadline.text, score=0.7),
        Strip(passage=relatives, index=0, text=relatives.text, score=0.45),
    ]
    text, citations = compose_extractive("How long do I have to submit my expense report?", strips, CLOSE, floor=0.35)
    assert text == "Submit your expense report within 30 calendar days after the trip ends. [1]"
    assert [c.document for c in citations] == ["travel.md"]

    # Nearly as strong, it follows, cited as the second source.
    strips[1] = replace(strips[1], score=0.68)
    text, citations = compose_extractive("How long do I have to submit my expense report?", strips, CLOSE, floor=0.35)
    assert text.endswith("\n\nTell People Operations within 30 days when a relative reports to you. [2]")
    assert [c.n for c in citations] == [1, 2]


def test_at_most_the_shapes_lines_follow_and_only_sentences_on_the_question() -> None:
    strips = scored(DOMESTIC, [0.5, 0.7, 0.9])  # scope+desk+flights, hotels+maintenance, deadline+receipts+payment
    text, _ = compose_extractive(QUESTION, strips, CLOSE, floor=0.35)
    lines = text.split("\n")
    assert lines[0] == f"{DEADLINE} {SCOPE} [1]"
    assert lines[1:] == ["", "Approved reports are paid within 5 business days. [1]"]  # "days": on the question


def test_a_question_for_a_figure_leads_with_a_sentence_holding_one() -> None:
    passage = policy_passage(
        "stipend",
        "Remote work > Stipend",
        "The internet stipend is paid through payroll. Remote employees get $40 a month for internet.",
    )
    strip = Strip(passage=passage, index=0, text=passage.text, score=0.6)
    text, _ = compose_extractive("How much is the internet stipend?", [strip])
    assert text.startswith("Remote employees get $40 a month for internet. [1]"), text
