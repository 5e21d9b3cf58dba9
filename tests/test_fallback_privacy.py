"""What a fallback source receives (#26, item 5): no identifier, no person's name, and no health
detail in a question that may reach the open web. Only the keyword rewrite ever leaves.

Every question goes through `plan_fallback`, as the pipeline sends it, with no asker names
(as when Slack's user lookup fails) unless a test says otherwise.
"""

from __future__ import annotations

import re

import pytest

from crag.pipeline import AskContext, PipelineConfig, plan_fallback
from crag.redaction import document_vocabulary, keyword_query
from crag.text import fold_accents
from crag.types import Thresholds

CONFIG = PipelineConfig(thresholds=Thresholds(upper=0.8, lower=0.3, strip=0.5), max_keywords=10)


def sent(question: str, asker_names: tuple[str, ...] = (), config: PipelineConfig = CONFIG) -> str:
    """The keywords a fallback source would receive (10 at most, so that trimming hides nothing)."""
    return plan_fallback(question, AskContext(asker_names=asker_names), [], config).keywords


def _fold(text: str) -> str:
    return fold_accents(text).lower()


# --- the issue's examples -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "forbidden", "kept"),
    [
        ("my SSN 123456789 is on file, which benefits apply to me?", ["123456789"], "benefits"),
        ("call me at 555/123/4567 about my expense report", ["555", "123", "4567"], "expense"),
        ("employee id = 48213, where do I find my payslip?", ["48213"], "payslip"),
        (
            "My manager Priyanka Raghunathan approved bereavement leave for my mother Oluwaseun, how many days?",
            ["priyanka", "raghunathan", "oluwaseun"],
            "bereavement",
        ),
        ("Explain what HIV means, my member number is 123456789", ["hiv", "123456789"], None),
    ],
)
def test_the_issue_examples_send_no_identifier_name_or_health_detail(
    question: str, forbidden: list[str], kept: str | None
) -> None:
    words = sent(question).split()
    assert not set(words) & set(forbidden), words
    assert not any(ch.isdigit() for ch in " ".join(words)), words
    assert kept is None or kept in words, words  # the policy word still goes


def test_the_general_question_about_hiv_reaches_no_source_with_the_health_word() -> None:
    plan = plan_fallback("Explain what HIV means, my member number is 123456789", AskContext(), [], CONFIG)
    assert plan.question_class == "general"  # the class that may reach an open-web source
    assert "hiv" not in plan.keywords.split() and "123456789" not in plan.keywords


@pytest.mark.parametrize(
    "question",
    [
        "Hi, I'm Priyanka Raghunathan from finance. Can I carry over unused PTO?",
        "hi, this is priyanka raghunathan, can I carry over unused PTO?",
        "Can I carry over unused PTO? Thanks, Priyanka",
        "can i carry over unused pto? thanks, priyanka raghunathan",
        "Priyanka Raghunathan here: can I carry over unused PTO?",
        "my name is john smith and I want to carry over unused PTO",
    ],
)
def test_the_askers_own_names_stay_when_the_slack_lookup_failed(question: str) -> None:
    words = sent(question).split()  # no asker names: the lookup failed
    assert not {"priyanka", "raghunathan", "john", "smith"} & set(words), words
    assert "pto" in words


# --- names from many cultures ------------------------------------------------------------------

NAMES = [
    # West and East African
    "Oluwaseun Adebayo",
    "Chidinma Okonkwo",
    "Kwame Mensah",
    "Ama Owusu",
    "Ngozi Eze",
    "Emeka Nwosu",
    "Folasade Adeyemi",
    "Kofi Boateng",
    "Aminata Diallo",
    "Moussa Traoré",
    "Fatoumata Keita",
    "Yaw Asante",
    "Wanjiru Kamau",
    "Abebe Bekele",
    "Thandiwe Ndlovu",
    "Dawit Tesfaye",
    # South Asian
    "Priyanka Raghunathan",
    "Venkatesh Subramanian",
    "Lakshmi Narayanan",
    "Arjun Mehta",
    "Deepika Chatterjee",
    "Rohan Deshpande",
    "Anjali Iyer",
    "Harpreet Kaur",
    "Gurpreet Singh Dhillon",
    "Farhan Chowdhury",
    "Nadeem Qureshi",
    "Sunita Bhattacharya",
    # East and South-East Asian (family name first where that is the custom)
    "Wang Xiaoming",
    "Zhang Wei",
    "Liu Yang",
    "Chen Meiling",
    "Tanaka Hiroshi",
    "Sato Yuki",
    "Nakamura Haruto",
    "Kim Minji",
    "Park Jiwoo",
    "Lee Seojun",
    "Nguyen Thi Huong",
    "Tran Van Minh",
    # Slavic and Eastern European
    "Svetlana Ivanova",
    "Dmitri Volkov",
    "Katarzyna Kowalska",
    "Piotr Wiśniewski",
    "Oksana Shevchenko",
    "Milica Jovanović",
    "Tomáš Dvořák",
    "Zbigniew Nowak",
    "Anastasia Kuznetsova",
    "Bogdan Popescu",
    # Arabic, Persian, Turkish
    "Mohammed Al-Rashid",
    "Fatima Haddad",
    "Omar Abdelrahman",
    "Layla Mansour",
    "Youssef El-Amin",
    "Khalid bin Saleh",
    "Aisha Nasser",
    "Tariq Farouk",
    "Reza Hosseini",
    "Ayşe Yılmaz",
    # Latin American and Iberian
    "María José Hernández",
    "Juan Carlos Rodríguez",
    "Guadalupe Morales",
    "Alejandro Gutiérrez",
    "Luz Marina Castaño",
    "João Pereira da Silva",
    "Ximena Quispe",
    "Catalina Restrepo",
    # Nordic
    "Sigrid Lindqvist",
    "Bjørn Haugland",
    "Astrid Johansson",
    "Eero Virtanen",
    "Ingrid Solberg",
    "Lars Østergaard",
    "Guðrún Sigurðardóttir",
    # Irish
    "Siobhán Ní Bhriain",
    "Ciarán Ó Súilleabháin",
    "Aoife Ní Fhaoláin",
    "Niamh O'Connor",
    "Eoin Mac Lochlainn",
    # Pacific, and English names that are common words too
    "Hemi Te Rangi",
    "Kalani Akana",
    "John Smith",
    "Maria Garcia",
    "Grace Lee",
    "Hope Brown",
    "Rose Green",
    "Mark Young",
]

TEMPLATES = [
    "My manager {name} said I can take bereavement leave for my grandmother, how many days do I get?",
    "How many days of bereavement leave can I take? My mother {name} passed away last week.",
    "Can {name} approve my expense report for the conference in Lisbon?",
    "{name} and I are sharing a hotel room on the trip, can we split the receipt?",
    "Is {name} allowed to expense my lunch when she visits the office?",
    "I need to add {name} as a dependent on my dental insurance.",
    "Hi, I'm {name} from finance. What is the per diem for meals abroad?",
    "Does parental leave cover adopting a child? Asking for {first}.",
    "Who approves overtime while {name} is on sabbatical?",
    "Please send the mileage policy to {name}, thanks!",
    "Hi {first}, is the gym stipend taxable?",
    "Can I swap my holiday with {name}'s?",
]
# A name typed in lower case is told by the word before it.
LOWER_CASE_TEMPLATES = [
    "my manager {name} approved my remote work request, is that enough?",
    "can i take bereavement leave for my grandma {name}?",
    "hi, this is {name}, how do i claim mileage?",
    "my colleague {name} wants to know the parental leave rules",
    "can i carry over vacation days? thanks, {first}",
    "is dr {name} on the approved travel list?",
]


def _name_parts(name: str) -> set[str]:
    folded = _fold(name)
    parts = set(re.split(r"[\s]+", folded)) | set(re.split(r"[\s'-]+", folded))
    return {part for part in parts if part}


@pytest.mark.parametrize("name", NAMES)
def test_no_part_of_a_name_from_any_culture_reaches_the_keywords(name: str) -> None:
    assert len(NAMES) >= 60
    parts = _name_parts(name)
    first = name.split()[0]
    for template in TEMPLATES:
        question = template.format(name=name, first=first)
        words = set(sent(question).split())
        assert not words & parts, (question, words & parts)
    for template in LOWER_CASE_TEMPLATES:
        question = template.format(name=name.lower(), first=first.lower())
        words = set(sent(question).split())
        assert not words & parts, (question, words & parts)


def test_questions_with_names_keep_their_policy_words() -> None:
    assert "bereavement" in sent(TEMPLATES[0].format(name="Oluwaseun Adebayo", first="Oluwaseun")).split()
    assert "per diem" in sent(TEMPLATES[6].format(name="Svetlana Ivanova", first="Svetlana"))
    assert "sabbatical" in sent(TEMPLATES[8].format(name="Tanaka Hiroshi", first="Tanaka")).split()


# --- identifiers in any spacing --------------------------------------------------------------------

IDENTIFIERS = [
    "123456789",
    "123-45-6789",
    "123 45 6789",
    "123.45.6789",
    "123 - 45 - 6789",
    "1 2 3 4 5 6 7 8 9",
    "123/45/6789",
    "123_45_6789",
    "#123456789",
    "no. 48213",
    "48 213",
    "48,213",
    "48213abc",
    "x48213",
    "MBR-0042-7731",
    "MBR00427731",
    "A12B34C56",
    "a1b2c3d4",
    "DE89 3704 0044 0532 0130 00",
    "4111 1111 1111 1111",
    "4111-1111-1111-1111",
    "555/123/4567",
    "(555)1234567",
    "+44 20 7946 0958",
    "one two three four five six seven eight nine",
    "EMP-12345",
    "E123456",
]
ID_TEMPLATES = [
    "my SSN is {id}, am I enrolled in the benefits plan?",
    "my member number is {id} - does my dental insurance cover braces?",
    "account number {id}: when is my bonus paid?",
    "employee id = {id}, where is my payslip?",
    "Can you check reimbursement for claim {id}?",
    "my social security number {id} was on the expense form, is that allowed?",
]


def _id_pieces(identifier: str) -> set[str]:
    return {piece.lower() for piece in re.findall(r"[A-Za-z]*\d[\w]*|\d+", identifier)} | (
        set(identifier.split()) if identifier.startswith("one") else set()
    )


@pytest.mark.parametrize("template", ID_TEMPLATES)
def test_no_identifier_reaches_the_keywords_in_any_spacing(template: str) -> None:
    for identifier in IDENTIFIERS:
        question = template.format(id=identifier)
        query = sent(question)
        assert not re.search(r"\d", query), (question, query)
        assert not set(query.split()) & _id_pieces(identifier), (question, query)
        assert not {"mbr", "mbr00427731", "a12b34c56", "emp"} & set(query.split()), (question, query)


def test_numbers_go_out_only_as_amounts_and_durations_with_their_unit() -> None:
    assert sent("Can I expense a $50 dinner with a client?") == "expense $50 dinner client"
    assert sent("Do receipts older than 30 days still get reimbursed?") == "receipts older 30 days reimbursed"
    assert sent("Is the 2-week notice period 14 days or two weeks?") == "notice period 14 days two weeks"
    for question in ("my member number is $123456789", "claim 1234 days", "account 123 456 789 days"):
        assert not re.search(r"\d", sent(question)), question


# --- health details in a general question ----------------------------------------------------------


@pytest.mark.parametrize(
    "question",
    [
        "Explain what HIV means, my member number is 123456789",
        "explain what hiv means",
        "What is the meaning of diabetes?",
        "explain how chemotherapy works",
        "who invented insulin?",
        "define bipolar disorder",
        "what is the meaning of arthritis, I was diagnosed last week",
    ],
)
def test_a_general_question_sends_no_health_detail(question: str) -> None:
    plan = plan_fallback(question, AskContext(), [], CONFIG)
    assert plan.question_class == "general"
    health = {"hiv", "diabetes", "chemotherapy", "insulin", "bipolar", "disorder", "arthritis", "diagnosed"}
    assert not set(plan.keywords.split()) & health, plan.keywords


def test_a_policy_question_keeps_its_health_words_for_the_internal_sources() -> None:
    # Policy questions never reach an open-web source (ActionPolicy's hard rule).
    plan = plan_fallback("How much sick leave do I get after surgery?", AskContext(), [], CONFIG)
    assert plan.question_class == "policy"
    assert plan.keywords == "sick leave surgery"
    general = plan_fallback("explain how surgery works", AskContext(), [], CONFIG)
    assert general.question_class == "general" and "surgery" not in general.keywords.split()


# --- ordinary questions keep useful keywords --------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("how many days of bereavement leave for my grandmother?", "bereavement leave grandmother"),
        ("Can I take a sabbatical after five years?", "take sabbatical five years"),
        ("What's the per diem for meals in Tokyo?", "per diem meals"),
        ("Can I expense a $50 dinner?", "expense $50 dinner"),
        ("Is moonlighting allowed if I tell my manager?", "moonlighting manager"),
        ("How do I top up my HSA?", "top hsa"),
    ],
)
def test_policy_questions_still_produce_useful_keywords(question: str, expected: str) -> None:
    vocabulary = document_vocabulary(["Moonlighting: employees may take outside work (moonlighting) with approval."])
    config = PipelineConfig(thresholds=CONFIG.thresholds, vocabulary=vocabulary)
    assert sent(question, config=config) == expected


def test_the_organisations_vocabulary_holds_its_words_but_not_its_names() -> None:
    vocabulary = document_vocabulary(
        [
            "Outside work (moonlighting) needs approval. Ask Jane Doe (jane.doe@acme.com, @jdoe) "
            "or see https://hr.acme.com/x1.",
            "The HSA and FSA plans: contact Priyanka Raghunathan. Claims older than 90 days lapse.",
        ]
    )
    assert {"moonlighting", "approval", "HSA", "FSA", "lapse", "days"} <= vocabulary
    assert not {"jane", "doe", "Jane", "jane.doe", "jdoe", "acme", "priyanka", "raghunathan", "90", "x1"} & vocabulary
    # A word the documents use goes out; the same rare word without them does not.
    assert keyword_query("is moonlighting on weekends ok", vocabulary=vocabulary) == "moonlighting weekends"
    assert keyword_query("is moonlighting on weekends ok") == "weekends"
    # A name the documents mention is still a name.
    assert "raghunathan" not in keyword_query("ask Priyanka Raghunathan about HSA", vocabulary=vocabulary)


# --- the application supplies the organisation's vocabulary ----------------------------------------


def test_the_runtime_sends_words_of_the_indexed_documents_and_follows_their_changes(settings, tmp_path) -> None:
    from sqlalchemy import select

    from application.runtime import fallback_preview
    from application.vocabulary import organisation_vocabulary
    from core import db
    from core.models import Document
    from ingestion.ingest import ingest_paths, remove_document

    question = "Is zymurgy allowed at the office party?"  # "zymurgy" is no common English (Zipf 0)
    assert "zymurgy" not in fallback_preview(settings, question).keywords.split()
    path = tmp_path / "clubs.md"
    path.write_text("# Clubs\n\nThe home-brewing club practises zymurgy on Fridays. Ask Zygmunt Wrzesniewski.\n")
    report = ingest_paths(settings, [path], collection="vocabulary-test")
    assert not report.failed, report.failed
    try:
        vocabulary = organisation_vocabulary(settings)
        assert "zymurgy" in vocabulary and "zygmunt" not in vocabulary
        assert organisation_vocabulary(settings) is vocabulary  # cached per process, not read per question
        assert "zymurgy" in fallback_preview(settings, question).keywords.split()
    finally:
        with db.session(settings) as session:
            ids = session.execute(select(Document.id).where(Document.collection == "vocabulary-test")).scalars().all()
        for document_id in ids:
            remove_document(settings, document_id)
    assert "zymurgy" not in organisation_vocabulary(settings)  # read again once the documents changed
