"""Weak supervision for the evaluator, generated from the ingested corpus alone.

There are no labelled (question, passage) pairs for a company's policies, so we make them,
in the spirit of the CRAG paper's training data (positives hold the answer; negatives are
other passages from the same retrieval results):

* pseudo-queries of three kinds:
  - ``cloze``: a sentence taken out of a chunk (inverse cloze); the positive is the chunk
    with that sentence removed most of the time, so the model cannot just match strings;
  - ``template``: a question about a number, amount, date or name in a sentence
    ("... within 30 calendar days ..." -> "How many calendar days ...?"); the answer stays in;
  - ``heading``: "What is the policy on <section heading>?";
* positives: the source chunk (for heading questions, the chunks of that section);
* negatives: the nearest *other* chunks to the question by embedding (hard: what retrieval
  would return), random chunks, and entity-swapped copies of the source (a number or date
  replaced), paired with the unaltered source so the only difference is the value;
* question-side negatives (``focus``): a templated or heading question whose focus word
  (its rarest word that the source contains) is swapped for a word of another document,
  paired with the source, which now is on topic but does not say. That is how most
  unanswerable questions look ("a day off on our birthday?" against the leave policy);
* asked the way people ask: some templated and heading questions get a conversational
  opener or a bit of situation first ("quick question: ...", "I'm new here, ..."), which
  does not change the answer, so the model learns to look past it.

Near-duplicates of the source (cosine > 0.95) are never negatives. The split is by chunk
(near-duplicate groups stay on one side), and training never sees a validation chunk.
Everything is deterministic for a given seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from crag.evidence import sentence_texts
from crag.text import STOPWORDS, plain_sentences
from crag.types import Passage

# review: a real question an admin labelled; corpus: a labelled question of the policy-qa corpus
QueryKind = Literal["cloze", "template", "heading", "review", "corpus"]
PairKind = Literal["positive", "hard", "random", "swap", "focus", "review"]
Embed = Callable[[list[str]], np.ndarray]

NEAR_DUPLICATE_COS = 0.95


@dataclass(frozen=True)
class CorpusChunk:
    """One ingested chunk, as the caller has it (embedding from the same MiniLM model)."""

    id: str
    text: str
    document: str
    section: str  # heading path, e.g. "Travel > Expense claims"
    embedding: np.ndarray | None = None


@dataclass(frozen=True)
class PseudoQuery:
    text: str
    kind: QueryKind
    source_id: str  # the chunk it was made from
    positive_text: str  # the positive passage (cloze: the chunk without the sentence)
    related: frozenset[str]  # chunk ids that also hold the answer: never negatives
    entity: str = ""  # template: the value asked about; cloze: a value a swap may change


@dataclass(frozen=True)
class Pair:
    question: str
    passage: str
    label: int  # 1 = the passage holds the answer
    kind: PairKind
    query_kind: QueryKind
    chunk_id: str  # the passage's chunk
    # Pairs of one rank group (one question's passages, or its sentences) are also ranked against
    # each other in training (crag/training/fitting.py, `rank_weight`); "" for none.
    rank_group: str = ""


@dataclass(frozen=True)
class CandidateSet:
    """A simulated retrieval result for one question, with or without its answer."""

    question: str
    query_kind: QueryKind
    present: bool  # the source chunk is among the candidates
    chunk_ids: tuple[str, ...]
    passages: tuple[str, ...]
    sections: tuple[str, ...] = ()  # the passages' heading paths, for their sentences' context
    # The candidates that hold the answer (by chunk id); empty where it is not known. Calibration
    # counts a present set whose best-scored candidate is not one of them as a wrong Correct.
    answer_ids: tuple[str, ...] = ()

    def as_passages(self) -> list[Passage]:
        """The candidates as the pipeline holds them (what crag/evidence.py reads sentences of)."""
        sections = self.sections or ("",) * len(self.passages)
        return [
            Passage(id=chunk_id, text=text, origin="kb", source="", document="", section=section)
            for chunk_id, text, section in zip(self.chunk_ids, self.passages, sections, strict=True)
        ]


@dataclass(frozen=True)
class StripExample:
    question: str
    text: str
    label: int  # 1 = the strip holds the templated answer


@dataclass
class WeakSupervision:
    chunks: list[CorpusChunk]
    embeddings: np.ndarray  # normalised, one row per chunk
    train_ids: frozenset[str]
    val_ids: frozenset[str]
    train_queries: list[PseudoQuery]
    val_queries: list[PseudoQuery]
    train_pairs: list[Pair]
    val_pairs: list[Pair]
    calibration_sets: list[CandidateSet]  # from validation template + heading questions
    strip_examples: list[StripExample]
    near_duplicates: dict[str, frozenset[str]] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------
# Text helpers
# ---------------------------------------------------------------------------------------


def split_strips(text: str, section: str = "") -> list[str]:
    """Strips exactly as refinement makes and scores them for an evaluator trained on answer
    sentences (one sentence each, with its context: crag/evidence.py), so the strip threshold fits."""
    return sentence_texts(Passage(id="calibration", text=text, origin="kb", source="", document="", section=section))


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9][A-Za-z0-9'$%.,:-]*[A-Za-z0-9%]|[A-Za-z0-9]", text)


def _content_words(text: str) -> list[str]:
    return [w for w in _words(text) if w.lower() not in STOPWORDS]


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)


# ---------------------------------------------------------------------------------------
# Templated questions over numbers, amounts, dates and names
# ---------------------------------------------------------------------------------------

_MONTHS = "January February March April May June July August September October November December".split()
_MONTH = "|".join(_MONTHS)
_NUMBER_WORD = "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|sixty|ninety"
_UNIT = r"(?:(?P<qual>calendar|business|working|consecutive|full|school)\s+)?(?P<unit>days?|weeks?|months?|years?|hours?|minutes?|nights?|miles?)"

# (kind, pattern); the first matching kind wins for a span. Order matters: amounts before counts.
_ENTITY_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "amount",
        re.compile(
            r"[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|K|million|thousand))?|\b\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP|dollars|euros)\b"
        ),
    ),
    ("percent", re.compile(r"\b\d+(?:\.\d+)?\s?(?:%|percent\b)")),
    (
        "date",
        re.compile(
            rf"\b(?:{_MONTH})\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,\s*\d{{4}})?|\b\d{{1,2}}\s+(?:{_MONTH})(?:\s+\d{{4}})?|\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b(?:{_MONTH})\s+\d{{4}}\b"
        ),
    ),
    ("time", re.compile(r"\b\d{1,2}:\d{2}\b(?:\s?(?:am|pm|AM|PM))?")),
    ("duration", re.compile(rf"\b(?:\d+|{_NUMBER_WORD})\s+{_UNIT}\b", re.IGNORECASE)),
    ("count", re.compile(r"\b\d+\s+(?P<noun>[a-z]{3,}s)\b")),
]
_NAME = re.compile(r"(?<![\w-])[A-Z][a-zA-Z&]+(?:\s+(?:of\s+|and\s+)?[A-Z][a-zA-Z&]+)*(?![\w-])")
_NOT_NAMES = frozenset(_MONTHS) | {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "I"}
# Words that only bridge the value to its sentence ("within 30 days"): dropped with the value.
_DANGLING = frozenset(
    "within at least most of for by up to than is are be on about around approximately only over under".split()
)


def find_entities(sentence: str, skip_names: frozenset[str] = frozenset()) -> list[tuple[str, int, int, str]]:
    """(kind, start, end, question word) for each value a question could ask about.

    `skip_names` are names too common to ask about (the company's own name, say)."""
    found: list[tuple[str, int, int, str]] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _ENTITY_PATTERNS:
        for m in pattern.finditer(sentence):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            if kind == "amount":
                wh = "How much"
            elif kind == "percent":
                wh = "What percentage"
            elif kind == "date":
                wh = "When"
            elif kind == "time":
                wh = "What time"
            elif kind == "duration":
                wh = f"How many {((m.group('qual') or '') + ' ').lstrip()}{_plural(m.group('unit').lower())}"
            else:
                wh = f"How many {m.group('noun')}"
            found.append((kind, m.start(), m.end(), wh))
            taken.append((m.start(), m.end()))
    first_word_end = len(sentence.split(" ", 1)[0])
    for m in _NAME.finditer(sentence):
        if m.start() < first_word_end or m.group(0) in _NOT_NAMES or m.group(0) in skip_names:
            continue  # a capitalised first word is just the sentence start
        if any(m.start() < e and s < m.end() for s, e in taken):
            continue
        found.append(("name", m.start(), m.end(), "Who or what"))
        taken.append((m.start(), m.end()))
    return sorted(found, key=lambda f: f[1])


def _plural(unit: str) -> str:
    return unit if unit.endswith("s") else unit + "s"


def template_question(sentence: str, start: int, end: int, wh: str, rng: random.Random) -> str | None:
    """A question about sentence[start:end], made from the rest of the sentence.

    Two deterministic styles: the remaining clause, or a handful of its content words
    (closer to how people type questions, with less verbatim overlap). None when too little
    of the sentence is left to ask with."""
    before = sentence[:start].split()
    while before and before[-1].lower() in _DANGLING:
        before.pop()
    rest = " ".join(before + sentence[end:].split())
    rest = re.sub(r"\s+([,.;:!?])", r"\1", rest).strip(" ,.;:!?")
    if rest[:1].isupper() and rest[1:2].islower():
        rest = rest[0].lower() + rest[1:]
    words = _content_words(rest)
    if len(words) < 3:
        return None
    if rng.random() < 0.5:
        keep = [w for w in words if rng.random() > 0.25][:7] or words[:4]
        rest = " ".join(keep)
    return f"{wh} {rest}?".replace("  ", " ")


def swap_entity(text: str, value: str, rng: random.Random) -> str | None:
    """`text` with `value` replaced by a different plausible value, or None if it has none."""
    if value not in text:
        return None
    new = value
    month = next((m for m in _MONTHS if m in value), None)
    if month:
        new = value.replace(month, rng.choice([m for m in _MONTHS if m != month]))
    else:
        digits = re.search(r"\d[\d,]*(?:\.\d+)?", value)
        if digits is None:
            return None
        number = float(digits.group(0).replace(",", ""))
        choices = [number * 2, number + rng.randint(1, 9), max(1.0, number // 2), number * 3]
        other = next(c for c in rng.sample(choices, len(choices)) if c != number)
        formatted = (
            f"{other:.2f}"
            if "." in digits.group(0)
            else f"{int(other):,}"
            if "," in digits.group(0)
            else str(int(other))
        )
        new = value[: digits.start()] + formatted + value[digits.end() :]
    if new == value:
        return None
    return text.replace(value, new, 1)


# ---------------------------------------------------------------------------------------
# Pseudo-queries
# ---------------------------------------------------------------------------------------


def heading_of(section: str) -> str:
    """The last element of a heading path, without its numbering ("3.5 Expense report deadline")."""
    last = re.split(r"\s*(?:>|/|»|›)\s*", section.strip())[-1] if section.strip() else ""
    return re.sub(r"^\s*(?:\d+(?:\.\d+)*\.?|[A-Z]\.)\s+", "", last).strip()


_HEADING_TEMPLATES = (
    "What is the policy on {h}?",
    "What are the rules for {h}?",
    "What does the policy say about {h}?",
    "{h}?",
    "Can you explain {h}?",
)


def common_names(chunks: Sequence[CorpusChunk], max_share: float = 0.05) -> frozenset[str]:
    """Names found in more than `max_share` of the chunks: asking "who" about them says nothing."""
    counts: dict[str, int] = {}
    for chunk in chunks:
        for name in {m.group(0) for m in _NAME.finditer(chunk.text)}:
            counts[name] = counts.get(name, 0) + 1
    limit = max(2, max_share * len(chunks))
    return frozenset(name for name, n in counts.items() if n > limit)


def heading_phrases(chunks: Sequence[CorpusChunk]) -> dict[tuple[str, str], str]:
    """What a heading question names, per (document, section). A heading found in several
    documents ("Purpose and scope") gets its document's title, or it would match them all."""
    documents_of: dict[str, set[str]] = {}
    for chunk in chunks:
        documents_of.setdefault(heading_of(chunk.section).lower(), set()).add(chunk.document)
    out: dict[tuple[str, str], str] = {}
    for chunk in chunks:
        heading = heading_of(chunk.section)
        if not heading:
            continue
        phrase = heading if heading.isupper() else heading.lower()
        if len(documents_of[heading.lower()]) > 1:
            root = re.split(r"\s*(?:>|/|»|›)\s*", chunk.section.strip())[0]
            title = root if root and heading_of(root).lower() != heading.lower() else chunk.document
            phrase = f"{phrase} in the {title}"
        out[(chunk.document, chunk.section)] = phrase
    return out


def make_queries(
    chunks: Sequence[CorpusChunk],
    related: dict[str, frozenset[str]],
    rng: random.Random,
    n_cloze: int = 2,
    n_template: int = 2,
    keep_sentence_prob: float = 0.1,
    skip_names: frozenset[str] = frozenset(),
    headings: dict[tuple[str, str], str] | None = None,
) -> list[PseudoQuery]:
    """Cloze, templated and heading questions for the given chunks."""
    headings = headings if headings is not None else heading_phrases(chunks)
    queries: list[PseudoQuery] = []
    by_section: dict[tuple[str, str], list[CorpusChunk]] = {}
    for chunk in chunks:
        if chunk.section.strip():
            by_section.setdefault((chunk.document, chunk.section), []).append(chunk)
        sentences = plain_sentences(chunk.text)
        usable = [s for s in sentences if len(_words(s)) >= 5]

        # Inverse cloze: the sentence is the query; the rest of the chunk is the positive.
        for sentence in rng.sample(usable, min(n_cloze, len(usable))):
            keep = len(sentences) < 2 or rng.random() < keep_sentence_prob
            positive = chunk.text if keep else _remove_sentence(chunk.text, sentence)
            values = [sentence[s:e] for kind, s, e, _ in find_entities(sentence, skip_names) if kind != "name"]
            queries.append(
                PseudoQuery(sentence, "cloze", chunk.id, positive, related[chunk.id], values[0] if values else "")
            )

        # Templated questions: the answer stays in the positive.
        candidates = [(s, e) for s in usable for e in find_entities(s, skip_names)]
        rng.shuffle(candidates)
        seen_kinds: set[str] = set()
        made = 0
        for sentence, (kind, start, end, wh) in candidates:
            if made >= n_template:
                break
            if kind in seen_kinds and len(candidates) > n_template:
                continue  # prefer variety: a number question and a name question, say
            seen_kinds.add(kind)
            text = template_question(sentence, start, end, wh, rng)
            if text is None:
                continue
            queries.append(PseudoQuery(text, "template", chunk.id, chunk.text, related[chunk.id], sentence[start:end]))
            made += 1

    # Heading questions: one per section; every chunk of the section holds "the policy on" it.
    for (document, section), members in by_section.items():
        phrase = headings.get((document, section), "")
        if not _words(phrase) or phrase.lower() == document.lower():
            continue
        text = rng.choice(_HEADING_TEMPLATES).format(h=phrase)
        section_ids = frozenset(c.id for c in members)
        for chunk in members[:2]:
            queries.append(PseudoQuery(text, "heading", chunk.id, chunk.text, section_ids | related[chunk.id]))
    return queries


# What people type around a question. None of it changes the answer; deliberately free of
# topic words, so it teaches the model to look past chatter, not a vocabulary.
_CONVERSATIONAL = (
    "quick question: {q}",
    "hi, {q}",
    "hey team, {q}",
    "sorry if this was asked before, {q}",
    "I'm new here, {q}",
    "not sure who to ask. {q}",
    "I couldn't find this anywhere. {q}",
    "my manager asked me this: {q}",
    "{q} thanks!",
    "{q} asking for a colleague",
)


def conversational(question: str, rng: random.Random) -> str:
    """`question` as someone might type it in chat: an opener or sign-off, sometimes all lower case."""
    template = rng.choice(_CONVERSATIONAL)
    if not template.startswith("{q}") and question[:1].isupper() and question[1:2].islower():
        question = question[0].lower() + question[1:]
    text = template.format(q=question)
    return text.lower().rstrip("?") if rng.random() < 0.3 else text


def inverse_document_frequency(chunks: Sequence[CorpusChunk]) -> dict[str, float]:
    counts: dict[str, int] = {}
    for chunk in chunks:
        for word in {w.lower() for w in _words(chunk.text)}:
            counts[word] = counts.get(word, 0) + 1
    return {word: float(np.log(len(chunks) / n)) for word, n in counts.items()}


def swap_focus(
    question: str, source_words: set[str], vocabulary: Sequence[str], idf: dict[str, float], rng: random.Random
) -> str | None:
    """`question` with its focus word (its rarest word found in the source) replaced by a
    `vocabulary` word the source does not contain, or None without a focus word."""
    focus = [w for w in _content_words(question) if w.isalpha() and len(w) >= 4 and w.lower() in source_words]
    options = [v for v in vocabulary if v not in source_words]
    if not focus or not options:
        return None
    word = max(focus, key=lambda w: (idf.get(w.lower(), 0.0), w))
    replacement = rng.choice(options)
    return re.sub(rf"(?<![\w-]){re.escape(word)}(?![\w-])", replacement, question, count=1)


def focus_vocabulary(
    chunks: Sequence[CorpusChunk], idf: dict[str, float], min_idf: float = 2.0
) -> dict[str, list[str]]:
    """Per document, the topic words of the *other* documents (rare enough to name a topic)."""
    words_of: dict[str, set[str]] = {}
    for chunk in chunks:
        words = {w.lower() for w in _content_words(chunk.text) if w.isalpha() and len(w) >= 4}
        words_of.setdefault(chunk.document, set()).update(w for w in words if idf.get(w, 0.0) >= min_idf)
    everything = set().union(*words_of.values()) if words_of else set()
    return {doc: sorted(everything - words) for doc, words in words_of.items()}


def _chatty(query: PseudoQuery, probability: float, rng: random.Random) -> PseudoQuery:
    if query.kind == "cloze" or rng.random() >= probability:
        return query
    return replace(query, text=conversational(query.text, rng))


def _remove_sentence(text: str, sentence: str) -> str:
    return re.sub(r"\s+", " ", text.replace(sentence, " ")).strip()


# ---------------------------------------------------------------------------------------
# The dataset
# ---------------------------------------------------------------------------------------


def near_duplicate_groups(
    ids: Sequence[str], embeddings: np.ndarray, threshold: float = NEAR_DUPLICATE_COS
) -> dict[str, frozenset[str]]:
    """For each chunk, the chunks (itself included) whose embedding cosine exceeds `threshold`."""
    sims = embeddings @ embeddings.T
    return {
        cid: frozenset(ids[int(j)] for j in np.flatnonzero(sims[i] > threshold)) | {cid} for i, cid in enumerate(ids)
    }


def _split_ids(
    ids: Sequence[str], dups: dict[str, frozenset[str]], val_fraction: float, rng: random.Random
) -> frozenset[str]:
    """Validation chunk ids: whole near-duplicate groups, about `val_fraction` of the chunks."""
    parent = {cid: cid for cid in ids}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for cid in ids:
        for other in dups[cid]:
            parent[find(other)] = find(cid)
    groups: dict[str, list[str]] = {}
    for cid in ids:
        groups.setdefault(find(cid), []).append(cid)
    order = list(groups)  # in the chunks' order: chunk ids depend on where a file was ingested from
    rng.shuffle(order)
    target = max(1, round(val_fraction * len(ids)))
    val: list[str] = []
    for root in order:
        if len(val) >= target:
            break
        if len(val) + len(groups[root]) <= max(target, 1) or not val:
            val.extend(groups[root])
    return frozenset(val)


def build_weak_supervision(
    chunks: Sequence[CorpusChunk],
    embed: Embed,
    *,
    seed: int = 0,
    val_fraction: float = 0.2,
    n_cloze: int = 2,
    n_template: int = 2,
    n_hard: int = 2,
    n_random: int = 1,
    swap_prob: float = 0.3,
    conversational_prob: float = 0.4,
    focus_prob: float = 0.7,
    top_k: int = 10,
    near_duplicate_cos: float = NEAR_DUPLICATE_COS,
) -> WeakSupervision:
    """Pseudo-queries, labelled pairs and simulated retrieval sets, split by chunk."""
    if len(chunks) < 5:
        raise ValueError(f"need at least 5 chunks to make training data, got {len(chunks)}")
    rng = random.Random(seed)
    chunks = list(chunks)
    ids = [c.id for c in chunks]
    if len(set(ids)) != len(ids):
        raise ValueError("chunk ids must be unique")
    if all(c.embedding is not None for c in chunks):
        embeddings = _normalise(np.stack([np.asarray(c.embedding) for c in chunks]))
    else:
        embeddings = _normalise(embed([c.text for c in chunks]))
    dups = near_duplicate_groups(ids, embeddings, near_duplicate_cos)
    val_ids = _split_ids(ids, dups, val_fraction, rng)
    train_ids = frozenset(ids) - val_ids
    text_of = {c.id: c.text for c in chunks}

    names, headings = common_names(chunks), heading_phrases(chunks)
    train_queries = make_queries(
        [c for c in chunks if c.id in train_ids], dups, rng, n_cloze, n_template, skip_names=names, headings=headings
    )
    val_queries = make_queries(
        [c for c in chunks if c.id in val_ids], dups, rng, n_cloze, n_template, skip_names=names, headings=headings
    )
    train_queries = [_chatty(q, conversational_prob, rng) for q in train_queries]
    val_queries = [_chatty(q, conversational_prob, rng) for q in val_queries]
    idf = inverse_document_frequency(chunks)
    vocabulary = focus_vocabulary(chunks, idf)
    document_of = {c.id: c.document for c in chunks}
    section_of = {c.id: c.section for c in chunks}
    all_queries = train_queries + val_queries
    q_emb = _normalise(embed([q.text for q in all_queries])) if all_queries else np.zeros((0, embeddings.shape[1]))
    sims = q_emb @ embeddings.T  # question-to-chunk cosine: what retrieval would rank by

    index = {cid: i for i, cid in enumerate(ids)}
    train_pool = np.array([cid in train_ids for cid in ids])  # training never sees a val chunk

    def pairs_for(qi: int, q: PseudoQuery, pool: np.ndarray, n_hard_q: int) -> list[Pair]:
        out = [Pair(q.text, q.positive_text, 1, "positive", q.kind, q.source_id)]
        allowed = pool.copy()
        for cid in q.related:
            allowed[index[cid]] = False
        ranked = [j for j in np.argsort(-sims[qi]) if allowed[j]]
        # Never call a chunk that contains the query sentence itself a negative.
        ranked = [j for j in ranked if q.kind != "cloze" or q.text not in text_of[ids[j]]]
        hard = ranked[:n_hard_q]
        out += [Pair(q.text, text_of[ids[j]], 0, "hard", q.kind, ids[j]) for j in hard]
        rest = ranked[n_hard_q:]
        for j in rng.sample(rest, min(n_random, len(rest))):
            out.append(Pair(q.text, text_of[ids[j]], 0, "random", q.kind, ids[j]))
        if q.kind == "cloze" and q.entity and rng.random() < swap_prob:
            # Same chunk with one value changed, against the intact chunk: only the value differs.
            swapped = swap_entity(text_of[q.source_id], q.entity, rng)
            if swapped and swapped != text_of[q.source_id]:
                if q.positive_text != text_of[q.source_id]:
                    out.append(Pair(q.text, text_of[q.source_id], 1, "positive", q.kind, q.source_id))
                out.append(Pair(q.text, swapped, 0, "swap", q.kind, q.source_id))
        if q.kind != "cloze" and rng.random() < focus_prob:
            unrelated = focus_question(q)
            if unrelated:
                out.append(Pair(unrelated, q.positive_text, 0, "focus", q.kind, q.source_id))
        return out

    def focus_question(q: PseudoQuery) -> str | None:
        """q about something its source (and every chunk that shares its answer) never mentions."""
        words = {w.lower() for cid in q.related | {q.source_id} for w in _words(text_of[cid])}
        return swap_focus(q.text, words, vocabulary[document_of[q.source_id]], idf, rng)

    all_pool = np.ones(len(ids), dtype=bool)
    train_pairs: list[Pair] = []
    for qi, q in enumerate(train_queries):
        train_pairs += pairs_for(qi, q, train_pool, n_hard)
    val_pairs: list[Pair] = []
    offset = len(train_queries)
    for qi, q in enumerate(val_queries):
        val_pairs += pairs_for(offset + qi, q, all_pool, max(n_hard, 3))
    rng.shuffle(train_pairs)

    # Simulated retrieval sets on the harder question kinds (cloze sentences overlap their
    # chunk verbatim, which made thresholds far too strict for real questions).
    k = max(2, min(top_k, len(ids) // 3))
    calibration: list[CandidateSet] = []
    strips: list[StripExample] = []
    calibrated: set[str] = set()
    for qi, q in enumerate(val_queries):
        if q.kind == "cloze" or q.text in calibrated:
            continue  # a heading question made for two chunks of its section is one question
        calibrated.add(q.text)
        order = list(np.argsort(-sims[offset + qi]))
        present = order[:k]
        if not any(ids[j] in q.related for j in present):
            present = present[: k - 1] + [index[q.source_id]]  # the answer is there, ranked last
        absent = [j for j in order if ids[j] not in q.related][:k]
        sets = [(q.text, True, present), (q.text, False, absent)]
        unrelated = focus_question(q) if focus_prob > 0 else None
        if unrelated:
            sets.append((unrelated, False, present))  # on topic, source retrieved, answer not there
        for question, is_present, members in sets:
            calibration.append(
                CandidateSet(
                    question,
                    q.kind,
                    is_present,
                    tuple(ids[j] for j in members),
                    tuple(text_of[ids[j]] for j in members),
                    tuple(section_of[ids[j]] for j in members),
                )
            )
        if q.kind == "template":
            for strip in split_strips(text_of[q.source_id], section_of[q.source_id]):
                if q.entity in strip.rsplit("\n", 1)[-1]:  # in the sentence, not its context line
                    strips.append(StripExample(q.text, strip, 1))
            for j in absent[:2]:
                strips += [StripExample(q.text, s, 0) for s in split_strips(text_of[ids[j]], section_of[ids[j]])]

    return WeakSupervision(
        chunks=chunks,
        embeddings=embeddings,
        train_ids=train_ids,
        val_ids=val_ids,
        train_queries=train_queries,
        val_queries=val_queries,
        train_pairs=train_pairs,
        val_pairs=val_pairs,
        calibration_sets=calibration,
        strip_examples=strips,
        near_duplicates=dups,
    )
