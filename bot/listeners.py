"""Listeners decide; they never run the pipeline.

Events from bots never get here (bot/who_may_ask.py, Bolt middleware); who else may ask is
checked with that module's predicates: outsiders in `decide_*`, guests and bot users from
users.info after the ack (`Listeners`).

`decide_*` are pure functions from a Slack event to a `Decision`. `Listeners` carries a
decision out with a few fast steps: claim the message (one answer per Slack message, even
when Slack sends it twice or retries), record the question, show progress (👀 or the agent
view's status), enqueue a Celery task holding plain IDs. The answer is posted by the worker.
"""

from __future__ import annotations

import html
import json
import logging
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from sqlalchemy.exc import SQLAlchemyError

from application import outbox
from application.answering import RecordedQuestion, mark_failed, record_feedback, record_question
from application.review import stats_summary
from bot.who_may_ask import (
    BotIdentity,
    lacks_writer_team,
    outsider_team,
    profile_refusal,
    writer_team,
)
from core import db, services
from core.config import Settings
from slack_outbound import blocks, state
from slack_outbound.askers import SLACK_USERS, SlackUnavailable, is_guest, teams_of
from slack_outbound.audience import ChannelAudience
from slack_outbound.progress import clear_progress, show_progress

if TYPE_CHECKING:
    from core.models import SlackMessage

log = logging.getLogger(__name__)

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


# ----------------------------------------------------------------- decide (pure)


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


# ----------------------------------------------------------------- act


class Enqueuer(Protocol):
    def answer(self, question_id: int) -> None: ...

    def ingest(
        self, claim_id: int, file_ids: Sequence[str], channel: str, thread_ts: str, user: str, collection: str
    ) -> None: ...


class RecentMessages:
    """A bounded, thread-safe memory of Slack messages, for when Redis cannot dedupe either."""

    def __init__(self, capacity: int = 4096) -> None:
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def first_time(self, channel: str, ts: str) -> bool:
        """True the first time a (channel, ts) is seen; remembers it."""
        key = (channel, ts)
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                return False
            self._seen[key] = None
            if len(self._seen) > self._capacity:
                self._seen.popitem(last=False)
            return True


OUTAGE_REPLY_TTL_S = 3600  # far past Slack's last retry (about 5 min) and a DM's twin event (seconds)


class OutageReplies:
    """Which messages were already told "can't take this right now", across bot processes.

    With the database down, the claim that makes one message get one reply is gone; a DM
    that mentions the bot still arrives twice (`message.im` and `app_mention`), possibly at
    two bot processes behind a load balancer. A Redis key (SET NX) dedupes the outage reply
    across them; when Redis is down too, each process remembers on its own.
    """

    def __init__(self, redis_url: Callable[[], str], local: RecentMessages | None = None) -> None:
        self._redis_url = redis_url
        self._local = local or RecentMessages()
        self._client: redis.Redis | None = None
        self._lock = threading.Lock()

    def first_time(self, channel: str, ts: str) -> bool:
        first_here = self._local.first_time(channel, ts)
        try:
            return bool(self._redis().set(f"policybot:outage-reply:{channel}:{ts}", 1, nx=True, ex=OUTAGE_REPLY_TTL_S))
        except redis.RedisError as error:
            log.info("outage replies deduped in this process only (Redis: %s)", type(error).__name__)
            return first_here

    def _redis(self) -> redis.Redis:
        with self._lock:
            if self._client is None:  # only on the failure path: the bot never needs it otherwise
                # One quick try: the user is waiting for the outage reply, not for Redis.
                self._client = redis.Redis.from_url(
                    self._redis_url(), socket_connect_timeout=0.5, socket_timeout=0.5, retry=Retry(NoBackoff(), 0)
                )
            return self._client


TAKING: dict[Kind, str] = {"question": "questions", "upload": "uploads"}


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

    # -- events

    def on_mention(self, body: Mapping[str, Any], event: Mapping[str, Any], client: WebClient, me: BotIdentity) -> None:
        event = self._with_writer_team(body, event, client, me)
        shared_externally = bool(body.get("is_ext_shared_channel"))
        self.carry_out(
            decide_mention(event, body.get("event_id"), self.settings, me, shared_externally=shared_externally),
            client,
            shared_externally=shared_externally,
        )

    def on_message(self, body: Mapping[str, Any], event: Mapping[str, Any], client: WebClient, me: BotIdentity) -> None:
        if event.get("channel_type") == "im":  # other messages are ignored: no lookup for them
            event = self._with_writer_team(body, event, client, me)
        decision = decide_message(
            event,
            body.get("event_id"),
            self.settings,
            me,
            self._in_assistant_thread,
            shared_externally=bool(body.get("is_ext_shared_channel")),
        )
        self.carry_out(decision, client)

    def _with_writer_team(
        self, body: Mapping[str, Any], event: Mapping[str, Any], client: WebClient, me: BotIdentity
    ) -> Mapping[str, Any]:
        """Slack Connect events name the writer's team (`user_team`). One that does not is
        completed from users.info: the writer's workspace, or on Enterprise Grid their
        organisation and its workspaces, one of ours if any is. A writer whose team cannot be
        told is taken for an outsider, since policies are internal."""
        if not lacks_writer_team(body, event, self.settings):
            return event
        try:
            teams = teams_of(self._slack_user(client, str(event["user"])) or {})
        except SlackUnavailable as error:  # no team: an outsider, since policies are internal
            log.warning(
                "%s: the writer in the shared conversation %s is taken for an outsider", error, event.get("channel")
            )
            teams = ()
        return {**event, "user_team": writer_team(teams, me.teams | self.settings.member_teams)}

    def _in_assistant_thread(self, channel: str, thread_ts: str | None) -> bool:
        try:
            return state.is_assistant_thread(self.settings, channel, thread_ts)
        except SQLAlchemyError as error:  # the database is down: carrying the message out says so
            log.warning("could not tell whether %s is an agent-view thread: %s", channel, type(error).__name__)
            return False

    def on_assistant_thread_started(self, event: Mapping[str, Any], client: WebClient) -> None:
        thread = event.get("assistant_thread") or {}
        channel, thread_ts = thread.get("channel_id"), thread.get("thread_ts")
        if not channel or not thread_ts:
            return
        try:
            first = state.remember_assistant_thread(
                self.settings, channel, thread_ts, thread.get("user_id"), thread.get("context")
            )
        except SQLAlchemyError as error:
            # No greeting and suggested prompts that invite questions it cannot take: say so
            # up front (once per thread, deduped in Redis: the database cannot).
            log.warning("could not remember agent-view thread in %s: %s", channel, type(error).__name__)
            if self.told_unavailable.first_time(channel, thread_ts):
                client.chat_postMessage(channel=channel, thread_ts=thread_ts, **blocks.unavailable_message(None))
            return
        if not first:
            return  # a retried delivery: greeted already
        if self._greets_a_guest(client, thread.get("user_id")):  # no prompts inviting questions it will refuse
            client.chat_postMessage(channel=channel, thread_ts=thread_ts, **blocks.members_only_message(asked=False))
            return
        client.chat_postMessage(channel=channel, thread_ts=thread_ts, **blocks.greeting_message())
        try:
            client.assistant_threads_setSuggestedPrompts(
                channel_id=channel, thread_ts=thread_ts, prompts=list(blocks.SUGGESTED_PROMPTS)
            )
        except SlackApiError as error:
            log.info("could not set suggested prompts: %s", error.response.get("error"))

    def on_app_home_opened(self, event: Mapping[str, Any], client: WebClient) -> None:
        if event.get("tab") != "messages" or not event.get("user") or not event.get("channel"):
            return
        try:
            first_visit = state.mark_greeted(self.settings, str(event["user"]))
        except SQLAlchemyError as error:  # cannot tell a first visit: no greeting rather than one on every visit
            log.warning("could not look up whether %s was greeted: %s", event["user"], type(error).__name__)
            return
        if first_visit:
            guest = self._greets_a_guest(client, str(event["user"]))
            client.chat_postMessage(
                channel=event["channel"],
                **(blocks.members_only_message(asked=False) if guest else blocks.greeting_message()),
            )

    def on_feedback(self, body: Mapping[str, Any], client: WebClient) -> None:
        """Called after ack(): record the vote (a second click changes it) and thank the user."""
        action = (body.get("actions") or [{}])[0]
        user = (body.get("user") or {}).get("id")
        value = str(action.get("value") or "")
        if not user or not value.isdigit():
            log.warning("feedback click without user or question id")
            return
        vote = 1 if action.get("action_id") == blocks.FEEDBACK_UP else -1
        try:
            record_feedback(self.settings, int(value), user, vote)
        except Exception:  # unknown question id (e.g. a deleted log row): say so in the log, not to the user
            log.exception("could not record feedback for question %s", value)
            return
        channel = (body.get("channel") or {}).get("id")
        message = body.get("message") or {}
        if channel:
            try:
                client.chat_postEphemeral(
                    channel=channel,
                    user=user,
                    thread_ts=message.get("thread_ts") or message.get("ts"),
                    text="Thanks, your feedback is recorded." + (" 👍" if vote > 0 else " 👎"),
                )
            except SlackApiError as error:
                log.info("could not thank for feedback: %s", error.response.get("error"))

    # -- decisions

    def carry_out(self, decision: Decision, client: WebClient, *, shared_externally: bool = False) -> None:
        """`shared_externally`: the event said it came from a Slack Connect conversation."""
        incoming = decision.incoming
        if decision.kind == "ignore" or incoming is None:
            log.debug("ignored event: %s", decision.reason)
            return
        decision = self._as_slack_knows_the_writer(decision, incoming, client)
        if decision.kind == "ignore":
            log.debug("ignored event: %s", decision.reason)
            return
        try:
            if decision.kind == "question":
                self._question(
                    incoming,
                    client,
                    self._private_reason(incoming, client, shared_externally),
                    offer_upload=decision.offer_upload,
                )
            elif decision.kind == "upload":
                self._upload(incoming, client)
            else:
                self._notice(decision, incoming, client)
        except SQLAlchemyError as error:  # the database is down before anything was recorded
            self._could_not_take(incoming, client, error, taking=TAKING.get(decision.kind, "requests"))

    def _slack_user(self, client: WebClient, user_id: str) -> dict[str, Any] | None:
        """users.info through the quick lookup client (cached; may raise SlackUnavailable)."""
        return SLACK_USERS.get(self.lookups or client, user_id)

    def _as_slack_knows_the_writer(self, decision: Decision, incoming: Incoming, client: WebClient) -> Decision:
        """users.info on the writer: a bot user posting as a user (no `bot_id` in the event) is
        a bot all the same (POLICYBOT_IGNORE_BOTS: no reply, so two bots never talk in a loop),
        and a guest of the workspace gets the members-only notice. When Slack does not say just
        now, a question is met with "ask again" rather than answered unchecked; anything else
        goes on as decided."""
        checks_guest = decision.kind == "question" and not self.settings.answer_guests
        if not (checks_guest or self.settings.ignore_bots):
            return decision
        try:
            user = self._slack_user(client, incoming.user) or {}
        except SlackUnavailable as error:
            if not checks_guest:
                return decision
            log.warning("%s: asking %s to ask again", error, incoming.user)
            return Decision("unverified", incoming, reason=str(error))
        refusal = profile_refusal(incoming.user, user, self.settings, asks_question=decision.kind == "question")
        if refusal is None:
            return decision
        kind, reason = refusal
        return Decision(kind, incoming if kind == "outsider" else None, reason=reason)

    def _greets_a_guest(self, client: WebClient, user_id: str | None) -> bool:
        """Whether a greeting would go to a guest, who gets the members-only notice instead.
        When Slack does not say just now, the greeting goes out: questions are checked as asked."""
        if self.settings.answer_guests or not user_id:
            return False
        try:
            return is_guest(self._slack_user(client, user_id) or {})
        except SlackUnavailable as error:
            log.warning("%s: greeting %s", error, user_id)
            return False

    def _private_reason(self, incoming: Incoming, client: WebClient, shared_externally: bool) -> str | None:
        """Why the answer must go to the asker alone (slack_outbound/audience.py); a DM with the bot (a `D`
        conversation, also when it mentions the bot) is theirs already."""
        if incoming.surface != "mention" or incoming.channel.startswith("D"):
            return None
        return self.audience.private_reason(
            self.lookups or client, self.settings, incoming.channel, shared_externally=shared_externally
        )

    def _question(
        self, incoming: Incoming, client: WebClient, private_reason: str | None = None, *, offer_upload: bool = False
    ) -> None:
        settings = self.settings
        recorded: RecordedQuestion | None = None
        try:
            # Claim and record in one transaction: a second delivery waits for it, then finds the claim.
            with db.session(settings) as session:
                claim = state.claim_message(session, incoming.channel, incoming.ts, incoming.event_id, "question")
                if claim.handled_elsewhere:
                    log.info(
                        "message %s in %s is handled already (%s)",
                        incoming.ts,
                        incoming.channel,
                        "retried delivery" if claim.same_event else "second event for the same message",
                    )
                    return
                parent_id = (
                    state.earlier_question_id(session, incoming.channel, incoming.thread_ts)
                    if incoming.in_thread
                    else None
                )
                recorded = record_question(
                    session,
                    incoming.text,
                    surface=incoming.surface,
                    asker=incoming.user,
                    channel=incoming.channel,
                    thread_ts=incoming.thread_ts,
                    message_ts=incoming.ts,
                    event_id=incoming.event_id,
                    parent_id=parent_id,
                    private_reply=private_reason is not None,
                )
                state.link_question(session, claim.id, recorded.id)
                outbox.add(session, recorded.id, settings.reply_wait_s)  # the sweep queues it if this bot stops
            # Progress first, then enqueue: the worker removes what is already there.
            show_progress(client, incoming.surface, incoming.channel, incoming.thread_ts, incoming.ts)
            self.enqueuer.answer(recorded.id)
        except Exception as error:  # the database or the queue is down
            self._could_not_take(incoming, client, error, recorded)
            return
        self._bookkeep(state.mark_enqueued, claim.id)
        log.info(
            "question %s (ref %s) queued from %s%s",
            recorded.id,
            recorded.reference,
            incoming.surface,
            f", to be answered privately: {incoming.channel} {private_reason}" if private_reason else "",
        )
        if offer_upload:
            try:
                self._offer_upload(incoming, client, claim.id, asked=True)
            except SlackApiError as error:  # the question is on its way; the admin can send the file again
                log.warning("could not offer to add the files in %s: %s", incoming.channel, error.response.get("error"))

    def _bookkeep(self, step: Callable[..., None], claim_id: int, *args: str) -> None:
        """A note on a claim after the user's request went through: losing it must not
        turn into an outage reply for a request that is being handled."""
        try:
            step(self.settings, claim_id, *args)
        except SQLAlchemyError as error:
            log.warning(
                "could not %s for claim %s: %s", step.__name__.replace("_", " "), claim_id, type(error).__name__
            )

    def _could_not_take(
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

    def _upload(self, incoming: Incoming, client: WebClient) -> None:
        with db.session(self.settings) as session:
            claim = state.claim_message(session, incoming.channel, incoming.ts, incoming.event_id, "upload")
        if claim.handled_elsewhere:
            return
        self._offer_upload(incoming, client, claim.id, asked=False)
        self._bookkeep(state.mark_enqueued, claim.id)  # offered: a retried delivery does not offer again

    def _offer_upload(self, incoming: Incoming, client: WebClient, claim_id: int, *, asked: bool) -> None:
        """Ask the admin whether the message's files become policy documents, saying where they
        would go; nothing is fetched until they confirm (on_upload_choice)."""
        files = [f for f in incoming.files if f.get("id")]
        if not files:
            return
        collection = self.settings.default_collection
        choice = json.dumps({"claim": claim_id, "files": [str(f["id"]) for f in files], "collection": collection})
        names = [str(f.get("name") or f.get("title") or f["id"]) for f in files]
        client.chat_postMessage(
            channel=incoming.channel,
            thread_ts=incoming.thread_ts,
            **blocks.upload_offer_message(names, collection, choice, asked=asked),
        )

    def on_upload_choice(self, body: Mapping[str, Any], client: WebClient) -> None:
        """Called after ack(): an admin's answer to upload_offer_message. The first confirmation
        of a message queues its files, with the collection the offer named; the worker ingests
        only confirmed files, and does not check admins itself (the bot decided)."""
        action = (body.get("actions") or [{}])[0]
        user = str((body.get("user") or {}).get("id") or "")
        channel = str((body.get("channel") or {}).get("id") or "")
        message = body.get("message") or {}
        try:
            choice = json.loads(str(action.get("value") or ""))
            claim_id, file_ids, collection = (
                int(choice["claim"]),
                [str(f) for f in choice["files"]],
                str(choice["collection"]),
            )
        except (ValueError, KeyError, TypeError):
            log.warning("upload choice without a readable value in %s", channel)
            return
        if user not in self.settings.admins:
            client.chat_postEphemeral(channel=channel, user=user, **blocks.upload_refused_message())
            return
        if action.get("action_id") != blocks.UPLOAD_ADD:
            client.chat_update(
                channel=channel, ts=str(message.get("ts") or ""), **blocks.upload_chosen_message(user, None)
            )
            return
        thread_ts = str(message.get("thread_ts") or message.get("ts") or "")
        surface: Surface = "assistant" if self._in_assistant_thread(channel, thread_ts) else "dm"
        claim: SlackMessage | None = None
        try:
            claim = state.confirm_upload(self.settings, claim_id, channel, user)
            if claim is None:
                log.info("upload %s in %s was confirmed already", claim_id, channel)
                return
            show_progress(client, surface, channel, thread_ts, claim.message_ts)
            self.enqueuer.ingest(claim_id, file_ids, channel, thread_ts, user, collection)
        except Exception as error:  # the database or the queue is down: say so; the buttons stay for a later try
            if claim is not None:
                try:
                    state.confirm_upload(self.settings, claim_id, channel, None)
                except SQLAlchemyError as second:
                    log.error("could not take back the confirmation of upload %s: %s", claim_id, type(second).__name__)
            message_ts = claim.message_ts if claim is not None else thread_ts
            self._could_not_take(
                Incoming(None, surface, channel, user, message_ts, thread_ts, False, ""),
                client,
                error,
                taking="uploads",
            )
            return
        client.chat_update(
            channel=channel, ts=str(message.get("ts") or ""), **blocks.upload_chosen_message(user, collection)
        )
        log.info(
            "upload of %d file(s) confirmed by admin %s, queued for collection %s", len(file_ids), user, collection
        )

    def _notice(self, decision: Decision, incoming: Incoming, client: WebClient) -> None:
        settings = self.settings
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
            self._bookkeep(state.set_reply_ts, claim.id, str(posted["ts"]))
