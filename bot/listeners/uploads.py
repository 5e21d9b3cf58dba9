"""Files an admin sends the bot: offered as policy documents (buttons), and queued for ingestion
once an admin confirms; nothing is fetched before."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from slack_sdk import WebClient
from sqlalchemy.exc import SQLAlchemyError

from bot.decisions import Incoming, Surface
from bot.listeners.common import Listeners
from core import db
from slack_shared import blocks, state
from slack_shared.progress import show_progress

if TYPE_CHECKING:
    from core.models import SlackMessage

log = logging.getLogger(__name__)


def upload(listeners: Listeners, incoming: Incoming, client: WebClient) -> None:
    with db.session(listeners.settings) as session:
        claim = state.claim_message(session, incoming.channel, incoming.ts, incoming.event_id, "upload")
    if claim.handled_elsewhere:
        return
    offer_upload(listeners, incoming, client, claim.id, asked=False)
    listeners.bookkeep(state.mark_enqueued, claim.id)  # offered: a retried delivery does not offer again


def offer_upload(listeners: Listeners, incoming: Incoming, client: WebClient, claim_id: int, *, asked: bool) -> None:
    """Ask the admin whether the message's files become policy documents, saying where they
    would go; nothing is fetched until they confirm (on_upload_choice)."""
    files = [f for f in incoming.files if f.get("id")]
    if not files:
        return
    collection = listeners.settings.default_collection
    choice = json.dumps({"claim": claim_id, "files": [str(f["id"]) for f in files], "collection": collection})
    names = [str(f.get("name") or f.get("title") or f["id"]) for f in files]
    client.chat_postMessage(
        channel=incoming.channel,
        thread_ts=incoming.thread_ts,
        **blocks.upload_offer_message(names, collection, choice, asked=asked),
    )


def on_upload_choice(listeners: Listeners, body: Mapping[str, Any], client: WebClient) -> None:
    """Called after ack(): an admin's answer to upload_offer_message. The first confirmation
    of a message queues its files, with the collection the offer named; the worker ingests
    only confirmed files, and does not check admins itself (the bot decided)."""
    action = (body.get("actions") or [{}])[0]
    user = str((body.get("user") or {}).get("id") or "")
    channel = str((body.get("channel") or {}).get("id") or "")
    message = body.get("message") or {}
    try:
        choice = json.loads(str(action.get("value") or ""))
        claim_id, file_ids, collection = (
            int(choice["claim"]),
            [str(f) for f in choice["files"]],
            str(choice["collection"]),
        )
    except (ValueError, KeyError, TypeError):
        log.warning("upload choice without a readable value in %s", channel)
        return
    if user not in listeners.settings.admins:
        client.chat_postEphemeral(channel=channel, user=user, **blocks.upload_refused_message())
        return
    if action.get("action_id") != blocks.UPLOAD_ADD:
        client.chat_update(channel=channel, ts=str(message.get("ts") or ""), **blocks.upload_chosen_message(user, None))
        return
    thread_ts = str(message.get("thread_ts") or message.get("ts") or "")
    surface: Surface = "assistant" if listeners.in_assistant_thread(channel, thread_ts) else "dm"
    claim: SlackMessage | None = None
    try:
        claim = state.confirm_upload(listeners.settings, claim_id, channel, user)
        if claim is None:
            log.info("upload %s in %s was confirmed already", claim_id, channel)
            return
        show_progress(client, surface, channel, thread_ts, claim.message_ts)
        listeners.enqueuer.ingest(claim_id, file_ids, channel, thread_ts, user, collection)
    except Exception as error:  # the database or the queue is down: say so; the buttons stay for a later try
        if claim is not None:
            try:
                state.confirm_upload(listeners.settings, claim_id, channel, None)
            except SQLAlchemyError as second:
                log.error("could not take back the confirmation of upload %s: %s", claim_id, type(second).__name__)
        message_ts = claim.message_ts if claim is not None else thread_ts
        listeners.could_not_take(
            Incoming(None, surface, channel, user, message_ts, thread_ts, False, ""),
            client,
            error,
            taking="uploads",
        )
        return
    client.chat_update(
        channel=channel, ts=str(message.get("ts") or ""), **blocks.upload_chosen_message(user, collection)
    )
    log.info("upload of %d file(s) confirmed by admin %s, queued for collection %s", len(file_ids), user, collection)
