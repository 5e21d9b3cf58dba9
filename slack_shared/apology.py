"""The apology: never leave an asker without a reply. Posted by the worker when a question
fails (workers/answer_tasks.py) and by the bot's sweep when the queue kept losing it (bot/recovery.py)."""

from __future__ import annotations

import logging
from typing import Any, Literal

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from sqlalchemy.exc import SQLAlchemyError

from application import outbox
from core.config import Settings
from slack_shared import blocks
from slack_shared.client import SLACK_CHANNEL_ERRORS, describe_error
from slack_shared.progress import clear_progress

log = logging.getLogger(__name__)

# What became of an apology: posted (or posted before); not posted for now (Slack is down or
# rate-limits, the token is being replaced); or never postable (a question from the CLI, a
# channel the bot cannot post in).
Apology = Literal["posted", "not_posted", "refused"]


def apologise(client: WebClient, settings: Settings, row: Any) -> Apology:
    """Never leave the user without a reply: a short apology with the reference ID, stored
    as the question's reply so that a later delivery never answers or apologises again."""
    if not row.channel:
        return "refused"  # a question from the CLI: nobody to tell in Slack
    try:
        posted = outbox.post_once(
            settings,
            row.id,
            lambda: client.chat_postMessage(
                channel=row.channel, thread_ts=row.thread_ts, **blocks.apology_message(row.reference)
            ),
        )
    except SlackApiError as error:
        log.error(
            "could not post the apology for question %s (ref %s): %s", row.id, row.reference, describe_error(error)
        )
        if error.response.get("error") in SLACK_CHANNEL_ERRORS:
            outbox.close_now(settings, row.id)
            return "refused"
        return "not_posted"
    except (outbox.UnsavedPost, SQLAlchemyError):
        raise  # the database went away: the caller waits for it
    except Exception as error:
        log.error(
            "could not post the apology for question %s (ref %s): %s", row.id, row.reference, describe_error(error)
        )
        return "not_posted"
    if posted is not None:
        clear_progress(client, row.surface, row.channel, row.thread_ts, row.message_ts)
    return "posted"
