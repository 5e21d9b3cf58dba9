"""The console's sign-in check, as ASGI middleware around its routes.

For every request to one of the console's routes it loads the signed session cookie
(console/auth.py), treating it as signed out when a logout since it was issued ended it, and
puts it on `request.state.session`. A signed-out request to a route that is not public is
answered here, before any page runs: a GET page sends to the login page, anything else gets
401. On the way out it writes the session cookie back when the session changed, and sets the
security headers. Static files and URLs that match no route pass through untouched.

Pure ASGI rather than Starlette's BaseHTTPMiddleware, as Starlette's docs advise: the
response's headers are amended as it starts, and the body streams through as it is.
"""

from __future__ import annotations

import http.cookies
from collections.abc import Sequence

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from console import auth
from console.web import PREFIX, Access, Console, url

SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
}


def refusal(access: Access, request: Request, signed_in: bool) -> Response | None:
    """The answer to a request that may not reach its route (None: it may)."""
    if signed_in or access == "public":
        return None
    if access == "data" or request.method != "GET":
        return JSONResponse({"error": "sign in first"}, status_code=401)
    next_path = request.url.path + (("?" + request.url.query) if request.url.query else "")
    return RedirectResponse(url("/login", next=next_path), status_code=303)


def session_cookie(session: auth.Session, console: Console, scheme: str) -> str:
    """The Set-Cookie value that stores the session: signed, HttpOnly, SameSite=Strict, path PREFIX."""
    cookie: http.cookies.SimpleCookie = http.cookies.SimpleCookie()
    cookie[auth.COOKIE_NAME] = auth.encode_session(session, console.secret)
    morsel = cookie[auth.COOKIE_NAME]
    morsel["max-age"] = int(console.settings.console_session_hours * 3600)
    morsel["path"] = PREFIX
    if auth.secure_cookie(console.settings, scheme):
        morsel["secure"] = True
    morsel["httponly"] = True
    morsel["samesite"] = "strict"
    return cookie.output(header="").strip()


class SignInMiddleware:
    """Loads the session, refuses the signed out, and finishes every response of `routes`."""

    def __init__(self, app: ASGIApp, *, console: Console, routes: Sequence[tuple[Route, Access]]) -> None:
        self.app = app
        self.console = console
        self.routes = routes

    def _access(self, scope: Scope) -> Access | None:
        """Who may reach the route this request is for; None when it is for none of `routes`."""
        for route, access in self.routes:
            match, _ = route.matches(scope)
            if match == Match.FULL:
                return access
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        access = self._access(scope) if scope["type"] == "http" else None
        if access is None:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        session = await self._session(request)
        request.state.session = session

        async def finish(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if session.changed:
                    headers.append("set-cookie", session_cookie(session, self.console, request.url.scheme))
                headers.setdefault("Cache-Control", "no-store")
                headers.update(SECURITY_HEADERS)
            await send(message)

        refused = refusal(access, request, session.user is not None)
        if refused is not None:
            await refused(scope, receive, finish)
            return
        await self.app(scope, receive, finish)

    async def _session(self, request: Request) -> auth.Session:
        """The cookie's session, signed out if a logout since it was issued ended it."""
        console = self.console
        session = auth.decode_session(request.cookies.get(auth.COOKIE_NAME), console.secret, console.settings)
        if session.user is not None:
            cutoff = await console.call(auth.sessions_valid_after, console.settings, session.user)
            if cutoff is not None and session.issued <= cutoff:
                return auth.Session(changed=True)
        return session
