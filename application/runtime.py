"""Wiring: build the CRAG pipeline from settings and the database, once per process.

The embedder and evaluator load once (CLI process, or each Celery worker child);
fallback sources and collections are read from the database on every question, so an
admin's change applies to the next question without a restart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import select

from application.generator import openai_generator
from application.thresholds import stored_thresholds
from application.vocabulary import organisation_vocabulary
from core import db
from core.config import Settings
from core.errors import UserError
from core.models import Document, EvaluatorVersion, FallbackSourceRow
from crag.checkpoint import load_evaluator
from crag.inference import CachedEvaluator, CosineEvaluator, native_bf16
from crag.pipeline import AskContext, CragPipeline, FallbackPlan, PipelineConfig, plan_fallback
from crag.types import Evaluator, FallbackSource, Retriever, Thresholds
from ingestion import embedding
from ingestion.http_source import FieldMap, HttpFallbackSource, HttpSourceConfig
from ingestion.retriever import ChunkRetriever, CollectionFallbackSource

log = logging.getLogger(__name__)

# Cosine-similarity thresholds for all-MiniLM-L6-v2 when no evaluator has been trained:
# measured on the sample question set (bench/quality), overridable like any threshold.
COSINE_THRESHOLDS = Thresholds(upper=0.55, lower=0.30, strip=0.35)


class EvaluatorNotReady(UserError):
    pass


@dataclass
class LoadedEvaluator:
    evaluator: Evaluator
    thresholds: Thresholds
    is_cosine: bool
    description: str
    sentence_evidence: bool = False  # trained on answer sentences: route and lead on them (crag/evidence.py)


def embed_function(settings: Settings):  # -> Callable[[list[str]], np.ndarray]
    model = embedding.embed_model(settings)

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(model.get_text_embedding_batch(list(texts)), dtype=np.float32)

    return embed


def use_bf16(settings: Settings) -> bool:
    """POLICYBOT_EVALUATOR_BF16: on, off, or auto (on where the CPU has native bf16)."""
    return settings.evaluator_bf16 == "on" or (settings.evaluator_bf16 == "auto" and native_bf16())


def _thresholds(settings: Settings, calibrated: Thresholds) -> Thresholds:
    """Calibrated values, each overridable by POLICYBOT_UPPER / _LOWER / _STRIP_THRESHOLD."""
    return Thresholds(
        upper=settings.upper_threshold if settings.upper_threshold is not None else calibrated.upper,
        lower=settings.lower_threshold if settings.lower_threshold is not None else calibrated.lower,
        strip=settings.strip_threshold if settings.strip_threshold is not None else calibrated.strip,
        fallback=calibrated.fallback,
    )


def load_active_evaluator(settings: Settings) -> LoadedEvaluator:
    """POLICYBOT_EVALUATOR_PATH, else the active trained version, else cosine similarity."""
    if settings.evaluator_path is not None:
        folder = Path(settings.evaluator_path).expanduser()
        if not folder.exists():
            raise EvaluatorNotReady(f"POLICYBOT_EVALUATOR_PATH={folder} does not exist")
        loaded = load_evaluator(
            folder,
            threads=settings.evaluator_threads,
            quantize_int8=settings.evaluator_int8,
            bf16=use_bf16(settings),
            passage_cache_mb=settings.evaluator_cache_mb,
        )
        calibrated = loaded.thresholds
        if calibrated is None and (settings.upper_threshold is None or settings.lower_threshold is None):
            raise EvaluatorNotReady(
                f"{folder} carries no calibrated thresholds: set POLICYBOT_UPPER and POLICYBOT_LOWER "
                "(the paper used 0.59/-0.99 on PopQA) or calibrate it with `policybot evaluator eval`"
            )
        thresholds = _thresholds(settings, calibrated or Thresholds(upper=0.0, lower=0.0))
        return LoadedEvaluator(
            CachedEvaluator(loaded), thresholds, False, f"checkpoint {folder}", sentence_evidence(loaded.metadata)
        )

    with db.session(settings) as session:
        active = session.execute(select(EvaluatorVersion).where(EvaluatorVersion.active.is_(True))).scalar_one_or_none()
        stored = active is not None or session.execute(select(EvaluatorVersion.id).limit(1)).first() is not None
    if active is not None:
        loaded = load_evaluator(
            active.path,
            threads=settings.evaluator_threads,
            quantize_int8=settings.evaluator_int8,
            bf16=use_bf16(settings),
            passage_cache_mb=settings.evaluator_cache_mb,
        )
        thresholds = _thresholds(settings, stored_thresholds(active))
        return LoadedEvaluator(
            CachedEvaluator(loaded),
            thresholds,
            False,
            f"trained evaluator {active.version}",
            sentence_evidence(loaded.metadata),
        )

    if stored:
        return cosine_evaluator(
            settings,
            "cosine similarity (trained evaluators are stored but none is active: "
            "`policybot evaluator list`, then `policybot evaluator activate VERSION`)",
        )
    return cosine_evaluator(settings, "cosine similarity (no trained evaluator yet: run `policybot evaluator train`)")


def cosine_evaluator(settings: Settings, description: str = "cosine similarity") -> LoadedEvaluator:
    thresholds = _thresholds(settings, COSINE_THRESHOLDS)
    cosine = CachedEvaluator(CosineEvaluator(embed_function(settings)))
    return LoadedEvaluator(cosine, thresholds, True, description)


def fallback_collections(settings: Settings) -> set[str]:
    with db.session(settings) as session:
        rows = session.execute(
            select(FallbackSourceRow.collection).where(FallbackSourceRow.kind == "collection")
        ).scalars()
        return {name for name in rows if name}


def knowledge_base_collections(settings: Settings) -> list[str]:
    """Every collection with documents, except those registered as fallback sources."""
    with db.session(settings) as session:
        names = (
            session.execute(select(Document.collection).where(Document.deleted.is_(False)).distinct()).scalars().all()
        )
    excluded = fallback_collections(settings)
    return sorted(name for name in names if name not in excluded)


def fallback_sources(settings: Settings, channel: str | None) -> list[FallbackSource]:
    """The allow-listed sources, as registered with `policybot fallback add`."""
    with db.session(settings) as session:
        rows = (
            session.execute(
                select(FallbackSourceRow).where(FallbackSourceRow.enabled.is_(True)).order_by(FallbackSourceRow.id)
            )
            .scalars()
            .all()
        )
    sources: list[FallbackSource] = []
    for row in rows:
        if row.kind == "collection" and row.collection:
            sources.append(
                CollectionFallbackSource(
                    row.name,
                    ChunkRetriever(
                        settings, [row.collection], channel=channel, origin="fallback", source_name=row.name
                    ),
                )
            )
        elif row.kind == "http" and row.url:
            try:
                sources.append(HttpFallbackSource(http_source_config(row)))
            except (ValueError, TypeError) as error:  # registered before a rule refused it (a metadata host)
                log.warning("fallback source %r skipped: %s", row.name, error)
    return sources


def http_source_config(row: FallbackSourceRow) -> HttpSourceConfig:
    options: dict[str, Any] = dict(row.config or {})
    field_map = options.pop("field_map", None)
    if field_map:
        options["field_map"] = FieldMap.from_mapping(field_map)
    return HttpSourceConfig(name=row.name, url=row.url or "", open_web=row.open_web, **options)


class Runtime:
    """Models loaded once per process; a fresh pipeline (current sources) per question."""

    def __init__(self, settings: Settings, loaded: LoadedEvaluator | None = None) -> None:
        self.settings = settings
        self.loaded = loaded or load_active_evaluator(settings)
        self.generator = openai_generator(settings)

    def warm_up(self) -> None:
        """Load the embedder and run each model once, so the first question is not the one that pays.

        Without it the first question after a worker starts loads the embedding model and its
        imports (seconds) and pays the models' first-call allocations.
        """
        question = "warm-up question"
        embedding.embed_model(self.settings).get_query_embedding(question)
        self.loaded.evaluator.score(question, ["warm-up passage"])
        # The vector store, its engines and the first database connections.
        ChunkRetriever(self.settings, knowledge_base_collections(self.settings)).retrieve(question, 1)

    def pipeline(self, channel: str | None) -> CragPipeline:
        settings = self.settings
        kb = knowledge_base_collections(settings)

        def retriever_for(context: AskContext) -> Retriever:
            return ChunkRetriever(settings, kb, channel=context.channel)

        config = pipeline_config(settings, self.loaded.thresholds, self.loaded.sentence_evidence)
        return CragPipeline(
            retriever_for, self.loaded.evaluator, fallback_sources(settings, channel), config, generator=self.generator
        )


def sentence_evidence(metadata: dict) -> bool:
    """Whether an evaluator folder's metadata says it was trained to judge sentences."""
    return bool(metadata.get("sentence_evidence"))


def pipeline_config(settings: Settings, thresholds: Thresholds, sentence_evidence: bool = False) -> PipelineConfig:
    return PipelineConfig(
        thresholds=thresholds,
        sentence_evidence=sentence_evidence,
        top_k=settings.top_k,
        strip_mode=settings.strip_mode,
        strips_top_n=settings.strips_top_n,
        fallback_limit=settings.fallback_limit,
        contact=settings.contact,
        vocabulary=organisation_vocabulary(settings),
    )


def fallback_preview(
    settings: Settings, question: str, asker_names: Sequence[str] = (), channel: str | None = None
) -> FallbackPlan:
    """Exactly what the pipeline's fallback step would send for this question, and to which sources.

    Loads no model: classification, redaction and the keyword rewrite need none.
    """
    config = pipeline_config(settings, COSINE_THRESHOLDS)  # thresholds play no part
    return plan_fallback(
        question,
        AskContext(asker_names=tuple(asker_names), channel=channel),
        fallback_sources(settings, channel),
        config,
    )


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def get_runtime(settings: Settings) -> Runtime:
    global _runtime
    with _runtime_lock:
        if _runtime is None or _runtime.settings is not settings:
            _runtime = Runtime(settings)
        return _runtime


def reset_runtime() -> None:
    """Reload models on next use (after training or activating an evaluator)."""
    global _runtime
    with _runtime_lock:
        _runtime = None
