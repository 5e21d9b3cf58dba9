"""A decision carried out: the writer checked with Slack (a bot user, a guest), then a question
recorded and queued, an upload offered, or a notice posted. A database down before anything was
recorded is said in the thread."""

from __future__ import annotations

import logging

from slack_sdk import WebClient
from sqlalchemy.exc import SQLAlchemyError

from bot.decisions import Decision, Incoming, Kind
from bot.listeners.common import Listeners
from bot.listeners.notices import notice
from bot.listeners.questions import question
from bot.listeners.uploads import upload
from bot.who_may_ask import profile_refusal
from slack_shared.askers import SlackUnavailable

log = logging.getLogger(__name__)

TAKING: dict[Kind, str] = {"question": "questions", "upload": "uploads"}


def carry_out(listeners: Listeners, decision: Decision, client: WebClient, *, shared_externally: bool = False) -> None:
    """`shared_externally`: the event said it came from a Slack Connect conversation."""
    incoming = decision.incoming
    if decision.kind == "ignore" or incoming is None:
        log.debug("ignored event: %s", decision.reason)
        return
    decision = _as_slack_knows_the_writer(listeners, decision, incoming, client)
    if decision.kind == "ignore":
        log.debug("ignored event: %s", decision.reason)
        return
    try:
        if decision.kind == "question":
            question(
                listeners,
                incoming,
                client,
                _private_reason(listeners, incoming, client, shared_externally),
                offer_upload=decision.offer_upload,
            )
        elif decision.kind == "upload":
            upload(listeners, incoming, client)
        else:
            notice(listeners, decision, incoming, client)
    except SQLAlchemyError as error:  # the database is down before anything was recorded
        listeners.could_not_take(incoming, client, error, taking=TAKING.get(decision.kind, "requests"))


def _as_slack_knows_the_writer(
    listeners: Listeners, decision: Decision, incoming: Incoming, client: WebClient
) -> Decision:
    """users.info on the writer: a bot user posting as a user (no `bot_id` in the event) is
    a bot all the same (POLICYBOT_IGNORE_BOTS: no reply, so two bots never talk in a loop),
    and a guest of the workspace gets the members-only notice. When Slack does not say just
    now, a question is met with "ask again" rather than answered unchecked; anything else
    goes on as decided."""
    checks_guest = decision.kind == "question" and not listeners.settings.answer_guests
    if not (checks_guest or listeners.settings.ignore_bots):
        return decision
    try:
        user = listeners.slack_user(client, incoming.user) or {}
    except SlackUnavailable as error:
        if not checks_guest:
            return decision
        log.warning("%s: asking %s to ask again", error, incoming.user)
        return Decision("unverified", incoming, reason=str(error))
    refusal = profile_refusal(incoming.user, user, listeners.settings, asks_question=decision.kind == "question")
    if refusal is None:
        return decision
    kind, reason = refusal
    return Decision(kind, incoming if kind == "outsider" else None, reason=reason)


def _private_reason(listeners: Listeners, incoming: Incoming, client: WebClient, shared_externally: bool) -> str | None:
    """Why the answer must go to the asker alone (slack_shared/audience.py); a DM with the bot (a `D`
    conversation, also when it mentions the bot) is theirs already."""
    if incoming.surface != "mention" or incoming.channel.startswith("D"):
        return None
    return listeners.audience.private_reason(
        listeners.lookups or client, listeners.settings, incoming.channel, shared_externally=shared_externally
    )
