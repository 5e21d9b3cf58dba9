"""`assistant_thread_started`: a user opened the agent view; the bot greets them, once per thread,
with suggested prompts."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from sqlalchemy.exc import SQLAlchemyError

from bot.listeners.common import Listeners
from slack_shared import blocks, state

log = logging.getLogger(__name__)


def on_assistant_thread_started(listeners: Listeners, event: Mapping[str, Any], client: WebClient) -> None:
    thread = event.get("assistant_thread") or {}
    channel, thread_ts = thread.get("channel_id"), thread.get("thread_ts")
    if not channel or not thread_ts:
        return
    try:
        first = state.remember_assistant_thread(
            listeners.settings, channel, thread_ts, thread.get("user_id"), thread.get("context")
        )
    except SQLAlchemyError as error:
        # No greeting and suggested prompts that invite questions it cannot take: say so
        # up front (once per thread, deduped in Redis: the database cannot).
        log.warning("could not remember agent-view thread in %s: %s", channel, type(error).__name__)
        if listeners.told_unavailable.first_time(channel, thread_ts):
            client.chat_postMessage(channel=channel, thread_ts=thread_ts, **blocks.unavailable_message(None))
        return
    if not first:
        return  # a retried delivery: greeted already
    if listeners.greets_a_guest(client, thread.get("user_id")):  # no prompts inviting questions it will refuse
        client.chat_postMessage(channel=channel, thread_ts=thread_ts, **blocks.members_only_message(asked=False))
        return
    client.chat_postMessage(channel=channel, thread_ts=thread_ts, **blocks.greeting_message())
    try:
        client.assistant_threads_setSuggestedPrompts(
            channel_id=channel, thread_ts=thread_ts, prompts=list(blocks.SUGGESTED_PROMPTS)
        )
    except SlackApiError as error:
        log.info("could not set suggested prompts: %s", error.response.get("error"))
