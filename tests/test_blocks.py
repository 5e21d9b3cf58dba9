"""Block Kit rendering within Slack's limits, and the listeners' decisions (pure functions)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.decisions import clean_text, decide_mention, decide_message
from bot.dedup import OutageReplies, RecentMessages
from bot.listeners.common import Listeners
from bot.who_may_ask import BotIdentity
from devtools.fake_slack import block_problems, sign
from slack_shared import blocks

ME = BotIdentity(user_id="UPOLICYBOT", bot_id="BPOLICYBOT")


def view(
    text: str, citations=(), action: str = "correct", found: bool = True, sources=("knowledge base",)
) -> blocks.AnswerView:
    return blocks.AnswerView(
        question_id=42,
        reference="Q7K2M9",
        text=text,
        action=action,
        found=found,
        sources_used=tuple(sources),
        citations=tuple(citations),
    )


def source(n: int, **kw) -> blocks.SourceView:
    values = dict(
        document="leave-policy.md",
        title="Leave Policy",
        section="Leave Policy > 4. Parental Leave > 4.2 Duration and pay",
    )
    values.update(kw)
    return blocks.SourceView(n=n, **values)


def test_answer_has_text_action_sources_buttons_and_reference() -> None:
    from core.wording import describe_action

    message = blocks.answer_message(view("Primary caregivers receive 16 weeks at full pay. [1]", [source(1)]))
    kinds = [b["type"] for b in message["blocks"]]
    assert kinds == ["section", "context", "context", "context", "actions", "context"]
    assert message["blocks"][0]["text"]["text"].endswith("[1]")
    assert describe_action("correct", True, ["knowledge base"]) in message["blocks"][1]["elements"][0]["text"]
    line = message["blocks"][3]["elements"][0]["text"]
    assert line.startswith("[1] *leave-policy.md* — Leave Policy — 4.2 Duration and pay") and "knowledge base" in line
    actions = message["blocks"][4]["elements"]
    assert [(a["action_id"], a["value"]) for a in actions] == [("feedback_up", "42"), ("feedback_down", "42")]
    assert "Q7K2M9" in message["blocks"][5]["elements"][0]["text"]
    assert message["text"].startswith("Primary caregivers")
    assert block_problems(message["blocks"]) == []


def test_source_with_url_is_a_link_and_fallback_origin_is_named() -> None:
    line = blocks.source_line(
        source(
            2,
            document="Payroll calendar",
            title="Payroll <calendar> | 2026",
            section="Dates",
            url="https://hr.example.com/payroll",
            origin="fallback",
            source="HR portal",
        )
    )
    assert (
        line == "[2] <https://hr.example.com/payroll|Payroll &lt;calendar&gt; ¦ 2026 — Dates> · _fallback: HR portal_"
    )
    # A URL from a fallback source with '|' or '>' in it cannot end the link early.
    odd = blocks.source_line(source(3, document="d", title="T", section="", url="https://hr.example.com/a|b>c?x=1&y=2"))
    assert odd.startswith("[3] <https://hr.example.com/a%7Cb%3Ec?x=1&amp;y=2|T> ")


def test_notification_text_pings_no_one_and_stays_within_its_limit() -> None:
    """The top-level text is mrkdwn too: a policy quoting "<!channel>" must not notify a channel."""
    message = blocks.answer_message(
        blocks.AnswerView(
            question_id=7,
            reference="Q7K2M9",
            text="Post urgent notices with <!channel> & tag <@U123>.",
            action="correct",
            found=True,
            sources_used=["knowledge base"],
        )
    )
    assert message["text"] == "Post urgent notices with &lt;!channel&gt; &amp; tag &lt;@U123&gt;."
    shortened = blocks.notification_text("&" * 5000, limit=3000)
    assert len(shortened) <= 3000 and shortened.endswith("&amp;…")


@pytest.mark.parametrize(
    "action,found,sources,expected",
    [
        ("correct", True, ["knowledge base"], "Answered from the policy knowledge base"),
        (
            "correct",
            True,
            ["HR portal", "knowledge base"],  # the knowledge base pointed to the portal, asked too
            "Answered from the policy knowledge base and HR portal, which it refers to",
        ),
        ("correct", True, ["HR portal"], "Answered from HR portal, which the policy knowledge base refers to"),
        ("ambiguous", True, ["knowledge base", "HR portal"], "Knowledge base was inconclusive, also checked HR portal"),
        ("incorrect", True, ["HR portal"], "Not in the knowledge base, answered from HR portal"),
        ("incorrect", False, [], "Not found in approved sources"),
    ],
)
def test_action_is_stated_for_people(action: str, found: bool, sources: list[str], expected: str) -> None:
    assert expected in blocks.action_line(view("x", action=action, found=found, sources=sources))


def test_long_answer_is_split_on_boundaries_within_limits() -> None:
    sentence = "Employees accrue one and a half days of vacation per month of service. "
    paragraph = sentence * 30  # ~2,100 characters
    text = "\n\n".join([paragraph.strip()] * 6) + " " + "y" * 7000  # and one enormous "word"
    message = blocks.answer_message(view(text, [source(n) for n in range(1, 6)]))
    sections = [b["text"]["text"] for b in message["blocks"] if b["type"] == "section"]
    assert len(sections) > 4 and all(len(s) <= blocks.SECTION_LIMIT for s in sections)
    assert all(s.endswith(".") for s in sections[:5])  # paragraph / sentence boundaries, not mid-word
    assert "".join(sections).replace(" ", "").replace("\n", "") == text.replace(" ", "").replace("\n", "")
    assert block_problems(message["blocks"]) == []


def test_split_text_packs_paragraphs_sentences_and_words_greedily() -> None:
    text = "One two three. Four five six.\n\nSeven eight. " + "x" * 25 + " nine"
    assert blocks.split_text(text, limit=20) == [
        "One two three.",  # a sentence per piece where two would not fit
        "Four five six.",
        "Seven eight.",  # a new paragraph starts a new piece when the blank line would not fit
        "x" * 20,  # an enormous word is cut every `limit` characters
        "xxxxx nine",  # and what follows joins its tail
    ]
    assert blocks.split_text("a b\n\nc d", limit=20) == ["a b\n\nc d"]  # short: unchanged


def test_enormous_answer_and_many_citations_stay_within_50_blocks() -> None:
    text = " ".join(f"Rule {i} says something specific about expenses." for i in range(4000))  # ~200k characters
    message = blocks.answer_message(view(text, [source(n) for n in range(1, 31)]))
    assert len(message["blocks"]) <= blocks.MAX_BLOCKS
    assert block_problems(message["blocks"]) == []
    assert "shortened" in [b for b in message["blocks"] if b["type"] == "section"][-1]["text"]["text"]
    listed = " ".join(e["text"] for b in message["blocks"] if b["type"] == "context" for e in b["elements"])
    assert all(f"[{n}]" in listed for n in range(1, 31))
    assert len(message["text"]) <= blocks.FALLBACK_TEXT_LIMIT
    # A private answer is headed by its question (escaped, shortened): still within the limits.
    lead = blocks.private_answer_lead("CSHARED01", "<!channel> per diem in Paris? " * 100)
    private = blocks.answer_message(view(text, [source(n) for n in range(1, 31)]), lead)
    assert len(private["blocks"]) <= blocks.MAX_BLOCKS and block_problems(private["blocks"]) == []
    first = private["blocks"][0]["elements"][0]["text"]
    assert first.startswith("🔒 Your question in <#CSHARED01>: &lt;!channel&gt;") and len(first) < 700


def test_answer_text_is_escaped_for_mrkdwn() -> None:
    message = blocks.answer_message(view("Use <script> & co [1]"))
    assert message["blocks"][0]["text"]["text"] == "Use &lt;script&gt; &amp; co [1]"


def test_a_markdown_link_in_an_answer_is_a_slack_link_and_its_text_in_the_notification() -> None:
    """Never "[text](url)" as it stands: in the section a Slack link with its text escaped, a
    link to anything but http(s) or mailto as its text; in the notification the text only."""
    text = (
        "We observe [11 local *holidays* <b>|ok</b>](https://x.example/h?a=1&b=2|3) "
        "and [![badge](https://img.shields.io/b.svg) CI](https://ci.example) ([write](mailto:hr@x.example)), "
        "see [the share](file://server/share), [this](javascript:alert(1)) and ![map](https://x.example/m.png). [1]"
    )
    message = blocks.answer_message(view(text, [source(1)]))
    shown = message["blocks"][0]["text"]["text"]
    assert shown == (
        "We observe <https://x.example/h?a=1&amp;b=2%7C3|11 local holidays &lt;b&gt;¦ok&lt;/b&gt;> "
        "and <https://ci.example|badge CI> (<mailto:hr@x.example|write>), "
        "see the share, this and map. [1]"
    )
    assert (
        message["text"]
        == "We observe 11 local holidays &lt;b&gt;|ok&lt;/b&gt; and badge CI (write), see the share, this and map. [1]"
    )
    assert "](" not in shown + message["text"] and block_problems(message["blocks"]) == []


def test_markdown_emphasis_in_an_answer_is_slack_emphasis() -> None:
    """Slack reads "*only*" as bold: Markdown's italic becomes "_only_", its bold "*manager*";
    code spans, URLs and words such as "snake_case" keep their marks."""
    text = (
        "Claims are *only* paid after **manager** approval (__all__ of them, ***no*** _exceptions_); "
        "file `leave_request_id` at https://x.example/forms/a_b_ or [the *form*](https://x.example/f_g_), "
        "not 2*3*4 snake_case_ids. [1]"
    )
    shown = blocks.answer_message(view(text, [source(1)]))["blocks"][0]["text"]["text"]
    assert shown == (
        "Claims are _only_ paid after *manager* approval (*all* of them, *_no_* _exceptions_); "
        "file `leave_request_id` at https://x.example/forms/a_b_ or <https://x.example/f_g_|the form>, "
        "not 2*3*4 snake_case_ids. [1]"
    )


def test_notices_and_apology_carry_what_users_need() -> None:
    apology = blocks.apology_message("Q7K2M9")
    assert "Q7K2M9" in apology["text"] and block_problems(apology["blocks"]) == []
    assert "40,000" in blocks.too_long_message(40_000, 4000)["text"]
    stats = blocks.stats_message(
        {
            "days": 7,
            "questions": 10,
            "answered": 9,
            "failed": 1,
            "action_rates": {"correct": 0.5, "ambiguous": 0.3, "incorrect": 0.2},
            "abstention_rate": 0.1,
            "feedback_up": 3,
            "feedback_down": 1,
            "latency_p50_ms": 1200.0,
            "latency_p95_ms": 2500.0,
        }
    )
    assert "10 questions" in stats["text"] and "correct 50%" in stats["text"] and "1.2s / 2.5s" in stats["text"]


def test_signature_is_slacks_v0_hmac() -> None:
    # The example from Slack's "Verifying requests" documentation.
    body = (
        "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&"
        "channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&"
        "response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&"
        "trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    )
    assert (
        sign("8f742231b10e8888abcd99yyyzzz85a5", 1531420618, body)
        == "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    )


# ---------------------------------------------------------------- decisions


@pytest.fixture(scope="module")
def slack_settings():  # -> Settings (no services needed)
    from core.config import Settings

    return Settings().model_copy(update={"admin_user_ids": "UADMIN0001,UADMIN0002", "max_question_chars": 4000})


def test_clean_text_removes_the_bot_mention_and_slack_markup() -> None:
    text = "<@UPOLICYBOT>  What does <https://hr.example.com/p|the policy> say about <#C123|travel> &amp; <@U999>?"
    assert clean_text(text, "UPOLICYBOT") == "What does the policy say about #travel & <@U999>?"
    # An e-mail or phone link keeps its address, which redaction knows, not its label (a name);
    # channel IDs, group pings and special mentions say nothing to search; dates keep their text.
    text = (
        "Ask <mailto:priya@acme.com|Priya Raghunathan> or <tel:+15551234567|Priya> in <#C0123> with "
        "<!subteam^S0ABC12|@hr-team> <!here> about leave by <!date^1392734382^{date}|Feb 18th> <!subteam^S0ABC13>"
    )
    assert clean_text(text, None) == "Ask priya@acme.com or +15551234567 in with @hr-team about leave by Feb 18th"
    assert (
        clean_text("See <#C0123|> and <https://hr.example.com/leave|> or <!subteam^S1|>.", None)
        == "See and https://hr.example.com/leave or ."
    )
    from crag.redaction import keyword_query, redact

    assert "priya" not in keyword_query(redact(clean_text(text, None), asker_names=())).lower()


def test_members_of_other_organisations_are_not_answered_in_slack_connect(slack_settings) -> None:
    """Policies are internal: in a Slack Connect channel or DM, a member of another organisation
    gets a notice, our own members (and listed Grid workspaces) get answers."""
    me = BotIdentity(user_id="UPOLICYBOT", bot_id="BPOLICYBOT", teams=frozenset({"TOURS", "EOURGRID"}))
    mention = {
        "type": "app_mention",
        "user": "UVENDOR1",
        "channel": "CSHARED1",
        "ts": "1.2",
        "text": "<@UPOLICYBOT> What is the travel per diem?",
        "user_team": "TVENDOR",
    }
    dm = {
        "type": "message",
        "channel_type": "im",
        "user": "UVENDOR1",
        "channel": "DSHARED1",
        "ts": "1.3",
        "text": "What is the travel per diem?",
        "user_team": "TVENDOR",
    }
    decision = decide_mention(mention, "Ev1", slack_settings, me, shared_externally=True)
    assert decision.kind == "outsider" and decision.reason == "a member of another organisation (team TVENDOR)"
    assert decide_message(dm, "Ev2", slack_settings, me, shared_externally=True).kind == "outsider"
    assert (
        decide_mention(mention | {"user_team": "TOURS"}, "Ev1", slack_settings, me, shared_externally=True).kind
        == "question"
    )
    assert decide_mention(mention, "Ev1", slack_settings, me).kind == "question"  # not a Slack Connect conversation
    grid = slack_settings.model_copy(update={"member_team_ids": "TSISTER, TVENDOR"})
    assert decide_mention(mention, "Ev1", grid, me, shared_externally=True).kind == "question"
    open_to_all = slack_settings.model_copy(update={"answer_outsiders": True})
    assert decide_message(dm, "Ev2", open_to_all, me, shared_externally=True).kind == "question"
    # A webhook's or workflow's post names no team: in a shared conversation, no member either.
    hook = {
        "type": "app_mention",
        "subtype": "bot_message",
        "bot_id": "BHOOK1",
        "channel": "CSHARED1",
        "ts": "1.4",
        "text": "<@UPOLICYBOT> What is the travel per diem?",
    }
    answer_bots = slack_settings.model_copy(update={"ignore_bots": False})
    assert decide_mention(hook, "Ev3", answer_bots, me).kind == "question"
    assert decide_mention(hook, "Ev3", answer_bots, me, shared_externally=True).kind == "outsider"


def test_mentions_become_questions_or_notices(slack_settings) -> None:
    base = {"type": "app_mention", "user": "U1", "channel": "C1", "ts": "1.2"}
    assert (
        decide_mention(base | {"text": "<@UPOLICYBOT> How much leave?"}, "Ev1", slack_settings, ME).kind == "question"
    )
    assert decide_mention(base | {"text": "<@UPOLICYBOT>"}, "Ev1", slack_settings, ME).kind == "empty"
    assert (
        decide_mention(base | {"text": "<@UPOLICYBOT> " + "x" * 40_000}, "Ev1", slack_settings, ME).kind == "too_long"
    )
    decision = decide_mention(
        base | {"text": "<@UPOLICYBOT> and after that?", "thread_ts": "1.0"}, "Ev1", slack_settings, ME
    )
    assert decision.incoming.in_thread and decision.incoming.thread_ts == "1.0"
    top = decide_mention(base | {"text": "<@UPOLICYBOT> hi there"}, "Ev1", slack_settings, ME).incoming
    assert not top.in_thread and top.thread_ts == "1.2"


@pytest.mark.parametrize(
    "extra,reason",
    [
        ({"subtype": "message_changed"}, "subtype"),
        ({"subtype": "message_deleted"}, "subtype"),
        ({"subtype": "bot_message", "bot_id": "BOTHER"}, "subtype"),
        ({"channel_type": "channel"}, "not a direct message"),
        ({"hidden": True}, "hidden"),
    ],
)
def test_messages_that_are_ignored(slack_settings, extra, reason) -> None:
    event = {
        "type": "message",
        "channel_type": "im",
        "user": "U1",
        "channel": "D1",
        "ts": "1.2",
        "text": "hello",
    } | extra
    decision = decide_message(event, "Ev1", slack_settings, ME)
    assert decision.kind == "ignore" and reason in decision.reason


def test_other_bots_are_answered_when_configured(slack_settings) -> None:
    """Bots' events are dropped before a decision (tests/test_who_may_ask.py); with
    POLICYBOT_IGNORE_BOTS off, what gets through is decided as a person's message."""
    permissive = slack_settings.model_copy(update={"ignore_bots": False})
    event = {
        "type": "message",
        "channel_type": "im",
        "bot_id": "BOTHER",
        "user": "UOTHER",
        "channel": "D1",
        "ts": "1.2",
        "text": "How much leave?",
    }
    assert decide_message(event, "Ev1", permissive, ME).kind == "question"
    # Webhooks and workflows post as `bot_message`: answered too when configured.
    webhook = {
        "type": "message",
        "channel_type": "im",
        "subtype": "bot_message",
        "bot_id": "BHOOK",
        "channel": "D1",
        "ts": "1.3",
        "text": "How much leave?",
    }
    assert decide_message(webhook, "Ev1", permissive, ME).kind == "question"
    assert decide_message(webhook, "Ev1", slack_settings, ME).kind == "ignore"


def test_thanks_and_greetings_are_not_questions(slack_settings) -> None:
    dm = {"type": "message", "channel_type": "im", "user": "U1", "channel": "D1", "ts": "1.2"}
    for text in ("thanks!", "Thank you so much 🙏", "ok great :+1:", "👍"):
        assert decide_message(dm | {"text": text}, "Ev1", slack_settings, ME).kind == "thanks", text
    for text in ("hi", "Hello there!", "good morning :wave:", "👎", "🤔"):
        assert decide_message(dm | {"text": text}, "Ev1", slack_settings, ME).kind == "empty", text
    for text in ("thanks, and what about contractors?", "Is that ok?", "hi, how many sick days do I get?", "thx 2"):
        assert decide_message(dm | {"text": text}, "Ev1", slack_settings, ME).kind == "question", text


def test_uploads_and_stats_depend_on_admin(slack_settings) -> None:
    upload = {
        "type": "message",
        "channel_type": "im",
        "subtype": "file_share",
        "channel": "D1",
        "ts": "1.2",
        "text": "",
        "files": [{"id": "F1", "name": "a.md"}],
    }
    assert decide_message(upload | {"user": "UADMIN0002"}, "Ev1", slack_settings, ME).kind == "upload"
    assert decide_message(upload | {"user": "UNOBODY"}, "Ev1", slack_settings, ME).kind == "upload_refused"
    # Someone's screenshot with a question: the question is answered (the file is not read);
    # an admin's contract with a question too, and the admin is offered to add the file.
    asked = upload | {"user": "UNOBODY", "text": "How long do I keep this receipt?"}
    decision = decide_message(asked, "Ev1", slack_settings, ME)
    assert decision.kind == "question" and not decision.offer_upload
    decision = decide_message(
        asked | {"user": "UADMIN0002", "text": "Is this vendor contract OK under the gifts policy?"},
        "Ev1",
        slack_settings,
        ME,
    )
    assert decision.kind == "question" and decision.offer_upload
    for text, kind in (
        ("please add this", "upload_refused"),
        ("Have a look and add it", "upload_refused"),
        ("I need to know how long to keep this receipt", "question"),
    ):
        assert decide_message(upload | {"user": "UNOBODY", "text": text}, "Ev1", slack_settings, ME).kind == kind, text
    stats = {"type": "message", "channel_type": "im", "channel": "D1", "ts": "1.2"}
    decision = decide_message(stats | {"user": "UADMIN0001", "text": "Stats 30d"}, "Ev1", slack_settings, ME)
    assert decision.kind == "stats" and decision.days == 30
    assert (
        decide_message(stats | {"user": "UNOBODY", "text": "stats"}, "Ev1", slack_settings, ME).kind == "stats_refused"
    )
    assert (
        decide_message(stats | {"user": "UADMIN0001", "text": "stats about leave?"}, "Ev1", slack_settings, ME).kind
        == "question"
    )


def test_assistant_thread_messages_are_marked(slack_settings) -> None:
    event = {
        "type": "message",
        "channel_type": "im",
        "user": "U1",
        "channel": "D1",
        "ts": "1.3",
        "thread_ts": "1.0",
        "text": "How much leave?",
    }
    decision = decide_message(event, "Ev1", slack_settings, ME, lambda channel, ts: (channel, ts) == ("D1", "1.0"))
    assert decision.incoming.surface == "assistant"
    assert decide_message(event, "Ev1", slack_settings, ME).incoming.surface == "dm"


def test_recent_messages_remember_each_message_once_within_capacity() -> None:
    recent = RecentMessages(capacity=2)
    assert recent.first_time("D1", "1.1") and not recent.first_time("D1", "1.1")
    assert recent.first_time("D2", "1.1")  # another channel, another message
    assert recent.first_time("D1", "1.2")  # a third message: the least recently seen, (D1, 1.1), is forgotten
    assert recent.first_time("D2", "1.1") is False  # still remembered
    assert recent.first_time("D1", "1.1")  # forgotten, so it counts as new again


def test_outage_replies_are_deduped_across_bot_processes_in_redis_and_locally_without_it(settings) -> None:
    from core import services
    from devtools.ports import free_port

    redis_url = services.redis_url(settings)
    one_bot, other_bot = OutageReplies(lambda: redis_url), OutageReplies(lambda: redis_url)
    assert one_bot.first_time("DOUTAGE01", "1.1")
    assert not other_bot.first_time("DOUTAGE01", "1.1")  # the message's twin event, at another process
    assert other_bot.first_time("DOUTAGE01", "1.2")
    nothing_there = f"redis://127.0.0.1:{free_port()}/0"
    alone, also_alone = OutageReplies(lambda: nothing_there), OutageReplies(lambda: nothing_there)
    assert alone.first_time("DOUTAGE01", "1.3") and not alone.first_time("DOUTAGE01", "1.3")
    assert also_alone.first_time("DOUTAGE01", "1.3")  # no Redis: each process can only remember its own


def test_bookkeeping_after_a_request_went_through_only_logs_a_database_error(slack_settings, caplog) -> None:
    """Once a question is queued, losing the note that says so must not reach the user as an outage."""
    from sqlalchemy.exc import OperationalError

    from workers.enqueuer import CeleryEnqueuer

    def mark_enqueued(settings, claim_id: int) -> None:
        raise OperationalError("UPDATE slack_messages", {}, Exception("server closed the connection"))

    Listeners(slack_settings, CeleryEnqueuer()).bookkeep(mark_enqueued, 42)
    assert "could not mark enqueued for claim 42: OperationalError" in caplog.text


def test_manifest_subscribes_to_what_the_app_handles() -> None:
    import bot.app
    from bot.app import EVENTS

    for name in ("manifest.yml", "manifest.socket.yml"):
        manifest = yaml.safe_load((Path(bot.app.__file__).parent / name).read_text())
        events = set(manifest["settings"]["event_subscriptions"]["bot_events"])
        assert events == {
            "app_mention",
            "message.im",
            "app_home_opened",
            "assistant_thread_started",
            "assistant_thread_context_changed",
        }
        assert {e.split(".")[0] for e in events} <= set(EVENTS)
        scopes = set(manifest["oauth_config"]["scopes"]["bot"])
        assert {
            "app_mentions:read",
            "chat:write",
            "im:history",
            "reactions:write",
            "files:read",
            "assistant:write",
            "users:read",
        } <= scopes
        assert manifest["features"]["app_home"]["messages_tab_enabled"] is True
        assert manifest["settings"]["interactivity"]["is_enabled"] is True
        socket_mode = manifest["settings"]["socket_mode_enabled"]
        assert socket_mode is (name == "manifest.socket.yml")
        if not socket_mode:
            assert manifest["settings"]["event_subscriptions"]["request_url"].endswith("/slack/events")
