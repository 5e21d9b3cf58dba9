"""What the bot does with a Slack message, decided by pure functions: `decide_mention` and
`decide_message` turn an event into a `Decision` (a question, a notice, an upload, or nothing).

Outsiders are told apart here, from the event (bot/who_may_ask.py's predicates); guests and bot
users from users.info after the ack, by the listeners (bot/listeners/). Nothing here touches
Slack, the database or the queue.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from bot.who_may_ask import BotIdentity, outsider_team
from core.config import Settings

Kind = Literal[
    "ignore",
    "question",
    "empty",
    "thanks",
    "too_long",
    "upload",
    "upload_refused",
    "stats",
    "stats_refused",
    "outsider",
    "unverified",
]
Surface = Literal["mention", "dm", "assistant"]

# Message subtypes that are people writing; everything else (edits, deletes, joins, bot messages) is ignored.
HUMAN_SUBTYPES = {None, "file_share", "thread_broadcast"}
STATS_COMMAND = re.compile(r"^\s*stats(?:\s+(\d{1,3})\s*d?)?\s*$", re.IGNORECASE)
# A thank-you or an emoji after an answer is not a question: it gets a short reply, not an abstention.
COURTESY_WORDS = frozenset(
    "thanks thank you thx ty tysm much many a lot so very great cool perfect ok okay got it awesome cheers nice "
    "appreciated appreciate that helps helped helpful super brilliant excellent wonderful".split()
)
_EMOJI_CODE = re.compile(r":[a-z0-9_+'-]+:(?::skin-tone-\d:)?")
GRATEFUL_EMOJI = frozenset("👍🙏❤🙌👌😊🙂😀😄🎉✅💯👏🤝💙💚♥☺")
GRATEFUL_EMOJI_CODES = frozenset(
    "+1 thumbsup pray heart raised_hands ok_hand blush slightly_smiling_face smile smiley tada white_check_mark 100 "
    "clap handshake blue_heart green_heart relaxed".split()
)
# A bare greeting gets the hint an empty mention gets.
GREETING_WORDS = frozenset("hi hello hey hiya yo there good morning afternoon evening day policybot bot".split())


@dataclass(frozen=True)
class Incoming:
    """The parts of a Slack message event the bot acts on."""

    event_id: str | None
    surface: Surface
    channel: str
    user: str
    ts: str  # the message itself
    thread_ts: str  # the thread the bot replies in
    in_thread: bool  # the message was a reply inside an existing thread
    text: str  # cleaned: bot mention removed, Slack markup undone
    files: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Decision:
    kind: Kind
    incoming: Incoming | None = None
    reason: str = ""
    days: int = 7  # for stats
    offer_upload: bool = False  # a question from an admin with files: also ask whether to add them


def clean_text(text: str, bot_user_id: str | None) -> str:
    """Remove the bot's mention, turn Slack markup into what people typed, collapse whitespace."""
    if bot_user_id:
        text = re.sub(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>", " ", text)
    # An e-mail or phone link's label may be a person's name: keep the address instead, which
    # redaction recognises, so neither reaches a fallback source.
    text = re.sub(r"<(?:mailto|tel):([^|>]*)(?:\|[^>]*)?>", r"\1", text, flags=re.IGNORECASE)
    text = re.sub(r"<https?:[^|>]*\|([^>]+)>", r"\1", text)  # <url|label> -> label
    text = re.sub(r"<(https?:[^|>]*)\|?>", r"\1", text)  # <url> (or an empty label) -> url
    text = re.sub(r"<#[A-Z0-9]+\|([^>]+)>", r"#\1", text)  # <#C123|general> -> #general
    text = re.sub(r"<#[A-Z0-9]+\|?>", " ", text)  # a channel without its name: an ID says nothing
    # Special mentions and dates: <!here>, <!subteam^S123|@hr-team> -> @hr-team, <!date^...|Feb 18> -> Feb 18.
    text = re.sub(r"<!(?:[^|>]*)\|([^>]+)>", r"\1", text)
    text = re.sub(r"<![^>]*>", " ", text)
    text = html.unescape(text)
    return re.sub(r"\s+", " ", text).strip()


def _ignored_subtype(event: Mapping[str, Any], settings: Settings) -> str | None:
    """Why a message subtype is not someone asking (None: it may be). Other bots' posts
    (`bot_message`: webhooks, workflows) count when POLICYBOT_IGNORE_BOTS is off."""
    subtype = event.get("subtype")
    if subtype in HUMAN_SUBTYPES or (subtype == "bot_message" and not settings.ignore_bots):
        return None
    return f"subtype {subtype}"


def _incoming(event: Mapping[str, Any], event_id: str | None, surface: Surface, me: BotIdentity) -> Incoming:
    ts = str(event.get("ts") or event.get("event_ts") or "")
    thread_ts = event.get("thread_ts")
    return Incoming(
        event_id=event_id,
        surface=surface,
        channel=str(event.get("channel") or ""),
        user=str(event.get("user") or event.get("bot_id") or ""),
        ts=ts,
        thread_ts=str(thread_ts or ts),
        in_thread=bool(thread_ts) and thread_ts != ts,
        text=clean_text(str(event.get("text") or ""), me.user_id),
        files=tuple(event.get("files") or ()),
    )


def _only_words_of(text: str, words: frozenset[str]) -> bool:
    """Whether every word of `text` (Slack emoji codes and emoji aside) is one of `words`; no digits."""
    text = _EMOJI_CODE.sub(" ", text.lower())
    return not re.search(r"\d", text) and all(word in words for word in re.findall(r"[^\W\d_]+", text))


_QUESTION_OPENING = re.compile(
    r"^\W*(?:can|could|do|does|did|is|are|am|should|shall|may|might|will|would|must)\b", re.IGNORECASE
)
_QUESTION_WORD = re.compile(r"\b(?:how|what|when|where|who|whom|which|why)\b", re.IGNORECASE)


def _asks_something(text: str) -> bool:
    """ "How long do I keep this receipt?", "I need to know how long to keep this"; not "please add this"."""
    return "?" in text or bool(_QUESTION_OPENING.match(text) or _QUESTION_WORD.search(text))


def is_courtesy(text: str) -> bool:
    """Only thanks, acknowledgements or a grateful emoji ("thanks!", "ok great 👍", ":pray:");
    not "???" and not 👎 or 🤔."""
    codes = _EMOJI_CODE.findall(text.lower())
    symbols = [char for char in text if unicodedata.category(char) == "So"]
    if any(code.strip(":").split("::")[0] not in GRATEFUL_EMOJI_CODES for code in codes) or any(
        char not in GRATEFUL_EMOJI for char in symbols
    ):
        return False
    said_something = re.search(r"[^\W\d_]", text) or codes or symbols
    return bool(said_something) and _only_words_of(text, COURTESY_WORDS)


def _question_or_notice(incoming: Incoming, settings: Settings) -> Decision:
    if is_courtesy(incoming.text):
        return Decision("thanks", incoming)
    if not incoming.text or _only_words_of(incoming.text, GREETING_WORDS):
        return Decision("empty", incoming)
    if len(incoming.text) > settings.max_question_chars:
        return Decision("too_long", incoming, reason=f"{len(incoming.text)} characters")
    return Decision("question", incoming)


def decide_mention(
    event: Mapping[str, Any],
    event_id: str | None,
    settings: Settings,
    me: BotIdentity,
    *,
    shared_externally: bool = False,
) -> Decision:
    """`app_mention`: someone mentioned the bot in a channel (or a thread in one).
    `shared_externally`: the event came from a Slack Connect conversation."""
    ignored = _ignored_subtype(event, settings)
    if ignored:
        return Decision("ignore", reason=ignored)
    if event.get("edited"):
        return Decision("ignore", reason="edited message")
    if not event.get("channel") or not event.get("ts"):
        return Decision("ignore", reason="no channel or ts")
    incoming = _incoming(event, event_id, "mention", me)
    outside = outsider_team(event, me, settings, shared_externally)
    if outside:
        return Decision("outsider", incoming, reason=f"a member of another organisation (team {outside})")
    return _question_or_notice(incoming, settings)


def decide_message(
    event: Mapping[str, Any],
    event_id: str | None,
    settings: Settings,
    me: BotIdentity,
    in_assistant_thread: Callable[[str, str | None], bool] = lambda channel, ts: False,
    *,
    shared_externally: bool = False,
) -> Decision:
    """`message`: only direct messages are ours; channel messages arrive as `app_mention`."""
    if event.get("channel_type") != "im":
        return Decision("ignore", reason="not a direct message (mentions arrive as app_mention)")
    ignored = _ignored_subtype(event, settings)
    if ignored:
        return Decision("ignore", reason=ignored)
    if event.get("hidden"):
        return Decision("ignore", reason="hidden message")
    if not event.get("channel") or not event.get("ts") or not (event.get("user") or event.get("bot_id")):
        return Decision("ignore", reason="no channel, ts or user")
    surface: Surface = "assistant" if in_assistant_thread(str(event["channel"]), event.get("thread_ts")) else "dm"
    incoming = _incoming(event, event_id, surface, me)
    outside = outsider_team(event, me, settings, shared_externally)
    if outside:
        return Decision("outsider", incoming, reason=f"a member of another organisation (team {outside})")
    is_admin = incoming.user in settings.admins
    # A file with a question ("How long do I keep this receipt?" and a screenshot, "Is this
    # contract OK under the gifts policy?"): the question is answered, the file is not read. With
    # anything else ("please add this") it is an upload, which only an admin may make. Either
    # way an admin's file becomes a policy document only once they confirm it (a button).
    if incoming.files and not _asks_something(incoming.text):
        return Decision("upload" if is_admin else "upload_refused", incoming)
    command = STATS_COMMAND.match(incoming.text)
    if command:
        if not is_admin:
            return Decision("stats_refused", incoming)
        return Decision("stats", incoming, days=int(command.group(1) or 7) or 7)
    decision = _question_or_notice(incoming, settings)
    return replace(decision, offer_upload=bool(incoming.files) and is_admin and decision.kind == "question")
