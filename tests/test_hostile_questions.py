"""Hostile questions: every text function on the question path stays linear in the message's
length (#26: a message shaped "1 . . . . 1" once took minutes in the phone redaction).

Property-based: hypothesis writes adversarial messages up to the 4,000-character limit from the
characters these functions' patterns care about, and fixed shapes cover the known blow-ups.
The bound is wall time per call, generous (a linear pass over 4,000 characters takes
milliseconds) and far below what a quadratic or cubic blow-up needs at this length.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crag.compose import compose_extractive
from crag.fallback import classify_question
from crag.followups import continues_earlier, needs_earlier
from crag.redaction import keyword_query, redact
from crag.types import Passage, Strip

MAX_CHARS = 4000  # POLICYBOT_MAX_QUESTION_CHARS's default
SECONDS_PER_CALL = 1.0

_STRIP = Strip(
    passage=Passage(
        id="p1", text="Receipts are due within 30 days.", origin="kb", source="policies", document="travel.md"
    ),
    text="Receipts are due within 30 days.",
    index=0,
)

QUESTION_PATH: dict[str, Callable[[str], object]] = {
    "redact": lambda text: redact(text, ("Priyanka Raghunathan",)),
    "keyword_query": keyword_query,
    "classify_question": classify_question,
    "continues_earlier": continues_earlier,
    "needs_earlier": needs_earlier,
    "compose_extractive": lambda text: compose_extractive(text, [_STRIP]),
}

# What the patterns read: digits and their separators, address and ID characters, Slack markup, words.
_ALPHABET = "1 .-()+@x:#<>|'_/eE\n" + "aZ9"
_PIECES = [
    "1",
    " .",
    " 1",
    "-",
    "(",
    ")",
    "+1",
    "@",
    "a.",
    "ext",
    "x",
    "employee id ",
    "EMP",
    "<@U1",
    "|",
    "http://",
    "what about ",
    "'s",
    "\u00e9",
    "555",
    " ",
    "\t",
    "\ud83d\ude00",
]

messages = st.one_of(
    st.text(alphabet=_ALPHABET, max_size=MAX_CHARS),
    st.lists(st.sampled_from(_PIECES), max_size=MAX_CHARS // 2).map("".join).map(lambda s: s[:MAX_CHARS]),
    st.tuples(st.sampled_from(_PIECES), st.sampled_from(_PIECES), st.integers(1, MAX_CHARS)).map(
        lambda t: (t[0] + t[1] * t[2])[:MAX_CHARS]
    ),
)


def _timed(function: Callable[[str], object], text: str) -> float:
    started = time.perf_counter()
    function(text)
    return time.perf_counter() - started


@pytest.mark.parametrize("name", sorted(QUESTION_PATH))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=messages)
def test_text_functions_stay_fast_on_adversarial_messages(name: str, text: str) -> None:
    assert _timed(QUESTION_PATH[name], text) < SECONDS_PER_CALL


@pytest.mark.parametrize("name", sorted(QUESTION_PATH))
@pytest.mark.parametrize(
    "shape",
    [
        ("1", " .", " 1"),  # the phone redaction's cubic blow-up (#26)
        ("", "a.", "@"),  # an address run with no domain
        ("", "1 ", "x"),
        ("+1", " (", ""),
        ("", "employee id ", "1"),
    ],
    ids=["dots", "address-run", "digit-run", "parens", "id-labels"],
)
def test_known_blow_up_shapes_stay_fast_at_the_length_limit(name: str, shape: tuple[str, str, str]) -> None:
    head, repeated, tail = shape
    text = head + repeated * ((MAX_CHARS - len(head) - len(tail)) // len(repeated)) + tail
    assert len(text) <= MAX_CHARS
    assert _timed(QUESTION_PATH[name], text) < SECONDS_PER_CALL
