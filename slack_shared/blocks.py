"""Block Kit: the one place that renders what the bot posts.

Everything the bot says in Slack is built here, within Slack's limits (3,000 characters
per section text, 50 blocks per message, 10 elements per context block). Long answers are
split on paragraph, then sentence, then word boundaries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.wording import describe_action, section_heading
from crag.text import link_text, plain_text, render_emphasis, render_links

SECTION_LIMIT = 3000
MAX_BLOCKS = 50
CONTEXT_ELEMENTS = 10
FALLBACK_TEXT_LIMIT = 3000  # the notification text; Slack allows more but shows less

FEEDBACK_UP = "feedback_up"
FEEDBACK_DOWN = "feedback_down"
FEEDBACK_BLOCK = "feedback"
UPLOAD_ADD = "upload_add"
UPLOAD_SKIP = "upload_skip"
UPLOAD_BLOCK = "upload"

ACTION_EMOJI = {"correct": "✅", "ambiguous": "🔎", "incorrect": "↪️", "abstain": "🤷"}

Block = dict[str, Any]


@dataclass(frozen=True)
class SourceView:
    n: int
    document: str
    title: str = ""
    section: str = ""
    url: str | None = None
    origin: str = "kb"  # kb | fallback
    source: str = ""  # collection or fallback source name


@dataclass(frozen=True)
class AnswerView:
    """What a posted answer shows; built from the action-log row."""

    question_id: int
    reference: str
    text: str
    action: str
    found: bool
    sources_used: Sequence[str] = ()
    citations: Sequence[SourceView] = field(default_factory=tuple)
    question_class: str | None = None  # core.wording.FOLLOW_UP_CLASS: a follow-up asked alone, not looked up

    @classmethod
    def from_row(cls, row: Any) -> AnswerView:
        """From a core.models.Question row (or anything with the same attributes)."""
        return cls(
            question_id=row.id,
            reference=row.reference,
            text=row.answer or "",
            action=row.action or "incorrect",
            found=bool(row.found),
            sources_used=tuple(row.sources_used or ()),
            citations=tuple(source_from_json(c) for c in (row.citations or ())),
            question_class=getattr(row, "question_class", None),
        )


def source_from_json(citation: Mapping[str, Any]) -> SourceView:
    return SourceView(
        n=int(citation.get("n", 0)),
        document=str(citation.get("document") or ""),
        title=str(citation.get("title") or ""),
        section=str(citation.get("section") or ""),
        url=citation.get("url") or None,
        origin=str(citation.get("origin") or "kb"),
        source=str(citation.get("source") or ""),
    )


# ------------------------------------------------------------------ text helpers


def escape(text: str) -> str:
    """Slack mrkdwn control characters (https://api.slack.com/reference/surfaces/formatting)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _link_label(text: str) -> str:
    # Inside <url|label>, '|' and '>' would end the label early.
    return escape(text).replace("|", "¦")


def _link_url(url: str) -> str:
    # Inside <url|label>, a raw '|' or '>' would end the URL early, and a space would cut it
    # (a "<url with spaces>" Markdown destination): percent-encode them.
    return escape(url.replace("|", "%7C").replace("<", "%3C").replace(">", "%3E").replace(" ", "%20"))


_LINKABLE = re.compile(r"(?:https?://|mailto:)\S", re.IGNORECASE)


# Markdown's emphasis markers as Slack's: Slack reads "*it*" as bold and "_it_" as italic.
_SLACK_EMPHASIS = {"*": "_", "_": "_", "**": "*", "__": "*", "***": "*_", "___": "*_"}


def _slack_emphasis(marker: str, inner: str) -> str:
    opening = _SLACK_EMPHASIS[marker]
    return f"{opening}{inner}{opening[::-1]}"


def answer_mrkdwn(text: str) -> str:
    """An answer's text as mrkdwn: escaped, each Markdown link ("[text](url)") a Slack link
    `<url|text>` (a link to anything but http(s) or mailto, or an image, shows as its text), and
    Markdown's emphasis Slack's ("*only*" italic, "**all**" bold)."""

    def link(label: str, url: str) -> str:
        shown = link_text(label).strip()
        if not _LINKABLE.match(url):
            return escape(shown)
        return f"<{_link_url(url)}|{_link_label(shown)}>" if shown else f"<{_link_url(url)}>"

    markdown = render_emphasis(text, _slack_emphasis)
    return render_links(markdown, link, escape, image=lambda alt, _url: escape(plain_text(alt)))


def notification_text(text: str, limit: int = FALLBACK_TEXT_LIMIT) -> str:
    """A message's top-level `text` (notifications, screen readers): Slack reads it as mrkdwn
    too, so "<!channel>" or "<@U123>" in a policy document must not ping anyone. Escaped,
    then shortened without cutting an escape in half."""
    cut = limit
    while True:
        shown = escape(_truncate(text, cut))
        if len(shown) <= limit:
            return shown
        cut = min(cut - 1, cut * limit // len(shown))


def _sentences(paragraph: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+(?=\S)", paragraph)
    return [part for part in parts if part]


def _pack(units: Iterable[tuple[str, str]], limit: int) -> list[str]:
    """Join (separator, piece) units greedily into pieces of at most `limit` characters; every
    piece given is at most `limit` long."""
    packed: list[str] = []
    current = ""
    for separator, piece in units:
        candidate = f"{current}{separator}{piece}" if current else piece
        if len(candidate) > limit:
            packed.append(current)
            current = piece
        else:
            current = candidate
    if current:
        packed.append(current)
    return packed


def _hard_split(text: str, limit: int) -> list[str]:
    """On spaces; a single enormous "word" (a URL, a hash) is cut every `limit` characters."""
    words = (word[i : i + limit] for word in text.split(" ") for i in range(0, max(len(word), 1), limit))
    return _pack(((" ", word) for word in words), limit)


def split_text(text: str, limit: int = SECTION_LIMIT) -> list[str]:
    """Split into pieces of at most `limit` characters, on paragraph, sentence, then word boundaries."""
    text = text.strip()
    if not text:
        return []
    if len(text) <= limit:
        return [text]
    units: list[tuple[str, str]] = []  # (separator before it, piece)
    for index, paragraph in enumerate(p for p in re.split(r"\n\s*\n", text) if p.strip()):
        paragraph = paragraph.strip()
        pieces = [paragraph] if len(paragraph) <= limit else _split_long(paragraph, limit)
        for offset, piece in enumerate(pieces):
            units.append(("\n\n" if index and not offset else " " if offset else "", piece))
    return _pack(units, limit)


def _split_long(paragraph: str, limit: int) -> list[str]:
    pieces: list[str] = []
    for sentence in _sentences(paragraph):
        pieces.extend([sentence] if len(sentence) <= limit else _hard_split(sentence, limit))
    return pieces


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# ------------------------------------------------------------------ pieces


def _section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(*texts: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": _truncate(t, SECTION_LIMIT)} for t in texts]}


def action_line(view: AnswerView) -> str:
    """The chosen action, stated for people: the same words as `policybot ask`."""
    words = describe_action(view.action, view.found, list(view.sources_used), view.question_class)
    emoji = ACTION_EMOJI["abstain" if not view.found else view.action] if view.action in ACTION_EMOJI else "ℹ️"
    return f"{emoji} {words}"


def origin_label(source: SourceView) -> str:
    if source.origin == "kb":
        return "knowledge base"
    return f"fallback: {source.source}" if source.source else "fallback source"


def source_line(source: SourceView) -> str:
    """`[n] <url|Title — Section> · origin`, or the document name when there is no URL."""
    heading = section_heading(source.section)
    label = " — ".join(part for part in (source.title or source.document, heading) if part)
    if source.url:
        shown = f"<{_link_url(source.url)}|{_link_label(label)}>"
    else:
        shown = f"*{escape(source.document)}*" + (f" — {escape(label)}" if label and label != source.document else "")
    return f"[{source.n}] {shown} · _{escape(origin_label(source))}_"


def feedback_actions(question_id: int) -> Block:
    value = str(question_id)
    return {
        "type": "actions",
        "block_id": FEEDBACK_BLOCK,
        "elements": [
            {
                "type": "button",
                "action_id": FEEDBACK_UP,
                "value": value,
                "text": {"type": "plain_text", "text": "👍 Helpful", "emoji": True},
            },
            {
                "type": "button",
                "action_id": FEEDBACK_DOWN,
                "value": value,
                "text": {"type": "plain_text", "text": "👎 Not helpful", "emoji": True},
            },
        ],
    }


# ------------------------------------------------------------------ messages


def answer_message(view: AnswerView, lead: str | None = None) -> dict[str, Any]:
    """`chat.postMessage` arguments (text + blocks) for an answer; `lead`: a context line
    before it (a private answer says which question it answers)."""
    head: list[Block] = [_context(lead)] if lead else []
    tail: list[Block] = [_context(action_line(view))]
    if view.citations:
        tail.append(_context("*Sources*"))
        lines = [source_line(source) for source in sorted(view.citations, key=lambda s: s.n)]
        # One context block per citation; when there are very many, pack them so the message stays legal.
        per_block = 1 if len(lines) <= 20 else CONTEXT_ELEMENTS
        for start in range(0, len(lines), per_block):
            tail.append(_context(*lines[start : start + per_block]))
    tail.append(feedback_actions(view.question_id))
    tail.append(_context(f"ref `{view.reference}`"))

    sections = split_text(answer_mrkdwn(view.text)) or ["_(no answer text)_"]
    room = MAX_BLOCKS - len(head) - len(tail)
    if len(sections) > room:
        sections = sections[:room]
        note = f"\n\n_(answer shortened; the full text is in the log under ref {view.reference})_"
        sections[-1] = _truncate(sections[-1], SECTION_LIMIT - len(note)) + note
    blocks = head + [_section(text) for text in sections] + tail
    assert len(blocks) <= MAX_BLOCKS
    # The notification shows a link as its text: Slack would show "[text](url)" as it stands.
    return {"text": notification_text(plain_text(view.text)) or "policybot answer", "blocks": blocks}


def private_answer_lead(channel: str | None, question: str) -> str:
    """What a private answer (slack_shared/audience.py) answers: the asker's question and where they asked it."""
    return f"🔒 Your question in <#{channel}>: {escape(_truncate(question, 500))}"


def answered_privately_message() -> dict[str, Any]:
    """The note in a shared thread whose answer went to the asker by DM: no policy text."""
    return notice_message(
        "🔒 I've sent you my answer in a direct message: company policies stay inside the "
        "organisation, and people from outside it can read this conversation."
    )


def apology_message(reference: str) -> dict[str, Any]:
    text = (
        f"Sorry, something went wrong while I was answering this. Please try again in a few minutes; "
        f"if it keeps happening, give an admin the reference {reference}."
    )
    return {
        "text": text,
        "blocks": [
            _section(
                f"⚠️ Sorry, something went wrong while I was answering this. "
                f"Please try again in a few minutes; if it keeps happening, "
                f"give an admin the reference *{reference}*."
            )
        ],
    }


def unavailable_message(reference: str | None, taking: str = "questions") -> dict[str, Any]:
    """A question or upload could not be recorded or queued (the database or the queue is down)."""
    ask = f"give an admin the reference {reference}" if reference else "tell an admin"
    text = (
        f"Sorry, I can't take {taking} right now: a service I depend on is not responding. "
        f"Please try again in a few minutes; if it keeps happening, {ask}."
    )
    shown = text.replace(reference, f"*{reference}*") if reference else text
    return {"text": text, "blocks": [_section("⚠️ " + shown)]}


def notice_message(text: str) -> dict[str, Any]:
    """A short reply that is not an answer (empty mention, oversized message, refusals)."""
    return {"text": notification_text(text), "blocks": [_section(escape(text))]}


def empty_question_message() -> dict[str, Any]:
    return notice_message(
        "Hi! Ask me a question about company policy, for example: "
        '"How many days of parental leave do I get?" or "What is the deadline for expense claims?"'
    )


def thanks_message() -> dict[str, Any]:
    return notice_message("You're welcome! Ask me anything else about company policy.")


def too_long_message(length: int, limit: int) -> dict[str, Any]:
    return notice_message(
        f"That message is {length:,} characters long; I can take questions of up to {limit:,} characters. "
        "Please ask the question itself in a sentence or two (you can paste a link instead of the whole text)."
    )


def upload_refused_message() -> dict[str, Any]:
    return notice_message(
        "Thanks! Only policybot admins can add documents to the knowledge base, so I have not read this file. "
        "Ask an admin if you think it belongs there."
    )


def unverified_message() -> dict[str, Any]:
    """Slack did not say, just now, whether the asker is a member."""
    return notice_message(
        "I couldn't check with Slack just now that you're a member of this organisation, which I need before "
        "answering policy questions. Please ask again in a minute."
    )


def members_only_message(asked: bool = True) -> dict[str, Any]:
    """For someone the bot does not answer; `asked` false when it greets them instead."""
    return notice_message(
        "I answer questions about this organisation's policies for its own members only"
        + (", so I can't answer this here." if asked else ".")
        + " Your contact in the organisation can help."
    )


def admin_only_message() -> dict[str, Any]:
    return notice_message("Usage statistics are available to policybot admins only.")


def upload_where(collection: str) -> str:
    """Where a file an admin sends goes, said before they confirm and when they do."""
    return (
        f"collection `{collection}`, with no access list: every member's answers can quote it "
        "(`policybot docs access NAME --channels C1,C2` limits it to channels later)"
    )


def upload_offer_message(names: Sequence[str], collection: str, choice: str, *, asked: bool) -> dict[str, Any]:
    """An admin's DM carried files: they become policy documents only if the admin says so.
    `choice`: the buttons' value (bot/listeners/uploads.py reads it back); `asked`: the message also
    asked a question, answered without reading the files."""
    listed = ", ".join(names)
    text = (
        ("I answer your question from the policies only, without reading " + listed + ". " if asked else "")
        + f"Add {listed} to the knowledge base? It would go into {upload_where(collection)}. "
        "Nothing is read until you choose."
    )
    actions = {
        "type": "actions",
        "block_id": UPLOAD_BLOCK,
        "elements": [
            {
                "type": "button",
                "action_id": UPLOAD_ADD,
                "value": choice,
                "style": "primary",
                "text": {"type": "plain_text", "text": "Add to knowledge base", "emoji": True},
            },
            {
                "type": "button",
                "action_id": UPLOAD_SKIP,
                "value": choice,
                "text": {"type": "plain_text", "text": "Don't add", "emoji": True},
            },
        ],
    }
    return {"text": notification_text(text), "blocks": [_section(escape(text)), actions]}


def upload_chosen_message(admin: str, collection: str | None) -> dict[str, Any]:
    """The offer once an admin chose (its buttons gone); `collection` None: not added."""
    if collection is None:
        text = f"Not added to the knowledge base (<@{admin}> chose so)."
    else:
        text = (
            f"<@{admin}> confirmed: adding to {escape(upload_where(collection))}. "
            "I will reply here when it is searchable."
        )
    return {"text": text, "blocks": [_section(text)]}


def upload_result_message(lines: Sequence[str], ok: bool) -> dict[str, Any]:
    head = "📥 Ingested:" if ok else "⚠️ Some files could not be ingested:"
    body = "\n".join(f"• {escape(line)}" for line in lines)
    text = f"{head}\n{body}" if body else head
    chunks = split_text(text)[:MAX_BLOCKS]
    return {"text": notification_text(f"{head} " + "; ".join(lines)), "blocks": [_section(chunk) for chunk in chunks]}


def greeting_message() -> dict[str, Any]:
    text = (
        "Hi, I'm policybot. Ask me anything about company policy (leave, expenses, travel, devices, "
        "remote work, ...) and I'll answer with the sources I used. Mention me in a channel or write here."
    )
    return {"text": text, "blocks": [_section(escape(text))]}


SUGGESTED_PROMPTS = (
    {"title": "Parental leave", "message": "How many weeks of parental leave do I get?"},
    {"title": "Expense deadline", "message": "How long do I have to submit a travel expense claim?"},
    {"title": "Remote work", "message": "Can I work remotely from another country?"},
)


def stats_message(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A short stats summary for admins (the numbers of `policybot stats`)."""
    total = summary.get("questions", 0)
    days = summary.get("days", 7)
    if not total:
        text = f"No questions in the last {days} days."
        return {"text": text, "blocks": [_section(text)]}
    rates = summary.get("action_rates", {})
    rate_text = ", ".join(f"{name} {rates.get(name, 0.0):.0%}" for name in ("correct", "ambiguous", "incorrect"))
    p50, p95 = summary.get("latency_p50_ms"), summary.get("latency_p95_ms")
    latency = f"{p50 / 1000:.1f}s / {p95 / 1000:.1f}s" if p50 is not None and p95 is not None else "n/a"
    lines = [
        f"*Last {days} days:* {total} questions ({summary.get('answered', 0)} answered, {summary.get('failed', 0)} failed)",
        f"*Actions:* {rate_text}",
        f"*Abstained:* {summary.get('abstention_rate', 0.0):.0%}",
        f"*Feedback:* 👍 {summary.get('feedback_up', 0)}  👎 {summary.get('feedback_down', 0)}",
        f"*Latency p50 / p95:* {latency}",
    ]
    text = "\n".join(lines)
    plain = text.replace("*", "")
    return {"text": plain, "blocks": [_section(text), _context("Details: `policybot stats` and `policybot logs`")]}
