"""Extractive answers: quote the kept evidence, cite every line, lead with the answer.

No generator model is involved: every sentence in the reply is a sentence from an approved
source, followed by the number of the passage it came from. The sentence that best answers
the question comes first, with the scope sentences that condition it ("This rule covers
domestic travel in 2026.") kept next to it, because a rule quoted without its scope can be
wrong. Little follows it (`ReplyShape`): an employee should not read five rules to find one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from crag.strips import context_scope, is_applicability_sentence, is_list_item, passage_key
from crag.text import (
    BARE_URL,
    BULLET_LINE,
    HEADING_LINE,
    TABLE_ROW,
    content_words,
    markdown_link,
    plain_text,
    split_sentences,
    table_cells,
)
from crag.types import Citation, Passage, Strip

ABSTENTION_LEAD = "I couldn't find this in the approved policy sources. "
DEFAULT_CONTACT = "your manager or the policy owner"

PassageKey = tuple[str, str, str]


@dataclass(frozen=True)
class ReplyShape:
    """What a reply holds besides its first line.

    Shares place a strip between the strip threshold (0) and the best strip's score (1), a
    scale every evaluator shares once its strip threshold is calibrated, so one shape serves
    cosine and a trained evaluator alike.
    """

    lead_share: float  # strips at least this close to the best may give the first line
    follow_share: float  # a strip of the first line's section follows from this share
    other_share: float  # a strip of another section or document follows only from this share
    max_following: int  # lines after the first
    on_topic_only: bool  # following lines keep only sentences that share a word with the question


# Chosen on the policy-qa dev organisations with `python -m bench.replies --split dev --tune`
# (docs/quality-history.md, "Replies"; docs/quality.md, "The reply's second line"). First with
# cosine (follow 0.75); with the trained sentence judge a looser follow share held more right
# replies on two seeds: 103 against 99 of 150 dev questions (seed 0), 193 against 186 of 300
# (seed 1), for 3 points fewer right replies led by their answer (86.5% against 89.8%, seed 1).
REPLY_SHAPE = ReplyShape(lead_share=0.8, follow_share=0.5, other_share=0.9, max_following=1, on_topic_only=False)


def compose_extractive(
    question: str,
    strips: Sequence[Strip],
    shape: ReplyShape = REPLY_SHAPE,
    floor: float | None = None,
    *,
    lead_by_score: bool = False,
) -> tuple[str, list[Citation]]:
    """Compose a cited reply from kept strips: the answering sentence first, with the
    conditions it depends on, then at most `shape.max_following` closely related lines.

    `floor` is the strip threshold the strips were kept with (the lowest strip score when
    None): shares of `shape` are measured from it. Strips come in the order their lines
    should appear (refine returns document order). Returns the reply text and its citations,
    numbered [1], [2]... per distinct passage in order of first use. Raises ValueError when
    there is no evidence (the caller abstains). `lead_by_score`: the strips are single
    sentences scored by an evaluator trained on answer sentences, and the best-scored one leads,
    helped by the words it shares with the question (`_lead_by_score`); otherwise the lead is
    chosen by words shared with the question among the best strips (`_lead`).
    """
    usable = [strip for strip in strips if split_sentences(strip.text)]
    if not usable:
        raise ValueError("compose_extractive needs at least one non-empty strip; abstain instead")

    share = _shares(usable, floor)
    if lead_by_score:
        lead_strip, lead_sentences = _lead_by_score(question, usable)
    else:
        lead_strip, lead_sentences = _lead(question, usable, share, shape.lead_share)
    reply = _Reply(best_scores=_best_scores(usable))

    # Lead: the answer sentence, then the scope that conditions it, all from one passage.
    lead_scope = context_scope(lead_strip) + [
        s for s in split_sentences(lead_strip.text) if s not in lead_sentences and is_applicability_sentence(s)
    ]
    lead_line = reply.line(lead_strip.passage, [*lead_sentences, *lead_scope])

    # Then the closest evidence: the rest of the lead strip, strips of its section that score
    # near the best, and of another section only those that score nearly as well as the best.
    lead_place = _place(lead_strip)
    following = [lead_strip] + sorted(
        (
            s
            for s in usable
            if s is not lead_strip
            and share[id(s)] >= (shape.follow_share if _place(s) == lead_place else shape.other_share)
        ),
        key=lambda s: -share[id(s)],
    )
    wanted = content_words(question)
    chosen: dict[int, list[str]] = {}
    for strip in following:
        if len(chosen) >= shape.max_following:
            break
        sentences = split_sentences(strip.text)
        if shape.on_topic_only:
            sentences = [s for s in sentences if wanted & content_words(plain_text(s))]
        if reply.fresh(strip.passage, sentences):
            chosen[id(strip)] = [*context_scope(strip), *sentences]
    # In the order given, the lead strip's rest first, so citations number in reading order.
    rest_lines: list[str] = []
    for strip in [lead_strip] + [s for s in usable if s is not lead_strip]:
        line = reply.line(strip.passage, chosen[id(strip)]) if id(strip) in chosen else ""
        if line:
            rest_lines.append(line)

    text = lead_line if not rest_lines else f"{lead_line}\n\n" + "\n".join(rest_lines)
    return text, reply.citations


def _place(strip: Strip) -> tuple[str, str, str, str]:
    """Where a strip stands: its source, document and section."""
    passage = strip.passage
    return (passage.origin, passage.source, passage.document, passage.section)


def _shares(strips: Sequence[Strip], floor: float | None) -> dict[int, float]:
    """Each strip's place between `floor` (0) and the best strip's score (1), by id()."""
    scores = [_score(s) if s.score is not None else 0.0 for s in strips]
    best = max(scores)
    low = min(scores) if floor is None else floor
    if best <= low:
        return {id(s): 1.0 if score >= best else 0.0 for s, score in zip(strips, scores, strict=True)}
    return {id(s): (score - low) / (best - low) for s, score in zip(strips, scores, strict=True)}


def abstention_text(contact: str, closest: Passage | None = None) -> str:
    """The reply when no approved source holds the answer: say so, and where to ask. With
    `closest` (a knowledge-base passage on the topic whose evidence fell short of answering),
    name its section, unquoted and hedged: the asker can read it, or tell whom they ask
    where the policy stops."""
    where = contact.strip().rstrip(".") or DEFAULT_CONTACT
    pointer = f"The closest section I found is {section_name(closest)}; it may not answer this. " if closest else ""
    return f"{ABSTENTION_LEAD}{pointer}Please ask {where}."


def section_name(passage: Passage) -> str:
    """A passage's place in words: “Travel › Hotels” in Travel policy (a Markdown link to the
    document when it has an address)."""
    document = passage.title.strip() or passage.document.strip()
    # " > " joins a heading path (ingestion/chunking.py, HEADING_SEPARATOR); a heading may hold ">".
    parts = [part.strip() for part in passage.section.split(" > ") if part.strip()]
    if parts and parts[0] == document:  # the document's own title heads its heading paths
        parts = parts[1:]
    shown = f"“{' › '.join(parts)}” in {document}" if parts else document
    return markdown_link(shown, passage.url) if passage.url else shown


@dataclass
class _Reply:
    """Tracks what the reply already shows, and numbers citations in order of first use."""

    best_scores: dict[PassageKey, float]
    citations: list[Citation] = field(default_factory=list)
    numbers: dict[PassageKey, int] = field(default_factory=dict)
    shown: set[tuple[PassageKey, str]] = field(default_factory=set)

    def fresh(self, passage: Passage, sentences: Sequence[str]) -> list[str]:
        """The sentences, tidied, that the reply does not show yet for this passage."""
        fresh: list[str] = []
        for sentence in sentences:
            tidy = tidy_sentence(sentence)
            # Per passage: each source is cited for what it says.
            if tidy and (passage_key(passage), tidy) not in self.shown and tidy not in fresh:
                fresh.append(tidy)
        return fresh

    def line(self, passage: Passage, sentences: Sequence[str]) -> str:
        """Tidied sentences not shown yet, followed by the passage's marker ("" if none)."""
        fresh = self.fresh(passage, sentences)
        if not fresh:
            return ""
        self.shown.update((passage_key(passage), tidy) for tidy in fresh)
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


def _lead(
    question: str,
    strips: Sequence[Strip],
    share: dict[int, float],
    lead_share: float,
) -> tuple[Strip, list[str]]:
    """The strip and sentences the reply opens with.

    Of the strips scoring at least `lead_share` of the way to the best, the rule sentence
    that shares most with the question, each shared word weighted by how rare it is among
    the strips' sentences: "What's the hotel cap in Boston?" opens with the sentence naming
    Boston, not the general cap. Ties go to the better strip, then the earlier sentence. A
    page header ("HR Portal > Tools and IT > IT Helpdesk.") never leads when any strip holds
    a rule that answers; without one, the best strip's first sentence that is not a header
    leads. A list's opening line ("you receive a referral bonus:") comes with its items.
    """
    weights = _rarity(question, strips)
    wants_figure = asks_for_a_figure(question)
    by_score = sorted(strips, key=lambda strip: -_score(strip))  # sorted() is stable: ties keep order
    near = [strip for strip in by_score if share[id(strip)] >= lead_share]
    for candidates in (near, by_score):
        best: tuple[float, float, int] | None = None
        found: tuple[Strip, list[str], int] | None = None
        for strip in candidates:
            sentences = split_sentences(strip.text)
            for index, sentence in enumerate(sentences):
                if not _is_rule(sentence):
                    continue
                overlap = _shared_words(sentence, weights, wants_figure)
                rank = (overlap, share[id(strip)], -index)
                if overlap > 0 and (best is None or rank > best):
                    best, found = rank, (strip, sentences, index)
        if found is not None:
            strip, sentences, index = found
            return strip, _lead_sentences(sentences, index)
    strip = by_score[0]  # no rule shares a word with the question: the best strip still leads
    sentences = split_sentences(strip.text)
    index = next((i for i, sentence in enumerate(sentences) if not is_breadcrumb(sentence)), 0)
    return strip, _lead_sentences(sentences, index)


def _shared_words(sentence: str, weights: dict[str, float], wants_figure: bool) -> float:
    """What a sentence shares with the question: its content words' rarity weights (`_rarity`),
    times FIGURE_WEIGHT when the question asks for a figure and the sentence holds one."""
    plain = plain_text(sentence)  # a link's URL adds no words and no figures
    overlap = sum(weights.get(word, 0.0) for word in content_words(plain))
    return overlap * FIGURE_WEIGHT if wants_figure and _FIGURE.search(plain) else overlap


# The judge's score of a sentence, plus this much of what it shares with the question (relative
# to the sentence that shares most). On the dev organisations' questions whose answer was
# retrieved, the best-judged sentence held it for 70.7%, the best-sharing one for 62.0%, and
# both together for 76.1% at 0.3 to 0.5 (docs/quality.md, "Choosing the sentence").
SHARED_WORDS_WEIGHT = 0.4


def _lead_by_score(question: str, strips: Sequence[Strip]) -> tuple[Strip, list[str]]:
    """The sentence that can answer (not a scope sentence, not a page header) with the best
    score, the judge's plus SHARED_WORDS_WEIGHT of the words it shares with the question, leads;
    a list's opening line comes with its items, read from the passage. Without one, the best
    sentence leads all the same."""
    weights = _rarity(question, strips)
    wants_figure = asks_for_a_figure(question)
    shared = {id(strip): _shared_words(strip.text, weights, wants_figure) for strip in strips}
    most = max(shared.values(), default=0.0)

    def fused(strip: Strip) -> float:
        return _score(strip) + (SHARED_WORDS_WEIGHT * shared[id(strip)] / most if most > 0 else 0.0)

    by_score = sorted(strips, key=lambda strip: -fused(strip))  # stable: ties keep document order
    lead = next((strip for strip in by_score if any(_is_rule(s) for s in split_sentences(strip.text))), by_score[0])
    own = split_sentences(lead.text)
    index = next((i for i, sentence in enumerate(own) if _is_rule(sentence)), 0)
    in_passage = split_sentences(lead.passage.text)
    if own[index] in in_passage:
        return lead, _lead_sentences(in_passage, in_passage.index(own[index]))
    return lead, _lead_sentences(own, index)


# "When...", "how much/many/long...", "what's the max...": the answer is a figure or a date, so
# a sentence holding one outweighs one that only shares words. The weight was chosen with
# bench/replies.py on the dev organisations (docs/quality-history.md, "Replies").
FIGURE_WEIGHT = 3.0  # 1, 1.5, 2 and 3 tried: 3 led most (67 of 79 right replies, against 64 without it)
_ASKS_FOR_A_FIGURE = re.compile(
    r"^\W*when\b|\bhow\s+(?:much|many|long|often|soon|far|old|late|early)\b|\bby\s+when\b|"
    r"\b(?:max|maximum|minimum|min|limit|cap|rate|deadline|amount)\b",
    re.IGNORECASE,
)
_FIGURE = re.compile(r"\d")


def asks_for_a_figure(question: str) -> bool:
    """Whether the question asks for a number, an amount or a date."""
    return _ASKS_FOR_A_FIGURE.search(question) is not None


def _is_rule(sentence: str) -> bool:
    """A sentence that can answer: not a scope sentence, not a page header."""
    return not is_applicability_sentence(sentence) and not is_breadcrumb(sentence)


def _rarity(question: str, strips: Sequence[Strip]) -> dict[str, float]:
    """The question's content words, each weighted by log(1 + n / sentences holding it) over
    the strips' n sentences (a word every sentence shares says little about which answers),
    and doubled for a name the question capitalises (a city, a site, a plan)."""
    sentences = [content_words(plain_text(s)) for strip in strips for s in split_sentences(strip.text)]
    names = _names(question)
    weights: dict[str, float] = {}
    for word in content_words(question):
        holding = sum(word in words for words in sentences)
        if holding:
            weights[word] = math.log(1 + len(sentences) / holding) * (2.0 if word in names else 1.0)
    return weights


def _names(question: str) -> set[str]:
    """Content words the question capitalises after its first word ("New York", "Cork", "PPO"):
    the detail that picks one of several rules ("the cap is $350 in New York")."""
    tokens = re.findall(r"[A-Za-z][A-Za-z0-9']*", question)[1:]
    return content_words(" ".join(token for token in tokens if token[0].isupper() and token != "I"))


def _lead_sentences(sentences: Sequence[str], index: int) -> list[str]:
    """The first line's sentences for sentences[index]: a list item comes after its list's
    opening line ("Tell whoever you're most comfortable with: either founder."), since an item
    alone ("either founder.") says nothing; then what the sentence introduces."""
    opening: list[str] = []
    if is_list_item(sentences[index]):
        before = index - 1
        while before >= 0 and is_list_item(sentences[before]) and not sentences[before].rstrip().endswith(":"):
            before -= 1
        if before >= 0 and sentences[before].rstrip().endswith(":") and not HEADING_LINE.match(sentences[before]):
            opening = [sentences[before]]
    return opening + _with_what_it_introduces(sentences, index)


def _with_what_it_introduces(sentences: Sequence[str], index: int, carry: bool = True) -> list[str]:
    """sentences[index], followed by what it only introduces: a list's opening line ("you
    receive a referral bonus:") comes with its items; a lead-in that ends with a question mark
    or a colon and no list under it ("Lost a receipt?", "Every claim needs a receipt:") comes
    with the sentence after it, unless that is a heading. Alone, a lead-in quotes the question
    back and not the answer (docs/quality.md, "Lead-ins and list items")."""
    lead = [sentences[index]]
    ending = sentences[index].rstrip()
    if ending.endswith(":"):
        for sentence in sentences[index + 1 :]:
            if not is_list_item(sentence):
                break
            lead.append(sentence)
    introduces = carry and len(lead) == 1 and ending.endswith(("?", ":"))
    if introduces and index + 1 < len(sentences) and not HEADING_LINE.match(sentences[index + 1]):
        # One sentence carried, with its list if it opens one: a run of "Phone:", "Email:"
        # label lines must not become the whole first line.
        lead.extend(_with_what_it_introduces(sentences, index + 1, carry=False))
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
    r"> (?:[$€£]\s?\d|(?:USD|EUR|GBP|CHF)\s?\d|(?!(?:19|20)\d\d (?!(?:USD|EUR|GBP|CHF)\b)[A-Z])\d)"
)


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


# --- tidying -----------------------------------------------------------------------------------

# A list marker as the reader reads one (BULLET_LINE), but not "J." nor "A.": a sentence may open
# with an initial ("J. Smith approves overtime."), which the reply must keep.
_LIST_MARK = re.compile(r"(?!\s*\(?[A-Z]\.\s)" + BULLET_LINE.pattern)
_HEADING_MARK = re.compile(r"^\s*#{1,6}\s+")
_EMPHASIS = re.compile(rf"(?P<url>{BARE_URL.pattern})|\*\*|__|`")  # a URL keeps its "__"
_TABLE_RULE = re.compile(r"\s*\|(?:[\s:-]*\|)+\s*")  # "| --- | :---: |", "| | |"
# A lone "*" or "_" opening or closing a sentence: the split cut an emphasised passage in two
# ("*Questions? Ask in #ask-people.*" is "*Questions?" and "Ask in #ask-people.*").
_CUT_EMPHASIS = (re.compile(r"^([*_])(?=\S)"), re.compile(r"(?<=\S)([*_])$"))


def tidy_sentence(sentence: str) -> str:
    """Strip list markers, heading marks and emphasis; collapse whitespace. Links stay
    as written ("[text](url)"): each surface shows them its own way. A number goes with its
    bullet: a reply joins its sentences on one line, where "Three rules: 3. If you …" reads
    as a stray figure, and the quoted items keep their order without it.

    A heading becomes "Heading:" and an unpunctuated bullet gets a full stop, so sentences
    joined on one line still read as separate statements.
    """
    if _TABLE_RULE.fullmatch(sentence):
        return ""  # a table's separator line or empty header row says nothing in a reply
    if TABLE_ROW.match(sentence):  # a row reads as its cells ("Office: Cork; Phone: 021 555 0191.")
        sentence = "; ".join(cell for cell in table_cells(sentence) if cell)
    is_heading = _HEADING_MARK.match(sentence) is not None
    text = _HEADING_MARK.sub("", _LIST_MARK.sub("", sentence))
    text = re.sub(r"\s+", " ", _EMPHASIS.sub(lambda match: match.group("url") or "", text)).strip()
    for edge in _CUT_EMPHASIS:
        match = edge.search(text)
        if match and text.count(match.group(1)) % 2:  # no partner: "2*3*4" and "*a* b" keep theirs
            text = text[: match.start()] + text[match.end() :]
    if not text:
        return ""
    if is_heading:
        return text if text.endswith(":") else f"{text}:"
    if not re.search(r"""[.!?:;]["'”’)\]]*$""", text):
        text += "."
    return text
