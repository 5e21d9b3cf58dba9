"""Who sees what the bot posts, end to end: signed events over HTTP to the Bolt app, a real
Celery worker process, the test PostgreSQL and Redis, and the local Slack fake.

The module's worker runs without POLICYBOT_ADMINS: who is an admin is the bot's decision,
carried to the worker, never decided twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from support.slack import (
    ADMIN,
    Stack,
    buttons,
    choose_upload,
    context_texts,
    question_for,
    running_stack,
    section_texts,
)

pytestmark = pytest.mark.timeout(300)

PARENTAL = "How many weeks of parental leave do primary caregivers get?"


@pytest.fixture(scope="module")
def stack(settings, ingested_samples, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from running_stack(settings, tmp_path_factory, POLICYBOT_ADMINS="")


def _settle(seconds: float = 1.5) -> None:
    """Give a would-be extra post time to show up before counting."""
    time.sleep(seconds)


def _private_answer(stack: Stack, event: dict, user: str = "UEMPLOYEE1"):
    """The answer DMed to the asker for a question asked where outsiders read, once the thread
    has its note; asserts that no policy text reached the channel."""
    channel, ts = event["channel"], event["ts"]
    [note] = stack.fake.wait_for_posts(channel, ts, timeout=90)
    answer = stack.fake.wait_for(
        lambda: [p for p in stack.fake.posts(user) if p.at <= note.at], what="the answer in the asker's DM"
    )[-1]
    assert "direct message" in note["text"] and "16 weeks" not in note["text"]
    [row] = question_for(stack.settings, channel, ts)
    assert row.private_reply and row.status == "answered"
    assert answer.response["channel"] == stack.fake.dm_channel(user) and answer.response["ts"] == row.answer_ts
    assert answer.get("thread_ts") is None
    return answer, row


def test_an_answer_asked_where_outsiders_read_goes_to_the_asker_alone(stack) -> None:
    """In a Slack Connect channel, the answer goes to the asker by DM (with its citations and
    buttons), the thread gets a short note without policy text, and the 👀 is cleared. The
    decision is Slack's (conversations.info), even when the event does not carry the flag;
    it is cached; a lookup that fails counts as shared."""
    stack.fake.add_channel("CEXTERNAL1", ext_shared=True)
    event = stack.mention(PARENTAL, "CEXTERNAL1")
    assert stack.deliver(event).status_code == 200  # is_ext_shared_channel: false in the envelope
    answer, row = _private_answer(stack, event)
    assert "16 weeks" in "\n".join(section_texts(answer))
    assert any("leave-policy.md" in line for line in context_texts(answer))
    assert any("CEXTERNAL1" in line and PARENTAL in line for line in context_texts(answer))
    assert [b["value"] for b in buttons(answer)] == [str(row.id)] * 2
    removed = stack.fake.wait_for(
        lambda: stack.fake.calls_to("reactions.remove", channel="CEXTERNAL1", timestamp=event["ts"])
    )
    assert removed[0]["name"] == "eyes"
    # A follow-up in the thread: the cached decision, no second lookup; still privately.
    follow_up = stack.mention("and is it at full pay?", "CEXTERNAL1", thread_ts=event["ts"])
    stack.deliver(follow_up)
    stack.fake.wait_for_posts("CEXTERNAL1", event["ts"], count=2, timeout=90)
    [child] = question_for(stack.settings, "CEXTERNAL1", follow_up["ts"])
    assert child.private_reply
    assert len(stack.fake.calls_to("conversations.info", channel="CEXTERNAL1")) == 1
    # The envelope's flag alone is enough, whatever conversations.info would say.
    flagged = stack.mention(PARENTAL, "CFLAGGED01") | {"user_team": stack.fake.team_id}
    stack.fake.deliver(stack.events_url, stack.fake.event_body(flagged) | {"is_ext_shared_channel": True})
    _private_answer(stack, flagged)
    # Slack cannot say who reads the channel: answered privately all the same.
    stack.fake.failures["conversations.info"] = "fatal_error"
    try:
        unknown = stack.mention(PARENTAL, "CUNKNOWN01")
        stack.deliver(unknown)
        _private_answer(stack, unknown)
    finally:
        del stack.fake.failures["conversations.info"]
    # An ordinary channel of the workspace gets its answer in the thread, as always.
    ours = stack.mention(PARENTAL, "CINTERNAL1")
    stack.deliver(ours)
    assert "16 weeks" in stack.fake.wait_for_posts("CINTERNAL1", ours["ts"], timeout=90)[0]["text"]
    _settle()
    assert not question_for(stack.settings, "CINTERNAL1", ours["ts"])[0].private_reply
    for channel in ("CEXTERNAL1", "CFLAGGED01", "CUNKNOWN01"):
        assert not any("16 weeks" in str(post.params) for post in stack.fake.posts(channel))


def test_a_channel_with_guests_is_answered_privately_when_configured(stack, settings) -> None:
    """POLICYBOT_PRIVATE_WITH_GUESTS: a channel that a guest of the workspace belongs to gets
    private answers (guests from users.list, or users.info for someone newer); without the
    setting, or without guests, answers stay in the thread."""
    from bot.app import build_app
    from bot.http import BackgroundServer, create_asgi_app
    from devtools.demo import slack_settings
    from workers.enqueuer import CeleryEnqueuer

    stack.fake.add_user("UGUESTREAD", "Gwen Guest")["is_restricted"] = True
    stack.fake.add_user("UMEMBER003", "Mia Member")
    stack.fake.add_channel("CGUESTREAD", members=["UEMPLOYEE1", "UMEMBER003", "UGUESTREAD"])
    stack.fake.add_channel("CNOGUESTS1", members=["UEMPLOYEE1", "UMEMBER003"])
    default = stack.mention(PARENTAL, "CGUESTREAD")
    stack.deliver(default)
    assert "16 weeks" in stack.fake.wait_for_posts("CGUESTREAD", default["ts"], timeout=90)[0]["text"]

    strict = slack_settings(settings, stack.fake, private_with_guests=True)
    server = BackgroundServer(create_asgi_app(build_app(strict, CeleryEnqueuer()))).start()
    try:
        with_guests = stack.mention(PARENTAL, "CGUESTREAD")
        stack.fake.deliver(server.url + "/slack/events", stack.fake.event_body(with_guests))
        _private_answer(stack, with_guests)
        stack.fake.add_user("UNEWGUEST1", "Nell New")["is_ultra_restricted"] = True  # after users.list was read
        stack.fake.channels["CNOGUESTS1"]["members"].append("UNEWGUEST1")
        joined = stack.mention(PARENTAL, "CNOGUESTS1")
        stack.fake.deliver(server.url + "/slack/events", stack.fake.event_body(joined))
        _private_answer(stack, joined)
        stack.fake.add_channel("CNOGUESTS2", members=["UEMPLOYEE1", "UMEMBER003"])
        members_only = stack.mention(PARENTAL, "CNOGUESTS2")
        stack.fake.deliver(server.url + "/slack/events", stack.fake.event_body(members_only))
        assert "16 weeks" in stack.fake.wait_for_posts("CNOGUESTS2", members_only["ts"], timeout=90)[0]["text"]
    finally:
        server.stop()
    assert len(stack.fake.calls_to("users.list")) == 1


LOCKER_POLICY = b"""# Locker Policy

## Lockers

Lockers on the third floor of the Lisbon office are assigned by the facilities desk against a
deposit of 20 euros, returned when the key is handed back.
"""


def _documents(settings, name: str) -> list:
    from sqlalchemy import select

    from core import db
    from core.models import Document

    with db.session(settings) as session:
        return list(session.execute(select(Document.collection).where(Document.name == name)).scalars())


def test_an_admins_file_becomes_a_policy_document_only_once_confirmed(stack) -> None:
    """A file an admin DMs is not ingested until they confirm it, and the offer says where it
    would go. With a question, the question is answered and the file not read. The first
    confirmation queues it once; only admins can confirm; the worker, which has no
    POLICYBOT_ADMINS here, ingests what the bot's admin confirmed and clears the 👀."""
    channel = "DADMINFILE"
    contract = stack.fake.add_file(
        "vendor-contract.md", b"# Contract\n\nThe vendor pays for the team dinner.\n", "text/markdown", user=ADMIN
    )
    asked = stack.dm(
        "Is this vendor contract OK under the gifts policy?",
        channel,
        user=ADMIN,
        subtype="file_share",
        files=[contract],
    )
    assert stack.deliver(asked).status_code == 200
    offer, answer = stack.fake.wait_for_posts(channel, asked["ts"], count=2, timeout=90)  # the offer comes at once
    [row] = question_for(stack.settings, channel, asked["ts"])
    assert row.status == "answered" and buttons(answer)[0]["value"] == str(row.id)
    assert "without reading vendor-contract.md" in offer["text"]
    assert "collection `policies`" in offer["text"] and "no access list" in offer["text"]
    choose_upload(stack, offer, add=False)
    [skipped] = stack.fake.wait_for(
        lambda: stack.fake.calls_to("chat.update", channel=channel, ts=offer.response["ts"])
    )
    assert "Not added" in skipped["text"] and not buttons(skipped)
    # A task for files nobody confirmed (a stale or forged queue message) is refused, and the 👀 goes.
    from workers.ingest_tasks import ingest_file_task

    ingest_file_task.delay(
        json.loads(buttons(offer)[0]["value"])["claim"],
        [contract["id"]],
        channel,
        asked["ts"],
        ADMIN,
        collection="policies",
    )
    refusal = stack.fake.wait_for_posts(channel, asked["ts"], count=3, timeout=60)[2]
    assert "Only policybot admins" in refusal["text"]
    stack.fake.wait_for(
        lambda: len(stack.fake.calls_to("reactions.remove", channel=channel, timestamp=asked["ts"])) == 2,
        what="the 👀 cleared after the answer and after the refusal",
    )

    lockers = stack.fake.add_file("locker-policy.md", LOCKER_POLICY, "text/markdown", user=ADMIN)
    upload = stack.dm("", channel, user=ADMIN, subtype="file_share", files=[lockers])
    assert stack.deliver(upload).status_code == 200
    [offer] = stack.fake.wait_for_posts(channel, upload["ts"], timeout=30)
    assert "Add locker-policy.md to the knowledge base?" in offer["text"]
    choose_upload(stack, offer, user="UNOTADMIN1")
    [refused] = stack.fake.wait_for(lambda: stack.fake.calls_to("chat.postEphemeral", channel=channel))
    assert refused["user"] == "UNOTADMIN1" and "Only policybot admins" in refused["text"]
    _settle()
    assert not stack.fake.calls_to("files.info") and _documents(stack.settings, "locker-policy.md") == []

    choose_upload(stack, offer)
    choose_upload(stack, offer)  # a double click
    result = stack.fake.wait_for_posts(channel, upload["ts"], count=2, timeout=120)[1]
    assert "locker-policy.md: added" in result["text"] and "collection policies" in result["text"]
    [confirmed] = stack.fake.calls_to("chat.update", channel=channel, ts=offer.response["ts"])
    assert "confirmed" in confirmed["text"] and "collection `policies`" in confirmed["text"]
    removed = stack.fake.wait_for(
        lambda: stack.fake.calls_to("reactions.remove", channel=channel, timestamp=upload["ts"])
    )
    assert [c["name"] for c in stack.fake.calls_to("reactions.add", channel=channel, timestamp=upload["ts"])] == [
        "eyes"
    ]
    assert removed[0]["name"] == "eyes"
    _settle()
    assert len(stack.fake.posts(channel, upload["ts"])) == 2
    assert [c["file"] for c in stack.fake.calls_to("files.info")] == [lockers["id"]]
    assert _documents(stack.settings, "locker-policy.md") == ["policies"]
    assert _documents(stack.settings, "vendor-contract.md") == []


def test_a_bot_user_posting_as_a_user_is_not_answered(stack) -> None:
    """A bot user's post without a `bot_id` (a script with a bot user's token) is a bot's all
    the same, as users.info says (`is_bot`): no answer, no notice, nothing recorded."""
    stack.fake.add_user("UDEPLOYBOT", "Deploy Bot", is_bot=True)
    from_the_bot = [
        stack.mention(PARENTAL, "CBOTUSER01", user="UDEPLOYBOT"),
        stack.dm("thanks!", "DBOTUSER01", user="UDEPLOYBOT"),
    ]
    for event in from_the_bot:
        assert stack.deliver(event).status_code == 200
    person = stack.mention(PARENTAL, "CBOTUSER01")
    stack.deliver(person)
    assert "16 weeks" in stack.fake.wait_for_posts("CBOTUSER01", person["ts"], timeout=90)[0]["text"]
    _settle()
    for event in from_the_bot:
        assert stack.fake.posts(event["channel"], event["ts"]) == []
        assert question_for(stack.settings, event["channel"], event["ts"]) == []
    assert len(stack.fake.calls_to("users.info", user="UDEPLOYBOT")) == 1  # the bot's lookup, cached
    assert not stack.fake.calls_to("reactions.add", channel="DBOTUSER01")
