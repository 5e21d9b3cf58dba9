"""The admin console: Starlette views over the same functions the CLI uses.

Mounted under `/admin` in HTTP mode (bot/http.py) and served alone by `policybot console`.
Every view is wrapped by `_view`: it loads the signed session, sends the signed-out to the
login page (pages) or answers 401 (data endpoints), refuses a POST without the session's
CSRF token (403), and writes the session cookie back when it changed.

Pages: activity (the action log) and one record with its review form, the health
dashboard, documents (upload, re-ingest, remove, access lists), fallback sources (add,
remove, test query) and evaluator versions (activate, train). Long work (ingestion,
training) is queued on the `ingest` Celery queue as a job whose progress the pages poll.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus, urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from application import jobs, manage, review
from application.uploads import check_size, checked_name, size_limit
from console import auth, charts
from core.config import Settings
from core.errors import UserError
from core.names import validate_collection
from core.urls import mask_query
from workers.tasks import MAX_TRAIN_MINUTES, ingest_job_task, train_evaluator_task

log = logging.getLogger(__name__)

PREFIX = "/admin"
HERE = Path(__file__).resolve().parent
PAGE_SIZE = 50
EXPORT_LIMIT = 100_000
MAX_UPLOAD_FILES = 10
# Request bodies are counted as they arrive and refused past these (the form parser is slow on big bodies).
LOGIN_BODY_MAX = 16 * 1024
FORM_BODY_MAX = 64 * 1024
RANGES = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30), "90d": timedelta(days=90)}

Handler = Callable[[Request], Awaitable[Response]]


class BadRequest(UserError):
    """Bad input from the browser: shown to the admin as it is, with this status."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def url(path: str = "", **query: Any) -> str:
    clean = {k: v for k, v in query.items() if v not in (None, "")}
    return PREFIX + path + (("?" + urlencode(clean)) if clean else "")


def thread_link(settings: Settings, record: dict[str, Any]) -> str | None:
    channel, ts = record.get("channel"), record.get("thread_ts")
    if not channel or not ts:
        return None
    if settings.slack_workspace_url:
        base = settings.slack_workspace_url.rstrip("/")
        return f"{base}/archives/{channel}/p{str(ts).replace('.', '')}"
    return f"https://slack.com/app_redirect?channel={channel}"


class BodyTooLarge(MultiPartException):
    """The body passed its limit (a MultiPartException, so the parser closes the files it had opened)."""

    def __init__(self) -> None:
        super().__init__("request body too large")


def counting_receive(receive: Any, limit: int) -> Any:
    """`receive` that raises BodyTooLarge once the request body passes `limit` bytes."""
    seen = 0

    async def wrapped() -> Any:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge()
        return message

    return wrapped


class Console:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.secret = auth.session_secret(settings)
        self.throttle = auth.LoginThrottle(settings)
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.globals.update(url=url, prefix=PREFIX)
        self.templates.env.filters["pct"] = lambda v: "-" if v is None else f"{v:.0%}"
        self.templates.env.filters["ms"] = lambda v: "-" if v is None else f"{v:,.0f} ms"
        self.templates.env.filters["mask_query"] = mask_query
        self.templates.env.filters["when"] = lambda v: (v or "")[:19].replace("T", " ")

    # ------------------------------------------------------------ plumbing

    def view(
        self, handler: Handler, *, data: bool = False, public: bool = False, body_limit: int = FORM_BODY_MAX
    ) -> Handler:
        async def endpoint(request: Request) -> Response:
            session = await self._session(request)
            request.state.session = session
            if not public and session.user is None:
                if data or request.method != "GET":
                    response: Response = JSONResponse({"error": "sign in first"}, status_code=401)
                else:
                    next_path = request.url.path + (("?" + request.url.query) if request.url.query else "")
                    response = RedirectResponse(url("/login", next=next_path), status_code=303)
                return self._finish(request, response)
            if any(isinstance(v, int) and not 0 < v < 2**31 for v in request.path_params.values()):
                return self._finish(request, self._error(request, "no such item", 404, data))
            if request.method == "POST":
                try:
                    form = await self._form(request, body_limit)
                except BadRequest as error:
                    return self._finish(request, self._error(request, str(error), error.status, data))
                request.state.form = form
                token = form.get("csrf_token") or request.headers.get("x-csrf-token")
                if not session.csrf_ok(str(token) if token else None):
                    await form.close()
                    return self._finish(
                        request,
                        self._error(request, "missing or wrong CSRF token: reload the page and try again", 403, data),
                    )
            try:
                response = await handler(request)
            except UserError as error:  # BadRequest and the domain errors; NotFound ones carry 404
                response = self._error(request, str(error), error.status, data)
            finally:
                if request.method == "POST":
                    await request.state.form.close()  # uploaded files spooled to disk
            return self._finish(request, response)

        return endpoint

    async def _session(self, request: Request) -> auth.Session:
        """The cookie's session, signed out if a logout since it was issued ended it."""
        session = auth.decode_session(request.cookies.get(auth.COOKIE_NAME), self.secret, self.settings)
        if session.user is not None:
            cutoff = await self._call(auth.sessions_valid_after, self.settings, session.user)
            if cutoff is not None and session.issued <= cutoff:
                return auth.Session(changed=True)
        return session

    def upload_body_limit(self) -> int:
        return int(self.settings.max_file_mb * 1024 * 1024) * MAX_UPLOAD_FILES + FORM_BODY_MAX

    async def _form(self, request: Request, limit: int) -> FormData:
        """The POSTed form, read only if it declares its length and stays within `limit` bytes as it arrives."""
        length = request.headers.get("content-length")
        if length is None or not length.isdigit():
            raise BadRequest("send the form with a Content-Length", 411)
        too_large = BadRequest(
            f"the request is too large (at most {limit // 1024:,} KB here; uploads: at most "
            f"{MAX_UPLOAD_FILES} files of {self.settings.max_file_mb:g} MB each, "
            "POLICYBOT_MAX_FILE_MB)",
            413,
        )
        if int(length) > limit:
            raise too_large
        counted = Request(request.scope, counting_receive(request.receive, limit))
        try:
            return await counted.form(max_files=MAX_UPLOAD_FILES, max_fields=200)
        except BodyTooLarge:
            raise too_large from None
        except Exception as error:  # malformed multipart, too many files
            if isinstance(error.__context__, BodyTooLarge):
                raise too_large from None
            raise BadRequest(f"could not read the form: {getattr(error, 'detail', error)}") from None

    def _finish(self, request: Request, response: Response) -> Response:
        session: auth.Session = request.state.session
        if session.changed:
            response.set_cookie(
                auth.COOKIE_NAME,
                auth.encode_session(session, self.secret),
                max_age=int(self.settings.console_session_hours * 3600),
                path=PREFIX,
                httponly=True,
                samesite="strict",
                secure=auth.secure_cookie(self.settings, request.url.scheme),
            )
        response.headers.setdefault("Cache-Control", "no-store")
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; "
            "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        )
        return response

    def _error(self, request: Request, message: str, status: int, data: bool) -> Response:
        if data or "application/json" in request.headers.get("accept", ""):
            return JSONResponse({"error": message}, status_code=status)
        return self.render(request, "error.html", {"message": message, "status": status}, status=status)

    def render(self, request: Request, template: str, context: dict[str, Any], status: int = 200) -> Response:
        session: auth.Session = request.state.session
        base = {"user": session.user, "csrf": session.csrf, "flash": session.pop_flash(), "path": request.url.path}
        return self.templates.TemplateResponse(request, template, base | context, status_code=status)

    def back(self, request: Request, path: str, message: str | None = None, level: str = "ok") -> Response:
        if message:
            request.state.session.add_flash(level, message)
        return RedirectResponse(path, status_code=303)

    def _form_value(self, request: Request, name: str, default: str = "") -> str:
        value = request.state.form.get(name, default)
        return value.strip() if isinstance(value, str) else default

    def _checked(self, request: Request, name: str) -> bool:
        """A checkbox: sent as "on" when ticked, left out otherwise."""
        return self._form_value(request, name) == "on"

    @staticmethod
    def _job_param(request: Request) -> str:
        """The `job` to watch: a job id (digits), or nothing."""
        job = request.query_params.get("job", "")
        if job and not (job.isdigit() and len(job) <= 10):
            raise BadRequest("job must be a job id (a number)")
        return job

    async def _call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await run_in_threadpool(function, *args, **kwargs)

    # ------------------------------------------------------------ sign-in

    async def login(self, request: Request) -> Response:
        session: auth.Session = request.state.session
        next_path = request.query_params.get("next", "")
        if not next_path.startswith(PREFIX + "/") or next_path.startswith("//"):
            next_path = url("/activity")
        if request.method == "GET":
            if session.user:
                return RedirectResponse(next_path, status_code=303)
            return self.render(
                request, "login.html", {"next": next_path, "configured": bool(self.settings.console_accounts)}
            )
        client = request.client.host if request.client else "unknown"
        configured = bool(self.settings.console_accounts)
        user = self._form_value(request, "username")[:100]
        password = request.state.form.get("password", "")
        account = auth.account_fingerprint(self.settings, self.secret, user)
        known_device = auth.is_known_device(request.cookies.get(auth.DEVICE_COOKIE_NAME), self.secret, account)
        try:
            stamp = await self._call(self.throttle.attempt, client, user, known_device)
        except auth.ThrottleUnavailable as error:
            log.error("console sign-in refused: the throttle's Redis cannot be reached (%s)", error)
            return self.render(
                request,
                "login.html",
                {"next": next_path, "configured": configured, "error": "sign-in is unavailable; try again in a moment"},
                503,
            )
        if stamp is None:
            return self.render(
                request,
                "login.html",
                {"next": next_path, "configured": configured, "error": "too many failed sign-ins; wait a few minutes"},
                429,
            )
        try:
            ok = await self.throttle.check(self.settings, user, str(password))
        except auth.LoginBusy:
            return self.render(
                request,
                "login.html",
                {"next": next_path, "configured": configured, "error": "sign-in is busy; try again in a moment"},
                503,
            )
        if not ok:
            log.warning("console sign-in failed (user #%s) from %s", auth.user_tag(user), client)
            return self.render(
                request,
                "login.html",
                {"next": next_path, "configured": configured, "error": "wrong user name or password"},
                401,
            )
        await self._call(self.throttle.succeeded, client, user, stamp)
        session.sign_in(user, account or "")
        log.info("console sign-in: %s from %s", user, client)
        if auth.is_outdated(self.settings.console_accounts[user], self.settings):
            log.warning("console user %s signs in with a password hash cheaper than new ones get", user)
            session.add_flash(
                "error",
                "Your password hash is of an older, cheaper kind: make a new one with "
                "`policybot console hash-password` and put it in POLICYBOT_CONSOLE_USERS.",
            )
        response = RedirectResponse(next_path, status_code=303)
        response.set_cookie(
            auth.DEVICE_COOKIE_NAME,
            auth.encode_device(account or "", self.secret),
            max_age=auth.DEVICE_COOKIE_DAYS * 86400,
            path=PREFIX,
            httponly=True,
            samesite="strict",
            secure=auth.secure_cookie(self.settings, request.url.scheme),
        )
        return response

    async def logout(self, request: Request) -> Response:
        await self._call(auth.end_sessions, self.settings, request.state.session.user)
        request.state.session.sign_out()
        response = RedirectResponse(url("/login"), status_code=303)
        response.delete_cookie(auth.DEVICE_COOKIE_NAME, path=PREFIX)  # a shared browser is nobody's device
        return response

    async def home(self, request: Request) -> Response:
        return RedirectResponse(url("/activity"), status_code=303)

    # ------------------------------------------------------------ activity

    def _filters(self, request: Request) -> tuple[review.LogFilters, dict[str, str]]:
        params = {
            key: request.query_params.get(key, "").strip()
            for key in (
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
        }
        now = datetime.now(UTC)
        since = until = None
        if params["range"] in RANGES:
            since = now - RANGES[params["range"]]
        elif params["range"] not in ("", "all", "custom"):
            raise BadRequest(f"unknown time range {params['range']!r}")
        try:
            if params["since"]:
                since = review.parse_since(params["since"])
            if params["until"]:
                until = review.parse_since(params["until"])
                if re.fullmatch(r"\d{4}-\d{2}-\d{2}", params["until"]):
                    until += timedelta(days=1)  # a date means up to the end of that day
        except ValueError as error:
            raise BadRequest(str(error).replace("--since ", "")) from None
        choices = {
            "action": review.ACTIONS,
            "found": ("true", "false"),
            "feedback": review.FEEDBACK_CHOICES,
            "status": review.STATUSES,
            "reviewed": (*review.VERDICTS, "any", "none"),
        }
        for key, allowed in choices.items():
            if params[key] and params[key] not in allowed:
                raise BadRequest(f"{key} must be one of {', '.join(allowed)}")
        filters = review.LogFilters(
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

    async def activity(self, request: Request) -> Response:
        filters, params = self._filters(request)
        page_text = request.query_params.get("page", "1")
        if not page_text.isdigit() or len(page_text) > 12 or int(page_text) < 1:
            raise BadRequest("page must be a positive number")
        total = await self._call(review.count_logs, self.settings, filters)
        pages = max(1, math.ceil(total / PAGE_SIZE))
        page = min(int(page_text), pages)  # past the end: the last page
        records = await self._call(
            review.query_logs, self.settings, filters, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE
        )
        versions = await self._call(review.logged_evaluator_versions, self.settings)
        query = {k: v for k, v in params.items() if v}
        return self.render(
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
                "actions": review.ACTIONS,
                "ranges": list(RANGES),
            },
        )

    async def export(self, request: Request) -> Response:
        kind = request.path_params["kind"]
        if kind not in ("csv", "jsonl"):
            raise BadRequest("export as .csv or .jsonl", 404)
        filters, _ = self._filters(request)
        records = await self._call(review.query_logs, self.settings, filters, limit=EXPORT_LIMIT)
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        if kind == "csv":
            body, media = review.records_csv(records), "text/csv; charset=utf-8"
        else:
            body, media = review.records_jsonl(records), "application/x-ndjson"
        return PlainTextResponse(
            body,
            media_type=media,
            headers={"Content-Disposition": f'attachment; filename="policybot-actions-{stamp}.{kind}"'},
        )

    async def record(self, request: Request) -> Response:
        record = await self._call(review.find_record, self.settings, request.path_params["ref"])
        if record is None:
            raise BadRequest(f"no logged question {request.path_params['ref']!r}", 404)
        documents = await self._call(manage.list_documents, self.settings)
        reviews = await self._call(review.reviews_for, self.settings, record["id"])
        scores = sorted(record["scores"], key=lambda s: -float(s.get("score", 0.0) or 0.0))
        timings = {k: v for k, v in record["timings_ms"].items() if isinstance(v, (int, float))}
        notes = record["timings_ms"].get("notes") or [] if isinstance(record["timings_ms"], dict) else []
        return self.render(
            request,
            "record.html",
            {
                "r": record,
                "scores": scores,
                "timings": timings,
                "notes": notes,
                "documents": documents,
                "reviews": reviews,
                "thread_link": thread_link(self.settings, record),
                "axis": charts.score_axis(scores, record["thresholds"]["upper"], record["thresholds"]["lower"]),
                "timing_max": max(timings.values(), default=1) or 1,
            },
        )

    async def record_json(self, request: Request) -> Response:
        record = await self._call(review.find_record, self.settings, request.path_params["ref"])
        if record is None:
            return JSONResponse({"error": "no such logged question"}, status_code=404)
        return JSONResponse(record)

    async def mark_review(self, request: Request) -> Response:
        question_id = request.path_params["id"]
        verdict = self._form_value(request, "verdict")
        expected = self._form_value(request, "expected_document")
        if expected and not expected.isdigit():
            raise BadRequest("expected document must be a document id")
        await self._call(
            review.set_review,
            self.settings,
            question_id,
            request.state.session.user,
            verdict,
            int(expected) if expected else None,
            self._form_value(request, "note"),
        )
        return self.back(request, url(f"/activity/id:{question_id}"), f"review saved: {verdict}")

    # ------------------------------------------------------------ dashboard

    @staticmethod
    def _days(request: Request) -> int:
        days_text = request.query_params.get("days", "30")
        if not days_text.isdigit() or not 1 <= int(days_text) <= 366:
            raise BadRequest("days must be between 1 and 366")
        return int(days_text)

    async def dashboard(self, request: Request) -> Response:
        context = await self._call(self._dashboard_data, self._days(request))
        return self.render(request, "dashboard.html", context)

    def _dashboard_data(self, days: int) -> dict[str, Any]:
        report = review.daily_stats(self.settings, days)
        by_day = {row["day"]: row for row in report["per_day"]}
        start = datetime.fromisoformat(report["since"]).date()
        labels = [(start + timedelta(days=i)).isoformat() for i in range(days)]
        rows = [by_day.get(day) for day in labels]
        stacked = {
            name: [(row or {}).get("actions", {}).get(name, 0) if row else 0 for row in rows] for name in review.ACTIONS
        }
        stacked["failed"] = [row["failed"] if row else 0 for row in rows]
        since = datetime.now(UTC) - timedelta(days=days)
        miss_documents, miss_topics = review.misses(self.settings, since)
        return {
            "days": days,
            "total": report["total"],
            "alert": review.incorrect_alert(self.settings, self.settings.alert_margin),
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

    async def stats_json(self, request: Request) -> Response:
        report = await self._call(review.daily_stats, self.settings, self._days(request))
        report["alert"] = await self._call(review.incorrect_alert, self.settings, self.settings.alert_margin)
        return JSONResponse(report)

    # ------------------------------------------------------------ documents

    async def documents(self, request: Request) -> Response:
        documents = await self._call(manage.list_documents, self.settings)
        collections: dict[str, list[Any]] = {}
        for document in documents:
            collections.setdefault(document.collection, []).append(document)
        recent = await self._call(jobs.recent_jobs, self.settings, "ingest", 5)
        fallback = {
            row.collection for row in await self._call(manage.list_fallback_sources, self.settings) if row.collection
        }
        return self.render(
            request,
            "documents.html",
            {
                "collections": collections,
                "jobs": recent,
                "fallback_collections": fallback,
                "default_collection": self.settings.default_collection,
                "max_mb": self.settings.max_file_mb,
                "watch": self._job_param(request),
            },
        )

    async def upload(self, request: Request) -> Response:
        form = request.state.form
        collection = self._form_value(request, "collection") or self.settings.default_collection
        validate_collection(collection)  # InvalidName and ManageError are UserErrors: view answers 400
        channels = manage.parse_channels(self._form_value(request, "channels"))
        uploads = [item for item in form.getlist("files") if isinstance(item, UploadFile) and item.filename]
        if not uploads:
            raise BadRequest("choose at least one file to upload")
        checked: list[tuple[str, UploadFile]] = []
        for item in uploads:  # every file is checked before any is written (UploadRefused: 415 or 413)
            name = checked_name(item.filename or "upload")
            if any(name == seen for seen, _ in checked):
                raise BadRequest(f"{name}: chosen twice; upload each file once")
            size = item.size if item.size is not None else len(await item.read(size_limit(self.settings) + 1))
            check_size(self.settings, name, size)
            if not size:
                raise BadRequest(f"{name}: the file is empty")
            checked.append((name, item))
        folder = self.settings.home / "uploads" / collection
        folder.mkdir(parents=True, exist_ok=True)
        saved: list[str] = []
        for name, item in checked:
            await item.seek(0)
            partial = folder / f".{name}.part"
            with partial.open("wb") as handle:
                while chunk := await item.read(1024 * 1024):
                    await self._call(handle.write, chunk)
            partial.replace(folder / name)
            saved.append(str(folder / name))
        job_id = await self._queue_ingest(request, saved, collection, channels or None)
        return self.back(
            request,
            url("/documents", job=job_id),
            f"{len(saved)} file(s) queued for ingestion into {collection} (job {job_id})",
        )

    async def _queue_ingest(
        self, request: Request, paths: list[str], collection: str, channels: list[str] | None
    ) -> int:
        params = {"paths": paths, "collection": collection, "channels": channels}
        return await self._enqueue(request, "ingest", params, lambda job_id: ingest_job_task.delay(job_id))

    async def _enqueue(self, request: Request, kind: str, params: dict[str, Any], send: Callable[[int], Any]) -> int:
        """Record a job, then queue its task on the ingest queue; a queue that cannot be reached fails the job."""
        job_id = await self._call(jobs.create_job, self.settings, kind, params, request.state.session.user)
        try:
            await self._call(send, job_id)
        except Exception as error:
            await self._call(jobs.fail_job, self.settings, job_id, f"could not queue the job: {error}")
            raise BadRequest(
                f"could not queue the {kind} job (is Redis running?): {type(error).__name__}", 503
            ) from None
        return job_id

    async def _document(self, request: Request):
        document = await self._call(manage.get_document, self.settings, request.path_params["id"])
        if document is None:
            raise BadRequest(f"no document {request.path_params['id']}", 404)
        return document

    async def reingest(self, request: Request) -> Response:
        document = await self._document(request)
        if not Path(document.source).is_file():
            raise BadRequest(f"{document.name}: its source file {document.source} is gone; upload it again", 409)
        # Passing the access list re-processes even an unchanged file (and keeps who may see it).
        job_id = await self._queue_ingest(
            request, [document.source], document.collection, list(document.access_channels or [])
        )
        return self.back(request, url("/documents", job=job_id), f"re-ingesting {document.name} (job {job_id})")

    async def remove(self, request: Request) -> Response:
        from ingestion.ingest import remove_document  # LlamaIndex: only for the pages that ingest

        document = await self._document(request)
        await self._call(remove_document, self.settings, document.id)
        return self.back(request, url("/documents"), f"removed {document.name} from {document.collection}")

    async def access(self, request: Request) -> Response:
        document = await self._document(request)
        channels = manage.parse_channels(self._form_value(request, "channels"))
        await self._call(manage.set_document_access, self.settings, document.id, channels)
        who = ", ".join(channels) if channels else "everyone"
        return self.back(request, url("/documents"), f"{document.name}: visible to {who}")

    async def job(self, request: Request) -> Response:
        found = await self._call(jobs.get_job, self.settings, request.path_params["id"])
        if found is None:
            return JSONResponse({"error": "no such job"}, status_code=404)
        return JSONResponse(found)

    # ------------------------------------------------------------ fallback sources

    async def sources(self, request: Request, test: dict[str, Any] | None = None) -> Response:
        rows = await self._call(manage.list_fallback_sources, self.settings)
        documents = await self._call(manage.list_documents, self.settings)
        return self.render(
            request,
            "sources.html",
            {"sources": rows, "collections": sorted({d.collection for d in documents}), "test": test},
        )

    async def sources_page(self, request: Request) -> Response:
        return await self.sources(request)

    async def add_source(self, request: Request) -> Response:
        kind = self._form_value(request, "kind")
        if kind not in ("collection", "http"):
            raise BadRequest("kind must be collection or http")
        try:
            timeout = float(self._form_value(request, "timeout") or 3.0)
            max_bytes = int(self._form_value(request, "max_bytes") or 1_000_000)
        except ValueError:
            raise BadRequest("timeout and max bytes must be numbers") from None
        name = self._form_value(request, "name")
        await self._call(
            manage.add_fallback_source,
            self.settings,
            name,
            collection=self._form_value(request, "collection") if kind == "collection" else None,
            url=self._form_value(request, "url") if kind == "http" else None,
            field_map=self._form_value(request, "field_map") or None,
            query_template=self._form_value(request, "query_template") or None,
            allowed_hosts=self._form_value(request, "allowed_hosts") or None,
            allow_private=self._checked(request, "allow_private"),
            timeout=timeout,
            max_bytes=max_bytes,
            open_web=self._checked(request, "open_web"),
        )
        return self.back(request, url("/sources"), f"allow-listed {name!r}")

    async def remove_source(self, request: Request) -> Response:
        name = self._form_value(request, "name")
        await self._call(manage.remove_fallback_source, self.settings, name)
        return self.back(request, url("/sources"), f"removed {name!r}")

    async def test_source(self, request: Request) -> Response:
        from application.runtime import fallback_preview  # torch and LlamaIndex: only for a preview

        question = self._form_value(request, "question")
        if not question:
            raise BadRequest("type a question to test")
        names = [n.strip() for n in self._form_value(request, "asker_names").split(",") if n.strip()]
        plan = await self._call(fallback_preview, self.settings, question[: self.settings.max_question_chars], names)
        sent = []
        for source in plan.sources:
            request_url = (
                mask_query(
                    source.request_url(plan.keywords, self.settings.fallback_limit),
                    keep=(quote_plus(plan.keywords), str(self.settings.fallback_limit)),
                )
                if hasattr(source, "request_url") and plan.keywords
                else None
            )
            sent.append({"name": source.name, "kind": source.kind, "request": request_url})
        test = {
            "question": question,
            "asker_names": ", ".join(names),
            "question_class": plan.question_class,
            "redacted": plan.redacted,
            "keywords": plan.keywords,
            "sent": sent,
        }
        return await self.sources(request, test)

    # ------------------------------------------------------------ evaluators

    async def evaluators(self, request: Request) -> Response:
        from application import evaluators  # torch: only for the evaluator pages

        versions = await self._call(evaluators.list_versions, self.settings)
        recent = await self._call(jobs.recent_jobs, self.settings, "train", 5)
        return self.render(
            request,
            "evaluators.html",
            {
                "versions": versions,
                "jobs": recent,
                "train_minutes": self.settings.train_minutes,
                "watch": self._job_param(request),
            },
        )

    async def activate(self, request: Request) -> Response:
        from application import evaluators  # torch: only for the evaluator pages

        version = self._form_value(request, "version")
        await self._call(evaluators.activate_version, self.settings, version)
        return self.back(
            request,
            url("/evaluators"),
            f"active: {version}. Restart the answer workers to use it (`policybot worker`).",
        )

    async def recalibrate(self, request: Request) -> Response:
        """A version's upper/lower thresholds from labelled questions: a preview, or stored with "apply"."""
        from application import calibration  # torch: only for the evaluator pages

        from_reviews, from_feedback = self._checked(request, "from_reviews"), self._checked(request, "from_feedback")
        if not (from_reviews or from_feedback):
            raise BadRequest("tick reviews, 👍/👎 votes or both: the labels to calibrate on")
        sources = calibration.LabelSources(from_reviews, from_feedback)
        apply = self._form_value(request, "apply") == "yes"
        version = self._form_value(request, "version") or None
        proposal = await self._call(calibration.propose_from_reviews, self.settings, version, sources=sources)
        notes = await self._call(calibration.apply_proposal, self.settings, proposal) if apply else []
        change = ", ".join(
            f"{key} {proposal.current[key]:.3f} → {proposal.proposed[key]:.3f}" for key in ("upper", "lower")
        )
        counts = f"{proposal.n_present} answer-present and {proposal.n_absent} answer-absent questions"
        if apply:
            message = (
                f"{proposal.version}: stored {change} (from {counts}). "
                "Restart the answer workers to use them." + "".join(f" {note}" for note in notes)
            )
        else:
            message = f"{proposal.version}: would set {change} (from {counts}). Preview only: nothing changed."
        return self.back(request, url("/evaluators"), message)

    async def train(self, request: Request) -> Response:
        activate = self._form_value(request, "activate", "if_better")
        if activate not in ("if_better", "always", "never"):
            raise BadRequest("activate must be if_better, always or never")
        try:
            minutes = float(self._form_value(request, "minutes") or self.settings.train_minutes)
        except ValueError:
            raise BadRequest("minutes must be a number") from None
        if not 0 < minutes <= MAX_TRAIN_MINUTES:
            raise BadRequest(
                f"minutes must be more than 0 and at most {MAX_TRAIN_MINUTES:g} (the training task's time limit)"
            )
        with_reviews, with_feedback = self._checked(request, "with_reviews"), self._checked(request, "with_feedback")
        params = {
            "minutes": minutes,
            "activate": activate,
            "with_reviews": with_reviews,
            "with_feedback": with_feedback,
        }
        job_id = await self._enqueue(
            request,
            "train",
            params,
            lambda job_id: train_evaluator_task.delay(minutes, activate, job_id, with_reviews, with_feedback),
        )
        return self.back(request, url("/evaluators", job=job_id), f"training queued (job {job_id})")


def create_console_app(settings: Settings) -> Starlette:
    """The console as an ASGI app whose routes start at `/` (mount it at PREFIX)."""
    c = Console(settings)
    page, data = c.view, (lambda handler: c.view(handler, data=True))
    routes = [
        Route("/", page(c.home), methods=["GET"]),
        Route("/login", c.view(c.login, public=True, body_limit=LOGIN_BODY_MAX), methods=["GET", "POST"], name="login"),
        Route("/logout", page(c.logout), methods=["POST"]),
        Route("/activity", page(c.activity), methods=["GET"]),
        Route("/activity.{kind:str}", data(c.export), methods=["GET"]),
        Route("/activity/{ref:str}", page(c.record), methods=["GET"]),
        Route("/activity/{id:int}/review", page(c.mark_review), methods=["POST"]),
        Route("/dashboard", page(c.dashboard), methods=["GET"]),
        Route("/documents", page(c.documents), methods=["GET"]),
        Route("/documents/upload", c.view(c.upload, body_limit=c.upload_body_limit()), methods=["POST"]),
        Route("/documents/{id:int}/reingest", page(c.reingest), methods=["POST"]),
        Route("/documents/{id:int}/remove", page(c.remove), methods=["POST"]),
        Route("/documents/{id:int}/access", page(c.access), methods=["POST"]),
        Route("/sources", page(c.sources_page), methods=["GET"]),
        Route("/sources/add", page(c.add_source), methods=["POST"]),
        Route("/sources/remove", page(c.remove_source), methods=["POST"]),
        Route("/sources/test", page(c.test_source), methods=["POST"]),
        Route("/evaluators", page(c.evaluators), methods=["GET"]),
        Route("/evaluators/activate", page(c.activate), methods=["POST"]),
        Route("/evaluators/train", page(c.train), methods=["POST"]),
        Route("/evaluators/recalibrate", page(c.recalibrate), methods=["POST"]),
        Route("/api/records/{ref:str}", data(c.record_json), methods=["GET"]),
        Route("/api/jobs/{id:int}", data(c.job), methods=["GET"]),
        Route("/api/stats", data(c.stats_json), methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    return Starlette(routes=routes)


def console_routes(settings: Settings) -> list[Mount]:
    """Routes that serve the console under PREFIX (for the bot's HTTP app or a console of its own)."""
    return [Mount(PREFIX, app=create_console_app(settings))]


def create_standalone_app(settings: Settings) -> Starlette:
    """`policybot console`: the console at PREFIX, and `/` sending people there."""

    async def root(_: Request) -> Response:
        return RedirectResponse(url("/"), status_code=303)

    async def health(_: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/", root), Route("/healthz", health), *console_routes(settings)])


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8080) -> None:
    import uvicorn

    uvicorn.run(
        create_standalone_app(settings), host=host, port=port, log_level="info", access_log=False, proxy_headers=True
    )


__all__ = ["create_console_app", "console_routes", "create_standalone_app", "serve"]
