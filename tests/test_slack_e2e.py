"""Slack, end to end, with real processes: signed events over HTTP to the Bolt app (uvicorn),
a real Celery worker process on the test Redis, the test PostgreSQL, and the local Slack
Web API fake recording every call. Nothing we own is mocked.

One worker serves the module; the kill test (last) replaces it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC

import pytest
from sqlalchemy import select

from support.slack import (
    ADMIN,
    FAIL_MARKER,
    answered_once_about_parental_leave,
    bot_process,
    buttons,
    choose_upload,
    context_texts,
    question_for,
    section_texts,
    wait_until,
)

pytestmark = pytest.mark.timeout(300)


def _settle(seconds: float = 1.5) -> None:
    """Give a would-be duplicate time to show up before counting."""
    time.sleep(seconds)


def _answer_post(stack, channel: str, ts: str, timeout: float = 60):
    posts = stack.fake.wait_for_posts(channel, ts, timeout=timeout)
    return posts[0]


@contextmanager
def _rate_limited_posts(stack, times: int, **fake_settings: object) -> Iterator[None]:
    """chat.postMessage answers HTTP 429 its next `times` calls, with the Slack fake's
    `fake_settings` (how it answers them) for the length of the block."""
    saved = {name: getattr(stack.fake, name) for name in fake_settings}
    for name, value in fake_settings.items():
        setattr(stack.fake, name, value)
    stack.fake.rate_limited["chat.postMessage"] = times
    try:
        yield
    finally:
        stack.fake.rate_limited.pop("chat.postMessage", None)
        for name, value in saved.items():
            setattr(stack.fake, name, value)


def _posted(stack, channel: str, ts: str, timeout: float = 120):
    """The posts Slack took in a thread, once there is one."""
    return stack.fake.wait_for(
        lambda: [p for p in stack.fake.posts(channel, ts) if p.response.get("ok")],
        timeout=timeout,
        what="a post Slack took",
    )


# ---------------------------------------------------------------- answers


def test_mention_gets_one_cited_answer_in_its_thread(stack) -> None:
    from core.wording import describe_action

    channel = "CMAIN00001"
    event = stack.mention("How many weeks of parental leave do primary caregivers get?", channel)
    response = stack.deliver(event)
    assert response.status_code == 200
    assert response.elapsed.total_seconds() < 3  # acked well within Slack's 3 s

    post = _answer_post(stack, channel, event["ts"])
    _settle()
    assert len(stack.fake.posts(channel, event["ts"])) == 1
    [row] = question_for(stack.settings, channel, event["ts"])
    assert row.status == "answered" and row.surface == "mention" and row.answer_ts == post.response["ts"]
    assert row.question == "How many weeks of parental leave do primary caregivers get?"  # mention removed

    text = "\n".join(section_texts(post))
    assert "[1]" in text and "16 weeks" in text
    contexts = context_texts(post)
    assert any(describe_action(row.action, row.found, row.sources_used) in c for c in contexts)
    assert any(c.startswith("[1] ") and "leave-policy.md" in c and "knowledge base" in c for c in contexts)
    assert [(b["action_id"], b["value"]) for b in buttons(post)] == [
        ("feedback_up", str(row.id)),
        ("feedback_down", str(row.id)),
    ]
    assert post.headers["authorization"] == f"Bearer {stack.fake.bot_token}"

    # progress shown on the question, then removed when the answer is posted
    added = stack.fake.calls_to("reactions.add", channel=channel, timestamp=event["ts"])
    removed = stack.fake.calls_to("reactions.remove", channel=channel, timestamp=event["ts"])
    assert [c["name"] for c in added] == ["eyes"] and [c["name"] for c in removed] == ["eyes"]
    assert added[0].at < removed[0].at and removed[0].at >= post.at


def test_thread_follow_up_is_answered_in_the_same_thread_with_context(stack) -> None:
    channel = "CTHREAD001"
    first = stack.mention("How many weeks of parental leave do primary caregivers get?", channel)
    stack.deliver(first)
    _answer_post(stack, channel, first["ts"])
    follow_up = stack.mention("and is it at full pay?", channel, thread_ts=first["ts"])
    assert stack.deliver(follow_up).status_code == 200

    posts = stack.fake.wait_for_posts(channel, first["ts"], count=2)
    _settle()
    assert len(stack.fake.posts(channel, first["ts"])) == 2
    [parent] = question_for(stack.settings, channel, first["ts"])
    [child] = question_for(stack.settings, channel, follow_up["ts"])
    assert child.parent_id == parent.id and child.thread_ts == first["ts"]
    assert child.question == "and is it at full pay?"  # the log keeps the question as asked
    # the pipeline saw the earlier question too, so the evidence is about parental leave
    assert any(c["document"] == "leave-policy.md" for c in child.citations)
    assert posts[1]["thread_ts"] == first["ts"]


def test_a_thread_question_that_stands_alone_is_asked_alone_and_a_thanks_is_no_question(stack, knowledge_base) -> None:
    """Only a follow-up that leans on the earlier question is asked with it; the earlier one
    may be someone else's, whose names are redacted from the fallback query too."""
    stack.fake.add_user("UPRIYA0002", "Priya Raghunathan", display_name="priya.r")
    channel = "CTHREAD002"
    first = stack.mention(
        "Hi, I'm Priya Raghunathan - when do payslips show up in Workday?", channel, user="UPRIYA0002"
    )
    stack.deliver(first)
    _answer_post(stack, channel, first["ts"])
    follow_up = stack.mention("and the W-2?", channel, user="UBOB000001", thread_ts=first["ts"])
    stack.deliver(follow_up)
    stack.fake.wait_for_posts(channel, first["ts"], count=2)
    [child] = question_for(stack.settings, channel, follow_up["ts"])
    sent = " ".join(query["query"] for query in child.fallback_queries).lower()
    assert child.fallback_queries and "priya" not in sent and "raghunathan" not in sent

    leave = stack.mention("How many weeks of parental leave do primary caregivers get?", channel)
    stack.deliver(leave)
    _answer_post(stack, channel, leave["ts"])
    other_topic = stack.mention(
        "What is the deadline for submitting travel expense reports?", channel, thread_ts=leave["ts"]
    )
    stack.deliver(other_topic)
    posts = stack.fake.wait_for_posts(channel, leave["ts"], count=2)
    assert "30 calendar days" in section_texts(posts[1])[0]  # it leads the answer
    [standalone] = question_for(stack.settings, channel, other_topic["ts"])
    assert {c["document"] for c in standalone.citations} == {"travel-expenses.md"}

    thanks = stack.mention("thanks! :pray:", channel, thread_ts=leave["ts"])
    stack.deliver(thanks)
    posts = stack.fake.wait_for_posts(channel, leave["ts"], count=3)
    assert "You're welcome" in posts[2]["text"]
    assert question_for(stack.settings, channel, thanks["ts"]) == []


def test_a_follow_up_at_the_top_level_is_asked_what_it_follows(stack) -> None:
    """Issue 34: a follow-up with no earlier question in its thread ("What about parking?" at
    the top of a channel or a DM) gets a reply that asks what it follows, not a passage about
    whatever retrieval guessed; the log keeps it as a follow-up, found nothing."""
    for event in (
        stack.mention("What about on international trips?", "CLONEFU001"),
        stack.dm("and for contractors?", "DLONEFU001"),
    ):
        assert stack.deliver(event).status_code == 200
        post = _answer_post(stack, event["channel"], event["ts"])
        text = " ".join(section_texts(post))
        assert text.startswith("This looks like a follow-up to an earlier question. Ask it in the thread of that")
        assert any("Not answered: a follow-up needs the question it follows" in c for c in context_texts(post))
        assert not any(c.startswith("[1] ") for c in context_texts(post))  # no sources: nothing was looked up
        [row] = wait_until(
            lambda event=event: [r for r in question_for(stack.settings, event["channel"], event["ts"]) if r.answer_ts],
            30,
            "the reply's ts saved",
        )
        assert row.status == "answered" and row.found is False and row.question_class == "follow-up"
        assert row.parent_id is None and row.scores == [] and row.answer_ts == post.response["ts"]


def test_direct_message_gets_one_answer_in_thread(stack) -> None:
    channel = "DUSER00001"
    event = stack.dm("What is the deadline for submitting travel expense reports?", channel)
    assert stack.deliver(event).status_code == 200
    post = _answer_post(stack, channel, event["ts"])
    _settle()
    assert len(stack.fake.posts(channel)) == 1
    [row] = question_for(stack.settings, channel, event["ts"])
    assert row.surface == "dm" and row.status == "answered"
    assert "30 calendar days" in "\n".join(section_texts(post))
    assert any("travel-expenses.md" in c for c in context_texts(post))
    assert len(buttons(post)) == 2


def test_the_askers_names_never_reach_a_fallback_source(stack, knowledge_base) -> None:
    """People introduce themselves; their names (from Slack's users.info) are redacted before
    the keyword rewrite that is sent to the HR portal. A user Slack cannot describe is still answered."""
    stack.fake.add_user("UPRIYA0001", "Priya Raghunathan", display_name="priya.r")
    channel = "CNAMES0001"
    event = stack.mention(
        "Hi, I'm Priya Raghunathan - when do payslips show up in Workday?", channel, user="UPRIYA0001"
    )
    assert stack.deliver(event).status_code == 200
    _answer_post(stack, channel, event["ts"])
    [row] = question_for(stack.settings, channel, event["ts"])
    sent = " ".join(query["query"] for query in row.fallback_queries).lower()
    assert row.fallback_queries and "payslips" in sent
    assert "priya" not in sent and "raghunathan" not in sent
    assert stack.fake.calls_to("users.info", user="UPRIYA0001")

    unknown = stack.mention("When do payslips show up in Workday?", channel, user="UNOBODY001")
    assert stack.deliver(unknown).status_code == 200
    assert "payslip" in _answer_post(stack, channel, unknown["ts"])["text"].lower()
    assert "Slack will not describe user UNOBODY001 (user_not_found)" in stack.worker.log_text()


def test_agent_view_thread_greets_then_answers_with_status(stack) -> None:
    channel, thread_ts = "DAGENT0001", stack.fake.new_ts()
    started = {
        "type": "assistant_thread_started",
        "event_ts": thread_ts,
        "assistant_thread": {"user_id": "UAGENTUSER", "channel_id": channel, "thread_ts": thread_ts, "context": {}},
    }
    assert stack.deliver(started).status_code == 200
    greeting = stack.fake.wait_for_posts(channel, thread_ts)[0]
    assert "policybot" in greeting["text"]
    assert stack.fake.wait_for(lambda: stack.fake.calls_to("assistant.threads.setSuggestedPrompts", channel_id=channel))

    event = stack.dm(
        "How long do I have to submit a travel expense report?", channel, user="UAGENTUSER", thread_ts=thread_ts
    )
    stack.deliver(event)
    posts = stack.fake.wait_for_posts(channel, thread_ts, count=2)
    [row] = question_for(stack.settings, channel, event["ts"])
    assert row.surface == "assistant" and row.status == "answered"
    # "is checking…" while working, cleared once the answer is posted
    cleared = stack.fake.wait_for(
        lambda: stack.fake.calls_to("assistant.threads.setStatus", channel_id=channel, status="")
    )
    statuses = stack.fake.calls_to("assistant.threads.setStatus", channel_id=channel)
    assert statuses[0]["status"] and statuses[0].at < posts[1].at <= cleared[0].at
    assert not stack.fake.calls_to("reactions.add", channel=channel)
    assert len(buttons(posts[1])) == 2


def test_slack_connect_members_of_other_organisations_get_a_notice_not_policies(stack) -> None:
    """In a channel shared with a vendor, the vendor's people are told the bot answers members
    only; nothing is recorded or searched for them. Our own member there is answered."""
    channel = "CSHARED001"
    outsider = stack.mention("What is the hotel cap per night?", channel, user="UVENDOR001") | {
        "user_team": "TVENDOR01"
    }
    member = stack.mention("How many weeks of parental leave do primary caregivers get?", channel) | {
        "user_team": stack.fake.team_id
    }
    for event in (outsider, member):
        body = stack.fake.event_body(event) | {"is_ext_shared_channel": True}
        assert stack.fake.deliver(stack.events_url, body).status_code == 200
    [notice] = stack.fake.wait_for_posts(channel, outsider["ts"], timeout=30)
    assert "for its own members only" in notice["text"]
    # Our member is answered by DM, the thread gets a note without policy text (docs/security.md).
    assert "direct message" in _answer_post(stack, channel, member["ts"])["text"]
    [answered] = question_for(stack.settings, channel, member["ts"])
    [answer] = [post for post in stack.fake.posts(member["user"]) if post.response["ts"] == answered.answer_ts]
    assert "16 weeks" in "\n".join(section_texts(answer))
    _settle()
    assert question_for(stack.settings, channel, outsider["ts"]) == []
    assert len(stack.fake.posts(channel, outsider["ts"])) == 1
    # An event that does not name the writer's team: Slack is asked (users.info), and a writer
    # it cannot place is no member.
    stack.fake.add_user("UVENDOR002", "Vera Vendor")["team_id"] = "TVENDOR01"
    stack.fake.add_user("UMEMBER002", "Mo Member")
    # On Enterprise Grid, users.info may name the organisation and its workspaces instead.
    grid_member = stack.fake.add_user("WGRIDMEMB1", "Gil Grid")
    del grid_member["team_id"]
    grid_member["enterprise_user"] = {"enterprise_id": "EOTHERORG", "teams": ["TOTHER001", stack.fake.team_id]}
    unnamed = {
        user: stack.mention("What is the hotel cap per night?", channel, user=user)
        for user in ("UVENDOR002", "UNOBODY01", "UMEMBER002", "WGRIDMEMB1")
    }
    for event in unnamed.values():
        body = stack.fake.event_body(event) | {"is_ext_shared_channel": True}
        assert stack.fake.deliver(stack.events_url, body).status_code == 200
    for user in ("UVENDOR002", "UNOBODY01"):
        [notice] = stack.fake.wait_for_posts(channel, unnamed[user]["ts"], timeout=30)
        assert "for its own members only" in notice["text"]
        assert question_for(stack.settings, channel, unnamed[user]["ts"]) == []
    for user in ("UMEMBER002", "WGRIDMEMB1"):
        assert "members only" not in _answer_post(stack, channel, unnamed[user]["ts"])["text"]
        assert len(question_for(stack.settings, channel, unnamed[user]["ts"])) == 1
    assert {call.params["user"] for call in stack.fake.calls_to("users.info")} >= set(unnamed)


def test_guests_of_the_workspace_get_a_notice_unless_allowed(stack, tmp_path, caplog) -> None:
    """Guests (contractors let into a few channels) are told the bot answers members only, in a
    channel and in a DM; nothing is recorded or searched for them. POLICYBOT_ANSWER_GUESTS
    lets them ask."""
    stack.fake.add_user("UGUEST0001", "Gus Guest")["is_restricted"] = True
    stack.fake.add_user("UGUEST0002", "Sal Single")["is_ultra_restricted"] = True
    caplog.set_level(logging.INFO, logger="bot.listeners")
    question = "How many weeks of parental leave do primary caregivers get?"
    asked = [
        stack.mention(question, "CGUESTS001", user="UGUEST0001"),
        stack.mention(question, "CGUESTS001", user="UGUEST0002"),
        stack.dm(question, "DGUEST0001", user="UGUEST0001"),
    ]
    for event in asked:
        assert stack.deliver(event).status_code == 200
    for event in asked:
        [notice] = stack.fake.wait_for_posts(event["channel"], event["ts"], timeout=30)
        assert "for its own members only" in notice["text"]
        assert question_for(stack.settings, event["channel"], event["ts"]) == []
    # Slack does not answer users.info just now: asked to ask again, not answered unchecked;
    # once Slack answers, the member is answered.
    stack.fake.failures["users.info"] = "fatal_error"
    try:
        unchecked = stack.mention(question, "CGUESTS003", user="UNEWASKER1")
        assert stack.deliver(unchecked).status_code == 200
        [notice] = stack.fake.wait_for_posts("CGUESTS003", unchecked["ts"], timeout=30)
    finally:
        del stack.fake.failures["users.info"]
    assert "couldn't check with Slack just now" in notice["text"]
    assert question_for(stack.settings, "CGUESTS003", unchecked["ts"]) == []
    again = stack.mention(question, "CGUESTS003", user="UNEWASKER1")
    assert stack.deliver(again).status_code == 200
    answered_once_about_parental_leave(stack, "CGUESTS003", again["ts"])
    with bot_process(stack, tmp_path / "bot.log", POLICYBOT_ANSWER_GUESTS="true") as url:
        allowed = stack.mention(question, "CGUESTS002", user="UGUEST0001")
        assert stack.fake.deliver(url + "/slack/events", stack.fake.event_body(allowed)).status_code == 200
        answered_once_about_parental_leave(stack, "CGUESTS002", allowed["ts"])
    assert "not answering UGUEST0002 in CGUESTS001: a guest of the workspace" in caplog.text


def test_guests_are_not_greeted_with_prompts_they_cannot_use(stack) -> None:
    """A guest opening the agent view or the Messages tab gets the members-only notice, not a
    greeting and suggested prompts inviting questions that would be refused."""
    stack.fake.add_user("UGUEST0003", "Gia Guest")["is_restricted"] = True
    channel, thread_ts = "DGUEST0003", stack.fake.new_ts()
    started = {
        "type": "assistant_thread_started",
        "event_ts": thread_ts,
        "assistant_thread": {"user_id": "UGUEST0003", "channel_id": channel, "thread_ts": thread_ts, "context": {}},
    }
    opened = {
        "type": "app_home_opened",
        "user": "UGUEST0003",
        "channel": "DGUEST0004",
        "tab": "messages",
        "event_ts": stack.fake.new_ts(),
    }
    for event in (started, opened):
        assert stack.deliver(event).status_code == 200
    [in_thread] = stack.fake.wait_for_posts(channel, thread_ts, timeout=30)
    [in_tab] = stack.fake.wait_for(lambda: stack.fake.posts("DGUEST0004"), what="the Messages tab's reply")
    _settle()
    for notice in (in_thread, in_tab):
        assert "for its own members only." in notice["text"] and "answer this here" not in notice["text"]
    assert not stack.fake.calls_to("assistant.threads.setSuggestedPrompts", channel_id=channel)
    assert len(stack.fake.posts(channel)) == 1 and len(stack.fake.posts("DGUEST0004")) == 1


def test_messages_tab_greets_once(stack) -> None:
    channel = "DHOME00001"
    opened = {
        "type": "app_home_opened",
        "user": "UHOMEUSER1",
        "channel": channel,
        "tab": "messages",
        "event_ts": stack.fake.new_ts(),
    }
    stack.deliver(opened)
    stack.fake.wait_for(lambda: stack.fake.posts(channel), what="greeting")
    stack.deliver(dict(opened, event_ts=stack.fake.new_ts()))
    stack.deliver(dict(opened, event_ts=stack.fake.new_ts(), tab="home"))
    _settle()
    assert len(stack.fake.posts(channel)) == 1


# ---------------------------------------------------------------- delivery


def test_same_event_three_times_is_answered_once(stack) -> None:
    channel = "CRETRY0001"
    event = stack.mention("How many days of bereavement leave do I get?", channel)
    event_id = stack.fake.new_event_id()
    for retry in (None, 1, 2):
        assert stack.deliver(event, event_id=event_id, retry_num=retry).status_code == 200
    _answer_post(stack, channel, event["ts"])
    _settle(2.5)
    assert len(stack.fake.posts(channel, event["ts"])) == 1
    assert len(question_for(stack.settings, channel, event["ts"])) == 1
    assert len(stack.fake.calls_to("reactions.add", channel=channel)) == 1


def test_retry_whose_first_delivery_never_arrived_is_answered(stack) -> None:
    channel = "CRETRY0002"
    event = stack.mention("Can I carry over unused vacation days?", channel)
    assert stack.deliver(event, retry_num=1, retry_reason="http_error").status_code == 200
    _answer_post(stack, channel, event["ts"])
    assert question_for(stack.settings, channel, event["ts"])[0].status == "answered"


def test_a_message_taken_for_a_notice_is_not_taken_for_a_question_on_a_retry(stack) -> None:
    """A retried delivery may decide otherwise (another bot process, whose view of the asker
    differs): the first decision stands, so the thread never gets a notice and an answer."""
    from datetime import datetime, timedelta

    from sqlalchemy import update

    from core import db
    from core.models import SlackMessage
    from slack_shared import state

    channel, ts = "CKINDS0001", stack.fake.new_ts()
    with db.session(stack.settings) as session:
        first = state.claim_message(session, channel, ts, "EvKINDS001", "reply")
        session.execute(
            update(SlackMessage)
            .where(SlackMessage.id == first.id)  # past the lease: not in progress
            .values(created_at=datetime.now(UTC) - timedelta(seconds=state.CLAIM_LEASE_S * 2))
        )
    with db.session(stack.settings) as session:
        retried = state.claim_message(session, channel, ts, "EvKINDS001", "question")
    assert first.new and not retried.new and retried.same_event and retried.handled_elsewhere


def test_mention_and_message_events_for_one_dm_message_are_answered_once(stack) -> None:
    channel = "DTWIN00001"
    message = stack.dm(
        f"<@{stack.fake.bot_user_id}> How many weeks of parental leave do secondary caregivers get?", channel
    )
    mention = stack.mention_twin(message)
    assert stack.deliver(message).status_code == 200
    assert stack.deliver(mention).status_code == 200
    _answer_post(stack, channel, message["ts"])
    _settle(2.5)
    assert len(stack.fake.posts(channel)) == 1
    assert len(question_for(stack.settings, channel, message["ts"])) == 1


def test_bad_or_stale_signature_is_rejected_and_nothing_is_enqueued(stack) -> None:
    import redis

    from core import services

    channel = "CSIGNED001"
    broker = redis.Redis.from_url(services.redis_url(stack.settings))
    calls_before = len(stack.fake.calls)
    cases = {
        "wrong secret": dict(secret="not-the-signing-secret"),
        "stale": dict(timestamp=int(time.time()) - 600),  # Bolt allows 5 minutes
        "garbled": dict(signature="v0=" + "0" * 64),
    }
    for name, options in cases.items():
        event = stack.mention(f"Am I allowed to expense a gym membership? ({name})", channel)
        response = stack.deliver(event, **options)
        assert response.status_code == 401, name
        assert question_for(stack.settings, channel, event["ts"]) == [], name
        assert broker.llen("answer") == 0
    unsigned = stack.fake.event_body(stack.mention("unsigned", channel))
    import httpx

    assert httpx.post(stack.events_url, json=unsigned).status_code == 401
    _settle()
    assert len(stack.fake.calls) == calls_before  # no reaction, no reply, nothing


def test_ignored_events_get_no_reply(stack) -> None:
    channel = "DIGNORE001"
    own = stack.dm("I am the bot", channel, user=stack.fake.bot_user_id, bot_id=stack.fake.bot_id)
    other_bot = stack.dm("beep, I am another bot", channel, user="UOTHERBOT1", bot_id="BOTHERBOT1")
    edited = stack.dm(
        "",
        channel,
        subtype="message_changed",
        message={"type": "message", "user": "UEMPLOYEE1", "text": "edited text", "ts": "1.1"},
    )
    deleted = stack.dm("", channel, subtype="message_deleted", deleted_ts="1.1")
    joined = stack.dm("joined", channel, subtype="channel_join")
    in_channel = dict(stack.dm("What is the travel policy?", "CCHANNEL01"), channel_type="channel")
    for event in (own, other_bot, edited, deleted, joined, in_channel):
        assert stack.deliver(event).status_code == 200
    _settle(2.0)
    assert not stack.fake.posts(channel) and not stack.fake.posts("CCHANNEL01")
    for event in (own, other_bot, edited, deleted, joined):
        assert question_for(stack.settings, channel, event["ts"]) == []


def test_empty_mention_and_oversized_message_get_a_clear_reply(stack) -> None:
    channel = "CNOTICE001"
    empty = stack.mention("", channel)
    assert stack.deliver(empty).status_code == 200
    reply = stack.fake.wait_for_posts(channel, empty["ts"])[0]
    assert "Ask me a question" in reply["text"]

    dm_channel = "DNOTICE001"
    huge = stack.dm("Please summarise this for me. " + "x" * 40_000, dm_channel)
    response = stack.deliver(huge)
    assert response.status_code == 200
    reply = stack.fake.wait_for_posts(dm_channel, huge["ts"])[0]
    assert "characters" in reply["text"] and f"{stack.settings.max_question_chars:,}" in reply["text"]
    _settle()
    for ch, event in ((channel, empty), (dm_channel, huge)):
        assert question_for(stack.settings, ch, event["ts"]) == []  # never sent to the pipeline
        assert len(stack.fake.posts(ch, event["ts"])) == 1


# ---------------------------------------------------------------- feedback, failures


def test_feedback_click_is_recorded_once_and_can_change(stack) -> None:
    from core import db
    from core.models import Feedback

    channel = "CFEEDBK001"
    event = stack.mention("What is the deadline for submitting travel expense reports?", channel)
    stack.deliver(event)
    post = _answer_post(stack, channel, event["ts"])
    message = post.response["message"]
    [row] = question_for(stack.settings, channel, event["ts"])

    def votes() -> list[int]:
        with db.session(stack.settings) as session:
            return list(session.execute(select(Feedback.vote).where(Feedback.question_id == row.id)).scalars())

    for action_id, expected in (("feedback_up", [1]), ("feedback_up", [1]), ("feedback_down", [-1])):
        response = stack.fake.click(
            stack.events_url,
            action_id=action_id,
            value=str(row.id),
            user="UVOTER0001",
            channel=channel,
            message=message,
        )
        assert response.status_code == 200 and response.elapsed.total_seconds() < 3
        wait_until(lambda expected=expected: votes() == expected, 10, f"votes {expected}")
    stack.fake.wait_for(lambda: len(stack.fake.calls_to("chat.postEphemeral", channel=channel)) == 3)
    assert votes() == [-1]


def test_pipeline_failure_posts_an_apology_with_the_reference(stack) -> None:
    channel = "CFAILED001"
    event = stack.mention(f"What is the parental leave policy? {FAIL_MARKER}", channel)
    stack.deliver(event)
    post = _answer_post(stack, channel, event["ts"], timeout=90)
    _settle()
    [row] = question_for(stack.settings, channel, event["ts"])
    assert row.status == "failed" and "failing on purpose" in (row.error or "")
    assert row.reference in post["text"] and "Sorry" in post["text"]
    assert row.answer_ts == post.response["ts"]
    assert len(stack.fake.posts(channel, event["ts"])) == 1
    assert stack.fake.calls_to("reactions.remove", channel=channel)
    assert stack.worker.log_text().count(f"answering question {row.id} ") == 3  # retried twice, then gave up


def test_an_apology_slack_would_not_take_is_posted_later(stack) -> None:
    """Slack fails the apology too (it is having an outage): the apology is tried again
    later, not dropped, and the asker hears back once Slack is back."""
    channel = "CFAILED002"
    event = stack.mention(f"What is the parental leave policy? {FAIL_MARKER}", channel)
    stack.fake.failures["chat.postMessage"] = "fatal_error"
    try:
        stack.deliver(event)
        stack.fake.wait_for(lambda: stack.fake.posts(channel, event["ts"]), timeout=90, what="the first apology")
    finally:
        del stack.fake.failures["chat.postMessage"]
    posted = _posted(stack, channel, event["ts"], timeout=60)
    _settle()
    [row] = question_for(stack.settings, channel, event["ts"])
    assert len(posted) == 1 and row.reference in posted[0]["text"] and "Sorry" in posted[0]["text"]
    assert row.status == "failed" and row.answer_ts == posted[0].response["ts"]
    assert [p.response.get("ok") for p in stack.fake.posts(channel, event["ts"])] == [False, True]


def test_an_answer_slack_would_not_take_is_posted_later_not_apologised_for(stack) -> None:
    """The pipeline answered, but Slack failed every post of the answer (an outage): once
    Slack is back the asker gets that answer, not an apology for it."""
    channel = "CFAILED003"
    event = stack.mention("How many weeks of parental leave do primary caregivers get?", channel)
    stack.fake.failures["chat.postMessage"] = "service_unavailable"
    try:
        stack.deliver(event)
        stack.fake.wait_for(
            lambda: len(stack.fake.posts(channel, event["ts"])) >= 3, timeout=90, what="the answer's three attempts"
        )
    finally:
        del stack.fake.failures["chat.postMessage"]
    posted = _posted(stack, channel, event["ts"], timeout=60)
    _settle()
    [row] = question_for(stack.settings, channel, event["ts"])
    assert len(posted) == 1 and "16 weeks" in "\n".join(section_texts(posted[0])) and "Sorry" not in posted[0]["text"]
    assert row.status == "answered" and row.answer_ts == posted[0].response["ts"]
    assert [p.response.get("ok") for p in stack.fake.posts(channel, event["ts"])] == [False, False, False, True]
    assert stack.worker.log_text().count(f"answering question {row.id} ") == 1  # the pipeline ran once
    stack.fake.wait_for(lambda: stack.fake.calls_to("reactions.remove", channel=channel), what="the 👀 removed")


def test_a_channel_the_bot_cannot_post_in_is_not_retried_and_the_answer_stays_logged(stack) -> None:
    """not_in_channel will not change on a retry, and an apology would fail the same way."""
    channel = "CNOTIN0001"
    event = stack.mention("How many weeks of parental leave do primary caregivers get?", channel)
    stack.fake.failures["chat.postMessage"] = "not_in_channel"
    try:
        stack.deliver(event)
        row = wait_until(
            lambda: next((r for r in question_for(stack.settings, channel, event["ts"]) if r.status == "failed"), None),
            timeout=60,
            what="the question marked failed",
        )
        _settle()
    finally:
        del stack.fake.failures["chat.postMessage"]
    assert "not_in_channel" in (row.error or "") and "16 weeks" in (row.answer or "")  # answered, kept for admins
    assert stack.worker.log_text().count(f"answering question {row.id} ") == 1
    assert [post.response["error"] for post in stack.fake.posts(channel)] == ["not_in_channel"]  # no retry, no apology


@pytest.mark.parametrize(
    "channel, times, how",
    [
        ("CRATELIM01", 10, {}),  # more than the three attempts other failures get
        ("CRATELIM02", 4, {"rate_limits_in_plain_text": True}),  # a proxy's 429, not Slack's JSON
    ],
)
def test_a_rate_limited_answer_waits_and_is_posted_not_apologised_for(stack, channel, times, how) -> None:
    """Slack answers HTTP 429 with Retry-After to a busy channel: the answer waits and goes out,
    even when the limit outlasts the SDK's own retries and the three attempts other errors get;
    also when a proxy in front of Slack answers the 429 in plain text."""
    event = stack.mention("How many weeks of parental leave do primary caregivers get?", channel)
    with _rate_limited_posts(stack, times, **how):
        stack.deliver(event)
        posted = _posted(stack, channel, event["ts"])
        _settle()
    [row] = question_for(stack.settings, channel, event["ts"])
    assert row.status == "answered" and row.answer_ts == posted[0].response["ts"]
    assert len(posted) == 1 and "16 weeks" in "\n".join(section_texts(posted[0]))  # the answer, no apology
    assert [p.response["error"] for p in stack.fake.posts(channel, event["ts"]) if not p.response.get("ok")] == [
        "ratelimited"
    ] * times
    assert len(stack.fake.posts(channel, event["ts"])) == times + 1


def test_a_rate_limit_without_retry_after_backs_off(stack) -> None:
    """A 429 that does not say how long to wait (some proxies send none) is not retried every
    second: the waits double (2 s, then 4 s)."""
    channel = "CRATELIM03"
    event = stack.mention("How many weeks of parental leave do primary caregivers get?", channel)
    with _rate_limited_posts(stack, 2, retry_after=None):
        stack.deliver(event)
        _posted(stack, channel, event["ts"])
    attempts = [post.at for post in stack.fake.posts(channel, event["ts"])]
    assert len(attempts) == 3
    assert attempts[1] - attempts[0] >= 1.9 and attempts[2] - attempts[1] >= 3.9


def test_queue_down_gets_a_clear_reply_and_the_question_is_logged_failed(stack, tmp_path) -> None:
    """A bot whose Redis is not there: Slack has its ack, so the thread says what happened,
    with the reference, instead of staying silent; the log row says failed."""
    from devtools.ports import free_port

    log_path = tmp_path / "bot.log"
    with bot_process(stack, log_path, REDIS_URL=f"redis://127.0.0.1:{free_port()}/0") as url:  # nothing listens there
        channel = "CQUEUEDOWN"
        event = stack.mention("How many PTO days can I carry over?", channel)
        assert stack.fake.deliver(url + "/slack/events", stack.fake.event_body(event)).status_code == 200
        post = _answer_post(stack, channel, event["ts"], timeout=60)
        [row] = question_for(stack.settings, channel, event["ts"])
        assert "can't take questions right now" in post["text"] and row.reference in post["text"]
        assert row.status == "failed" and row.error
        assert stack.fake.calls_to("reactions.remove", channel=channel)  # no 👀 left promising an answer
        _settle()
        assert len(stack.fake.posts(channel, event["ts"])) == 1
        # An admin's upload: the offer to add it, then on confirming the same plain reply instead of silence.
        file = stack.fake.add_file("bike-parking.md", BIKE_POLICY, "text/markdown", user=ADMIN)
        upload = stack.dm("", "DQUEUEDOWN", user=ADMIN, subtype="file_share", files=[file])
        assert stack.fake.deliver(url + "/slack/events", stack.fake.event_body(upload)).status_code == 200
        choose_upload(
            stack, stack.fake.wait_for_posts("DQUEUEDOWN", upload["ts"], timeout=60)[0], url=url + "/slack/events"
        )
        posts = stack.fake.wait_for_posts("DQUEUEDOWN", upload["ts"], count=2, timeout=60)
        assert "can't take uploads right now" in posts[1]["text"]
    log = log_path.read_text()
    assert "could not take questions from mention in CQUEUEDOWN (recorded, not queued)" in log
    assert stack.fake.bot_token not in log and stack.fake.signing_secret not in log


def test_database_down_gets_a_clear_reply(stack, tmp_path) -> None:
    """A bot whose PostgreSQL is not there cannot even claim the message: it still says so."""
    from devtools.ports import free_port

    log_path = tmp_path / "bot.log"
    nothing_there = f"postgresql://policybot@127.0.0.1:{free_port()}/policybot"
    with (
        bot_process(stack, log_path, DATABASE_URL=nothing_there) as url,
        bot_process(stack, tmp_path / "second-bot.log", DATABASE_URL=nothing_there) as second_url,
    ):
        channel = "CDBDOWN001"
        event = stack.mention("How many PTO days can I carry over?", channel)
        assert stack.fake.deliver(url + "/slack/events", stack.fake.event_body(event)).status_code == 200
        post = _answer_post(stack, channel, event["ts"], timeout=60)
        assert "can't take questions right now" in post["text"] and "tell an admin" in post["text"]
        assert question_for(stack.settings, channel, event["ts"]) == []
        # A DM that mentions the bot arrives twice (message.im and app_mention), here at two
        # bot processes behind a load balancer; with no database to claim it, it still gets
        # one reply, not two and not none.
        dm = stack.dm(f"<@{stack.fake.bot_user_id}> How many PTO days can I carry over?", "DDBDOWN001")
        for delivered, bot_url in ((dm, url), (stack.mention_twin(dm), second_url)):
            assert stack.fake.deliver(bot_url + "/slack/events", stack.fake.event_body(delivered)).status_code == 200
        assert "can't take questions right now" in _answer_post(stack, "DDBDOWN001", dm["ts"], timeout=60)["text"]
        # The agent view opens with the outage notice instead of a greeting that invites questions.
        thread_ts = stack.fake.new_ts()
        started = {
            "type": "assistant_thread_started",
            "event_ts": thread_ts,
            "assistant_thread": {"user_id": "UAGENTUSER", "channel_id": "DDBDOWN003", "thread_ts": thread_ts},
        }
        assert stack.fake.deliver(url + "/slack/events", stack.fake.event_body(started)).status_code == 200
        [notice] = stack.fake.wait_for_posts("DDBDOWN003", thread_ts, timeout=60)
        assert "can't take questions right now" in notice["text"]
        assert not stack.fake.calls_to("assistant.threads.setSuggestedPrompts", channel_id="DDBDOWN003")
        # The Messages tab cannot tell a first visit: no greeting (rather than one on every visit).
        opened = {
            "type": "app_home_opened",
            "user": "UHOMEDOWN1",
            "channel": "DDBDOWN004",
            "tab": "messages",
            "event_ts": stack.fake.new_ts(),
        }
        assert stack.fake.deliver(url + "/slack/events", stack.fake.event_body(opened)).status_code == 200
        # An admin's upload cannot be claimed either: a plain reply, and the file is not fetched.
        file = stack.fake.add_file("bike-parking.md", BIKE_POLICY, "text/markdown", user=ADMIN)
        upload = stack.dm("", "DDBDOWN002", user=ADMIN, subtype="file_share", files=[file])
        assert stack.fake.deliver(url + "/slack/events", stack.fake.event_body(upload)).status_code == 200
        [reply] = stack.fake.wait_for_posts("DDBDOWN002", upload["ts"], timeout=60)
        assert "can't take uploads right now" in reply["text"]
        _settle()
        assert len(stack.fake.posts("DDBDOWN001", dm["ts"])) == 1
        assert len(stack.fake.posts("DDBDOWN002", upload["ts"])) == 1
        assert not stack.fake.calls_to("files.info", file=file["id"])
        assert stack.fake.posts("DDBDOWN004") == []
    log = log_path.read_text()
    assert "could not take questions from mention in CDBDOWN001 (not recorded)" in log
    assert "could not take uploads from dm in DDBDOWN002 (not recorded)" in log
    assert "could not remember agent-view thread in DDBDOWN003: OperationalError" in log
    assert "could not look up whether UHOMEDOWN1 was greeted: OperationalError" in log


# ---------------------------------------------------------------- admin


BIKE_POLICY = b"""# Bicycle Parking Policy

## Bike room

Employees may park bicycles in the *basement*
[bike room](https://facilities.northwind.example/rooms/bike_room) of the Zurich office. The bike room
is open from 6:00 to 22:00 on weekdays, and every bicycle needs a green Northwind tag.
"""


def test_admin_upload_is_ingested_then_answerable(stack) -> None:
    channel = "DADMIN0001"
    file = stack.fake.add_file("bike-parking.md", BIKE_POLICY, "text/markdown", user=ADMIN)
    upload = stack.dm("", channel, user=ADMIN, subtype="file_share", files=[file])
    assert stack.deliver(upload).status_code == 200
    offer = stack.fake.wait_for_posts(channel, upload["ts"])[0]
    assert "bike-parking.md" in offer["text"]  # "add it?"
    choose_upload(stack, offer)
    posts = stack.fake.wait_for_posts(channel, upload["ts"], count=2, timeout=90)
    assert "bike-parking.md: added" in posts[1]["text"]
    assert stack.fake.calls_to("files.info", file=file["id"])

    question = stack.dm("Where can I park my bicycle at the Zurich office?", channel, user=ADMIN)
    stack.deliver(question)
    answer = _answer_post(stack, channel, question["ts"])
    assert any("bike-parking.md" in c for c in context_texts(answer))
    # The Markdown sentence as Slack shows it: its link a Slack link, its emphasis Slack's.
    shown = "\n".join(section_texts(answer))
    assert "the _basement_ <https://facilities.northwind.example/rooms/bike_room|bike room> of" in shown
    assert "the basement bike room of" in answer["text"] and "](" not in shown + answer["text"]


def test_non_admin_upload_is_refused(stack) -> None:
    from core import db
    from core.models import Document

    channel = "DNONADMIN1"
    file = stack.fake.add_file("secret-plans.md", b"# Plans\n\nWe will take over the world.\n", user="UNOTADMIN1")
    upload = stack.dm("please add this", channel, user="UNOTADMIN1", subtype="file_share", files=[file])
    stack.deliver(upload)
    reply = stack.fake.wait_for_posts(channel, upload["ts"])[0]
    assert "Only policybot admins" in reply["text"]
    _settle()
    assert not stack.fake.calls_to("files.info", file=file["id"])
    with db.session(stack.settings) as session:
        assert not session.execute(select(Document).where(Document.name == "secret-plans.md")).first()


def test_admin_stats_in_dm(stack) -> None:
    admin_channel, other_channel = "DSTATS0001", "DSTATS0002"
    asked = stack.dm("stats", admin_channel, user=ADMIN)
    stack.deliver(asked)
    reply = stack.fake.wait_for_posts(admin_channel, asked["ts"])[0]
    assert "questions" in reply["text"] and "Abstained" in reply["text"]
    refused = stack.dm("stats", other_channel, user="UEMPLOYEE2")
    stack.deliver(refused)
    assert "admins only" in stack.fake.wait_for_posts(other_channel, refused["ts"])[0]["text"]


# ---------------------------------------------------------------- crash (last: replaces the worker)


def test_worker_killed_mid_task_is_answered_once_by_a_new_worker(stack) -> None:
    stack.worker.stop()
    slow = stack.start_worker("worker-slow", POLICYBOT_TEST_TASK_DELAY_S="120").wait_ready(timeout=240)
    channel = "CKILLED001"
    event = stack.mention("How many weeks of parental leave do secondary caregivers get?", channel)
    stack.deliver(event)
    row = wait_until(
        lambda: (rows := question_for(stack.settings, channel, event["ts"])) and rows[0], 20, "question row"
    )
    slow.wait_for_log(rf"answering question {row.id} ", timeout=60)
    slow.kill()  # SIGKILL to the worker and its pool child, mid-task
    assert not stack.fake.posts(channel, event["ts"])

    stack.worker = stack.start_worker("worker-after-kill").wait_ready(timeout=240)
    post = _answer_post(stack, channel, event["ts"], timeout=120)
    _settle(3)
    assert len(stack.fake.posts(channel, event["ts"])) == 1
    [row] = question_for(stack.settings, channel, event["ts"])
    assert row.status == "answered" and row.answer_ts == post.response["ts"]
