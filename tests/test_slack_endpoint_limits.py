"""The Slack endpoint against hostile requests: real HTTP (httpx, or a raw socket where a request
must stay unfinished) to the Bolt app under uvicorn, signed by the local Slack where it matters.

Oversized bodies get 413 before they are read in full; a timestamp that is not a number gets 401;
a body Bolt cannot parse gets 400. Each with one log line and no traceback.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.timeout(120)

READ_TIMEOUT_S = 10.0  # an unfixed server waits for the rest of the body: the test fails on this


@dataclass
class Endpoint:
    fake: Any  # devtools.fake_slack.FakeSlack, for its signing secret
    url: str

    def post(
        self,
        body: bytes | Iterator[bytes],
        *,
        timestamp: str | None = None,
        headers: list[tuple[str, str]] | None = None,
    ) -> httpx.Response:
        """POST `body` signed as Slack signs it (an iterator is sent chunked, signed as a whole)."""
        from devtools.fake_slack import sign

        ts = timestamp if timestamp is not None else str(int(time.time()))
        pieces = list(body) if not isinstance(body, bytes) else [body]
        signed = [
            ("Content-Type", "application/json"),
            ("X-Slack-Request-Timestamp", ts),
            ("X-Slack-Signature", sign(self.fake.signing_secret, ts, b"".join(pieces))),
        ]
        content: bytes | Iterator[bytes] = body if isinstance(body, bytes) else iter(pieces)
        return httpx.post(self.url, content=content, headers=signed + (headers or []), timeout=READ_TIMEOUT_S)

    def unfinished(self, head: list[str], body: bytes) -> bytes:
        """Send a request's head and part of its body over a raw socket, never finish it, and
        return all the server answers until it closes the connection."""
        url = httpx.URL(self.url)
        request = "".join(f"{line}\r\n" for line in [f"POST {url.path} HTTP/1.1", f"Host: {url.host}", *head, ""])
        with socket.create_connection((url.host, url.port), timeout=READ_TIMEOUT_S) as conn:
            conn.sendall(request.encode("latin-1") + body)
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        return answer


@pytest.fixture(scope="module")
def endpoint(policybot_home) -> Iterator[Endpoint]:
    # No PostgreSQL or Redis: every request here is refused, or answered by Bolt itself (url_verification).
    from bot.app import build_app
    from bot.http import BackgroundServer, create_asgi_app
    from core.config import get_settings
    from devtools.demo import slack_settings
    from devtools.fake_slack import FakeSlack
    from workers.enqueuer import CeleryEnqueuer

    fake = FakeSlack().start()
    server = BackgroundServer(
        create_asgi_app(build_app(slack_settings(get_settings(), fake), CeleryEnqueuer()))
    ).start()
    try:
        yield Endpoint(fake, server.url + "/slack/events")
    finally:
        server.stop()
        fake.stop()


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def _one_log_line_without_traceback(logger: str = "bot.http") -> Iterator[None]:
    """Exactly one record at WARNING or above while the block runs, from `logger`, and no traceback
    logged anywhere (uvicorn's loggers included: they do not propagate to the root logger)."""
    handler = _Records()
    loggers = [logging.getLogger(), logging.getLogger("uvicorn")]
    for each in loggers:
        each.addHandler(handler)
    try:
        yield
        time.sleep(0.2)  # uvicorn logs an application's exception after the 500 went out
    finally:
        for each in loggers:
            each.removeHandler(handler)
    assert [r for r in handler.records if r.exc_info or r.exc_text] == []
    lines = [r for r in handler.records if r.levelno >= logging.WARNING]
    assert [r.name for r in lines] == [logger], [r.getMessage() for r in lines]


def _url_verification(size: int) -> bytes:
    """A url_verification body (Bolt answers it itself) padded to exactly `size` bytes."""
    body = {"type": "url_verification", "challenge": "limits-challenge", "token": "unused", "padding": ""}
    padding = size - len(json.dumps(body).encode())
    return json.dumps(body | {"padding": "x" * padding}).encode()


def _pieces(body: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    return (body[start : start + size] for start in range(0, len(body), size))


def _chunked(total: int, size: int = 64 * 1024) -> bytes:
    """HTTP/1.1 chunks carrying `total` bytes, without the final zero-length chunk."""
    out = b""
    for start in range(0, total, size):
        piece = b"x" * min(size, total - start)
        out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    return out


# ---------------------------------------------------------------- size


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_signed_body_at_the_limit_is_still_handled(endpoint, chunked: bool) -> None:
    from bot.http import MAX_BODY_BYTES

    body = _url_verification(MAX_BODY_BYTES)
    response = endpoint.post(_pieces(body) if chunked else body)
    assert response.status_code == 200 and response.json() == {"challenge": "limits-challenge"}


def test_a_declared_oversized_body_is_refused_from_its_content_length_before_it_is_sent(endpoint) -> None:
    from bot.http import MAX_BODY_BYTES

    with _one_log_line_without_traceback():
        answer = endpoint.unfinished(["Content-Type: application/json", f"Content-Length: {MAX_BODY_BYTES + 1}"], b"")
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert b"connection: close" in answer.lower()


def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit(endpoint) -> None:
    from bot.http import MAX_BODY_BYTES

    with _one_log_line_without_traceback():
        answer = endpoint.unfinished(
            ["Content-Type: application/json", "Transfer-Encoding: chunked"], _chunked(MAX_BODY_BYTES + 1)
        )  # the body goes on; the server stops here
    assert answer.startswith(b"HTTP/1.1 413 ")


def test_the_endpoint_still_answers_after_refusing_an_oversized_body(endpoint) -> None:
    from bot.http import MAX_BODY_BYTES

    endpoint.unfinished(["Content-Type: application/json", f"Content-Length: {MAX_BODY_BYTES + 1}"], b"")
    assert endpoint.post(_url_verification(100)).json() == {"challenge": "limits-challenge"}


# ---------------------------------------------------------------- malformed


@pytest.mark.parametrize(
    "timestamp, extra",
    [
        ("abc", []),
        ("9" * 5000, []),  # too many digits for int()
        (None, [("X-Slack-Request-Timestamp", "abc")]),  # a second value: Bolt reads the last one
    ],
    ids=["letters", "too-long", "second-header"],
)
def test_a_timestamp_that_is_not_a_number_gets_401_and_one_log_line(endpoint, timestamp, extra) -> None:
    with _one_log_line_without_traceback():
        response = endpoint.post(_url_verification(100), timestamp=timestamp, headers=extra)
    assert response.status_code == 401


@pytest.mark.parametrize(
    "body",
    [b'{"type": "url_verification", "challenge": "\xff\xfe"}', b'{"type": ', b"[1]", b"null"],
    ids=["not-utf-8", "not-json", "a-list", "null"],
)
def test_a_body_bolt_cannot_parse_gets_400_and_one_log_line(endpoint, body: bytes) -> None:
    with _one_log_line_without_traceback():
        response = endpoint.post(body)  # signed: it fails on its content, not on its signature
    assert response.status_code == 400
