"""Training, gating and calibration data from the policy-qa corpus, asked through real retrieval.

Every organisation's documents are ingested with policybot's own ingestion into a database of
their own (`services.corpus_database_url`; never the knowledge base's), one collection for its
knowledge base and one for its fallback portal. Ingestion skips unchanged files, and the
retrieved candidates are cached under POLICYBOT_HOME/corpus/, so the first training run on a
machine pays for this once.

Each question is asked of its organisation's knowledge base with the product's retriever
(`ChunkRetriever`, hybrid dense + full-text), as the pipeline reads it (a follow-up together
with its first turn when it leans on it). A retrieved chunk holds the answer when it comes from
the labelled document and section and contains every key phrase. From the train split come
training pairs: answer-bearing chunks against the chunks retrieval put beside them, and the
retrieved chunks of unanswerable and fallback-only questions (on topic, answer absent). From
the dev split come the held-out sets that gate the evaluator and calibrate its thresholds. The
test split is never read here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import SecretStr
from sqlalchemy import select

from application.corpus import (
    CORPUS_ROOT,
    Corpus,
    CorpusQuestion,
    Organisation,
    load_corpus,
    normalise,
    section_matches,
)
from core import db, services
from core.config import Settings
from core.errors import UserError
from core.models import Document
from crag.followups import continues_earlier
from crag.text import plain_text
from crag.training.metrics import HeldOut
from crag.training.progress import Progress
from crag.training.train import LabelledData
from crag.training.weak_supervision import CandidateSet, Pair, StripExample, split_strips
from ingestion import embedding
from ingestion.chunking import HEADING_SEPARATOR
from ingestion.ingest import ingest_paths
from ingestion.retriever import ChunkRetriever
from ingestion.store import chunk_table

HARD_NEGATIVES = {"kb": 3, "fallback": 3, "none-on-topic": 4, "none-off-topic": 2}
# Sentence pairs per question (crag/evidence.py): every answer sentence is a positive; these many
# negatives, first the answer's neighbours in its own chunk, then sentences of other candidates.
SENTENCE_NEGATIVES = {"kb": 4, "fallback": 4, "none-on-topic": 4, "none-off-topic": 2}
CACHE_VERSION = 2  # 2: the fallback portal's candidates are retrieved too


class CorpusUnavailable(UserError):
    """The corpus is switched off, missing or broken; the message says which and what to do."""


@dataclass(frozen=True)
class StoredChunk:
    id: str
    text: str
    document: str  # file name
    section: str  # heading path joined with " > "
    embedding: np.ndarray

    @property
    def plain(self) -> str:
        """The text as the evaluator reads it at run time (crag/pipeline.py): links as their text."""
        return plain_text(self.text)


@dataclass(frozen=True)
class AskedQuestion:
    """One corpus question as the pipeline would ask it, with what retrieval returned."""

    question: CorpusQuestion
    asked: str
    candidates: tuple[StoredChunk, ...]  # the knowledge base's top-k, best first
    answers: tuple[StoredChunk, ...]  # chunks of its labelled document that hold the answer
    portal: tuple[StoredChunk, ...] = ()  # the fallback portal's top-k, best first

    def holds_answer(self, chunk: StoredChunk) -> bool:
        return any(chunk.id == a.id for a in self.answers)


def corpus_path(settings: Settings) -> Path | None:
    """The corpus to learn from: POLICYBOT_CORPUS, the shipped one by default, None when "off"."""
    if settings.corpus.strip().lower() in ("off", "none", "false", "0"):
        return None
    return Path(settings.corpus).expanduser() if settings.corpus.strip() else CORPUS_ROOT


def corpus_settings(settings: Settings) -> Settings:
    """The same settings, on the corpus's own database."""
    return settings.model_copy(update={"database_url": SecretStr(services.corpus_database_url(settings))})


def kb_collection(org: Organisation) -> str:
    return f"qa-{org.id}"[:63]


def portal_collection(org: Organisation) -> str:
    return f"qa-{org.id}"[:56] + "-portal"


def load_checked_corpus(path: Path, splits: Sequence[str]) -> Corpus:
    corpus, problems = load_corpus(path)
    if problems:
        raise CorpusUnavailable(
            f"the corpus at {path} does not load ({len(problems)} problems, first: {problems[0]}); "
            f"run `python datasets/policy-qa/validate.py`, or set POLICYBOT_CORPUS=off"
        )
    missing = [s for s in splits if not corpus.in_split(s)]
    if missing:
        raise CorpusUnavailable(f"the corpus at {path} has no organisation in the {', '.join(missing)} split")
    return corpus


def ingest_corpus(
    qa_settings: Settings, organisations: Sequence[Organisation], progress: Progress | None = None
) -> None:
    """Each organisation's documents into its two collections (unchanged files are skipped)."""
    for n, org in enumerate(organisations, 1):
        for collection, role in ((kb_collection(org), "kb"), (portal_collection(org), "fallback")):
            report = ingest_paths(qa_settings, [org.folder / role], collection=collection, prune=True)
            failed = report.failed
            if failed:
                raise CorpusUnavailable(
                    f"corpus document {failed[0].document} of {org.id} did not ingest: {failed[0].detail}"
                )
        if progress:
            progress({"phase": "corpus", "step": n, "total": len(organisations), "loss": None, "detail": "ingest"})


def stored_chunks(qa_settings: Settings, collections: Sequence[str]) -> dict[str, list[StoredChunk]]:
    """Live chunks per collection, in document order."""
    table = chunk_table(qa_settings.embed_dim)
    with db.session(qa_settings) as session:
        live = set(
            session.execute(
                select(Document.id).where(Document.deleted.is_(False), Document.collection.in_(list(collections)))
            ).scalars()
        )
        rows = session.execute(select(table.c.node_id, table.c.text, table.c.metadata_, table.c.embedding)).all()
    out: dict[str, list[tuple[tuple[str, int], StoredChunk]]] = {c: [] for c in collections}
    for node_id, text, metadata, vector in rows:
        if int(metadata.get("doc_id", -1)) not in live:
            continue
        chunk = StoredChunk(
            node_id,
            text,
            str(metadata.get("document", "")),
            str(metadata.get("section", "")),
            np.asarray(vector, dtype=np.float32),
        )
        out[str(metadata["collection"])].append(((chunk.document, int(metadata.get("position", 0))), chunk))
    return {c: [chunk for _, chunk in sorted(items, key=lambda item: item[0])] for c, items in out.items()}


def holds_answer(chunk: StoredChunk, question: CorpusQuestion) -> bool:
    """From the labelled document (and section), and every key phrase in its text."""
    r = question.record
    if r.document is None or chunk.document != Path(r.document).name:
        return False
    if r.section and not section_matches(r.section, chunk.section.split(HEADING_SEPARATOR)):
        return False
    text = normalise(chunk.text)
    return all(normalise(p) in text for p in r.phrases)


def as_asked(question: CorpusQuestion) -> str:
    """What the pipeline reads: a follow-up that leans on its first turn is asked with it (workers/answer_tasks.py)."""
    r = question.record
    if r.first_turn and continues_earlier(r.question):
        return f"{r.first_turn} {r.question}"
    return r.question


def _cache_file(settings: Settings, org: Organisation, chunks: Sequence[StoredChunk], top_k: int) -> Path:
    key = hashlib.sha1(json.dumps([CACHE_VERSION, top_k, sorted(c.id for c in chunks)]).encode()).hexdigest()[:16]
    return settings.home / "corpus" / f"{org.id}-{key}.json"


def ask_organisation(
    settings: Settings, qa_settings: Settings, org: Organisation, chunks: dict[str, list[StoredChunk]], top_k: int
) -> list[AskedQuestion]:
    """Every question of `org`, retrieved from its knowledge base and its fallback portal (cached
    by the chunks' identity)."""
    kb = chunks[kb_collection(org)]
    by_id = {c.id: c for c in kb} | {c.id: c for c in chunks[portal_collection(org)]}
    cache = _cache_file(settings, org, kb, top_k)
    retrieved: dict[str, list[str]] = {}
    if cache.exists():
        try:
            retrieved = json.loads(cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            retrieved = {}
    retriever = ChunkRetriever(qa_settings, [kb_collection(org)])
    asked = {q.id: as_asked(q) for q in org.questions}
    key_of = {q.id: hashlib.sha1(asked[q.id].encode()).hexdigest() for q in org.questions}
    missing = list(
        dict.fromkeys(
            asked[q.id]
            for q in org.questions
            if key_of[q.id] not in retrieved
            or "portal:" + key_of[q.id] not in retrieved
            or any(i not in by_id for i in retrieved[key_of[q.id]] + retrieved["portal:" + key_of[q.id]])
        )
    )
    portal = ChunkRetriever(qa_settings, [portal_collection(org)])
    if missing:  # one embedding batch, then the retrievers' own queries per question
        vectors = embedding.embed_model(qa_settings).get_text_embedding_batch(missing)
        for text, vector in zip(missing, vectors, strict=True):
            key = hashlib.sha1(text.encode()).hexdigest()
            retrieved[key] = [p.id for p in retriever.retrieve_embedded(text, vector, top_k)]
            retrieved["portal:" + key] = [p.id for p in portal.retrieve_embedded(text, vector, top_k)]
    out = []
    for question in org.questions:
        candidates = tuple(by_id[i] for i in retrieved[key_of[question.id]])
        from_portal = tuple(by_id[i] for i in retrieved.get("portal:" + key_of[question.id], []) if i in by_id)
        role = "fallback" if question.label == "fallback" else "kb"
        pool = chunks[portal_collection(org)] if role == "fallback" else kb
        answers = tuple(c for c in pool if question.label in ("kb", "fallback") and holds_answer(c, question))
        out.append(AskedQuestion(question, asked[question.id], candidates, answers, from_portal))
    if missing:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(retrieved), encoding="utf-8")
    return out


def training_pairs(asked: Sequence[AskedQuestion]) -> list[Pair]:
    """Answer-bearing chunks against the chunks retrieval ranked beside them, and answer
    sentences against the sentences beside them (`sentence_pairs`)."""
    pairs: list[Pair] = []
    for a in asked:
        q, group = a.asked, f"{a.question.id}:passages"
        pairs += [Pair(q, c.plain, 1, "positive", "corpus", c.id, group) for c in a.answers]
        negatives = [c for c in a.candidates if not a.holds_answer(c)][: HARD_NEGATIVES[a.question.label]]
        pairs += [Pair(q, c.plain, 0, "hard", "corpus", c.id, group) for c in negatives]
        pairs += sentence_pairs(a)
    return pairs


def _sentence(strip_text: str) -> str:
    """The sentence of a one-sentence strip as the evaluator reads it (its context line first)."""
    return strip_text.rsplit("\n", 1)[-1]


def answer_sentences(a: AskedQuestion, chunk: StoredChunk) -> tuple[list[str], list[int]]:
    """A chunk's sentences as the evaluator reads them, and which of them hold a key phrase."""
    texts = split_strips(chunk.text, chunk.section)
    phrases = [normalise(p) for p in a.question.record.phrases] if a.holds_answer(chunk) else []
    return texts, [i for i, text in enumerate(texts) if any(p in normalise(_sentence(text)) for p in phrases)]


def sentence_pairs(a: AskedQuestion) -> list[Pair]:
    """The corpus's answer spans at the sentence (crag/evidence.py): the answer's sentences are
    positives; the hard negatives are the sentences beside them in their own chunk (nearest
    first), then sentences of the other candidates. An unanswerable question's candidates hold
    no answering sentence. Deterministic: the same corpus gives the same pairs."""
    q, label, group = a.asked, a.question.label, f"{a.question.id}:sentences"
    pairs: list[Pair] = []
    beside: list[tuple[int, str, str]] = []  # (distance to an answer sentence, text, chunk id)
    for chunk in a.answers:
        texts, hits = answer_sentences(a, chunk)
        pairs += [Pair(q, texts[i], 1, "positive", "corpus", chunk.id, group) for i in hits]
        if hits:
            beside += [(min(abs(i - h) for h in hits), t, chunk.id) for i, t in enumerate(texts) if i not in hits]
    wanted = SENTENCE_NEGATIVES[label]
    negatives = [(text, chunk_id) for _, text, chunk_id in sorted(beside)[: (wanted + 1) // 2]]
    others = [c for c in a.candidates if not a.holds_answer(c)]
    for rank in range(3):  # round-robin over the best other candidates: the first sentences that differ
        for chunk in others[:3]:
            texts = split_strips(chunk.text, chunk.section)
            if rank < len(texts) and len(negatives) < wanted:
                negatives.append((texts[rank], chunk.id))
    # A sentence met twice (chunks overlap) is one pair; one that answers is never a negative.
    positives = {pair.passage: pair for pair in pairs}
    chosen = {text: chunk_id for text, chunk_id in negatives if text not in positives}
    return [
        *positives.values(),
        *(Pair(q, text, 0, "hard", "corpus", chunk_id, group) for text, chunk_id in chosen.items()),
    ]


def held_out(asked: Sequence[AskedQuestion]) -> HeldOut:
    """Pairs, retrieval sets, strips and fallback sets of held-out questions.

    A set is answer-present only when the knowledge base's answer is among the retrieved
    candidates: a fallback-only or unanswerable question, or an answer retrieval missed, should
    not be routed Correct. A fallback set is the portal's candidates of a fallback-only question
    whose answer the portal returned (present), or of an unanswerable one (absent). Strips are
    single sentences, as an evaluator trained on answer sentences refines (crag/evidence.py)."""
    pairs: list[Pair] = []
    sets: list[CandidateSet] = []
    strips: list[StripExample] = []
    fallback_sets: list[CandidateSet] = []
    for a in asked:
        q = a.asked
        label = a.question.label
        kb_answers = a.answers if label == "kb" else ()
        pairs += [Pair(q, c.plain, 1, "positive", "corpus", c.id) for c in kb_answers]
        pairs += [Pair(q, c.plain, 0, "hard", "corpus", c.id) for c in a.candidates if not a.holds_answer(c)]
        if a.portal and label != "kb":  # the fallback's bar: fallback-only against unanswerable
            found = label == "fallback" and any(a.holds_answer(c) for c in a.portal)
            if found or label != "fallback":
                fallback_sets.append(_candidate_set(q, found, a.portal, a))
        if not a.candidates:
            continue
        present = label == "kb" and any(a.holds_answer(c) for c in a.candidates)
        sets.append(_candidate_set(q, present, a.candidates, a if label == "kb" else None))
        if present:  # the strip threshold: answer sentences against their neighbours and others
            for c in a.candidates:
                if a.holds_answer(c):
                    texts, hits = answer_sentences(a, c)
                    strips += [StripExample(q, t, int(i in hits)) for i, t in enumerate(texts)]
            for c in [c for c in a.candidates if not a.holds_answer(c)][:2]:
                strips += [StripExample(q, s, 0) for s in split_strips(c.text, c.section)]
    return HeldOut(pairs, sets, strips, fallback_sets)


def _candidate_set(
    question: str, present: bool, chunks: Sequence[StoredChunk], asked: AskedQuestion | None
) -> CandidateSet:
    """`asked`: the question whose answer the chunks may hold (None: none of them answers it)."""
    return CandidateSet(
        question,
        "corpus",
        present,
        tuple(c.id for c in chunks),
        tuple(c.plain for c in chunks),
        tuple(c.section for c in chunks),
        tuple(c.id for c in chunks if asked is not None and asked.holds_answer(c)),
    )


def ask_corpus(
    settings: Settings,
    organisations: Sequence[Organisation],
    progress: Progress | None = None,
) -> tuple[dict[str, list[AskedQuestion]], dict[str, np.ndarray]]:
    """Every question of these organisations through real retrieval (by organisation), and the
    stored embedding of every chunk met (passage text as the evaluator reads it -> vector, for cosine)."""
    qa_settings = corpus_settings(settings)
    ingest_corpus(qa_settings, organisations, progress)
    collections = [name for org in organisations for name in (kb_collection(org), portal_collection(org))]
    chunks = stored_chunks(qa_settings, collections)
    asked: dict[str, list[AskedQuestion]] = {}
    for n, org in enumerate(organisations, 1):
        asked[org.id] = ask_organisation(settings, qa_settings, org, chunks, settings.top_k)
        if progress:
            progress({"phase": "corpus", "step": n, "total": len(organisations), "loss": None, "detail": "retrieve"})
    return asked, {c.plain: c.embedding for items in chunks.values() for c in items}


def labelled_data(
    settings: Settings, progress: Progress | None = None, max_train_orgs: int | None = None
) -> LabelledData | None:
    """The corpus's training pairs (train split) and gate (dev split); None when POLICYBOT_CORPUS=off.

    `max_train_orgs` bounds the train organisations (in name order, so later runs reuse the
    first runs' ingestion): each costs about 10 s to ingest the first time. The dev split is
    always whole, since it decides activation."""
    path = corpus_path(settings)
    if path is None:
        return None
    corpus = load_checked_corpus(path, ("train", "dev"))
    if max_train_orgs is not None:
        kept = {org.id for org in corpus.in_split("train")[: max(1, max_train_orgs)]}
        corpus = Corpus(corpus.root, [org for org in corpus.organisations if org.split != "train" or org.id in kept])
    asked, embeddings = ask_corpus(settings, corpus.in_split("train") + corpus.in_split("dev"), progress)
    train = [a for org in corpus.in_split("train") for a in asked[org.id]]
    dev = [a for org in corpus.in_split("dev") for a in asked[org.id]]
    return LabelledData(
        train_pairs=training_pairs(train),
        held_out=held_out(dev),
        embeddings=embeddings,
        description=(
            f"the policy-qa corpus: {len(train)} questions of its train organisations "
            f"({len(corpus.in_split('train'))}), {len(dev)} of its dev organisations "
            f"({len(corpus.in_split('dev'))}) through real retrieval"
        ),
    )
