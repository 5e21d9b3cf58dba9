"""`message`: a direct message to the bot, in its DM or in the agent view's thread (channel
messages arrive as `app_mention`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slack_sdk import WebClient

from bot.decisions import decide_message
from bot.listeners.carry_out import carry_out
from bot.listeners.common import Listeners
from bot.who_may_ask import BotIdentity


def on_message(
    listeners: Listeners, body: Mapping[str, Any], event: Mapping[str, Any], client: WebClient, me: BotIdentity
) -> None:
    if event.get("channel_type") == "im":  # other messages are ignored: no lookup for them
        event = listeners.with_writer_team(body, event, client, me)
    decision = decide_message(
        event,
        body.get("event_id"),
        listeners.settings,
        me,
        listeners.in_assistant_thread,
        shared_externally=bool(body.get("is_ext_shared_channel")),
    )
    carry_out(listeners, decision, client)
