"""How the chosen action is stated for people: the same words in the CLI, Slack and the console."""

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
