"""Who may ask (bot/who_may_ask.py): the pure predicates, and the Bolt middleware that drops
bots' events, run through a real Bolt app without any service."""

from __future__ import annotations

import json
from typing import Any

import pytest
from slack_bolt import App
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request import BoltRequest

from bot.who_may_ask import (
    UNKNOWN_TEAM,
    BotIdentity,
    bot_writer,
    ignoring_bot_events,
    lacks_writer_team,
    outsider_team,
    profile_refusal,
    writer_team,
)
from core.config import Settings

ME = BotIdentity(user_id="UPOLICYBOT", bot_id="BPOLICYBOT", teams=frozenset({"TOURS"}))
PERSON = {"type": "message", "channel_type": "im", "user": "U1", "channel": "D1", "ts": "1.2", "text": "hello"}


@pytest.fixture
def plain_settings() -> Settings:  # no services needed
    return Settings()


@pytest.mark.parametrize(
    "extra,reason",
    [
        ({"user": "UPOLICYBOT"}, "own message"),
        ({"bot_id": "BPOLICYBOT"}, "own message"),
        ({"bot_id": "BOTHER", "user": "UOTHER"}, "another bot"),
        ({"subtype": "bot_message"}, "another bot"),
        ({"bot_profile": {"id": "BOTHER"}}, "another bot"),
    ],
)
def test_bot_writers_are_told_apart_from_people(extra: dict[str, Any], reason: str) -> None:
    assert reason in (bot_writer(PERSON | extra, ME, ignore_bots=True) or "")
    # With POLICYBOT_IGNORE_BOTS off, other bots may ask; this bot never answers itself.
    expected_when_allowed = "own message" if reason == "own message" else None
    assert bot_writer(PERSON | extra, ME, ignore_bots=False) == expected_when_allowed
    assert bot_writer(PERSON, ME, ignore_bots=True) is None


def test_outsiders_are_members_of_no_team_of_ours_in_shared_conversations(plain_settings) -> None:
    vendor = PERSON | {"user_team": "TVENDOR"}
    assert outsider_team(vendor, ME, plain_settings, shared_externally=True) == "TVENDOR"
    assert outsider_team(vendor, ME, plain_settings, shared_externally=False) is None
    assert outsider_team(PERSON | {"user_team": "TOURS"}, ME, plain_settings, shared_externally=True) is None
    assert outsider_team(PERSON | {"source_team": "TVENDOR"}, ME, plain_settings, shared_externally=True) == "TVENDOR"
    assert outsider_team(PERSON, ME, plain_settings, shared_externally=True) == UNKNOWN_TEAM  # no team named
    sister = plain_settings.model_copy(update={"member_team_ids": "TVENDOR"})
    assert outsider_team(vendor, ME, sister, shared_externally=True) is None
    open_to_all = plain_settings.model_copy(update={"answer_outsiders": True})
    assert outsider_team(vendor, ME, open_to_all, shared_externally=True) is None


def test_the_writers_team_is_looked_up_only_when_a_shared_event_leaves_it_out(plain_settings) -> None:
    shared = {"is_ext_shared_channel": True}
    assert lacks_writer_team(shared, PERSON, plain_settings)
    assert not lacks_writer_team({}, PERSON, plain_settings)
    assert not lacks_writer_team(shared, PERSON | {"user_team": "TVENDOR"}, plain_settings)
    assert not lacks_writer_team(shared, {k: v for k, v in PERSON.items() if k != "user"}, plain_settings)
    assert not lacks_writer_team(shared, PERSON, plain_settings.model_copy(update={"answer_outsiders": True}))
    assert writer_team(["TOTHER", "TOURS"], frozenset({"TOURS"})) == "TOURS"
    assert writer_team(["TOTHER", "TTHIRD"], frozenset({"TOURS"})) == "TOTHER"
    assert writer_team([], frozenset({"TOURS"})) == UNKNOWN_TEAM


def test_users_info_refuses_bot_users_and_guests_who_ask(plain_settings) -> None:
    bot_user, guest, member = {"is_bot": True}, {"is_restricted": True}, {"is_restricted": False}
    assert profile_refusal("UBOT", bot_user, plain_settings, asks_question=False) == (
        "ignore",
        "UBOT is a bot user (users.info; POLICYBOT_IGNORE_BOTS)",
    )
    assert profile_refusal("UG", guest, plain_settings, asks_question=True) == ("outsider", "a guest of the workspace")
    assert profile_refusal("UG", {"is_ultra_restricted": True}, plain_settings, asks_question=True) is not None
    assert (
        profile_refusal("UG", guest, plain_settings, asks_question=False) is None
    )  # a guest's "thanks" gets its reply
    assert profile_refusal("UM", member, plain_settings, asks_question=True) is None
    allowing = plain_settings.model_copy(update={"answer_guests": True, "ignore_bots": False})
    assert profile_refusal("UG", guest, allowing, asks_question=True) is None
    assert profile_refusal("UBOT", bot_user, allowing, asks_question=True) is None


def _app(settings: Settings, reached: list[str]) -> App:
    """A Bolt app with the middleware and listeners that note what reached them. Bolt's own
    self-event check is off, so that the one under test is the only one."""
    app = App(
        signing_secret="unit-test-secret",
        authorize=lambda **_: AuthorizeResult(
            enterprise_id=None, team_id="TOURS", bot_user_id="UPOLICYBOT", bot_id="BPOLICYBOT", bot_token="xoxb-unit"
        ),
        process_before_response=True,  # listeners run inside dispatch, so the test sees them
        ignoring_self_events_enabled=False,
        request_verification_enabled=False,
    )
    app.use(ignoring_bot_events(settings))
    app.event("message")(lambda event: reached.append(str(event.get("text"))))
    app.event("app_mention")(lambda event: reached.append(str(event.get("text"))))
    return app


def _deliver(app: App, event: dict[str, Any]) -> int:
    body = {"type": "event_callback", "team_id": "TOURS", "event_id": "Ev" + event["text"], "event": event}
    return app.dispatch(BoltRequest(body=json.dumps(body), mode="socket_mode")).status


def test_the_middleware_acks_bots_events_and_keeps_them_from_the_listeners(plain_settings) -> None:
    reached: list[str] = []
    app = _app(plain_settings, reached)
    events = {
        "person": PERSON | {"text": "person"},
        "own": PERSON | {"user": "UPOLICYBOT", "text": "own"},
        "other bot": PERSON | {"user": "UOTHER", "bot_id": "BOTHER", "text": "other bot"},
        "mention by a bot": {"type": "app_mention", "bot_id": "BOTHER", "channel": "C1", "ts": "1.3", "text": "hook"},
        "mention by a person": {"type": "app_mention", "user": "U1", "channel": "C1", "ts": "1.4", "text": "asked"},
    }
    assert all(_deliver(app, event) == 200 for event in events.values())  # acked: Slack does not retry
    assert reached == ["person", "asked"]
    permissive: list[str] = []
    app = _app(plain_settings.model_copy(update={"ignore_bots": False}), permissive)
    for event in events.values():
        _deliver(app, event)
    assert permissive == ["person", "other bot", "hook", "asked"]
