"""The chunk store: writes in our own transactions, reads through LlamaIndex PGVectorStore.

PGVectorStore.add() commits on its own, so it cannot replace a document's chunks
atomically. Writes therefore go straight to its table, in the layout it expects
(`node_to_metadata_dict`, the same serialisation PGVectorStore uses), inside the
transaction that also updates the document row. Queries use PGVectorStore.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, cast

from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.utils import node_to_metadata_dict
from sqlalchemy import CursorResult, delete, insert, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import Session

from core import db
from core.config import Settings
from core.errors import UserError
from core.models import CHUNKS_TABLE, CHUNKS_TABLE_NAME, Base, Document, chunks_table
from ingestion.chunking import ChunkDraft

PUBLIC_ACL = "*"  # chunks of documents without an access list carry this marker


class DimensionMismatch(UserError):
    pass


@lru_cache(maxsize=4)
def chunk_table(embed_dim: int):  # -> sqlalchemy.Table
    return chunks_table(Base.metadata, embed_dim)


def stored_dimension(session: Session) -> int:
    value = session.execute(
        text("SELECT atttypmod FROM pg_attribute WHERE attrelid = CAST(:table AS regclass) AND attname = 'embedding'"),
        {"table": CHUNKS_TABLE},
    ).scalar_one()
    return int(value)


def check_dimension(session: Session, model_dimension: int) -> None:
    stored = stored_dimension(session)
    if stored != model_dimension:
        raise DimensionMismatch(
            f"the embedding model makes {model_dimension}-d vectors but the chunk store holds {stored}-d vectors. "
            "Use the model the store was built with, or a new database with POLICYBOT_EMBED_DIM set to the model's size."
        )


def acl_for(document: Document) -> list[str]:
    return list(document.access_channels) if document.access_channels else [PUBLIC_ACL]


def node_id_for(document: Document, position: int) -> str:
    # Deterministic and unique per content version, so a retried write never duplicates.
    key = f"{document.collection}|{document.source}|{document.content_hash}|{position}"
    return hashlib.sha1(key.encode()).hexdigest()


def build_nodes(document: Document, drafts: Sequence[ChunkDraft], embeddings: Sequence[list[float]]) -> list[TextNode]:
    nodes = []
    for draft, embedding in zip(drafts, embeddings, strict=True):
        node = TextNode(
            id_=node_id_for(document, draft.position),
            text=draft.text,
            embedding=list(embedding),
            metadata={
                "collection": document.collection,
                "document": document.name,
                "title": document.title,
                "section": draft.section,
                "position": draft.position,
                "source": document.source,
                "acl": acl_for(document),
            },
            # Only the text is embedded and shown; the rest is for filters and citations.
            excluded_embed_metadata_keys=["collection", "document", "source", "position", "acl"],
            excluded_llm_metadata_keys=["collection", "source", "position", "acl"],
        )
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=str(document.id))
        nodes.append(node)
    return nodes


def replace_chunks(session: Session, settings: Settings, document: Document, nodes: Sequence[TextNode]) -> None:
    """Swap a document's chunks inside the caller's transaction: readers see old or new, never both."""
    table = chunk_table(settings.embed_dim)
    session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": document.id})
    delete_chunks(session, settings, document.id)
    if nodes:
        session.execute(
            insert(table),
            [
                {
                    "node_id": node.node_id,
                    "text": node.get_content(),
                    "metadata_": node_to_metadata_dict(node, remove_text=True, flat_metadata=False),
                    "embedding": node.embedding,
                }
                for node in nodes
            ],
        )


def delete_chunks(session: Session, settings: Settings, document_id: int) -> int:
    table = chunk_table(settings.embed_dim)
    # a DELETE's result is a CursorResult (Session.execute is typed to return any Result)
    result = cast(
        CursorResult[Any], session.execute(delete(table).where(table.c.metadata_["doc_id"].astext == str(document_id)))
    )
    return int(result.rowcount or 0)


def set_chunk_acl(session: Session, document: Document) -> None:
    session.execute(
        text(
            f"UPDATE {CHUNKS_TABLE} SET metadata_ = jsonb_set(metadata_, '{{acl}}', CAST(:acl AS jsonb)) "
            "WHERE metadata_->>'doc_id' = :doc_id"
        ),
        {"acl": json.dumps(acl_for(document)), "doc_id": str(document.id)},
    )


def chunk_texts(session: Session, document_id: int) -> list[tuple[str, str, int]]:
    """(section, text, position) of a document's chunks, in order."""
    rows = session.execute(
        text(
            f"SELECT metadata_->>'section', text, CAST(metadata_->>'position' AS int) AS position "
            f"FROM {CHUNKS_TABLE} WHERE metadata_->>'doc_id' = :doc_id ORDER BY position"
        ),
        {"doc_id": str(document_id)},
    ).all()
    return [(row[0] or "", row[1], row[2]) for row in rows]


def vector_store(settings: Settings):  # -> PGVectorStore
    """LlamaIndex's PGVectorStore over our chunk table (schema created by our migrations)."""
    # LlamaIndex's Postgres store: it loads asyncpg and psycopg2, which only it uses, not the
    # modules that import this one for chunk_table (application/evaluators.py, vocabulary.py)
    from llama_index.vector_stores.postgres import PGVectorStore

    sync_engine = db.engine(settings)
    # PGVectorStore insists on an async engine too; we only ever use the sync API
    # (the async engine binds to the first event loop, which breaks in Celery tasks).
    async_engine = create_async_engine(sync_engine.url, pool_size=1, max_overflow=0, hide_parameters=True)
    return PGVectorStore(
        engine=sync_engine,
        async_engine=async_engine,
        table_name=CHUNKS_TABLE_NAME,
        schema_name="public",
        embed_dim=settings.embed_dim,
        hybrid_search=True,
        text_search_config="english",
        use_jsonb=True,
        perform_setup=False,  # the schema, extension and HNSW index belong to our migrations
    )
