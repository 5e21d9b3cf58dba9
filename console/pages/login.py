"""Signing in and out: the login form, checked against POLICYBOT_CONSOLE_USERS through the
sign-in throttle (console/auth.py), and the logout that ends the user's sessions everywhere."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from console import auth
from console.web import LOGIN_BODY_MAX, PREFIX, Access, Console, session_of, url

log = logging.getLogger(__name__)


async def login(c: Console, request: Request) -> Response:
    session = session_of(request)
    next_path = request.query_params.get("next", "")
    if not next_path.startswith(PREFIX + "/") or next_path.startswith("//"):
        next_path = url("/activity")
    if request.method == "GET":
        if session.user:
            return RedirectResponse(next_path, status_code=303)
        return c.render(request, "login.html", {"next": next_path, "configured": bool(c.settings.console_accounts)})
    client = request.client.host if request.client else "unknown"
    configured = bool(c.settings.console_accounts)
    user = c.form_value(request, "username")[:100]
    password = request.state.form.get("password", "")
    account = auth.account_fingerprint(c.settings, c.secret, user)
    known_device = auth.is_known_device(request.cookies.get(auth.DEVICE_COOKIE_NAME), c.secret, account)

    def refused(error: str, status: int) -> Response:
        return c.render(request, "login.html", {"next": next_path, "configured": configured, "error": error}, status)

    try:
        stamp = await c.call(c.throttle.attempt, client, user, known_device)
    except auth.ThrottleUnavailable as error:
        log.error("console sign-in refused: the throttle's Redis cannot be reached (%s)", error)
        return refused("sign-in is unavailable; try again in a moment", 503)
    if stamp is None:
        return refused("too many failed sign-ins; wait a few minutes", 429)
    try:
        ok = await c.throttle.check(c.settings, user, str(password))
    except auth.LoginBusy:
        return refused("sign-in is busy; try again in a moment", 503)
    if not ok:
        log.warning("console sign-in failed (user #%s) from %s", auth.user_tag(user), client)
        return refused("wrong user name or password", 401)
    await c.call(c.throttle.succeeded, client, user, stamp)
    session.sign_in(user, account or "")
    log.info("console sign-in: %s from %s", user, client)
    if auth.is_outdated(c.settings.console_accounts[user], c.settings):
        log.warning("console user %s signs in with a password hash cheaper than new ones get", user)
        session.add_flash(
            "error",
            "Your password hash is of an older, cheaper kind: make a new one with "
            "`policybot console hash-password` and put it in POLICYBOT_CONSOLE_USERS.",
        )
    response = RedirectResponse(next_path, status_code=303)
    response.set_cookie(
        auth.DEVICE_COOKIE_NAME,
        auth.encode_device(account or "", c.secret),
        max_age=auth.DEVICE_COOKIE_DAYS * 86400,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=auth.secure_cookie(c.settings, request.url.scheme),
    )
    return response


async def logout(c: Console, request: Request) -> Response:
    session = session_of(request)
    await c.call(auth.end_sessions, c.settings, session.user)
    session.sign_out()
    response = RedirectResponse(url("/login"), status_code=303)
    response.delete_cookie(auth.DEVICE_COOKIE_NAME, path=PREFIX)  # a shared browser is nobody's device
    return response


def routes(c: Console) -> list[tuple[Route, Access]]:
    return [
        c.route("/login", login, ["GET", "POST"], access="public", body_limit=LOGIN_BODY_MAX),
        c.route("/logout", logout, ["POST"]),
    ]
