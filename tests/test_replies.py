"""Replies on the sample documents are short and on point (issue #25, section 3): the first line
answers, its conditions stay, and nothing from an unrelated section follows.

Asked through the product's pipeline (application/runtime.py) over the ingested samples, judged by
cosine similarity: what a fresh clone answers before any evaluator is trained.
"""

from __future__ import annotations

import pytest

from devtools.replies import reply_words

EXPENSE_DEADLINE = "How long do I have to submit my expense report after a domestic business trip?"


@pytest.fixture(scope="module")
def pipeline(knowledge_base):  # -> crag.pipeline.CragPipeline
    from application.runtime import Runtime, cosine_evaluator

    return Runtime(knowledge_base, cosine_evaluator(knowledge_base)).pipeline(None)


def test_the_demo_expense_question_gets_the_deadline_and_little_else(pipeline) -> None:
    answer = pipeline.answer(EXPENSE_DEADLINE)

    first_line = answer.text.split("\n")[0]
    assert "30 calendar days" in first_line, answer.text
    assert [(c.document, c.section.split(" > ")[-1]) for c in answer.citations] == [
        ("travel-expenses.md", "3.5 Expense report deadline")
    ], answer.text
    assert "relative" not in answer.text.lower() and "45 calendar days" not in answer.text, answer.text
    assert reply_words(answer.text) <= 60, answer.text


@pytest.mark.parametrize("city", ["New York", "Boston"])
def test_a_high_cost_city_leads_with_its_own_hotel_cap(pipeline, city: str) -> None:
    from dataclasses import replace

    # Cosine routes Boston Ambiguous, whose knowledge-base evidence the band never answers from
    # (crag.pipeline.AMBIGUOUS_BAR_SHARE); a band that does lets the reply's choice be tested.
    answering = replace(pipeline, config=replace(pipeline.config, ambiguous_bar_share=0.5))
    answer = answering.answer(f"What's the hotel cap in {city}?")

    first_line = answer.text.split("\n")[0]
    assert "$350" in first_line and "$250" not in first_line, answer.text
    assert all(c.document == "travel-expenses.md" and c.section.endswith("3.2 Lodging") for c in answer.citations), (
        answer.text
    )
    assert reply_words(answer.text) <= 60, answer.text
