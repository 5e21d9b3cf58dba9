"""Hybrid retrieval over the chunk store: dense (HNSW) and full-text, fused by reciprocal rank.

PGVectorStore's own "hybrid" mode concatenates two lists with incomparable scores
(STACK-NOTES), so we run both queries and fuse them with RRF. Filters are built only
from validated collection names and channel IDs: PGVectorStore pastes filter values
into SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from sqlalchemy import Engine

from core import db
from core.config import Settings
from core.names import CHANNEL_ID, COLLECTION_NAME
from crag.types import Origin, Passage
from ingestion import embedding, store

RRF_K = 60  # the usual reciprocal-rank-fusion constant


_vector_stores: dict[Engine, object] = {}


def _vector_store(settings: Settings):  # -> PGVectorStore, one per database engine and process
    # The process's engine, not services.database_url: resolving the URL on every question
    # checked the embedded server each time and tried to start one that was stopping
    # (issue 34); the engine is resolved once, and a database that went away is waited out.
    key = db.engine(settings)
    if key not in _vector_stores:
        _vector_stores[key] = store.vector_store(settings)
    return _vector_stores[key]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, node_id in enumerate(ranking):
            fused[node_id] = fused.get(node_id, 0.0) + 1.0 / (k + rank + 1)
    return fused


def access_filters(collections: Sequence[str], channel: str | None) -> MetadataFilters:
    """Restrict to the given collections and to documents the asker's channel may see."""
    for name in collections:
        if not COLLECTION_NAME.fullmatch(name):
            raise ValueError(f"invalid collection name {name!r}")
    visible = [store.PUBLIC_ACL]
    if channel:
        if not CHANNEL_ID.fullmatch(channel):
            raise ValueError(f"invalid Slack channel ID {channel!r}")
        visible.append(channel)
    return MetadataFilters(
        filters=[
            MetadataFilter(key="collection", value=list(collections), operator=FilterOperator.IN),
            MetadataFilter(key="acl", value=visible, operator=FilterOperator.ANY),
        ],
        condition=FilterCondition.AND,
    )


@dataclass
class ChunkRetriever:
    """crag.types.Retriever over some collections of the chunk store."""

    settings: Settings
    collections: Sequence[str]
    channel: str | None = None
    origin: Origin = "kb"
    source_name: str | None = None  # the fallback source's name when used as a fallback

    def retrieve(self, question: str, top_k: int) -> list[Passage]:
        if not self.collections or not question.strip():
            return []
        return self.retrieve_embedded(
            question, embedding.embed_model(self.settings).get_query_embedding(question), top_k
        )

    def retrieve_embedded(self, question: str, query_embedding: list[float], top_k: int) -> list[Passage]:
        """`retrieve` with the question's embedding already made (many questions embed faster in one batch)."""
        if not self.collections or not question.strip():
            return []
        filters = access_filters(self.collections, self.channel)
        vector_store = _vector_store(self.settings)
        dense = vector_store.query(
            VectorStoreQuery(
                query_embedding=query_embedding,
                similarity_top_k=top_k,
                filters=filters,
                mode=VectorStoreQueryMode.DEFAULT,
            )
        )
        sparse = vector_store.query(
            VectorStoreQuery(
                query_str=question,
                sparse_top_k=top_k,
                similarity_top_k=top_k,
                filters=filters,
                mode=VectorStoreQueryMode.TEXT_SEARCH,
            )
        )
        nodes = {node.node_id: node for node in (sparse.nodes or []) + (dense.nodes or [])}
        fused = reciprocal_rank_fusion([dense.ids or [], sparse.ids or []])
        best = sorted(fused.items(), key=lambda item: item[1], reverse=True)[:top_k]
        return [self._passage(nodes[node_id], score) for node_id, score in best]

    def _passage(self, node, score: float) -> Passage:
        metadata = node.metadata
        return Passage(
            id=node.node_id,
            text=node.get_content(),
            origin=self.origin,
            source=self.source_name or str(metadata.get("collection", "")),
            document=str(metadata.get("document", "")),
            title=str(metadata.get("title", "")),
            section=str(metadata.get("section", "")),
            url=metadata.get("url"),
            position=int(metadata.get("position", 0)),
            retrieval_score=score,
        )


@dataclass
class CollectionFallbackSource:
    """crag.types.FallbackSource over a separately ingested collection (e.g. an HR portal export)."""

    name: str
    retriever: ChunkRetriever
    kind: Literal["collection", "http"] = "collection"
    open_web: bool = False

    def search(self, keywords: str, limit: int) -> list[Passage]:
        return self.retriever.retrieve(keywords, limit)
