"""The action log without the database: its filters and exports, what `policybot logs|stats` and
the admin console need before (or without) a query.

- `ACTIONS`, `STATUSES`, `FEEDBACK_CHOICES`, `VERDICTS`: the values a filter may take;
- `LogFilters`: what to show of the log (application/review.py turns it into a query);
- `parse_since`: `--since 7d` and the console's since/until;
- `record_id`: the row id a reference names, if any;
- `records_csv` / `records_jsonl`: exports of the `logs --json` records.

No SQLAlchemy here: the CLI's `logs` and `stats` import this module at the top to check their
options, and `--help` must not load SQLAlchemy (tests/test_cli_startup.py). The queries are in
application/review.py.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from core.names import could_be_reference

ACTIONS = ("correct", "ambiguous", "incorrect")
# What happened to the asker (application/review.py's asker_outcome derives it from what is stored):
# answered, abstained (no approved source held it), apologised (given up: the apology with the
# reference), failed (given up with no reply in Slack), pending (not answered yet, or a retry is due).
# A record's `delivery` says apart where its Slack reply is: posted, owed or not posted (reply_delivery).
STATUSES = ("answered", "abstained", "apologised", "failed", "pending")
FEEDBACK_CHOICES = ("up", "down", "any", "none")
VERDICTS = ("right", "wrong")


def parse_since(value: str, now: datetime | None = None) -> datetime:
    """`7d`, `12h`, `30m`, `2w`, or an ISO date/time; returns an aware UTC datetime."""
    now = now or datetime.now(UTC)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*", value.lower())
    if match:
        amount = float(match.group(1))
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[match.group(2)]
        return now - timedelta(**{unit: amount})
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"--since {value!r}: use e.g. 7d, 12h, 30m, 2w or a date like 2026-01-31") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class LogFilters:
    """What to show of the action log; every field optional (None: no filter)."""

    since: datetime | None = None
    until: datetime | None = None
    action: str | None = None
    found: bool | None = None
    feedback: str | None = None  # up | down | any | none
    status: str | None = None
    channel: str | None = None
    evaluator_version: str | None = None
    text: str | None = None  # case-insensitive substring of the question
    reviewed: str | None = None  # right | wrong | any | none


def record_id(ref: str) -> int | None:
    """The row id `ref` names: "#123" or "id:123", or bare digits that cannot be a reference. None
    otherwise: `ref` is then looked up as a reference (e.g. Q7K2M9, or 482759: all-digit ones exist)."""
    ref = ref.strip()
    explicit = next((ref[len(prefix) :].strip() for prefix in ("#", "id:") if ref.lower().startswith(prefix)), None)
    digits = explicit if explicit is not None else ref if not could_be_reference(ref) else ""
    return int(digits) if digits.isascii() and digits.isdigit() and int(digits) < 2**31 else None


# ------------------------------------------------------------------ exports

CSV_FIELDS = (
    "id",
    "reference",
    "created_at",
    "surface",
    "asker",
    "channel",
    "status",
    "delivery",
    "action",
    "found",
    "top_score",
    "question",
    "answer",
    "sources_used",
    "citations",
    "fallback_queries",
    "feedback_up",
    "feedback_down",
    "latency_ms",
    "evaluator_version",
    "error",
    "review",
)


# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """The value as a spreadsheet will show it, never run it: text that starts a formula gets a leading '."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def records_csv(records: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    for record in records:
        flat = dict(record)
        flat["feedback_up"], flat["feedback_down"] = record["feedback"]["up"], record["feedback"]["down"]
        flat["review"] = (record.get("review") or {}).get("verdict", "")
        for key in ("sources_used", "citations", "fallback_queries"):
            flat[key] = json.dumps(record[key])
        writer.writerow({key: csv_cell(value) for key, value in flat.items()})
    return out.getvalue()


def records_jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(record, default=str) + "\n" for record in records)
