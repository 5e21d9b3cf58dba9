"""Extractive answers: quote the kept evidence, cite every line, lead with the answer.

No generator model is involved: every sentence in the reply is a sentence from an approved
source, followed by the number of the passage it came from. The sentence that best answers
the question comes first, with the scope sentences that condition it ("This rule covers
domestic travel in 2026.") kept next to it, because a rule quoted without its scope can be
wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from crag.redaction import STOPWORDS
from crag.strips import context_scope, is_applicability_sentence, is_list_item, passage_key, split_sentences
from crag.types import Citation, Passage, Strip

ABSTENTION_LEAD = "I couldn't find this in the approved policy sources. "
DEFAULT_CONTACT = "your manager or the policy owner"

PassageKey = tuple[str, str, str]


def compose_extractive(question: str, strips: Sequence[Strip]) -> tuple[str, list[Citation]]:
    """Compose a cited reply from kept strips (best-answering sentence first).

    Returns the reply text and its citations, numbered [1], [2]... per distinct passage in
    order of first use. Raises ValueError when there is no evidence (the caller abstains).
    """
    usable = [strip for strip in strips if split_sentences(strip.text)]
    if not usable:
        raise ValueError("compose_extractive needs at least one non-empty strip; abstain instead")

    lead_strip, lead_sentences = _lead(question, usable)
    reply = _Reply(best_scores=_best_scores(usable))

    # Lead: the answer sentence, then the scope that conditions it, all from one passage.
    lead_scope = context_scope(lead_strip) + [
        s for s in split_sentences(lead_strip.text) if s not in lead_sentences and is_applicability_sentence(s)
    ]
    lead_line = reply.line(lead_strip.passage, [*lead_sentences, *lead_scope])

    # Then the rest of the evidence in the order given (refine returns document order).
    rest_lines: list[str] = []
    ordered = [lead_strip] + [s for s in usable if s is not lead_strip]
    for strip in ordered:
        line = reply.line(strip.passage, [*context_scope(strip), *split_sentences(strip.text)])
        if line:
            rest_lines.append(line)

    text = lead_line if not rest_lines else f"{lead_line}\n\n" + "\n".join(rest_lines)
    return text, reply.citations


def abstention_text(contact: str) -> str:
    """The reply when no approved source holds the answer: say so and where to ask."""
    where = contact.strip().rstrip(".") or DEFAULT_CONTACT
    return f"{ABSTENTION_LEAD}Please ask {where}."


@dataclass
class _Reply:
    """Tracks what the reply already shows, and numbers citations in order of first use."""

    best_scores: dict[PassageKey, float]
    citations: list[Citation] = field(default_factory=list)
    numbers: dict[PassageKey, int] = field(default_factory=dict)
    shown: set[tuple[PassageKey, str]] = field(default_factory=set)

    def line(self, passage: Passage, sentences: Sequence[str]) -> str:
        """Tidied sentences not shown yet, followed by the passage's marker ("" if none)."""
        fresh: list[str] = []
        for sentence in sentences:
            tidy = tidy_sentence(sentence)
            seen_key = (passage_key(passage), tidy)  # per passage: each source is cited for what it says
            if tidy and seen_key not in self.shown:
                self.shown.add(seen_key)
                fresh.append(tidy)
        if not fresh:
            return ""
        return f"{' '.join(fresh)} [{self.number(passage)}]"

    def number(self, passage: Passage) -> int:
        key = passage_key(passage)
        if key not in self.numbers:
            self.numbers[key] = len(self.numbers) + 1
            self.citations.append(_citation(self.numbers[key], passage, self.best_scores[key]))
        return self.numbers[key]


def _citation(n: int, passage: Passage, score: float) -> Citation:
    return Citation(
        n=n,
        origin=passage.origin,
        source=passage.source,
        document=passage.document,
        title=passage.title,
        section=passage.section,
        url=passage.url,
        score=score,
    )


def _score(strip: Strip) -> float:
    return strip.score if strip.score is not None else float("-inf")


def _best_scores(strips: Sequence[Strip]) -> dict[PassageKey, float]:
    best: dict[PassageKey, float] = {}
    for strip in strips:
        key = passage_key(strip.passage)
        score = strip.score if strip.score is not None else 0.0
        best[key] = max(best.get(key, score), score)
    return best


# --- choosing the lead sentence -------------------------------------------------------------


def _lead(question: str, strips: Sequence[Strip]) -> tuple[Strip, list[str]]:
    """The strip and sentences the reply opens with.

    The best strip's best sentence, unless that is a page header ("HR Portal > Tools and
    IT > IT Helpdesk."): then the next strip, by score, whose best sentence is not. A
    list's opening line ("you receive a referral bonus:") comes with its items.
    """
    first: tuple[Strip, list[str], int] | None = None
    for strip in sorted(strips, key=lambda strip: -_score(strip)):  # sorted() is stable: ties keep order
        sentences = split_sentences(strip.text)
        index = _best_sentence(question, sentences)
        if not is_breadcrumb(sentences[index]):
            return strip, _with_list_items(sentences, index)
        first = first or (strip, sentences, index)
    assert first is not None, "compose_extractive passes at least one strip with sentences"
    strip, sentences, index = first  # every strip leads with a page header: the best one still leads
    return strip, _with_list_items(sentences, index)


def _best_sentence(question: str, sentences: Sequence[str]) -> int:
    """The index of the sentence sharing most content words with the question (rules before
    scope sentences and page headers)."""
    wanted = content_words(question)

    def rank(indexed: tuple[int, str]) -> tuple[bool, int, int]:
        index, sentence = indexed
        overlap = len(wanted & content_words(sentence))
        is_rule = overlap > 0 and not is_applicability_sentence(sentence) and not is_breadcrumb(sentence)
        return (is_rule, overlap, -index)  # earliest sentence wins ties

    return max(enumerate(sentences), key=rank)[0]


def _with_list_items(sentences: Sequence[str], index: int) -> list[str]:
    """sentences[index], followed by its list items when it introduces a list (ends with ":")."""
    lead = [sentences[index]]
    if sentences[index].rstrip().endswith(":"):
        for sentence in sentences[index + 1 :]:
            if not is_list_item(sentence):
                break
            lead.append(sentence)
    return lead


# Words that make "A > B ..." a statement rather than a navigation path: auxiliaries and
# the commonest verbs of rules, written in lower case. Capitalised, they are page names
# ("May 2026", "Will Writing Service", "Need Help"), and menu labels use other verbs
# ("IT Portal > Get Help", "Leave > How to apply").
RULE_VERBS = frozenset(
    "is are be must may might can cannot should shall will need needs require requires required "
    "has have gets goes go".split()
)
# "> 50 EUR", "> $500", "> USD 500", "> 5000 EUR", "> 5 days": a comparison. A year that
# starts a page name ("Benefits > 2025 Open Enrollment") is not one.
_QUANTITY_AFTER_ARROW = re.compile(
    r"> (?:[$€£]\s?\d|(?:USD|EUR|GBP|CHF)\s?\d|(?!(?:19|20)\d\d (?!(?:USD|EUR|GBP|CHF)\b)[A-Z])\d)")


def is_breadcrumb(sentence: str) -> bool:
    """A navigation path such as "HR Portal > Tools and IT > IT Helpdesk.": a page header,
    never an answer. A rule that names a menu ("under Pay > Payslips") is not one, nor is a
    comparison ("Claims > 500 USD need approval.", "Gifts > 50 EUR: declare them.")."""
    text = sentence.strip().rstrip(".")
    parts = text.split(" > ")
    if len(parts) < 2 or not all(0 < len(part.split()) <= 5 for part in parts):
        return False
    says_something = bool(set(re.findall(r"\b[a-z][a-z']*\b", text)) & RULE_VERBS) or any(mark in text for mark in ":;")
    return not says_something and not _QUANTITY_AFTER_ARROW.search(text)


def content_words(text: str) -> set[str]:
    """Lower-cased, stemmed words that are not stopwords ("Expenses" and "expense" match)."""
    words = re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())
    return {_stem(w) for w in words if w not in STOPWORDS}


def _stem(word: str) -> str:
    """A tiny suffix stripper: enough to match plurals and -ed/-ing forms."""
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2]:
        word = word[:-1]  # "submitt" -> "submit"
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]  # "expense" and "expens" meet
    return word


# --- tidying -----------------------------------------------------------------------------------

_BULLET_MARK = re.compile(r"^\s*[-*+•·▪◦–—]\s+")
_HEADING_MARK = re.compile(r"^\s*#{1,6}\s+")
_EMPHASIS = re.compile(r"(\*\*|__|`)")
_TABLE_RULE = re.compile(r"\s*\|(?:[\s:-]*\|)+\s*")  # "| --- | :---: |", "| | |"


def tidy_sentence(sentence: str) -> str:
    """Strip markdown bullets, heading marks and emphasis; collapse whitespace.

    A heading becomes "Heading:" and an unpunctuated bullet gets a full stop, so sentences
    joined on one line still read as separate statements.
    """
    if _TABLE_RULE.fullmatch(sentence):
        return ""  # a table's separator line or empty header row says nothing in a reply
    is_heading = _HEADING_MARK.match(sentence) is not None
    text = _HEADING_MARK.sub("", _BULLET_MARK.sub("", sentence))
    text = re.sub(r"\s+", " ", _EMPHASIS.sub("", text)).strip()
    if not text:
        return ""
    if is_heading:
        return text if text.endswith(":") else f"{text}:"
    if not re.search(r"""[.!?:;]["'”’)\]]*$""", text):
        text += "."
    return text
