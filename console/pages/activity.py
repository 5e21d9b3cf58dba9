"""The activity page: the action log, filtered and paged, its exports, and one record with
the whole decision and its review form."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from application import action_log, manage, review
from console import charts
from console.web import Access, BadRequest, Console, session_of, url
from core.config import Settings

PAGE_SIZE = 50
EXPORT_LIMIT = 100_000
RANGES = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30), "90d": timedelta(days=90)}
FILTER_PARAMS = (
    "range",
    "since",
    "until",
    "action",
    "found",
    "feedback",
    "status",
    "channel",
    "evaluator",
    "q",
    "reviewed",
)


def thread_link(settings: Settings, record: dict[str, Any]) -> str | None:
    channel, ts = record.get("channel"), record.get("thread_ts")
    if not channel or not ts:
        return None
    if settings.slack_workspace_url:
        base = settings.slack_workspace_url.rstrip("/")
        return f"{base}/archives/{channel}/p{str(ts).replace('.', '')}"
    return f"https://slack.com/app_redirect?channel={channel}"


def log_filters(request: Request) -> tuple[action_log.LogFilters, dict[str, str]]:
    params = {key: request.query_params.get(key, "").strip() for key in FILTER_PARAMS}
    now = datetime.now(UTC)
    since = until = None
    if params["range"] in RANGES:
        since = now - RANGES[params["range"]]
    elif params["range"] not in ("", "all", "custom"):
        raise BadRequest(f"unknown time range {params['range']!r}")
    try:
        if params["since"]:
            since = action_log.parse_since(params["since"])
        if params["until"]:
            until = action_log.parse_since(params["until"])
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", params["until"]):
                until += timedelta(days=1)  # a date means up to the end of that day
    except ValueError as error:
        raise BadRequest(str(error).replace("--since ", "")) from None
    choices = {
        "action": action_log.ACTIONS,
        "found": ("true", "false"),
        "feedback": action_log.FEEDBACK_CHOICES,
        "status": action_log.STATUSES,
        "reviewed": (*action_log.VERDICTS, "any", "none"),
    }
    for key, allowed in choices.items():
        if params[key] and params[key] not in allowed:
            raise BadRequest(f"{key} must be one of {', '.join(allowed)}")
    filters = action_log.LogFilters(
        since=since,
        until=until,
        action=params["action"] or None,
        found=None if not params["found"] else params["found"] == "true",
        feedback=params["feedback"] or None,
        status=params["status"] or None,
        channel=params["channel"] or None,
        evaluator_version=params["evaluator"] or None,
        text=params["q"][:500] or None,
        reviewed=params["reviewed"] or None,
    )
    return filters, params


async def home(c: Console, request: Request) -> Response:
    return RedirectResponse(url("/activity"), status_code=303)


async def activity(c: Console, request: Request) -> Response:
    filters, params = log_filters(request)
    page_text = request.query_params.get("page", "1")
    if not page_text.isdigit() or len(page_text) > 12 or int(page_text) < 1:
        raise BadRequest("page must be a positive number")
    total = await c.call(review.count_logs, c.settings, filters)
    pages = max(1, math.ceil(total / PAGE_SIZE))
    page = min(int(page_text), pages)  # past the end: the last page
    records = await c.call(review.query_logs, c.settings, filters, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
    versions = await c.call(review.logged_evaluator_versions, c.settings)
    query = {k: v for k, v in params.items() if v}
    today = datetime.now(UTC).date()  # the dates are UTC, as the rows' times
    return c.render(
        request,
        "activity.html",
        {
            "records": records,
            "total": total,
            "page": page,
            "pages": pages,
            "params": params,
            "query": query,
            "versions": versions,
            "actions": action_log.ACTIONS,
            "statuses": action_log.STATUSES,
            "ranges": list(RANGES),
            # placeholders: a week back to today, examples that fit their boxes
            "since_example": (today - timedelta(days=7)).isoformat(),
            "until_example": today.isoformat(),
        },
    )


async def export(c: Console, request: Request) -> Response:
    kind = request.path_params["kind"]
    if kind not in ("csv", "jsonl"):
        raise BadRequest("export as .csv or .jsonl", 404)
    filters, _ = log_filters(request)
    records = await c.call(review.query_logs, c.settings, filters, limit=EXPORT_LIMIT)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    if kind == "csv":
        body, media = action_log.records_csv(records), "text/csv; charset=utf-8"
    else:
        body, media = action_log.records_jsonl(records), "application/x-ndjson"
    return PlainTextResponse(
        body,
        media_type=media,
        headers={"Content-Disposition": f'attachment; filename="policybot-actions-{stamp}.{kind}"'},
    )


async def record(c: Console, request: Request) -> Response:
    found = await c.call(review.find_record, c.settings, request.path_params["ref"])
    if found is None:
        raise BadRequest(f"no logged question {request.path_params['ref']!r}", 404)
    documents = await c.call(manage.list_documents, c.settings)
    reviews = await c.call(review.reviews_for, c.settings, found["id"])
    scores = sorted(found["scores"], key=lambda s: -float(s.get("score", 0.0) or 0.0))
    timings = {k: v for k, v in found["timings_ms"].items() if isinstance(v, (int, float))}
    notes = found["timings_ms"].get("notes") or [] if isinstance(found["timings_ms"], dict) else []
    return c.render(
        request,
        "record.html",
        {
            "r": found,
            "scores": scores,
            "timings": timings,
            "notes": notes,
            "documents": documents,
            "reviews": reviews,
            "thread_link": thread_link(c.settings, found),
            "axis": charts.score_axis(scores, found["thresholds"]["upper"], found["thresholds"]["lower"]),
            "timing_max": max(timings.values(), default=1) or 1,
        },
    )


async def record_json(c: Console, request: Request) -> Response:
    found = await c.call(review.find_record, c.settings, request.path_params["ref"])
    if found is None:
        return JSONResponse({"error": "no such logged question"}, status_code=404)
    return JSONResponse(found)


async def mark_review(c: Console, request: Request) -> Response:
    question_id = request.path_params["id"]
    verdict = c.form_value(request, "verdict")
    expected = c.form_value(request, "expected_document")
    if expected and not expected.isdigit():
        raise BadRequest("expected document must be a document id")
    await c.call(
        review.set_review,
        c.settings,
        question_id,
        session_of(request).user,
        verdict,
        int(expected) if expected else None,
        c.form_value(request, "note"),
    )
    return c.back(request, url(f"/activity/id:{question_id}"), f"review saved: {verdict}")


def routes(c: Console) -> list[tuple[Route, Access]]:
    return [
        c.route("/", home, ["GET"]),
        c.route("/activity", activity, ["GET"]),
        c.route("/activity.{kind:str}", export, ["GET"], access="data"),
        c.route("/activity/{ref:str}", record, ["GET"]),
        c.route("/activity/{id:int}/review", mark_review, ["POST"]),
        c.route("/api/records/{ref:str}", record_json, ["GET"], access="data"),
    ]
