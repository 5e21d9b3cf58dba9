"""Which Slack failures the worker waits out: an answer Slack surely did not take is tried
again later; one that Slack may have posted, or refused as such, is not."""

from __future__ import annotations

from http.client import RemoteDisconnected
from urllib.error import URLError

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web import SlackResponse

from workers.tasks import slack_failed_for_now


def _slack_error(error: str, status: int = 200) -> SlackApiError:
    """A failed call as slack_sdk reports it (a body that is not JSON becomes such an error too)."""
    response = SlackResponse(client=None, http_verb="POST", api_url="https://slack.test/api/chat.postMessage",
                             req_args={}, data={"ok": False, "error": error}, headers={}, status_code=status)
    return SlackApiError(error, response)


NOT_JSON = "Received a response in a non-JSON format: <html>"


@pytest.mark.parametrize("error, for_now", [
    (_slack_error("fatal_error"), True),  # Slack's own failure
    (_slack_error("ratelimited", 429), True),
    (_slack_error(NOT_JSON, 429), True),  # a proxy's rate limit in plain text
    (_slack_error(NOT_JSON, 503), True),  # an outage page
    (URLError(ConnectionRefusedError()), True),  # never reached
    (_slack_error(NOT_JSON, 504), False),  # a gateway gave up waiting: Slack may have posted it
    (TimeoutError("The read operation timed out"), False),  # likewise
    (RemoteDisconnected("Remote end closed connection without response"), False),
    (_slack_error("msg_too_long"), False),  # the message itself: it fails the same way later
    (_slack_error("invalid_blocks"), False),
    (_slack_error("not_in_channel"), False),
    (_slack_error("token_revoked"), False),
    (KeyError("ts"), False),  # a fault of ours
    (OSError("No space left on device"), False),
])
def test_what_counts_as_slack_failing_for_now(error: BaseException, for_now: bool) -> None:
    assert slack_failed_for_now(error) is for_now
