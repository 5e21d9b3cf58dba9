"""The progress a question shows while it waits for its answer: 👀 on the message, or the agent
view's "is checking the policies…" status; the listener shows it, whoever replies clears it."""

from __future__ import annotations

import logging

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

log = logging.getLogger(__name__)

PROGRESS_REACTION = "eyes"
ASSISTANT_STATUS = "is checking the policies…"


def show_progress(client: WebClient, surface: str, channel: str, thread_ts: str, message_ts: str) -> None:
    """👀 on the question, or the agent view's "is thinking" status; never fatal."""
    try:
        if surface == "assistant":
            client.assistant_threads_setStatus(channel_id=channel, thread_ts=thread_ts, status=ASSISTANT_STATUS)
        else:
            client.reactions_add(channel=channel, timestamp=message_ts, name=PROGRESS_REACTION)
    except SlackApiError as error:
        log.warning("could not show progress in %s: %s", channel, error.response.get("error"))


def clear_progress(
    client: WebClient, surface: str, channel: str | None, thread_ts: str | None, message_ts: str | None
) -> None:
    if channel is None:  # a question asked outside Slack (the CLI) shows no progress there
        return
    try:
        if surface == "assistant":
            if thread_ts is not None:
                client.assistant_threads_setStatus(channel_id=channel, thread_ts=thread_ts, status="")
        elif message_ts:
            client.reactions_remove(channel=channel, timestamp=message_ts, name=PROGRESS_REACTION)
    except SlackApiError as error:
        log.info("could not clear progress in %s: %s", channel, error.response.get("error"))
