"""`app_mention`: someone mentioned the bot in a channel (or a thread in one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slack_sdk import WebClient

from bot.decisions import decide_mention
from bot.listeners.carry_out import carry_out
from bot.listeners.common import Listeners
from bot.who_may_ask import BotIdentity


def on_mention(
    listeners: Listeners, body: Mapping[str, Any], event: Mapping[str, Any], client: WebClient, me: BotIdentity
) -> None:
    event = listeners.with_writer_team(body, event, client, me)
    shared_externally = bool(body.get("is_ext_shared_channel"))
    carry_out(
        listeners,
        decide_mention(event, body.get("event_id"), listeners.settings, me, shared_externally=shared_externally),
        client,
        shared_externally=shared_externally,
    )
