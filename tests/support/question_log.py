"""Action-log rows for tests that review the log (CLI and console)."""

from __future__ import annotations

from typing import Any


def question_row(**values: Any):  # -> core.models.Question
    from core.models import Question
    from core.names import new_reference

    defaults = dict(
        surface="mention",
        asker="UCLIOPS",
        channel="CCLIOPS01",
        reference=new_reference(),
        status="answered",
        found=True,
        sources_used=["knowledge base"],
        scores=[],
        strips=[],
        citations=[],
        fallback_queries=[],
        evaluator_version="cosine",
        upper=0.55,
        lower=0.30,
        timings_ms={"total": 10.0},
    )
    return Question(**(defaults | values))
