"""The Slack Web API client, the Slack error codes its callers act on, how a failed call is
classified (a rate limit, a failure for now), and how an error is named in a log without the token."""

from __future__ import annotations

from typing import Any
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from core.config import Settings, secret_value

# chat.postMessage errors that no retry fixes: the bot is not in the channel, it is gone or
# archived; the token is dead (until an operator replaces it).
SLACK_CHANNEL_ERRORS = frozenset({"channel_not_found", "not_in_channel", "is_archived"})
SLACK_TOKEN_ERRORS = frozenset({"invalid_auth", "account_inactive", "token_revoked", "token_expired", "not_authed"})
SLACK_PERMANENT_ERRORS = SLACK_CHANNEL_ERRORS | SLACK_TOKEN_ERRORS
# Slack saying it did not take a message for now (besides a rate limit, is_rate_limited). Not
# fatal_error nor internal_error: "some aspect of the operation" may have succeeded (Slack's
# docs), so the message may be posted.
SLACK_SERVER_ERRORS = frozenset({"service_unavailable", "request_timeout"})
MAX_RETRY_AFTER_S = 300  # a longer Retry-After is waited this long, then tried


def web_client(
    settings: Settings, *, wait_out_rate_limits: bool = True, timeout_s: int = 15, connection_retries: int = 2
) -> WebClient:
    """The Slack Web API client for settings.slack_api_url (Slack itself, or a local fake).

    It waits out a rate limit (Slack's Retry-After, twice) unless `wait_out_rate_limits` is
    off: a Celery task rather retries later than sleeps inside its time limit, and a listener
    thread must not stall behind a lookup."""
    # Only a request never sent (urllib's URLError) is sent again: one that reached Slack before
    # the connection dropped may have posted already, and a second post would show twice.
    handlers: list = (
        [ConnectionErrorRetryHandler(max_retry_count=connection_retries, error_types=[URLError])]
        if connection_retries
        else []
    )
    if wait_out_rate_limits:
        handlers.append(RateLimitErrorRetryHandler(max_retry_count=2))
    return WebClient(
        token=secret_value(settings.slack_bot_token),
        base_url=settings.slack_api_url,
        timeout=timeout_s,
        retry_handlers=handlers,
    )


def describe_error(error: BaseException) -> str:
    """One line for a log: a Slack API error by its code only (the request holds the token)."""
    if isinstance(error, SlackApiError):
        return f"Slack API error {error.response.get('error')}"
    return f"{type(error).__name__}: {error}"


def slack_error_of(error: BaseException) -> str | None:
    """Slack's error code for a failed Web API call ("ratelimited", "not_in_channel" …); None
    for anything else."""
    return error.response.get("error") if isinstance(error, SlackApiError) else None


def is_rate_limited(error: BaseException) -> bool:
    """HTTP 429 is a rate limit whatever its body says (a proxy's plain text is no "ratelimited")."""
    return slack_error_of(error) == "ratelimited" or (
        isinstance(error, SlackApiError) and error.response.status_code == 429
    )


def slack_failed_for_now(error: BaseException) -> bool:
    """Whether Slack surely did not take a message but may take it later: it said so (a rate
    limit, service_unavailable, HTTP 503) or was never reached (urllib's URLError: the request
    was not sent). Not a read timeout, a dropped connection, HTTP 500, 502 or 504, or Slack's
    fatal_error, after which the message may be in the thread already; not a refusal
    of the message itself (too long, bad blocks) or of the place (not in the channel, a dead
    token); not a fault of ours."""
    if isinstance(error, SlackApiError):
        return (
            is_rate_limited(error) or error.response.status_code == 503 or slack_error_of(error) in SLACK_SERVER_ERRORS
        )
    return isinstance(error, URLError)


def retry_after_s(error: BaseException) -> int:
    """Slack's Retry-After for a rate-limited call, in seconds (0 when it gives none)."""
    headers = getattr(getattr(error, "response", None), "headers", None) or {}
    value: Any = next((v for k, v in headers.items() if k.lower() == "retry-after"), "0")
    value = value[0] if isinstance(value, list) and value else value
    return min(int(value), MAX_RETRY_AFTER_S) if str(value).isdigit() else 0
