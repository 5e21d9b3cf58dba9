"""Evaluator versions: train (on the policy-qa corpus and the knowledge base's weak supervision),
store with metrics, activate, evaluate.

Weights live under POLICYBOT_HOME/evaluators/<version>/; metadata, thresholds and the
metrics (with cosine similarity measured on the same split) live in `evaluator_versions`.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Literal

import numpy as np
from sqlalchemy import select, update

from application.calibration import REVIEWS, LabelSources, review_examples
from application.corpus_supervision import CorpusUnavailable, corpus_path, labelled_data
from application.runtime import embed_function, reset_runtime
from core import db
from core.config import Settings
from core.errors import NotFound, UserError
from core.models import Document, EvaluatorVersion
from core.services import ServiceError
from crag.checkpoint import METADATA_FILE, WEIGHTS_FILE, load_evaluator
from crag.judge import EvaluatorConfig
from crag.text import plain_text
from crag.training.metrics import EvaluationReport, evaluate_evaluator
from crag.training.train import LabelledData, TrainingResult, general_fingerprint, train_evaluator, train_general
from crag.training.weak_supervision import CorpusChunk, Pair
from ingestion.store import chunk_table

log = logging.getLogger(__name__)

Activation = Literal["if_better", "always", "never"]
MIN_CHUNKS = 20  # below this, weak supervision has too few negatives to learn from
# One train organisation of the corpus per this much budget: each costs about 10 s to ingest the
# first time and adds about 1,200 pairs; 10 minutes take all 15, 5 minutes take 7.
SECONDS_PER_CORPUS_ORG = 40
# Below this budget the corpus's first-time ingestion and its gate would leave training almost nothing.
MIN_CORPUS_BUDGET_S = 300


class TrainingError(UserError):
    pass


def general_folder(settings: Settings, labelled: LabelledData, seed: int) -> Path:
    """Where the general evaluator learnt from exactly these corpus pairs, shape and seed lives."""
    return (
        settings.evaluators_dir
        / "general"
        / f"general-{general_fingerprint(labelled.train_pairs, EvaluatorConfig(), seed)}"
    )


def has_general(settings: Settings) -> bool:
    root = settings.evaluators_dir / "general"
    return root.is_dir() and any((folder / WEIGHTS_FILE).exists() for folder in root.iterdir())


def _corpus_for_training(
    settings: Settings, progress: Callable[[dict], None] | None, max_train_orgs: int | None = None
) -> LabelledData:
    try:
        labelled = labelled_data(settings, progress, max_train_orgs=max_train_orgs)
    except (CorpusUnavailable, ServiceError) as error:
        raise TrainingError(f"{error}") from None
    if labelled is None:
        raise TrainingError("POLICYBOT_CORPUS is off: the general evaluator learns from the policy-qa corpus")
    return labelled


def pretrain_general(
    settings: Settings,
    budget_s: float,
    seed: int = 0,
    force: bool = False,
    resume: bool = False,
    progress: Callable[[dict], None] | None = None,
) -> Path:
    """Train the general evaluator once per machine: every train organisation of the corpus, for
    up to two epochs or `budget_s`. Every later `train_and_register` with the same seed adapts it
    to the knowledge base instead of starting from MiniLM. Kept unless `force` (train afresh) or
    `resume` (train it further for `budget_s`)."""
    started = time.monotonic()
    labelled = _corpus_for_training(settings, progress)
    folder = general_folder(settings, labelled, seed)
    exists = (folder / WEIGHTS_FILE).exists()
    if exists and not (force or resume):
        return folder
    if resume and not exists:
        raise TrainingError(
            f"no general evaluator for this corpus and seed {seed} to resume: `policybot evaluator pretrain` trains one"
        )
    budget_s -= time.monotonic() - started  # the corpus's first ingestion comes out of the budget
    if budget_s < 60:
        raise TrainingError("no time left to train after preparing the corpus: give a longer budget")
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    if resume:
        shutil.copytree(folder, partial)
    train_general(labelled, partial, budget_s, seed=seed, progress=progress, resume=resume, version=folder.name)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)  # only a finished folder is ever found by train_and_register
    return folder


def general_summary(folder: Path) -> dict:
    return json.loads((folder / METADATA_FILE).read_text())


class VersionNotFound(TrainingError, NotFound):
    """No stored evaluator version has that name."""


def corpus_chunks(settings: Settings) -> list[CorpusChunk]:
    """Every live chunk with its stored embedding, in document order; its text as the evaluator
    reads it at run time (links as their text)."""
    table = chunk_table(settings.embed_dim)
    with db.session(settings) as session:
        live: dict[int, str] = {
            row.id: row.content_hash
            for row in session.execute(select(Document.id, Document.content_hash).where(Document.deleted.is_(False)))
        }
        rows = session.execute(select(table.c.node_id, table.c.text, table.c.metadata_, table.c.embedding)).all()
    chunks = []
    order: dict[str, tuple[str, int]] = {}  # chunk -> (its document's content hash, its position)
    for node_id, text, metadata, vector in rows:
        if int(metadata.get("doc_id", -1)) not in live:
            continue
        chunks.append(
            CorpusChunk(
                id=node_id,
                text=plain_text(text),  # as the evaluator reads it at run time: links as their text
                document=str(metadata.get("document", "")),
                section=str(metadata.get("section", "")),
                embedding=np.asarray(vector, dtype=np.float32),
            )
        )
        order[node_id] = (live[int(metadata["doc_id"])] or "", int(metadata.get("position", 0)))
    # Not by id: ids hash the file's path, and one seed must give the same training data
    # wherever the same documents were ingested from. Two files of one name stay apart by content.
    chunks.sort(key=lambda c: (c.document, *order[c.id], c.text))
    return chunks


def review_pairs(settings: Settings, chunks: list[CorpusChunk], sources: LabelSources = REVIEWS) -> list[Pair]:
    """Labelled questions (admins' reviews, and askers' votes if asked) as (question, chunk) pairs,
    for chunks still ingested."""
    examples, skipped = review_examples(settings, sources)
    text_of = {c.id: c.text for c in chunks}
    pairs = [
        Pair(example.question, text_of[chunk_id], int(example.label == "present"), "review", "review", chunk_id)
        for example in examples
        for chunk_id in example.chunk_ids
        if chunk_id in text_of  # a chunk removed or re-ingested since: its text is gone
    ]
    if not pairs:
        reasons = "; ".join(f"{n} {reason}" for reason, n in skipped.most_common()) or "no labels yet"
        # Worded for the CLI and the console alike: neither's option names.
        raise TrainingError(
            f"training on {sources.describe()}: no labelled question gives a training pair ({reasons}). "
            f"Review answers in the admin console first, or train on the knowledge base alone."
        )
    return pairs


def _metrics_json(result: TrainingResult | EvaluationReport) -> dict:
    return {"evaluator": asdict(result.evaluator), "cosine": asdict(result.cosine)}


def train_and_register(
    settings: Settings,
    budget_s: float,
    activate: Activation = "if_better",
    progress: Callable[[dict], None] | None = None,
    with_reviews: bool = False,
    with_feedback: bool = False,
    seed: int = 0,
) -> TrainingResult:
    chunks = corpus_chunks(settings)
    if len(chunks) < MIN_CHUNKS:
        raise TrainingError(
            f"only {len(chunks)} chunks are ingested; training needs at least {MIN_CHUNKS}. Ingest your policies first."
        )
    reviewed = with_reviews or with_feedback
    extra = review_pairs(settings, chunks, LabelSources(with_reviews, with_feedback)) if reviewed else []
    started = time.monotonic()
    labelled, general = None, None
    if budget_s >= MIN_CORPUS_BUDGET_S and corpus_path(settings) is not None:
        # With a general evaluator on this machine, every train organisation is already ingested;
        # without one, a short budget takes fewer of them.
        whole = has_general(settings)
        labelled = _corpus_for_training(
            settings, progress, max_train_orgs=None if whole else int(budget_s // SECONDS_PER_CORPUS_ORG)
        )
        found = general_folder(settings, labelled, seed) if whole else None
        if found is not None and (found / WEIGHTS_FILE).exists():
            general = found
    # Preparing the corpus (ingesting it once per machine, retrieving) comes out of the budget,
    # but training keeps at least half of it.
    budget_s = max(budget_s - (time.monotonic() - started), budget_s / 2)
    settings.evaluators_dir.mkdir(parents=True, exist_ok=True)
    result = train_evaluator(
        chunks,
        embed_function(settings),
        settings.evaluators_dir,
        budget_s=budget_s,
        progress=progress,
        extra_pairs=extra,
        seed=seed,
        labelled=labelled,
        start_from=general,
    )
    if labelled is not None and general is None:
        result.notes.append(
            f"trained from MiniLM: no general evaluator for this corpus and seed {seed} on this machine "
            f"(`policybot evaluator pretrain` trains one once; later training adapts it)"
        )
    short_of_the_corpus = labelled is None and corpus_path(settings) is not None
    if short_of_the_corpus:
        result.notes.append(
            f"trained on weak supervision alone: the policy-qa corpus needs a budget of at least "
            f"{MIN_CORPUS_BUDGET_S / 60:.0f} minutes (ingesting it, retrieving, and scoring its gate)"
        )
    should_activate, why_not = activation_decision(activate, result.beats_cosine, short_of_the_corpus)
    if why_not:
        result.notes.append(why_not)
    thresholds = result.thresholds
    with db.session(settings) as session:
        row = EvaluatorVersion(
            version=result.version,
            kind="minilm_t5",
            path=str(result.folder),
            upper=thresholds.upper,
            lower=thresholds.lower,
            strip_threshold=thresholds.strip,
            fallback_threshold=thresholds.fallback,
            metrics=_metrics_json(result)
            | {
                "n_train_pairs": result.n_train_pairs,
                "n_val_pairs": result.n_val_pairs,
                "steps": result.steps,
                "epochs": result.epochs,
                "seconds": result.seconds,
                "notes": result.notes,
                "seed": seed,
                "gate": labelled.description if labelled else "weak supervision's held-out pseudo-queries",
            },
            beats_cosine=result.beats_cosine,
            active=False,
        )
        session.add(row)
    if should_activate:
        activate_version(settings, result.version)
    return result


def activation_decision(activate: Activation, beats_cosine: bool, short_of_the_corpus: bool) -> tuple[bool, str | None]:
    """Whether a new evaluator becomes the active one, and why not when it beat cosine but is not.

    `short_of_the_corpus`: the corpus was there but the budget was too short for it, so the
    evaluator was gated and calibrated on weak supervision alone. Those pseudo-queries come from
    the documents it trained on and are easier than people's questions: "beats cosine" there is
    noise (AUC 0.748 against 0.747 on 40 questions in one demo run), and its thresholds do not carry
    over (another demo run put upper at 0.95 and abstained the demo's first question, which cosine
    answers). So `if_better` keeps cosine; `always` activates it anyway.
    """
    if activate == "always":
        return True, None
    if activate == "never" or not beats_cosine:
        return False, None
    if short_of_the_corpus:
        return False, (
            "not activated: gated on weak supervision alone, whose pseudo-queries are easier than people's "
            "questions, so its thresholds do not carry over; answers keep cosine similarity. A budget of "
            f"{MIN_CORPUS_BUDGET_S / 60:.0f} minutes or more trains and gates on the policy-qa corpus"
        )
    return True, None


def active_version(settings: Settings) -> EvaluatorVersion | None:
    with db.session(settings) as session:
        return session.execute(select(EvaluatorVersion).where(EvaluatorVersion.active.is_(True))).scalar_one_or_none()


def list_versions(settings: Settings) -> list[EvaluatorVersion]:
    with db.session(settings) as session:
        return list(session.execute(select(EvaluatorVersion).order_by(EvaluatorVersion.created_at.desc())).scalars())


COSINE = "cosine"  # the version to activate for cosine similarity: no trained version active, all kept


def activate_version(settings: Settings, version: str) -> EvaluatorVersion | None:
    with db.session(settings) as session:
        row = None
        if version != COSINE:
            row = session.execute(
                select(EvaluatorVersion).where(EvaluatorVersion.version == version)
            ).scalar_one_or_none()
            if row is None:
                raise VersionNotFound(f"no evaluator version {version!r} (see `policybot evaluator list`)")
        session.execute(update(EvaluatorVersion).where(EvaluatorVersion.active.is_(True)).values(active=False))
        session.flush()
        if row is not None:
            row.active = True
    reset_runtime()
    return row


def evaluate_version(
    settings: Settings, version: str | None = None, progress: Callable[[dict], None] | None = None
) -> EvaluationReport:
    """Re-measure a stored evaluator (default: the active one) against cosine on the current corpus."""
    rows = [r for r in list_versions(settings) if (r.version == version if version else r.active)]
    if not rows:
        if version:
            raise VersionNotFound(f"no evaluator version {version!r} (see `policybot evaluator list`)")
        raise TrainingError("no active evaluator; train one first")
    row = rows[0]
    evaluator = load_evaluator(row.path, threads=settings.evaluator_threads)
    return evaluate_evaluator(evaluator, corpus_chunks(settings), embed_function(settings), progress=progress)
