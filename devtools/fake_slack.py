"""A local Slack: a Web API fake that records every call, and the Events API side that delivers signed events.

Real HTTP on a free local port, so the Bolt app and the Celery workers talk to it exactly as
they talk to slack.com (point SLACK_API_URL at `FakeSlack.api_url`). It checks the bot
token, enforces the Block Kit limits Slack enforces (50 blocks, 3,000 characters per
section), answers `chat.postMessage` with a fresh `ts` (to a user ID: in the app's DM with
them), describes users (`users.info`, `users.list`) and conversations (`conversations.info`,
`conversations.members`: Slack Connect or with guests, per channel), and serves uploaded
files at their `url_private` (bot token required). Used by `policybot demo` and by the tests.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import httpx


def sign(signing_secret: str, timestamp: str | int, body: str | bytes) -> str:
    """Slack's request signature: `v0=` + hex HMAC-SHA256 of `v0:{timestamp}:{body}`."""
    raw = body.encode() if isinstance(body, str) else body
    base = b"v0:" + str(timestamp).encode() + b":" + raw
    return "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Call:
    """One Web API call as the fake received it."""

    method: str
    params: dict[str, Any]  # JSON body, form fields and query string, merged
    headers: dict[str, str]
    at: float
    response: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.params[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.params.get(key, default)


@dataclass
class StoredFile:
    id: str
    name: str
    content: bytes
    mimetype: str
    user: str

    def info(self, base_url: str) -> dict[str, Any]:
        url = f"{base_url}/files-pri/{self.id}/{quote(self.name)}"
        return {
            "id": self.id,
            "name": self.name,
            "title": self.name,
            "mimetype": self.mimetype,
            "filetype": self.name.rsplit(".", 1)[-1] if "." in self.name else "text",
            "size": len(self.content),
            "user": self.user,
            "url_private": url,
            "url_private_download": url + "?download=1",
            "mode": "hosted",
            "is_external": False,
        }


SECTION_LIMIT = 3000
MAX_BLOCKS = 50


def block_problems(blocks: Any) -> list[str]:
    """What Slack would reject as `invalid_blocks` (the limits this bot must respect)."""
    if blocks is None:
        return []
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    problems = []
    if len(blocks) > MAX_BLOCKS:
        problems.append(f"{len(blocks)} blocks (max {MAX_BLOCKS})")
    for index, block in enumerate(blocks):
        if block.get("type") == "section":
            text = (block.get("text") or {}).get("text", "")
            if not text or len(text) > SECTION_LIMIT:
                problems.append(f"block {index}: section text of {len(text)} characters")
        if block.get("type") == "context" and not 1 <= len(block.get("elements", [])) <= 10:
            problems.append(f"block {index}: context with {len(block.get('elements', []))} elements")
        if block.get("type") == "actions" and not 1 <= len(block.get("elements", [])) <= 25:
            problems.append(f"block {index}: actions with {len(block.get('elements', []))} elements")
    return problems


class FakeSlack:
    """The Slack Web API and Events API for one workspace, in-process."""

    def __init__(
        self,
        bot_token: str | None = None,
        signing_secret: str | None = None,
        *,
        bot_user_id: str = "UPOLICYBOT",
        bot_id: str = "BPOLICYBOT",
        team_id: str = "TLOCAL",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.bot_token = bot_token or "xoxb-local-" + secrets.token_hex(12)
        self.signing_secret = signing_secret or secrets.token_hex(16)
        self.bot_user_id, self.bot_id, self.team_id = bot_user_id, bot_id, team_id
        self.calls: list[Call] = []
        self.files: dict[str, StoredFile] = {}
        self.users: dict[str, dict[str, Any]] = {}  # users.info answers; add_user() fills it
        # conversations.info / conversations.members answers; add_channel() fills it. A channel
        # not in it is an ordinary channel of the workspace, with no members listed.
        self.channels: dict[str, dict[str, Any]] = {}
        self.failures: dict[str, str] = {}  # method -> error to answer with (simulate Slack problems)
        # method -> how many of its next calls get HTTP 429 "ratelimited" with Retry-After: 1
        self.rate_limited: dict[str, int] = {}
        # Those 429s with a plain-text body instead of Slack's JSON, as a proxy in front of Slack may send.
        self.rate_limits_in_plain_text = False
        self.retry_after: str | None = "1"  # the 429s' Retry-After header (None: none, as some proxies send)
        # method -> how many of its next calls get HTTP 503 with an outage page (Slack down)
        self.unavailable: dict[str, int] = {}
        # method -> called once Slack has taken such a call, before its reply is sent (a fault injected there)
        self.before_reply: dict[str, Callable[[], None]] = {}
        self._changed = threading.Condition()
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._epoch = int(time.time())
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-slack", daemon=True)

    # -------------------------------------------------------------- lifecycle

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)  # an IPv4 server's address (typeshed also allows bytes, for other families)
        return f"http://{host}:{port}"

    @property
    def api_url(self) -> str:
        """What SLACK_API_URL should be."""
        return self.base_url + "/api/"

    def start(self) -> FakeSlack:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -------------------------------------------------------------- ids

    def new_ts(self) -> str:
        """A message timestamp, unique and increasing, in Slack's `seconds.micros` form."""
        return f"{self._epoch}.{next(self._ts):06d}"

    def new_event_id(self) -> str:
        return f"Ev{self._epoch % 100000:05d}{next(self._ids):06d}"

    def add_file(
        self, name: str, content: bytes, mimetype: str = "text/plain", user: str = "U0000000"
    ) -> dict[str, Any]:
        """Store a file as if a user had uploaded it; returns the file object events carry."""
        file = StoredFile(f"F{self._epoch % 100000:05d}{next(self._ids):06d}", name, content, mimetype, user)
        self.files[file.id] = file
        return file.info(self.base_url)

    # -------------------------------------------------------------- events API side

    def add_user(self, user_id: str, real_name: str, display_name: str = "", *, is_bot: bool = False) -> dict[str, Any]:
        """A workspace member (or a bot user, `is_bot`), as users.info describes one."""
        first, _, last = real_name.partition(" ")
        handle = (display_name or real_name).lower().replace(" ", ".")
        self.users[user_id] = {
            "id": user_id,
            "team_id": self.team_id,
            "name": handle,
            "real_name": real_name,
            "is_bot": is_bot,
            "profile": {"real_name": real_name, "display_name": display_name, "first_name": first, "last_name": last},
        }
        return self.users[user_id]

    def add_channel(self, channel_id: str, *, ext_shared: bool = False, members: Iterable[str] = ()) -> dict[str, Any]:
        """A conversation as conversations.info describes one (Slack Connect when `ext_shared`),
        with its members for conversations.members (a guest is a user with `is_restricted`)."""
        self.channels[channel_id] = {
            "id": channel_id,
            "is_channel": True,
            "is_ext_shared": ext_shared,
            "is_shared": ext_shared,
            "members": list(members),
        }
        return self.channels[channel_id]

    def event_body(self, event: Mapping[str, Any], event_id: str | None = None) -> dict[str, Any]:
        """The `event_callback` envelope Slack wraps every event in."""
        return {
            "token": "unused-verification-token",
            "team_id": self.team_id,
            "api_app_id": "APOLICYBOT",
            "event": dict(event),
            "type": "event_callback",
            "event_id": event_id or self.new_event_id(),
            "event_time": int(time.time()),
            "authorizations": [{"team_id": self.team_id, "user_id": self.bot_user_id, "is_bot": True}],
            "is_ext_shared_channel": False,
        }

    def signed_headers(
        self,
        body: str,
        *,
        timestamp: int | None = None,
        secret: str | None = None,
        content_type: str = "application/json",
    ) -> dict[str, str]:
        ts = str(int(time.time()) if timestamp is None else timestamp)
        return {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": sign(secret or self.signing_secret, ts, body),
        }

    def deliver(
        self,
        url: str,
        body: Mapping[str, Any],
        *,
        retry_num: int | None = None,
        retry_reason: str = "http_timeout",
        timestamp: int | None = None,
        secret: str | None = None,
        signature: str | None = None,
        timeout: float = 10.0,
    ) -> httpx.Response:
        """POST an Events API body to the app, signed as Slack signs it (or not, when told)."""
        raw = json.dumps(body)
        headers = self.signed_headers(raw, timestamp=timestamp, secret=secret)
        if signature is not None:
            headers["X-Slack-Signature"] = signature
        if retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = retry_reason
        return httpx.post(url, content=raw, headers=headers, timeout=timeout)

    def click(
        self,
        url: str,
        *,
        action_id: str,
        value: str,
        user: str,
        channel: str,
        message: Mapping[str, Any],
        block_id: str = "feedback",
        timeout: float = 10.0,
    ) -> httpx.Response:
        """A `block_actions` interaction (a button click), form-encoded and signed like Slack's."""
        payload = {
            "type": "block_actions",
            "team": {"id": self.team_id},
            "user": {"id": user, "team_id": self.team_id},
            "api_app_id": "APOLICYBOT",
            "token": "unused-verification-token",
            "container": {"type": "message", "message_ts": message.get("ts"), "channel_id": channel},
            "trigger_id": f"{next(self._ids)}.trigger",
            "channel": {"id": channel},
            "message": dict(message),
            "response_url": f"{self.base_url}/response/{next(self._ids)}",
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": block_id,
                    "value": value,
                    "action_ts": str(time.time()),
                }
            ],
        }
        raw = urlencode({"payload": json.dumps(payload)})
        headers = self.signed_headers(raw, content_type="application/x-www-form-urlencoded")
        return httpx.post(url, content=raw, headers=headers, timeout=timeout)

    # -------------------------------------------------------------- inspection

    def calls_to(self, method: str, **match: Any) -> list[Call]:
        with self._changed:
            return [c for c in self.calls if c.method == method and all(c.params.get(k) == v for k, v in match.items())]

    def posts(self, channel: str | None = None, thread_ts: str | None = None) -> list[Call]:
        """`chat.postMessage` calls, optionally in one channel / thread."""
        match = {k: v for k, v in (("channel", channel), ("thread_ts", thread_ts)) if v is not None}
        return self.calls_to("chat.postMessage", **match)

    def wait_for(self, condition: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
        """Wait until `condition()` is truthy (checked whenever a call arrives); return its value."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                value = condition()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
                self._changed.wait(min(remaining, 0.5))

    def wait_for_posts(self, channel: str, thread_ts: str, count: int = 1, timeout: float = 60.0) -> list[Call]:
        return self.wait_for(
            lambda: (p := self.posts(channel, thread_ts)) and len(p) >= count and p,
            timeout,
            f"{count} post(s) in {channel} thread {thread_ts}",
        )

    def clear(self) -> None:
        with self._changed:
            self.calls.clear()

    # -------------------------------------------------------------- Web API side

    def _record(self, call: Call) -> None:
        with self._changed:
            self.calls.append(call)
            self._changed.notify_all()

    def _take_rate_limit(self, method: str) -> bool:
        return self._take(self.rate_limited, method)

    def _take(self, counts: dict[str, int], method: str) -> bool:
        with self._changed:
            left = counts.get(method, 0)
            if left <= 0:
                return False
            counts[method] = left - 1
            return True

    def answer(self, method: str, params: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
        token = params.get("token") or headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not token:
            return {"ok": False, "error": "not_authed"}
        if token != self.bot_token:
            return {"ok": False, "error": "invalid_auth"}
        if method in self.failures:
            return {"ok": False, "error": self.failures[method]}
        handler = getattr(self, "_api_" + method.replace(".", "_"), None)
        return handler(params) if handler else {"ok": True}

    def _api_auth_test(self, _: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": self.base_url + "/",
            "team": "Local workspace",
            "user": "policybot",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _post(self, params: dict[str, Any], ephemeral: bool = False) -> dict[str, Any]:
        channel = params.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not params.get("text") and not params.get("blocks"):
            return {"ok": False, "error": "no_text"}
        problems = block_problems(params.get("blocks"))
        if problems:
            return {"ok": False, "error": "invalid_blocks", "errors": problems}
        ts = self.new_ts()
        if ephemeral:
            return {"ok": True, "message_ts": ts}
        if str(channel).startswith(("U", "W")):  # a user ID: the app's DM with them, as Slack does
            channel = self.dm_channel(str(channel))
        message = {
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "text": params.get("text", ""),
            "ts": ts,
            "blocks": params.get("blocks") or [],
        }
        if params.get("thread_ts"):
            message["thread_ts"] = params["thread_ts"]
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _api_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._post(params)

    def _api_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        if not params.get("user"):
            return {"ok": False, "error": "user_not_in_channel"}
        return self._post(params, ephemeral=True)

    def _api_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        problems = block_problems(params.get("blocks"))
        if problems:
            return {"ok": False, "error": "invalid_blocks", "errors": problems}
        return {"ok": True, "channel": params.get("channel"), "ts": params.get("ts"), "text": params.get("text", "")}

    def _api_reactions_add(self, params: dict[str, Any]) -> dict[str, Any]:
        if not params.get("channel") or not params.get("timestamp") or not params.get("name"):
            return {"ok": False, "error": "invalid_arguments"}
        return {"ok": True}

    _api_reactions_remove = _api_reactions_add

    def _api_assistant_threads_setStatus(self, params: dict[str, Any]) -> dict[str, Any]:
        if not params.get("channel_id") or not params.get("thread_ts") or "status" not in params:
            return {"ok": False, "error": "invalid_arguments"}
        return {"ok": True}

    def _api_users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(params.get("user")))
        if user is None:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "user": user}

    def dm_channel(self, user_id: str) -> str:
        """The ID of the app's DM with a user (where chat.postMessage to a user ID goes)."""
        return "D" + user_id[1:]

    def _api_conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        known = self.channels.get(channel)
        if known is None:
            known = {
                "id": channel,
                "is_im": channel.startswith("D"),
                "is_channel": channel.startswith("C"),
                "is_ext_shared": False,
                "is_shared": False,
            }
        return {"ok": True, "channel": {key: value for key, value in known.items() if key != "members"}}

    def _api_conversations_members(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self.channels.get(str(params.get("channel") or ""))
        return {
            "ok": True,
            "members": list(channel["members"]) if channel else [],
            "response_metadata": {"next_cursor": ""},
        }

    def _api_users_list(self, _: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "members": list(self.users.values()), "response_metadata": {"next_cursor": ""}}

    def _api_files_info(self, params: dict[str, Any]) -> dict[str, Any]:
        file = self.files.get(str(params.get("file")))
        if file is None:
            return {"ok": False, "error": "file_not_found"}
        return {"ok": True, "file": file.info(self.base_url)}

    def serve_file(self, path: str, headers: Mapping[str, str]) -> tuple[int, bytes, str]:
        parts = path.split("/")
        file = self.files.get(parts[2]) if len(parts) > 2 else None
        if file is None:
            return 404, b"not found", "text/plain"
        if headers.get("authorization") != f"Bearer {self.bot_token}":
            # Slack answers a missing token with its sign-in page, not the file.
            return 200, b"<!DOCTYPE html><html><body>Sign in to Slack</body></html>", "text/html"
        return 200, file.content, file.mimetype

    def _handler_class(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:  # keep test and demo output clean
                return

            def _send(self, status: int, body: bytes, content_type: str, **extra_headers: str) -> None:
                self.send_response(status)
                for name, value in extra_headers.items():
                    self.send_header(name.replace("_", "-"), value)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                try:
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the caller is gone (a bot killed mid-call)
                    self.close_connection = True

            def _handle(self) -> None:
                split = urlsplit(self.path)
                headers = {key.lower(): value for key, value in self.headers.items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if split.path.startswith("/files-pri/"):
                    status, body, content_type = fake.serve_file(split.path, headers)
                    self._send(status, body, content_type)
                    return
                if not split.path.startswith("/api/"):
                    fake._record(Call(split.path, _parse(raw, headers.get("content-type", "")), headers, time.time()))
                    self._send(200, b'{"ok": true}', "application/json")
                    return
                method = split.path.removeprefix("/api/")
                params = dict(parse_qsl(split.query)) | _parse(raw, headers.get("content-type", ""))
                if fake._take_rate_limit(method):  # as Slack does: HTTP 429 and how long to wait
                    limited = {"ok": False, "error": "ratelimited"}
                    fake._record(Call(method, params, headers, time.time(), limited))
                    wait = {"Retry_After": fake.retry_after} if fake.retry_after is not None else {}
                    if fake.rate_limits_in_plain_text:
                        self._send(429, b"Too Many Requests", "text/plain; charset=utf-8", **wait)
                    else:
                        self._send(429, json.dumps(limited).encode(), "application/json; charset=utf-8", **wait)
                    return
                if fake._take(fake.unavailable, method):  # an outage page, not Slack's JSON
                    fake._record(Call(method, params, headers, time.time(), {"ok": False, "error": "http_503"}))
                    self._send(503, b"<html>Service Unavailable</html>", "text/html; charset=utf-8")
                    return
                response = fake.answer(method, params, headers)
                fake._record(Call(method, params, headers, time.time(), response))
                hook = fake.before_reply.get(method)
                if hook is not None:
                    hook()
                self._send(200, json.dumps(response).encode(), "application/json; charset=utf-8")

            do_GET = _handle
            do_POST = _handle

        return Handler


def _parse(raw: bytes, content_type: str) -> dict[str, Any]:
    if not raw:
        return {}
    text = raw.decode("utf-8", errors="replace")
    if "json" in content_type:
        try:
            data = json.loads(text)
        except ValueError:
            return {"_raw": text}
        return data if isinstance(data, dict) else {"_json": data}
    params: dict[str, Any] = dict(parse_qsl(text, keep_blank_values=True))
    for key in ("blocks", "attachments", "prompts"):  # form-encoded JSON fields, decoded for inspection
        if isinstance(params.get(key), str):
            try:
                params[key] = json.loads(params[key])
            except ValueError:
                pass
    return params


def thread_messages(calls: Iterable[Call], channel: str, thread_ts: str) -> list[Call]:
    return [
        c
        for c in calls
        if c.method == "chat.postMessage" and c.get("channel") == channel and c.get("thread_ts") == thread_ts
    ]
