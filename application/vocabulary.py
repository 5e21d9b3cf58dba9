"""The words the indexed documents use: what the fallback keyword rewrite may send besides
policy terms and common English (crag/redaction.py), read once per process and again only
when documents change. Apart from runtime.py so the console can use it without torch."""

from __future__ import annotations

import threading

from sqlalchemy import func, select

from core import db
from core.config import Settings
from core.models import Document
from crag.redaction import document_vocabulary
from ingestion.store import chunk_table

# Per database engine: (the documents' stamp, the vocabulary read then).
_vocabularies: dict[object, tuple[tuple[object, ...], frozenset[str]]] = {}
_vocabulary_lock = threading.Lock()


def organisation_vocabulary(settings: Settings) -> frozenset[str]:
    """The words the indexed documents use, which the fallback keyword rewrite may send.

    Read from the chunk store once per process, and again only after documents were added,
    updated or removed: each call costs one small query on the documents table, not a scan.
    """
    with db.session(settings) as session:
        stamp = tuple(
            session.execute(
                select(func.count(), func.max(Document.ingested_at), func.sum(Document.version)).where(
                    Document.deleted.is_(False)
                )
            ).one()
        )
    key = db.engine(settings)
    with _vocabulary_lock:
        cached = _vocabularies.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        table = chunk_table(settings.embed_dim)
        with db.session(settings) as session:
            texts = session.execute(select(table.c.text).execution_options(yield_per=1000)).scalars()
            vocabulary = document_vocabulary(texts)
        _vocabularies[key] = (stamp, vocabulary)
        return vocabulary
