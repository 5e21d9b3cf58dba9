"""Managing the knowledge base and the fallback allow-list: what `policybot docs|fallback`
and the admin console both do, so a change made in one is the same change made in the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast
from urllib.parse import urlsplit

from sqlalchemy import CursorResult, delete, select

from core import db
from core.config import Settings
from core.errors import NotFound, UserError
from core.models import Document, FallbackSourceRow
from core.names import InvalidName, parse_channels, validate_collection
from ingestion.http_source import FieldMap


class ManageError(UserError):
    """A bad request from an admin: the message says what to change."""


class ManageNotFound(ManageError, NotFound):
    """The document or fallback source named does not exist."""


# ------------------------------------------------------------------ documents


def list_documents(settings: Settings, collection: str | None = None, include_deleted: bool = False) -> list[Document]:
    with db.session(settings) as session:
        query = select(Document).order_by(Document.collection, Document.name)
        if collection:
            query = query.where(Document.collection == collection)
        if not include_deleted:
            query = query.where(Document.deleted.is_(False))
        return list(session.execute(query).scalars().all())


def get_document(settings: Settings, document_id: int) -> Document | None:
    with db.session(settings) as session:
        document = session.get(Document, document_id)
        return None if document is None or document.deleted else document


def set_document_access(settings: Settings, document_id: int, channels: Sequence[str]) -> Document:
    """Restrict a document to askers in these channels (empty: everyone); applies to its chunks at once."""
    from ingestion import store  # LlamaIndex (a second): only to change access, not for the listings

    allowed = parse_channels(channels)
    with db.session(settings) as session:
        document = session.get(Document, document_id, with_for_update=True)
        if document is None or document.deleted:
            raise ManageNotFound(f"no document {document_id}")
        document.access_channels = allowed or None
        store.set_chunk_acl(session, document)
        return document


def document_json(document: Document) -> dict[str, Any]:
    return {
        "id": document.id,
        "document": document.name,
        "collection": document.collection,
        "title": document.title,
        "source": document.source,
        "chunks": document.chunk_count,
        "version": document.version,
        "ingested_at": document.ingested_at.isoformat(),
        "deleted": document.deleted,
        "access_channels": document.access_channels,
    }


# ------------------------------------------------------------------ fallback sources


def list_fallback_sources(settings: Settings) -> list[FallbackSourceRow]:
    with db.session(settings) as session:
        return list(session.execute(select(FallbackSourceRow).order_by(FallbackSourceRow.id)).scalars().all())


def add_fallback_source(
    settings: Settings,
    name: str,
    *,
    collection: str | None = None,
    url: str | None = None,
    field_map: str | None = None,
    query_template: str | None = None,
    allowed_hosts: str | None = None,
    allow_private: bool = False,
    timeout: float = 3.0,
    max_bytes: int = 1_000_000,
    open_web: bool = False,
) -> FallbackSourceRow:
    """Allow-list a collection or an HTTP search API; everything is validated now, not at question time."""
    # application/runtime.py loads torch and LlamaIndex (seconds): only to add a source, not for the listings
    from application.runtime import http_source_config

    name = name.strip()
    if not name or len(name) > 100:
        raise ManageError("a fallback source needs a name of 1 to 100 characters")
    collection = collection.strip() if collection else None
    url = url.strip() if url else None
    if (collection is None) == (url is None):
        raise ManageError("give exactly one of --collection or --url")
    config: dict[str, Any] = {}
    if url is not None:
        if field_map:
            try:
                mapping = dict(part.split("=", 1) for part in field_map.split(","))
                FieldMap.from_mapping(mapping)
            except ValueError as error:
                raise ManageError(f"bad --field-map: {error}") from None
            config["field_map"] = mapping
        if query_template:
            config["query_template"] = query_template
        if allowed_hosts:
            config["allowed_hosts"] = [urlsplit(url).hostname or ""] + [
                h.strip() for h in allowed_hosts.split(",") if h.strip()
            ]
        config.update(allow_private=allow_private, timeout_s=timeout, max_bytes=max_bytes)
    else:
        try:
            validate_collection(collection or "")
        except InvalidName as error:
            raise ManageError(str(error)) from None
    row = FallbackSourceRow(
        name=name,
        kind="collection" if collection else "http",
        collection=collection,
        url=url,
        config=config,
        open_web=open_web,
    )
    if url is not None:
        try:
            http_source_config(row)  # validates URL, template and options
        except (ValueError, TypeError) as error:
            raise ManageError(str(error)) from None
    with db.session(settings) as session:
        if session.execute(select(FallbackSourceRow).where(FallbackSourceRow.name == name)).scalar_one_or_none():
            raise ManageError(f"a fallback source named {name!r} exists; remove it first")
        session.add(row)
    return row


def remove_fallback_source(settings: Settings, name: str) -> None:
    with db.session(settings) as session:
        # a DELETE's result is a CursorResult (Session.execute is typed to return any Result)
        result = cast(
            CursorResult[Any], session.execute(delete(FallbackSourceRow).where(FallbackSourceRow.name == name))
        )
        removed = result.rowcount
    if not removed:
        raise ManageNotFound(f"no fallback source named {name!r}")


def fallback_source_json(row: FallbackSourceRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "kind": row.kind,
        "collection": row.collection,
        "url": row.url,
        "open_web": row.open_web,
        "config": row.config,
    }
