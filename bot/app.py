"""The Bolt app: wiring only. Who may ask is checked in bot/who_may_ask.py, listeners decide
(bot/decisions.py) and carry out (bot/listeners/), blocks render (slack_shared/blocks.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from slack_bolt import Ack, App, BoltContext, BoltRequest
from slack_sdk import WebClient
from sqlalchemy.exc import SQLAlchemyError

from bot import inbox
from bot.enqueuer import Enqueuer
from bot.listeners.agent_view import on_assistant_thread_started
from bot.listeners.app_home import on_app_home_opened
from bot.listeners.common import Listeners
from bot.listeners.feedback import on_feedback
from bot.listeners.mentions import on_mention
from bot.listeners.messages import on_message
from bot.listeners.uploads import on_upload_choice
from bot.who_may_ask import identity, ignoring_bot_events
from core.config import Settings, secret_value
from slack_shared import blocks
from slack_shared.client import web_client

log = logging.getLogger(__name__)

# The events the app subscribes to (bot/manifest.yml lists the same ones).
EVENTS = ("app_mention", "message", "app_home_opened", "assistant_thread_started", "assistant_thread_context_changed")


class SlackConfigError(RuntimeError):
    """A Slack setting needed for this mode is missing; the message names it."""


def require_slack_settings(settings: Settings, *names: str) -> None:
    """Fail clearly (naming the variables, never showing values) when Slack settings are missing."""
    missing = [name for name in names if not getattr(settings, name.lower(), None)]
    if missing:
        raise SlackConfigError(
            "missing "
            + ", ".join(missing)
            + ": set "
            + ("it" if len(missing) == 1 else "them")
            + ' in the environment or .env (see docs/slack.md, "Connect to Slack")'
        )


# A lookup on a listener thread (users.info) before a question is taken: quick, or not at all.
LOOKUP_TIMEOUT_S = 3


def build_app(settings: Settings, enqueuer: Enqueuer, *, socket_mode: bool = False) -> App:
    """A Bolt app for one workspace (SLACK_BOT_TOKEN), verifying requests with SLACK_SIGNING_SECRET;
    its listeners send work with `enqueuer` (workers/enqueuer.py's CeleryEnqueuer, or a test's).

    `auth.test` runs once here (against settings.slack_api_url), so a wrong token fails at
    startup and the bot knows its own user ID to ignore its own messages.
    """
    require_slack_settings(settings, "SLACK_BOT_TOKEN", *(() if socket_mode else ("SLACK_SIGNING_SECRET",)))
    app = App(
        # The token travels in `client` (Bolt takes it from there); auth.test runs against slack_api_url.
        # Socket Mode requests are not signed (Bolt skips the check for them); HTTP ones always are.
        signing_secret=secret_value(settings.slack_signing_secret) or "",
        client=web_client(settings),
        process_before_response=False,
        ignoring_self_events_enabled=True,
        name="policybot",
    )
    lookups = web_client(settings, wait_out_rate_limits=False, timeout_s=LOOKUP_TIMEOUT_S, connection_retries=0)
    listeners = Listeners(settings, enqueuer, lookups)
    app.use(ignoring_bot_events(settings))  # bots' events are dropped before they are stored
    app.use(_store_before_ack(settings))
    register(app, listeners)
    return app


def _store_before_ack(settings: Settings) -> Callable[..., None]:
    """A middleware, run after Bolt verified the request and before its listener acks it: the
    event goes into the inbox (bot/inbox.py), so a bot killed between the ack and the
    listener's work leaves it for the sweep to replay."""

    def store_event(body: dict[str, Any], next: Callable[[], None]) -> None:  # noqa: A002 - Bolt's argument name
        event_id = inbox.event_id_to_store(body)
        if event_id is not None:
            try:
                inbox.store(settings, event_id, body)
            except SQLAlchemyError as error:  # the database is down: the listener says so in the thread
                log.warning("could not store Slack event %s before its ack: %s", event_id, type(error).__name__)
        next()

    return store_event


def _carried_out(settings: Settings, body: dict[str, Any]) -> None:
    """The event's listener is done with it: out of the inbox."""
    event_id = inbox.event_id_to_store(body)
    if event_id is None:
        return
    try:
        inbox.done(settings, event_id)
    except SQLAlchemyError as error:  # remembered: this bot's next sweep clears it (bot/inbox.py)
        log.warning("could not clear Slack event %s from the inbox: %s", event_id, type(error).__name__)


def replay_event(app: App, body: dict[str, Any]) -> None:
    """Run a stored event through the app again, as a delivery of its own. Its signature was
    verified when it came; the stored body has none, so it goes in as Socket Mode requests
    do (unsigned). The listener runs in Bolt's threads and clears the event when done."""
    app.dispatch(BoltRequest(body=json.dumps(body), mode="socket_mode"))


def register(app: App, listeners: Listeners) -> None:
    @app.event("app_mention")
    def app_mention(body: dict[str, Any], event: dict[str, Any], client: WebClient, context: BoltContext) -> None:
        on_mention(listeners, body, event, client, identity(context))
        _carried_out(listeners.settings, body)

    @app.event("message")
    def message(body: dict[str, Any], event: dict[str, Any], client: WebClient, context: BoltContext) -> None:
        on_message(listeners, body, event, client, identity(context))
        _carried_out(listeners.settings, body)

    @app.event("assistant_thread_started")
    def assistant_thread_started(event: dict[str, Any], client: WebClient) -> None:
        on_assistant_thread_started(listeners, event, client)

    @app.event("assistant_thread_context_changed")
    def assistant_thread_context_changed() -> None:
        return None  # the channel a user looks at does not change policy answers

    @app.event("app_home_opened")
    def app_home_opened(event: dict[str, Any], client: WebClient) -> None:
        on_app_home_opened(listeners, event, client)

    @app.action(blocks.FEEDBACK_UP)
    @app.action(blocks.FEEDBACK_DOWN)
    def feedback(ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        ack()
        on_feedback(listeners, body, client)

    @app.action(blocks.UPLOAD_ADD)
    @app.action(blocks.UPLOAD_SKIP)
    def upload_choice(ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        ack()
        on_upload_choice(listeners, body, client)

    @app.error
    def on_error(error: Exception, body: dict[str, Any]) -> None:
        event = body.get("event") or {}
        log.error("listener failed for %s %s: %s", body.get("type"), event.get("type", ""), error, exc_info=error)
