"""`app_home_opened`: a user's first visit to the bot's Messages tab gets a greeting."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk import WebClient
from sqlalchemy.exc import SQLAlchemyError

from bot.listeners.common import Listeners
from slack_shared import blocks, state

log = logging.getLogger(__name__)


def on_app_home_opened(listeners: Listeners, event: Mapping[str, Any], client: WebClient) -> None:
    if event.get("tab") != "messages" or not event.get("user") or not event.get("channel"):
        return
    try:
        first_visit = state.mark_greeted(listeners.settings, str(event["user"]))
    except SQLAlchemyError as error:  # cannot tell a first visit: no greeting rather than one on every visit
        log.warning("could not look up whether %s was greeted: %s", event["user"], type(error).__name__)
        return
    if first_visit:
        guest = listeners.greets_a_guest(client, str(event["user"]))
        client.chat_postMessage(
            channel=event["channel"],
            **(blocks.members_only_message(asked=False) if guest else blocks.greeting_message()),
        )
