"""HTTP mode: Bolt behind Starlette, served by uvicorn, at Bolt's default path `/slack/events`.

Events and interactivity (the feedback buttons) share the one endpoint. Bolt verifies the
`X-Slack-Signature` with SLACK_SIGNING_SECRET and rejects bad or stale requests with 401
before any listener runs. `dispatch` runs in a worker thread, so a slow Slack API call in a
listener never blocks the event loop that acks other requests.

Before Bolt sees a request, the endpoint refuses, with one log line each, what would make Bolt
fail or hold memory: a body over MAX_BODY_BYTES (413, the rest left unread), a timestamp that is
not a number (401), and a body Bolt cannot parse (400).
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Sequence

import uvicorn
from slack_bolt import App
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"

# Slack's event and interactivity payloads are a few KB; even a 40,000-character message,
# URL-encoded inside an interactivity payload, stays well under this.
MAX_BODY_BYTES = 1024 * 1024

# A decimal number short enough for int(): Bolt calls int() on the timestamp unchecked.
_NUMBER = re.compile(r"[0-9]{1,18}")


def _refuse(status: int, error: str, **headers: str) -> Response:
    return JSONResponse({"error": error}, status_code=status, headers=headers)


def _too_big() -> Response:
    # Connection: close, so the server stops reading the rest of the body instead of draining it.
    return _refuse(413, "request body too large", Connection="close")


async def _read_capped(request: Request, limit: int) -> bytes | None:
    """The request body, or None as soon as it passes `limit` bytes (the rest is never read)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


async def _slack_events(bolt: App, request: Request) -> Response:
    declared = request.headers.get("content-length", "")
    if _NUMBER.fullmatch(declared) and int(declared) > MAX_BODY_BYTES:
        log.warning("refused a Slack request of %s bytes (Content-Length); the limit is %d", declared, MAX_BODY_BYTES)
        return _too_big()
    # Every value: Starlette's headers.get() gives the first, Bolt uses the last.
    for timestamp in request.headers.getlist("x-slack-request-timestamp"):
        if not _NUMBER.fullmatch(timestamp):
            log.warning("refused a Slack request whose X-Slack-Request-Timestamp is not a number: %r", timestamp[:40])
            return _refuse(401, "invalid request")
    body = await _read_capped(request, MAX_BODY_BYTES)
    if body is None:
        log.warning("refused a Slack request whose body passed %d bytes", MAX_BODY_BYTES)
        return _too_big()
    try:
        bolt_request = to_bolt_request(request, body)
    # Bolt decodes and parses the body before it checks the signature, so anything raised here
    # comes from a malformed, unverified body (not UTF-8, not JSON, not an object).
    except Exception as error:
        # The type only: the message may quote the body, and an unverified body is nobody's to log.
        log.warning(
            "refused a Slack request whose %d-byte body could not be parsed: %s", len(body), type(error).__name__
        )
        return _refuse(400, "malformed body")
    return to_starlette_response(await run_in_threadpool(bolt.dispatch, bolt_request))


def create_asgi_app(bolt: App, more_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """Bolt at /slack/events and /healthz, plus `more_routes` (cli/serve.py adds the admin console's)."""

    async def events(request: Request) -> Response:
        return await _slack_events(bolt, request)

    async def health(_: Request) -> Response:
        return JSONResponse({"ok": True})

    routes: list[BaseRoute] = [Route(EVENTS_PATH, events, methods=["POST"]), Route("/healthz", health, methods=["GET"])]
    return Starlette(routes=[*routes, *more_routes])


class BackgroundServer:
    """uvicorn serving an ASGI app in a thread on a free local port (the demo and the tests)."""

    def __init__(self, asgi_app, host: str = "127.0.0.1", port: int = 0) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.host, self.port = self._socket.getsockname()[:2]
        config = uvicorn.Config(asgi_app, log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="policybot-http", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 15.0) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the HTTP server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()
