"""Who may ask: pure predicates over a Slack event or a users.info record, and the Bolt
middleware that runs the one needing nothing else.

Policies are internal. Not answered, and told nothing: this bot itself and, with
POLICYBOT_IGNORE_BOTS, other bots (so two bots never talk in a loop). Told "members only":
members of other organisations writing in a Slack Connect conversation (unless
POLICYBOT_ANSWER_OUTSIDERS) and guests of the workspace (unless POLICYBOT_ANSWER_GUESTS).

Where each check runs:
- `bot_writer`, from the event alone: `ignoring_bot_events`, global Bolt middleware before the
  event is stored (bot/app.py), as Bolt's own `ignoring_self_events` is: the event is acked
  and goes no further.
- `outsider_team`, from the event: in decide_mention/decide_message (bot/decisions.py), since
  an outsider gets a reply, which the listener posts once per message after the ack.
- `writer_team`, `profile_refusal`, from users.info: in the listener, after the ack. Middleware
  runs before the ack, and a lookup may take LOOKUP_TIMEOUT_S (bot/app.py) of Slack's 3 s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from slack_bolt import Ack, BoltContext, BoltResponse

from core.config import Settings
from slack_shared.askers import is_guest

log = logging.getLogger(__name__)

UNKNOWN_TEAM = "unknown"  # a writer in a Slack Connect conversation whose team Slack would not tell
EVENTS_FROM_WRITERS = ("app_mention", "message")  # the events whose writer may be asking


@dataclass(frozen=True)
class BotIdentity:
    user_id: str | None
    bot_id: str | None
    teams: frozenset[str] = frozenset()  # the workspace (and Enterprise Grid organisation) the app is installed in


def identity(context: BoltContext) -> BotIdentity:
    """This bot, as Bolt's authorization found it for the request."""
    return BotIdentity(
        user_id=context.bot_user_id,
        bot_id=context.bot_id,
        teams=frozenset(team for team in (context.team_id, context.enterprise_id) if team),
    )


def bot_writer(event: Mapping[str, Any], me: BotIdentity, ignore_bots: bool) -> str | None:
    """Why a message comes from a bot we should not answer (None: answer it)."""
    user = event.get("user")
    bot_id = event.get("bot_id")
    if (me.user_id and user == me.user_id) or (me.bot_id and bot_id == me.bot_id):
        return "own message"
    if (bot_id or event.get("subtype") == "bot_message" or event.get("bot_profile")) and ignore_bots:
        return "another bot (POLICYBOT_IGNORE_BOTS)"
    return None


def outsider_team(event: Mapping[str, Any], me: BotIdentity, settings: Settings, shared_externally: bool) -> str | None:
    """The team of a member of another organisation writing in a Slack Connect channel or DM
    (None for our own members). Policies are internal: outsiders are not answered unless
    POLICYBOT_ANSWER_OUTSIDERS is on. Their team is `user_team`; ours are the installation's
    and POLICYBOT_MEMBER_TEAMS (other workspaces of an Enterprise Grid organisation). A
    writer of no named team (a webhook's post) is no member either."""
    if not shared_externally or settings.answer_outsiders:
        return None
    team = str(event.get("user_team") or event.get("source_team") or UNKNOWN_TEAM)
    return team if team not in me.teams | settings.member_teams else None


def lacks_writer_team(body: Mapping[str, Any], event: Mapping[str, Any], settings: Settings) -> bool:
    """Whether a Slack Connect event leaves out the team outsider_team needs, so that
    users.info must tell it (writer_team)."""
    return bool(
        body.get("is_ext_shared_channel")
        and not settings.answer_outsiders
        and event.get("user")
        and not (event.get("user_team") or event.get("source_team"))
    )


def writer_team(teams: Iterable[str], ours: frozenset[str]) -> str:
    """The team to judge a writer by, from users.info (askers.teams_of): one of ours if any
    is (on Enterprise Grid a user belongs to several), else their first; UNKNOWN_TEAM if none."""
    teams = tuple(teams)
    return next((team for team in teams if team in ours), teams[0] if teams else UNKNOWN_TEAM)


def profile_refusal(
    writer: str, user: dict[str, Any], settings: Settings, asks_question: bool
) -> tuple[Literal["ignore", "outsider"], str] | None:
    """What users.info says of a writer the event did not: a bot user posting as a user (no
    `bot_id`) is a bot all the same (POLICYBOT_IGNORE_BOTS), and a guest asking a question
    gets the members-only notice (unless POLICYBOT_ANSWER_GUESTS). None: as decided."""
    if settings.ignore_bots and user.get("is_bot"):
        return "ignore", f"{writer} is a bot user (users.info; POLICYBOT_IGNORE_BOTS)"
    if asks_question and not settings.answer_guests and is_guest(user):
        return "outsider", "a guest of the workspace"
    return None


def ignoring_bot_events(settings: Settings) -> Callable[..., BoltResponse | None]:
    """Global Bolt middleware: a mention or message written by this bot or, with
    POLICYBOT_IGNORE_BOTS, by another bot is acked and goes no further (not stored in the
    inbox, no listener)."""

    def ignore_bot_events(
        body: dict[str, Any],
        context: BoltContext,
        ack: Ack,
        next: Callable[[], None],  # noqa: A002 - Bolt's argument name
    ) -> BoltResponse | None:
        event = body.get("event") or {}
        if body.get("type") == "event_callback" and event.get("type") in EVENTS_FROM_WRITERS:
            why = bot_writer(event, identity(context), settings.ignore_bots)
            if why:
                log.debug("ignored event: %s", why)
                return ack()
        next()
        return None

    return ignore_bot_events
