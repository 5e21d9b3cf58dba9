"""The admin console: Starlette pages over the same functions the CLI uses.

Mounted under `/admin` in HTTP mode (bot/http.py) and served alone by `policybot console`.
The sign-in is middleware (console/signin.py): it loads the signed session, sends the
signed-out to the login page (pages) or answers 401 (data endpoints), and writes the session
cookie back when it changed. Each page (console/web.py: Console.view) refuses a POST without
the session's CSRF token (403).

Pages, one module each in console/pages/: activity (the action log) and one record with its
review form, the health dashboard, documents (upload, re-ingest, remove, access lists),
fallback sources (add, remove, test query) and evaluator versions (activate, train). Long
work (ingestion, training) is queued on the `ingest` Celery queue as a job whose progress the
pages poll (console/pages/jobs.py).
"""

from __future__ import annotations

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from console.pages import activity, dashboard, documents, evaluators, jobs, login, sources
from console.signin import SignInMiddleware
from console.web import HERE, PREFIX, Console, url
from core.config import Settings


def create_console_app(settings: Settings) -> Starlette:
    """The console as an ASGI app whose routes start at `/` (mount it at PREFIX)."""
    console = Console(settings)
    guarded = [
        *login.routes(console),
        *activity.routes(console),
        *dashboard.routes(console),
        *documents.routes(console),
        *sources.routes(console),
        *evaluators.routes(console),
        *jobs.routes(console),
    ]
    routes: list[BaseRoute] = [route for route, _ in guarded]
    routes.append(Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static"))
    return Starlette(routes=routes, middleware=[Middleware(SignInMiddleware, console=console, routes=guarded)])


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
    uvicorn.run(
        create_standalone_app(settings), host=host, port=port, log_level="info", access_log=False, proxy_headers=True
    )


__all__ = ["PREFIX", "create_console_app", "console_routes", "create_standalone_app", "serve"]
