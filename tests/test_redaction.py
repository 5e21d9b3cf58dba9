import re

import pytest

from crag.redaction import keyword_query, redact


@pytest.mark.parametrize(
    "email",
    ["jane.doe@acme.com", "j.doe+travel@mail.acme.co.uk", "HR-Team@Example.ORG"],
)
def test_emails_are_redacted(email: str) -> None:
    assert redact(f"Write to {email} today.") == "Write to [email] today."


def test_slack_mailto_links_are_redacted_whole() -> None:
    assert redact("mail <mailto:jane@acme.com|jane@acme.com> now") == "mail [email] now"


@pytest.mark.parametrize(
    "phone",
    [
        "+1 (555) 123-4567",
        "+44 20 7946 0958",
        "+49-30-1234567",
        "020 7946 0958",
        "555-123-4567",
        "(555) 123 4567",
        "555.123.4567",
        "5551234567",
        "1-800-555-0199",
        "123-4567",
        "+1 555 123 4567 ext. 89",
        "555-123-4567 x12",
        "555-123-4567 extension 1234",
    ],
)
def test_phone_numbers_are_redacted(phone: str) -> None:
    assert redact(f"Call {phone} please.") == "Call [phone] please."


@pytest.mark.parametrize(
    "text",
    [
        "The limit is $1,250.50 per trip.",
        "Leave accrues at 2.5 days per month.",
        "It started on 2026-01-05 and 01-05-2026.",
        "Effective Jan. 5, 2026.",
        "Applies to fiscal years 2025 2026 and 2025-2026.",
        "Submit within 30 calendar days, or 10-20 days abroad.",
        "Contribute to your 401k.",
        "Section 3.1.2 of policy No. 12.",
    ],
)
def test_amounts_dates_and_numbers_are_kept(text: str) -> None:
    assert redact(text) == text


def test_employee_ids_are_redacted_with_the_default_pattern() -> None:
    assert redact("IDs EMP-12345, emp12345 and E123456.") == "IDs [employee-id], [employee-id] and [employee-id]."
    assert redact("Form E12 is short.") == "Form E12 is short."


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("Call 555-123-4567/555-987-6543 today", "Call [phone]/[phone] today"),
        ("numbers: 555-123-4567,555-987-6543", "numbers: [phone],[phone]"),
        ("call 555-123-4567 555-987-6543 today", "call [phone] [phone] today"),  # one 20-digit run, two numbers
        ("reach me on ext555-123-4567", "reach me on ext [phone]"),
        ("My ID is EMP 12345 or EMP_12345", "My ID is [employee-id] or [employee-id]"),
        ("employee number 48213 - am I eligible?", "employee number [employee-id] - am I eligible?"),
        ("my staff id: AB-9921", "my staff id: [employee-id]"),
        ("my employee id = 48213, thanks", "my employee id = [employee-id], thanks"),
        ("emp no. 48213 here", "emp no. [employee-id] here"),
        ("my id is 48213", "my id is [employee-id]"),
        ("room id 48213 is booked", "room id 48213 is booked"),  # only people's IDs
    ],
)
def test_numbers_written_together_or_labelled_are_redacted(text: str, redacted: str) -> None:
    assert redact(text) == redacted


def test_names_are_found_without_their_accents_or_with_curly_quotes() -> None:
    assert (
        redact("Jose Nunez and Sean O’Brien ask", asker_names=["José Núñez", "Sean O'Brien"]) == "[name] and [name] ask"
    )
    assert (
        keyword_query("Is there parking at the zürich office?") == "parking zurich office"
    )  # folded, not cut to "rich"
    # Capitalised, a place reads like a name: only policy terms go out so written (#26).
    assert keyword_query("Is there parking at the Zürich office?") == "parking office"
    # Words of other scripts go out only if the organisation's documents use them: with no
    # frequency list to vouch for them, a name cannot be told from a word (#26).
    assert keyword_query("我可以带狗去办公室吗？") == ""
    assert (
        keyword_query("我可以带狗去办公室吗？", vocabulary=frozenset({"我可以带狗去办公室吗"}))
        == "我可以带狗去办公室吗"
    )


def test_employee_id_pattern_is_configurable() -> None:
    pattern = r"\bACME/\d{3}\b"
    assert redact("I am ACME/042, not EMP-12345.", employee_id_pattern=pattern) == (
        "I am [employee-id], not EMP-12345."
    )


def test_slack_user_mentions_are_redacted() -> None:
    assert redact("Ask <@U123ABC> or <@W999XYZ|bob>.") == "Ask [user] or [user]."


def test_asker_names_are_redacted_case_insensitively_as_whole_words() -> None:
    text = "Jane Doe here (jane). JANE's question for DOE? Janet and Doek stay."
    assert redact(text, asker_names=["Jane Doe"]) == (
        "[name] here ([name]). [name]'s question for [name]? Janet and Doek stay."
    )


def test_asker_handles_are_redacted() -> None:
    assert redact("I'm jane.doe, aka @jdoe.", asker_names=["jane.doe", "@jdoe"]) == "I'm [name], aka @[name]."


def test_names_with_regex_characters_are_safe() -> None:
    assert redact("Hi A.J. (aj) here", asker_names=["A.J."]) == "Hi [name] (aj) here"


def test_keyword_query_rewrites_to_at_most_three_keywords_in_order() -> None:
    assert keyword_query("How many days do I have to submit travel expenses?") == "submit travel expenses"


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Hey, quick question: can I expense a laptop?", "expense laptop"),
        ("Do you know if PTO carries over to next year?", "pto carries year"),
        ("please tell me the per diem for meals in Berlin thanks", "per diem meals"),  # "Berlin": a proper noun
        ("How many PTO days do I get in 2026?", "pto days"),  # numbers only as amounts or durations (#26)
        ("Can I expense a $50 dinner within 30 days?", "expense $50 30 days"),
        ("Am I allowed to work remotely from another country?", "work remotely country"),
        ("??", ""),
        ("", ""),
    ],
)
def test_keyword_query_drops_filler_and_keeps_domain_words_and_numbers(question: str, expected: str) -> None:
    assert keyword_query(question) == expected


def test_keyword_query_prefers_rarer_words_when_trimming() -> None:
    assert keyword_query("What is the reimbursement limit for hotel lodging abroad?", max_keywords=2) == (
        "reimbursement lodging"
    )
    assert keyword_query("reimbursement limit hotel", max_keywords=0) == ""


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        # Short but specific words win over longer generic ones ("office", "company").
        ("Can I bring my dog to the office on Fridays?", "bring dog office"),  # capitalised words stay (#26)
        ("Where can I lock up my bike at the Boston office?", "lock bike office"),
        ("Do account executives get a company car?", "account executives car"),
    ],
)
def test_keyword_query_keeps_the_specific_word_even_when_it_is_short(question: str, expected: str) -> None:
    assert keyword_query(question) == expected


def test_keyword_query_keeps_acronyms_that_look_like_stopwords() -> None:
    assert keyword_query("What hours is IT support around?") == "hours it support"
    assert "hsa" in keyword_query("How much goes into my HSA each year?").split()
    # Lower-case "it" is the pronoun; a shouted question has no acronyms.
    assert "it" not in keyword_query("where do I return it after my trip?").split()
    assert "it" not in keyword_query("WHERE DO I RETURN IT AFTER MY TRIP").split()


def test_keyword_query_is_deterministic() -> None:
    question = "Can contractors claim mileage and parking for client visits?"
    assert len({keyword_query(question) for _ in range(5)}) == 1
    assert len(keyword_query(question).split()) <= 3


def test_nothing_personal_survives_into_the_keyword_query() -> None:
    question = (
        "Hi <@U12345>! Jane Doe here (EMP-12345, jane.doe@acme.com, +1 555 123 4567). "
        "Can I expense the laptop I bought for Doe's home office?"
    )
    redacted = redact(question, asker_names=["Jane Doe"])
    for personal in ["U12345", "Jane", "Doe", "EMP-12345", "jane.doe@acme.com", "555 123 4567"]:
        assert personal.lower() not in redacted.lower()
    query = keyword_query(redacted, max_keywords=5)
    assert query == "expense laptop bought home office"
    assert not re.search(r"[\[\]@<>]|jane|doe|emp|acme|555|user|name|phone|email", query)


def test_keyword_query_redacts_contact_details_even_if_the_caller_forgot() -> None:
    query = keyword_query("mail jane.doe@acme.com or call 555-123-4567 about EMP-12345 travel", max_keywords=10)
    assert query == "mail call travel"
