"""What every listener shares: `Listeners` holds the settings, the enqueuer, the quick lookup
client, the channel audience and the outage replies, and the steps more than one flow takes (users.info
on the writer, whether a thread is the agent view's, the outage reply, a note on a claim)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from sqlalchemy.exc import SQLAlchemyError

from application import outbox
from application.answering import RecordedQuestion, mark_failed
from bot.decisions import Incoming
from bot.dedup import OutageReplies
from bot.enqueuer import Enqueuer
from bot.who_may_ask import BotIdentity, lacks_writer_team, writer_team
from core import services
from core.config import Settings
from slack_shared import blocks, state
from slack_shared.askers import SLACK_USERS, SlackUnavailable, is_guest, teams_of
from slack_shared.audience import ChannelAudience
from slack_shared.progress import clear_progress

log = logging.getLogger(__name__)


@dataclass
class Listeners:
    settings: Settings
    enqueuer: Enqueuer  # sends questions and uploads to the workers (workers/enqueuer.py, handed over by cli/serve.py)
    # For users.info before a question is taken: quick, without waiting out rate limits, so a
    # listener thread never stalls behind it (bot/app.py builds one); else the event's client.
    lookups: WebClient | None = None
    audience: ChannelAudience = field(default_factory=ChannelAudience)  # who reads a channel (cached)
    told_unavailable: OutageReplies = field(init=False)

    def __post_init__(self) -> None:
        self.told_unavailable = OutageReplies(lambda: services.configured_redis_url(self.settings))

    def slack_user(self, client: WebClient, user_id: str) -> dict[str, Any] | None:
        """users.info through the quick lookup client (cached; may raise SlackUnavailable)."""
        return SLACK_USERS.get(self.lookups or client, user_id)

    def with_writer_team(
        self, body: Mapping[str, Any], event: Mapping[str, Any], client: WebClient, me: BotIdentity
    ) -> Mapping[str, Any]:
        """Slack Connect events name the writer's team (`user_team`). One that does not is
        completed from users.info: the writer's workspace, or on Enterprise Grid their
        organisation and its workspaces, one of ours if any is. A writer whose team cannot be
        told is taken for an outsider, since policies are internal."""
        if not lacks_writer_team(body, event, self.settings):
            return event
        try:
            teams = teams_of(self.slack_user(client, str(event["user"])) or {})
        except SlackUnavailable as error:  # no team: an outsider, since policies are internal
            log.warning(
                "%s: the writer in the shared conversation %s is taken for an outsider", error, event.get("channel")
            )
            teams = ()
        return {**event, "user_team": writer_team(teams, me.teams | self.settings.member_teams)}

    def in_assistant_thread(self, channel: str, thread_ts: str | None) -> bool:
        try:
            return state.is_assistant_thread(self.settings, channel, thread_ts)
        except SQLAlchemyError as error:  # the database is down: carrying the message out says so
            log.warning("could not tell whether %s is an agent-view thread: %s", channel, type(error).__name__)
            return False

    def greets_a_guest(self, client: WebClient, user_id: str | None) -> bool:
        """Whether a greeting would go to a guest, who gets the members-only notice instead.
        When Slack does not say just now, the greeting goes out: questions are checked as asked."""
        if self.settings.answer_guests or not user_id:
            return False
        try:
            return is_guest(self.slack_user(client, user_id) or {})
        except SlackUnavailable as error:
            log.warning("%s: greeting %s", error, user_id)
            return False

    def bookkeep(self, step: Callable[..., None], claim_id: int, *args: str) -> None:
        """A note on a claim after the user's request went through: losing it must not
        turn into an outage reply for a request that is being handled."""
        try:
            step(self.settings, claim_id, *args)
        except SQLAlchemyError as error:
            log.warning(
                "could not %s for claim %s: %s", step.__name__.replace("_", " "), claim_id, type(error).__name__
            )

    def could_not_take(
        self,
        incoming: Incoming,
        client: WebClient,
        error: Exception,
        recorded: RecordedQuestion | None = None,
        taking: str = "questions",
    ) -> None:
        """Slack has its ack, so a database or queue outage is said in the thread, not left silent."""
        log.error(
            "could not take %s from %s in %s (%s): %s: %s",
            taking,
            incoming.surface,
            incoming.channel,
            "recorded, not queued" if recorded else "not recorded",
            type(error).__name__,
            error,
        )
        if recorded is not None:
            try:
                mark_failed(self.settings, recorded.id, error)  # admins see it in the log as failed
                outbox.close_now(self.settings, recorded.id)  # this reply is the one it gets
            except Exception as second:
                log.error("could not mark question %s failed: %s", recorded.id, second)
        if not self.told_unavailable.first_time(incoming.channel, incoming.ts):
            return  # the same message's other event (a DM that mentions the bot) got the reply
        clear_progress(client, incoming.surface, incoming.channel, incoming.thread_ts, incoming.ts)
        try:
            client.chat_postMessage(
                channel=incoming.channel,
                thread_ts=incoming.thread_ts,
                **blocks.unavailable_message(recorded.reference if recorded else None, taking),
            )
        except SlackApiError as slack_error:
            log.error("could not say so in %s: %s", incoming.channel, slack_error.response.get("error"))
