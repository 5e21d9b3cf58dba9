"""A short reply instead of an answer: a thank-you, an empty or too long question, a refusal
(outsiders, guests, non-admins), "ask again", or the admins' stats. One per Slack message."""

from __future__ import annotations

import logging

from slack_sdk import WebClient

from application.review import stats_summary
from bot.decisions import Decision, Incoming
from bot.listeners.common import Listeners
from core import db
from slack_shared import blocks, state

log = logging.getLogger(__name__)


def notice(listeners: Listeners, decision: Decision, incoming: Incoming, client: WebClient) -> None:
    settings = listeners.settings
    with db.session(settings) as session:
        claim = state.claim_message(session, incoming.channel, incoming.ts, incoming.event_id, "reply")
    # Handled already: by another event, by this one's earlier delivery, or as a question
    # (a retried delivery decided otherwise, e.g. on another bot process).
    if not claim.new and (not claim.same_event or claim.reply_ts or claim.question_id):
        return
    if decision.kind == "empty":
        message = blocks.empty_question_message()
    elif decision.kind == "thanks":
        message = blocks.thanks_message()
    elif decision.kind == "too_long":
        message = blocks.too_long_message(len(incoming.text), settings.max_question_chars)
    elif decision.kind == "upload_refused":
        message = blocks.upload_refused_message()
    elif decision.kind == "stats_refused":
        message = blocks.admin_only_message()
    elif decision.kind == "outsider":
        log.info("not answering %s in %s: %s", incoming.user, incoming.channel, decision.reason)
        message = blocks.members_only_message()
    elif decision.kind == "unverified":
        message = blocks.unverified_message()
    elif decision.kind == "stats":
        message = blocks.stats_message(stats_summary(settings, decision.days))
    else:  # pragma: no cover - every kind is handled above
        return
    posted = client.chat_postMessage(channel=incoming.channel, thread_ts=incoming.thread_ts, **message)
    if posted.get("ts"):
        listeners.bookkeep(state.set_reply_ts, claim.id, str(posted["ts"]))
