"""Knowledge refinement: decompose passages into strips, score them, recompose the best.

CRAG (arXiv 2401.15884, section 4.4) splits each document into strips of a few sentences,
scores every strip against the original question with the same evaluator, drops the weak
ones, keeps the top few and concatenates them in order. For policy text a strip must never
lose the conditions that make it true (scope, dates, negations, units), so:

- strips are made of whole sentences only (a window never cuts a sentence), and
- every strip carries `context`: its section heading path plus the passage's
  applicability sentences ("This rule covers domestic travel in 2026."), which the
  evaluator sees when scoring and which recompose/compose keep attached.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Literal

from crag.text import BULLET_LINE, HEADING_LINE, TABLE_ROW, plain_text, split_sentences
from crag.types import Evaluator, Passage, Strip

StripMode = Literal["sentences", "words"]

# --- applicability (scope) sentences --------------------------------------------------

_SCOPE_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        # "This section/policy/rule covers ...", "The policy applies to ..."
        r"\b(?:this|the|these|that)\s+(?:section|policy|policies|rule|rules|guideline|guidelines|"
        r"procedure|procedures|standard|document|chapter|part|page|handbook|program|programme|plan|"
        r"benefit|provision|provisions)\b[^.]{0,40}?\b(?:covers?|appl(?:y|ies)|governs?|is\s+valid|"
        r"is\s+effective|relates?\s+to|is\s+for)\b",
        r"\bappl(?:y|ies)\s+(?:only\s+)?to\b",
        r"\bonly\b",
        r"\b(?:does|do|shall|will)\s+not\s+apply\b|\bnot\s+applicable\b|\bout\s+of\s+scope\b|\bin\s+scope\b",
        r"^\W*eligib(?:le|ility)\b",
        r"^\W*effective\b|\beffective\s+(?:from|as\s+of|on|date|immediately)\b|\bin\s+effect\s+(?:from|until)\b",
        r"^\W*(?:unless|except)\b",
    )
]


def is_applicability_sentence(sentence: str) -> bool:
    """True for sentences that state the scope or conditions of the surrounding rules."""
    return any(pattern.search(sentence) for pattern in _SCOPE_PATTERNS)


def applicability_sentences(passage: Passage) -> list[str]:
    """The passage's scope/condition sentences, in document order."""
    return [s for s in split_sentences(passage.text) if is_applicability_sentence(s)]


def context_line(section: str, scope: Sequence[str]) -> str:
    """Render a strip's context: "Travel > Domestic travel: This rule covers ... 2026."."""
    scope_text = " ".join(scope)
    if section and scope_text:
        return f"{section}: {scope_text}"
    return section or scope_text


def context_scope(strip: Strip) -> list[str]:
    """The applicability sentences held in a strip's context (the section removed)."""
    context = strip.context
    section = strip.passage.section
    if section and context.startswith(section):
        context = context[len(section) :].removeprefix(":").strip()
    return split_sentences(context)


# --- decompose -----------------------------------------------------------------------


def decompose(
    passage: Passage,
    mode: StripMode = "sentences",
    sentences_per_strip: int = 3,
    words_per_strip: int = 50,
) -> list[Strip]:
    """Split a passage into strips of whole sentences, each carrying its scope context.

    "sentences": consecutive groups of `sentences_per_strip` sentences.
    "words": whole sentences accumulated up to about `words_per_strip` words (a window
    closes before a sentence that would overflow it, so windows snap to sentence bounds).
    """
    sentences = split_sentences(passage.text)
    if mode == "sentences":
        groups = _group_by_count(sentences, max(1, sentences_per_strip))
    elif mode == "words":
        groups = _group_by_words(sentences, max(1, words_per_strip))
    else:
        raise ValueError(f"unknown strip mode {mode!r}; expected 'sentences' or 'words'")

    scope = [s for s in sentences if is_applicability_sentence(s)]
    strips: list[Strip] = []
    for index, group in enumerate(groups):
        outside_scope = [s for s in scope if s not in group]  # don't repeat the strip itself
        strips.append(
            Strip(
                passage=passage,
                index=index,
                text=join_sentences(group),
                context=context_line(passage.section, outside_scope),
            )
        )
    return strips


def join_sentences(sentences: Sequence[str]) -> str:
    """Join sentences so that split_sentences gives them back unchanged.

    Prose joins with spaces; headings, bullet items, table rows and list intros ("...:")
    keep their own line, so the block structure survives the round trip.
    """
    text = ""
    for i, sentence in enumerate(sentences):
        if i == 0:
            text = sentence
        elif _is_structural(sentence) or _is_structural(sentences[i - 1]):
            text += "\n" + sentence
        else:
            text += " " + sentence
    return text


def is_list_item(sentence: str) -> bool:
    """A bullet or numbered item ("- $3,000 for engineering roles;", "2) Keep receipts.")."""
    return BULLET_LINE.match(sentence) is not None


def _is_structural(sentence: str) -> bool:
    return bool(
        HEADING_LINE.match(sentence)
        or is_list_item(sentence)
        or TABLE_ROW.match(sentence)
        or sentence.rstrip().endswith(":")
    )


def _group_by_count(sentences: list[str], size: int) -> list[list[str]]:
    return [sentences[i : i + size] for i in range(0, len(sentences), size)]


def _group_by_words(sentences: list[str], target_words: int) -> list[list[str]]:
    groups: list[list[str]] = []
    current: list[str] = []
    current_words = 0
    for sentence in sentences:
        words = len(sentence.split())
        if current and current_words + words > target_words:
            groups.append(current)
            current, current_words = [], 0
        current.append(sentence)
        current_words += words
    if current:
        groups.append(current)
    return groups


# --- refine and recompose ---------------------------------------------------------------


def strip_text_for_scoring(strip: Strip) -> str:
    """What the evaluator reads for a strip: its context line, then its text, as plain text
    (a link as its text: URLs add no tokens)."""
    return plain_text(f"{strip.context}\n{strip.text}" if strip.context else strip.text)


def refine(
    question: str,
    passages: Sequence[Passage],
    evaluator: Evaluator,
    strip_threshold: float,
    top_n: int = 5,
    mode: StripMode = "sentences",
    sentences_per_strip: int = 3,
    words_per_strip: int = 50,
) -> list[Strip]:
    """Decompose, score every strip against the original question, filter, recompose.

    All strips are scored in one batched evaluator call. Strips below `strip_threshold`
    are dropped, the `top_n` best are kept, and they are returned grouped per passage
    (passages ordered by their best strip score) and in strip order within a passage.
    """
    strips = [
        strip
        for passage in _unique_passages(passages)
        for strip in decompose(passage, mode, sentences_per_strip, words_per_strip)
    ]
    if not strips:
        return []
    scores = evaluator.score(question, [strip_text_for_scoring(s) for s in strips])
    if len(scores) != len(strips):
        raise ValueError(f"evaluator returned {len(scores)} scores for {len(strips)} strips")

    scored = [replace(strip, score=float(score)) for strip, score in zip(strips, scores, strict=True)]
    kept = [s for s in scored if s.score is not None and s.score >= strip_threshold]
    # sorted() is stable, so ties keep document order.
    best = sorted(kept, key=lambda s: -_score(s))[: max(0, top_n)]
    return _in_document_order(best)


def _unique_passages(passages: Sequence[Passage]) -> list[Passage]:
    """Drop repeated passages (same origin, source and id) so no strip is scored twice."""
    seen: set[tuple[str, str, str]] = set()
    unique: list[Passage] = []
    for passage in passages:
        key = passage_key(passage)
        if key not in seen:
            seen.add(key)
            unique.append(passage)
    return unique


def passage_key(passage: Passage) -> tuple[str, str, str]:
    """What makes a passage distinct: origin, source and id."""
    return (passage.origin, passage.source, passage.id)


def _score(strip: Strip) -> float:
    return strip.score if strip.score is not None else float("-inf")


def _in_document_order(strips: Sequence[Strip]) -> list[Strip]:
    """Group per passage (best passage first), strips by index inside each passage."""
    groups = _by_passage(strips)  # strips arrive best-first, so groups are created best-first
    return [strip for group in groups.values() for strip in sorted(group, key=lambda s: s.index)]


def _by_passage(strips: Sequence[Strip]) -> dict[tuple[str, str, str], list[Strip]]:
    """Strips grouped by their passage, groups in order of first appearance."""
    groups: dict[tuple[str, str, str], list[Strip]] = {}
    for strip in strips:
        groups.setdefault(passage_key(strip.passage), []).append(strip)
    return groups


def recompose(strips: Sequence[Strip]) -> str:
    """Render kept strips as text: per passage, its context line once, then its strips.

    Each strip starts on its own line (kept strips need not be adjacent in the passage).

    The context line repeats only the scope sentences that none of the passage's kept
    strips already contain.
    """
    groups = _by_passage(strips)
    blocks: list[str] = []
    for group in groups.values():
        passage = group[0].passage
        kept_sentences = {s for strip in group for s in split_sentences(strip.text)}
        scope = _ordered_unique(s for strip in group for s in context_scope(strip))
        line = context_line(passage.section, [s for s in scope if s not in kept_sentences])
        body = "\n".join(strip.text for strip in group)
        blocks.append(f"{line}\n{body}" if line else body)
    return "\n\n".join(blocks)


def _ordered_unique(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    unique: list[str] = []
    for item in items:
        if item not in seen:
            seen.add(item)
            unique.append(item)
    return unique
