"""The 👍/👎 buttons under an answer: the asker's vote, recorded."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from application.answering import record_feedback
from bot.listeners.common import Listeners
from slack_shared import blocks

log = logging.getLogger(__name__)


def on_feedback(listeners: Listeners, body: Mapping[str, Any], client: WebClient) -> None:
    """Called after ack(): record the vote (a second click changes it) and thank the user."""
    action = (body.get("actions") or [{}])[0]
    user = (body.get("user") or {}).get("id")
    value = str(action.get("value") or "")
    if not user or not value.isdigit():
        log.warning("feedback click without user or question id")
        return
    vote = 1 if action.get("action_id") == blocks.FEEDBACK_UP else -1
    try:
        record_feedback(listeners.settings, int(value), user, vote)
    except Exception:  # unknown question id (e.g. a deleted log row): say so in the log, not to the user
        log.exception("could not record feedback for question %s", value)
        return
    channel = (body.get("channel") or {}).get("id")
    message = body.get("message") or {}
    if channel:
        try:
            client.chat_postEphemeral(
                channel=channel,
                user=user,
                thread_ts=message.get("thread_ts") or message.get("ts"),
                text="Thanks, your feedback is recorded." + (" 👍" if vote > 0 else " 👎"),
            )
        except SlackApiError as error:
            log.info("could not thank for feedback: %s", error.response.get("error"))
