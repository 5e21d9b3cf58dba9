"""Which thread messages continue the question before them (crag.followups)."""

from __future__ import annotations

import pytest

from crag.followups import continues_earlier


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
