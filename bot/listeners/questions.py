"""A question taken: claimed (one answer per Slack message, even when Slack sends it twice or
retries), recorded with its reply owed in the outbox, progress shown, and queued for a worker,
which posts the answer."""

from __future__ import annotations

import logging

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from application import outbox
from application.answering import RecordedQuestion, record_question
from bot.decisions import Incoming
from bot.listeners import uploads
from bot.listeners.common import Listeners
from core import db
from slack_shared import state
from slack_shared.progress import show_progress

log = logging.getLogger(__name__)


def question(
    listeners: Listeners,
    incoming: Incoming,
    client: WebClient,
    private_reason: str | None = None,
    *,
    offer_upload: bool = False,
) -> None:
    settings = listeners.settings
    recorded: RecordedQuestion | None = None
    try:
        # Claim and record in one transaction: a second delivery waits for it, then finds the claim.
        with db.session(settings) as session:
            claim = state.claim_message(session, incoming.channel, incoming.ts, incoming.event_id, "question")
            if claim.handled_elsewhere:
                log.info(
                    "message %s in %s is handled already (%s)",
                    incoming.ts,
                    incoming.channel,
                    "retried delivery" if claim.same_event else "second event for the same message",
                )
                return
            parent_id = (
                state.earlier_question_id(session, incoming.channel, incoming.thread_ts) if incoming.in_thread else None
            )
            recorded = record_question(
                session,
                incoming.text,
                surface=incoming.surface,
                asker=incoming.user,
                channel=incoming.channel,
                thread_ts=incoming.thread_ts,
                message_ts=incoming.ts,
                event_id=incoming.event_id,
                parent_id=parent_id,
                private_reply=private_reason is not None,
            )
            state.link_question(session, claim.id, recorded.id)
            outbox.add(session, recorded.id, settings.reply_wait_s)  # the sweep queues it if this bot stops
        # Progress first, then enqueue: the worker removes what is already there.
        show_progress(client, incoming.surface, incoming.channel, incoming.thread_ts, incoming.ts)
        listeners.enqueuer.enqueue_answer(recorded.id)
    except Exception as error:  # the database or the queue is down
        listeners.could_not_take(incoming, client, error, recorded)
        return
    listeners.bookkeep(state.mark_enqueued, claim.id)
    log.info(
        "question %s (ref %s) queued from %s%s",
        recorded.id,
        recorded.reference,
        incoming.surface,
        f", to be answered privately: {incoming.channel} {private_reason}" if private_reason else "",
    )
    if offer_upload:
        try:
            uploads.offer_upload(listeners, incoming, client, claim.id, asked=True)
        except SlackApiError as error:  # the question is on its way; the admin can send the file again
            log.warning("could not offer to add the files in %s: %s", incoming.channel, error.response.get("error"))
