"""How things are stated for people, the same way in the CLI, Slack and the console: the chosen
action, where a citation points in a document's heading path, and long text in a table's cell."""

from __future__ import annotations

ACTION_WORDS = {
    "correct": "Answered from the policy knowledge base",
    "correct_referred": "Answered from the policy knowledge base and {sources}, which it refers to",
    "correct_referred_only": "Answered from {sources}, which the policy knowledge base refers to",
    "ambiguous": "Knowledge base was inconclusive, also checked {sources}",
    "incorrect": "Not in the knowledge base, answered from {sources}",
    "abstain": "Not found in approved sources",
    "follow_up": "Not answered: a follow-up needs the question it follows",
}
FOLLOW_UP_CLASS = "follow-up"  # the question class of a follow-up asked alone (application/answering.py)


def describe_action(action: str, found: bool, sources_used: list[str], question_class: str | None = None) -> str:
    """The chosen action, stated for people (the CLI and Slack say the same); `question_class`
    FOLLOW_UP_CLASS: a follow-up asked with no earlier question, not looked up at all."""
    fallback = [name for name in sources_used if name != "knowledge base"]
    if question_class == FOLLOW_UP_CLASS:
        return ACTION_WORDS["follow_up"]
    if not found:
        return ACTION_WORDS["abstain"]
    if action == "correct":
        if not fallback:
            return ACTION_WORDS["correct"]
        key = "correct_referred" if "knowledge base" in sources_used else "correct_referred_only"
        return ACTION_WORDS[key].format(sources=", ".join(fallback))
    template = ACTION_WORDS[action]
    if action == "ambiguous" and not fallback:
        return "Knowledge base was inconclusive; answered from the closest policy text"
    return template.format(sources=", ".join(fallback) or "approved fallback sources")


def shorten(text: str | None, width: int) -> str:
    """`text` on one line in `width` characters; a cut one ends with "…" (`policybot logs`, the demo's log table)."""
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


SECTION_SEPARATOR = " > "  # between the headings of a section path (ingestion/chunking.py joins them)


def section_heading(section: str | None) -> str:
    """A section path's own heading, its last part ("Policy > 3. BYOD > 3.1 Enrolment" → "3.1 Enrolment")."""
    return section.split(SECTION_SEPARATOR)[-1] if section else ""


def citation_place(title: str | None, section: str | None) -> str:
    """Where a citation points: "Title — its heading". A path starts with the document's title, so
    the whole path after the title would say the title twice."""
    return " — ".join(part for part in (title, section_heading(section)) if part)


def path_end(section: str | None, width: int) -> str:
    """A section path in `width` characters, keeping its end: the headings that tell one section from
    its neighbours ("… > 3. Bring Your Own Device > 3.1 Enrolment"); its start is the same in each."""
    path = " ".join((section or "").split())
    if len(path) <= width:
        return path
    parts = path.split(SECTION_SEPARATOR)
    while len(parts) > 1 and len("…" + SECTION_SEPARATOR + SECTION_SEPARATOR.join(parts)) > width:
        parts.pop(0)
    kept = "…" + SECTION_SEPARATOR + SECTION_SEPARATOR.join(parts)
    return kept if len(kept) <= width else "…" + path[len(path) - width + 1 :]
