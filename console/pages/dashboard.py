"""The health dashboard: questions per day by action, abstention rate, 👍 share, latency,
the Incorrect alert and what was missed; and the same figures as JSON (`/api/stats`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from application import action_log, review
from console import charts
from console.web import Access, BadRequest, Console
from core.config import Settings


def days_param(request: Request) -> int:
    days_text = request.query_params.get("days", "30")
    if not days_text.isdigit() or not 1 <= int(days_text) <= 366:
        raise BadRequest("days must be between 1 and 366")
    return int(days_text)


async def dashboard(c: Console, request: Request) -> Response:
    context = await c.call(dashboard_data, c.settings, days_param(request))
    return c.render(request, "dashboard.html", context)


def dashboard_data(settings: Settings, days: int) -> dict[str, Any]:
    report = review.daily_stats(settings, days)
    by_day = {row["day"]: row for row in report["per_day"]}
    start = datetime.fromisoformat(report["since"]).date()
    labels = [(start + timedelta(days=i)).isoformat() for i in range(days)]
    rows = [by_day.get(day) for day in labels]
    stacked = {
        name: [(row or {}).get("actions", {}).get(name, 0) if row else 0 for row in rows] for name in action_log.ACTIONS
    }
    stacked["failed"] = [row["failed"] if row else 0 for row in rows]
    since = datetime.now(UTC) - timedelta(days=days)
    miss_documents, miss_topics = review.misses(settings, since)
    return {
        "days": days,
        "total": report["total"],
        "alert": review.incorrect_alert(settings, settings.alert_margin),
        "questions_chart": charts.stacked_bars(labels, stacked, "questions per day by action"),
        "abstention_chart": charts.line_chart(
            labels,
            {"abstention rate": [row["abstention_rate"] if row and row["answered"] else None for row in rows]},
            "abstention rate per day",
            fmt="{:.0%}",
            y_max=1.0,
        ),
        "feedback_chart": charts.line_chart(
            labels,
            {
                "👍 share": [
                    row["feedback_up"] / (row["feedback_up"] + row["feedback_down"])
                    if row and row["feedback_up"] + row["feedback_down"]
                    else None
                    for row in rows
                ]
            },
            "share of 👍 among votes per day",
            fmt="{:.0%}",
            y_max=1.0,
        ),
        "latency_chart": charts.line_chart(
            labels,
            {
                "p50": [row["latency_p50_ms"] if row else None for row in rows],
                "p95": [row["latency_p95_ms"] if row else None for row in rows],
            },
            "latency p50 and p95 per day (ms)",
        ),
        "miss_documents": miss_documents,
        "miss_topics": miss_topics,
        "colours": charts.ACTION_COLOURS,
        "series": list(stacked),
    }


async def stats_json(c: Console, request: Request) -> Response:
    report = await c.call(review.daily_stats, c.settings, days_param(request))
    report["alert"] = await c.call(review.incorrect_alert, c.settings, c.settings.alert_margin)
    return JSONResponse(report)


def routes(c: Console) -> list[tuple[Route, Access]]:
    return [
        c.route("/dashboard", dashboard, ["GET"]),
        c.route("/api/stats", stats_json, ["GET"], access="data"),
    ]
