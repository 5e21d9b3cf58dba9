"""Shared pieces of the console tests: console settings with a known admin, a seeded action log."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import SecretStr

from support.question_log import question_row

ADMIN_USER, ADMIN_PASSWORD = "ada", "correct horse battery"
CONSOLE_SECRET = "test-console-secret-" + "x" * 20
CHANNEL = "CCONSOLE01"
PARENTAL = "How many weeks of parental leave do primary caregivers get?"
DOG = "Can I bring my dog named Rex to the office?"
MINIBAR = (
    "Are hotel minibar costs reimbursed?",
    "Can I expense the hotel minibar?",
    "Is the minibar covered on trips?",
)

_HASHES: dict[str, str] = {}


def console_settings(settings, **updates: Any):
    from console.auth import hash_password

    if ADMIN_PASSWORD not in _HASHES:
        _HASHES[ADMIN_PASSWORD] = hash_password(ADMIN_PASSWORD, settings.console_scrypt_n)
    return settings.model_copy(
        update={
            "console_users": SecretStr(f"{ADMIN_USER}:{_HASHES[ADMIN_PASSWORD]}"),
            "console_secret": SecretStr(CONSOLE_SECRET),
        }
        | updates
    )


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "no CSRF token in the page"
    return match.group(1)


@pytest.fixture(scope="module")
def seeded_log(settings, request) -> dict[str, int]:  # label -> question id
    """A month of questions in the module's SEED_CHANNEL (default CHANNEL): mostly Correct before
    the last week, many Incorrect in it. Each module seeds its own channel, so filters stay exact."""
    from core import db

    channel = getattr(request.module, "SEED_CHANNEL", CHANNEL)
    from core.models import Feedback

    now = datetime.now(UTC)
    scores = [
        {
            "document": "leave-policy.md",
            "section": "4.2 Duration and pay",
            "origin": "kb",
            "source": "policies",
            "chunk_id": "n1",
            "score": 0.71,
        },
        {
            "document": "travel-expenses.md",
            "section": "Deadlines",
            "origin": "kb",
            "source": "policies",
            "chunk_id": "n2",
            "score": 0.12,
        },
        {
            "document": "hr-faq.md",
            "section": "Pets",
            "origin": "fallback",
            "source": "HR portal",
            "chunk_id": "f1",
            "score": -0.2,
        },
    ]
    rows: dict[str, Any] = {
        "parental": question_row(
            question=PARENTAL,
            channel=channel,
            thread_ts="1700000000.000100",
            action="correct",
            latency_ms=1200.0,
            evaluator_version="t5-console-test",
            upper=0.5,
            lower=-0.1,
            scores=scores,
            answer="Primary caregivers receive 16 weeks of paid leave. [1]",
            citations=[
                {
                    "n": 1,
                    "origin": "kb",
                    "source": "policies",
                    "document": "leave-policy.md",
                    "title": "Leave Policy",
                    "section": "4.2 Duration and pay",
                    "url": None,
                    "score": 0.7,
                }
            ],
            strips=[
                {
                    "document": "leave-policy.md",
                    "section": "4.2 Duration and pay",
                    "text": "Primary caregivers receive 16 weeks of paid leave.",
                    "score": 0.66,
                }
            ],
            timings_ms={"retrieve": 40.0, "evaluate": 300.0, "refine": 80.0, "compose": 5.0, "total": 425.0},
            created_at=now - timedelta(hours=1),
        ),
        "dog": question_row(
            question=DOG,
            channel=channel,
            action="incorrect",
            found=False,
            latency_ms=900.0,
            sources_used=[],
            scores=[dict(scores[1], score=-0.5)],
            answer="I couldn't find this in the approved policy sources.",
            fallback_queries=[{"source": "HR portal", "query": "dog office"}],
            created_at=now - timedelta(hours=2),
        ),
    }
    for day in range(1, 7):  # the last week: Incorrect on a travel topic
        for n in range(3):
            rows[f"recent-{day}-{n}"] = question_row(
                question=MINIBAR[n],
                channel=channel,
                action="incorrect",
                found=n != 0,
                sources_used=["HR portal"] if n else [],
                latency_ms=800.0 + 100 * n,
                scores=[dict(scores[1], score=-0.4)],
                created_at=now - timedelta(days=day, hours=3),
            )
    for day in range(8, 30, 2):  # the weeks before: Correct
        for n in range(3):
            rows[f"prior-{day}-{n}"] = question_row(
                question="How many vacation days do I get per year?",
                channel=channel,
                action="correct",
                latency_ms=700.0,
                scores=[dict(scores[0], score=0.8)],
                created_at=now - timedelta(days=day, hours=3),
            )
    with db.session(settings) as session:
        session.add_all(rows.values())
        session.flush()
        session.add(Feedback(question_id=rows["parental"].id, user_id="UVOTE9", vote=1))
        session.add(Feedback(question_id=rows["dog"].id, user_id="UVOTE9", vote=-1))
        return {label: row.id for label, row in rows.items()}
