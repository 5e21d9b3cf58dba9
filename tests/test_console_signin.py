"""The console's sign-in middleware (console/signin.py) without any service: a signed-out
request never reaches a page, and every console response carries the security headers."""

from __future__ import annotations

import pytest
from pydantic import SecretStr
from starlette.requests import Request
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from console.app import create_console_app, create_standalone_app
from console.auth import COOKIE_NAME
from console.signin import SECURITY_HEADERS, refusal
from core.config import Settings

SECRET = "unit-console-secret-" + "y" * 20


@pytest.fixture
def offline_settings(tmp_path) -> Settings:
    """Console settings for a signed-out browser: nothing here reaches PostgreSQL or Redis."""
    return Settings().model_copy(update={"console_secret": SecretStr(SECRET), "home": tmp_path})


def _request(method: str, path: str, query: str = "") -> Request:
    scope = {"type": "http", "method": method, "path": path, "query_string": query.encode(), "headers": []}
    return Request(scope)


def test_refusal_lets_the_signed_in_and_the_public_through_and_sends_others_away() -> None:
    assert refusal("page", _request("GET", "/admin/activity"), signed_in=True) is None
    assert refusal("public", _request("POST", "/admin/login"), signed_in=False) is None
    page = refusal("page", _request("GET", "/admin/activity", "q=leave"), signed_in=False)
    assert page is not None and page.status_code == 303
    assert page.headers["location"] == "/admin/login?next=%2Fadmin%2Factivity%3Fq%3Dleave"
    for access, method in (("data", "GET"), ("page", "POST"), ("data", "POST")):
        refused = refusal(access, _request(method, "/admin/api/stats"), signed_in=False)
        assert refused is not None and refused.status_code == 401 and refused.body == b'{"error":"sign in first"}'


def test_no_console_route_is_reached_signed_out(offline_settings) -> None:
    """Every route but the login page answers before its page runs (a page would need the database)."""
    client = TestClient(create_standalone_app(offline_settings))
    checked = 0
    for route in create_console_app(offline_settings).routes:
        if isinstance(route, Mount) or route.path == "/login":
            continue
        assert isinstance(route, Route)
        path = "/admin" + route.path.replace("{kind:str}", "csv").replace("{ref:str}", "1").replace("{id:int}", "1")
        for method in sorted((route.methods or set()) - {"HEAD"}):
            response = client.request(method, path, follow_redirects=False)
            assert response.status_code in (303, 401), (method, path, response.status_code)
            assert all(response.headers[name] == value for name, value in SECURITY_HEADERS.items())
            assert response.headers["cache-control"] == "no-store"
            checked += 1
    assert checked >= 20


def test_the_login_page_is_public_and_gets_a_session_cookie_and_static_files_pass_through(offline_settings) -> None:
    client = TestClient(create_standalone_app(offline_settings))
    login = client.get("/admin/login")
    assert login.status_code == 200 and 'name="csrf_token"' in login.text
    cookie = login.headers["set-cookie"]
    assert cookie.startswith(COOKIE_NAME + "=") and "HttpOnly" in cookie and "Path=/admin" in cookie
    assert "SameSite=strict" in cookie and "Secure" not in cookie  # plain HTTP under the "auto" default
    assert login.headers["x-frame-options"] == "DENY"
    static = client.get("/admin/static/console.css")
    assert static.status_code == 200 and "set-cookie" not in static.headers and "x-frame-options" not in static.headers
    unknown = client.get("/admin/no-such-page", follow_redirects=False)
    assert unknown.status_code == 404 and "set-cookie" not in unknown.headers
