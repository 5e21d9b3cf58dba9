"""Which thread messages continue the question before them, and which mean nothing asked alone
(crag.followups)."""

from __future__ import annotations

import pytest

from application.corpus import load_corpus
from crag.followups import continues_earlier, needs_earlier


@pytest.mark.parametrize(
    "message",
    [
        "what about contractors?",
        "And for international trips?",
        "Does that apply to interns too?",
        "Is this the same for contractors?",
        "Can I carry them over?",
        "What's the deadline?",
        "For interns?",
        "and the W-2?",
        "Same for part-time staff?",
        "Who approves it?",
        "Does it apply to contractors?",
        "Does it include weekends?",
        "How does that work for employees in Berlin on fixed-term contracts?",
        "With a doctor's note?",
        "What if I'm late?",
        "Is there a limit?",
        "Is there a deadline?",
        "Is there a form for that?",
        "Can I use it for my kids?",
        "Are contractors eligible?",
        "Do interns qualify?",
        "Per day or per trip?",
        "How long?",
        "Who approves?",
        "contractors?",
        "Who is eligible?",
        "Is it covered?",
        "Is it taxable?",
        "When is it due?",
        "Can interns?",
        "Are contractors allowed?",
        "Do I need a receipt?",
        "Who do I contact?",
        "What's the policy?",
        "Are part-time employees eligible?",
        "What's the timeline?",
        "What are the steps?",
        "Where's the portal?",
        "What's covered?",
        "What's the stipend?",
        "What's the SLA?",
        "What's the Timeline?",
        "IS IT TAXABLE?",
    ],
)
def test_follow_ups_that_lean_on_the_earlier_question(message: str) -> None:
    assert continues_earlier(message)


@pytest.mark.parametrize(
    "message",
    [
        "How many sick days do I get?",
        "Is it allowed to expense alcohol?",
        "What is the deadline for submitting travel expense reports?",
        "Can I bring my dog to the office?",
        "What is the per diem in London?",
        "Who approves a hotel above the cap?",
        "Is there a dress code?",
        "Is there parking?",
        "So how do I submit expenses for a conference in Berlin?",
        "Also, how do I request a new laptop?",
        "Then what's the policy on gifts from vendors?",
        "For how many days can I work remotely from another country each year?",
        "When is payday?",
        "What is PTO?",
        "Where is the handbook?",
        "Are contractors eligible for the referral bonus?",
        "What does TOIL mean?",
        "Is tuition covered?",
        "Who is eligible for the bonus?",
        "Is it OK to work from Spain?",
        "What is COBRA?",
        "what is cobra?",
        "Is IT open on weekends?",
        "Does IT approve software purchases?",
    ],
)
def test_questions_that_stand_alone(message: str) -> None:
    assert not continues_earlier(message)


# ------------------------------------------------ asked with no earlier question (needs_earlier)


@pytest.mark.parametrize(
    "message",
    [
        "What about on international trips?",
        "What about parking?",
        "what about parking",
        "how about for interns",
        "What about parking at the London office?",
        "And for contractors?",
        "and in germany?",
        "Same for part-time staff?",
        "Is that taxable?",
        "Does that apply to interns too?",
        "Does it include weekends?",
        "Can I carry them over?",
        "For contractors?",
        "Per day or per trip?",
        "What's the deadline?",
        "Is there a limit?",
        "Who approves?",
        "How long?",
        "Are contractors eligible?",
        "Is it the same for contractors, or only for employees?",
        "Hi, what about parking?",
        "ok so what about interns?",
    ],
)
def test_follow_ups_that_mean_nothing_asked_alone(message: str) -> None:
    assert needs_earlier(message)
    assert continues_earlier(message)  # and in a thread, they are asked with the earlier question


@pytest.mark.parametrize(
    "message",
    [
        "What is the parking policy?",
        "Where do I park?",
        "Is there parking?",
        "Is parking free?",
        "Do I need a receipt?",
        "Do I need a receipt for a taxi?",
        "How many sick days do I get?",
        "Can I expense a taxi?",
        "Who approves my PTO?",
        "what holidays do we get",
        "Do we get Juneteenth off?",
        "who do i ask about payroll",
        "whats the wifi password",
        "When is payday?",
        "How long is probation here?",
        "Can they extend my probation?",
        "Where is the offsite this year?",
        "Are we allowed to date someone on the same team?",
        "per diem for site-to-site travel?",
        "Does this leave policy apply to the analysts in our Jakarta office?",
        "when do you get the sabbatical and how long is it",
        "Hi, how many sick days do I get?",
        "Hi",
    ],
)
def test_short_questions_that_name_their_subject_are_answered_alone(message: str) -> None:
    assert not needs_earlier(message)


def test_no_question_of_the_corpus_asked_alone_is_taken_for_a_follow_up() -> None:
    """The labelled corpus's 8,000-odd employee questions that start a conversation (no first
    turn): a follow-up asked alone is not answered, so none of them may be taken for one."""
    corpus, problems = load_corpus()
    assert not problems
    alone = [q.record.question for q in corpus.questions() if not q.record.first_turn]
    assert len(alone) > 5000
    assert [question for question in alone if needs_earlier(question)] == []
