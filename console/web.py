"""What every console page shares: the URL prefix, the templates, reading a POSTed form
within its size limit and checking its CSRF token, and answering bad input with its status.

The sign-in itself (the session, who is signed in, the cookie and the security headers) is
middleware: console/signin.py. The pages are in console/pages/, wired in console/app.py.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from console import auth
from core.config import Settings
from core.errors import UserError
from core.urls import mask_query
from crag.text import reader_text

PREFIX = "/admin"
HERE = Path(__file__).resolve().parent
MAX_UPLOAD_FILES = 10
# Request bodies are counted as they arrive and refused past these (the form parser is slow on big bodies).
LOGIN_BODY_MAX = 16 * 1024
FORM_BODY_MAX = 64 * 1024

# Who may reach a route (console/signin.py): "page" and "data" need a signed-in user; signed
# out, a GET page sends to the login page and the rest answer 401. "public": the login page.
Access = Literal["page", "data", "public"]
Page = Callable[["Console", Request], Awaitable[Response]]


class BadRequest(UserError):
    """Bad input from the browser: shown to the admin as it is, with this status."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def url(path: str = "", **query: Any) -> str:
    clean = {k: v for k, v in query.items() if v not in (None, "")}
    return PREFIX + path + (("?" + urlencode(clean)) if clean else "")


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


def session_of(request: Request) -> auth.Session:
    """The session console/signin.py loaded for this request."""
    session: auth.Session = request.state.session
    return session


class Console:
    """The settings, keys and templates the pages share, and the steps every page takes."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.secret = auth.session_secret(settings)
        self.throttle = auth.LoginThrottle(settings)
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.globals.update(url=url, prefix=PREFIX)
        self.templates.env.filters["pct"] = lambda v: "-" if v is None else f"{v:.0%}"
        self.templates.env.filters["ms"] = lambda v: "-" if v is None else f"{v:,.0f} ms"
        self.templates.env.filters["mask_query"] = mask_query
        self.templates.env.filters["plain"] = reader_text  # a Markdown link as its text
        self.templates.env.filters["when"] = lambda v: (v or "")[:19].replace("T", " ")

    def route(
        self, path: str, page: Page, methods: list[str], access: Access = "page", body_limit: int = FORM_BODY_MAX
    ) -> tuple[Route, Access]:
        """A route to `page`, with who may reach it (checked by console/signin.py before the page runs)."""
        return Route(path, self.view(page, data=access == "data", body_limit=body_limit), methods=methods), access

    def view(self, page: Page, *, data: bool = False, body_limit: int = FORM_BODY_MAX) -> Callable[..., Any]:
        """The endpoint running `page` for a signed-in request: an ID out of range is not found, a
        POST's form is read within `body_limit` and refused without the session's CSRF token (403),
        and a UserError is shown with its status."""

        async def endpoint(request: Request) -> Response:
            if any(isinstance(v, int) and not 0 < v < 2**31 for v in request.path_params.values()):
                return self.error(request, "no such item", 404, data)
            if request.method == "POST":
                try:
                    form = await self._form(request, body_limit)
                except BadRequest as error:
                    return self.error(request, str(error), error.status, data)
                request.state.form = form
                token = form.get("csrf_token") or request.headers.get("x-csrf-token")
                if not session_of(request).csrf_ok(str(token) if token else None):
                    await form.close()
                    return self.error(request, "missing or wrong CSRF token: reload the page and try again", 403, data)
            try:
                return await page(self, request)
            except UserError as error:  # BadRequest and the domain errors; NotFound ones carry 404
                return self.error(request, str(error), error.status, data)
            finally:
                if request.method == "POST":
                    await request.state.form.close()  # uploaded files spooled to disk

        return endpoint

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

    def error(self, request: Request, message: str, status: int, data: bool) -> Response:
        if data or "application/json" in request.headers.get("accept", ""):
            return JSONResponse({"error": message}, status_code=status)
        return self.render(request, "error.html", {"message": message, "status": status}, status=status)

    def render(self, request: Request, template: str, context: dict[str, Any], status: int = 200) -> Response:
        session = session_of(request)
        base = {"user": session.user, "csrf": session.csrf, "flash": session.pop_flash(), "path": request.url.path}
        return self.templates.TemplateResponse(request, template, base | context, status_code=status)

    def back(self, request: Request, path: str, message: str | None = None, level: str = "ok") -> Response:
        if message:
            session_of(request).add_flash(level, message)
        return RedirectResponse(path, status_code=303)

    def form_value(self, request: Request, name: str, default: str = "") -> str:
        value = request.state.form.get(name, default)
        return value.strip() if isinstance(value, str) else default

    def checked(self, request: Request, name: str) -> bool:
        """A checkbox: sent as "on" when ticked, left out otherwise."""
        return self.form_value(request, name) == "on"

    async def call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await run_in_threadpool(function, *args, **kwargs)
