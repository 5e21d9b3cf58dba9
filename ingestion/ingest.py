"""Ingest policy files: load, chunk, embed, store; idempotent and per-file atomic.

`ingest_paths` is the one entry point; the CLI and the Celery task both call it and
only differ in how they show progress.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from sqlalchemy import or_, select
from sqlalchemy.exc import DataError

from core import db
from core.config import Settings
from core.models import Document
from core.names import validate_collection
from ingestion import embedding, store
from ingestion.chunking import chunk_markdown, word_piece_counter
from ingestion.loaders import SUPPORTED_SUFFIXES, LoadError, load_document

# skipped: the same content is already in the collection from another file (a copy would
# double every citation and every weak-supervision pair).
FileStatus = Literal["added", "updated", "unchanged", "skipped", "removed", "failed"]

# What a file becomes depends on the readers and the chunker as well as on its bytes. Bump
# this when they change what they make of a file: documents ingested before then count as
# "updated" on their next ingest and are read again, instead of "unchanged" forever.
READER_VERSION = "2026-12-06.2"  # .2: Markdown callouts, HTML tags, static-site marks, tables of contents


def document_hash(content: bytes) -> str:
    """The file's content hash under this reader version (a document's `content_hash`)."""
    return hashlib.sha256(READER_VERSION.encode() + b"\n" + content).hexdigest()


@dataclass
class FileResult:
    path: str
    document: str
    status: FileStatus
    chunks: int = 0
    detail: str | None = None  # why it failed, or why it was skipped


@dataclass
class IngestReport:
    collection: str
    files: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, status: FileStatus) -> int:
        return sum(1 for item in self.files if item.status == status)

    @property
    def failed(self) -> list[FileResult]:
        return [item for item in self.files if item.status == "failed"]

    @property
    def chunks(self) -> int:
        return sum(item.chunks for item in self.files if item.status in ("added", "updated"))

    def as_json(self) -> dict:
        return {
            "added": self.count("added"),
            "updated": self.count("updated"),
            "unchanged": self.count("unchanged"),
            "skipped": self.count("skipped"),
            "removed": self.count("removed"),
            "failed": [{"path": item.path, "error": item.detail} for item in self.failed],
            "files": [
                {"path": item.path, "document": item.document, "status": item.status, "chunks": item.chunks}
                | ({"detail": item.detail} if item.detail else {})
                for item in self.files
            ],
        }


@dataclass(frozen=True)
class Progress:
    """Sent after each file: how far along the batch is."""

    done: int
    total: int
    chunks: int
    result: FileResult


ProgressCallback = Callable[[Progress], None]


def collect_files(paths: Sequence[Path]) -> tuple[list[Path], list[FileResult]]:
    """Files to ingest (folders walked recursively, hidden entries skipped) and paths that do not exist."""
    files: list[Path] = []
    missing: list[FileResult] = []
    for raw in paths:
        path = raw.expanduser()
        if path.is_dir():
            for candidate in sorted(path.rglob("*")):
                relative = candidate.relative_to(path)
                if candidate.is_file() and not any(part.startswith(".") for part in relative.parts):
                    files.append(candidate.resolve())
        elif path.is_file():
            files.append(path.resolve())
        else:
            missing.append(FileResult(str(raw), raw.name, "failed", detail="no such file or folder"))
    unique = list(dict.fromkeys(files))
    return unique, missing


def ingest_paths(
    settings: Settings,
    paths: Sequence[Path],
    collection: str | None = None,
    prune: bool = False,
    access_channels: Sequence[str] | None = None,
    on_progress: ProgressCallback | None = None,
) -> IngestReport:
    collection = validate_collection(collection or settings.default_collection)
    started = time.perf_counter()
    report = IngestReport(collection=collection)
    files, missing = collect_files(paths)
    report.files.extend(missing)

    tokenize = word_piece_counter(str(embedding.embedding_folder(settings)))
    with db.session(settings) as session:
        store.check_dimension(session, embedding.embedding_dimension(settings))

    chunks_so_far = 0
    for index, path in enumerate(files, start=1):
        result = _ingest_file(settings, path, collection, tokenize, access_channels)
        report.files.append(result)
        if result.status in ("added", "updated"):
            chunks_so_far += result.chunks
        if on_progress:
            on_progress(Progress(done=index, total=len(files), chunks=chunks_so_far, result=result))

    if prune:
        folders = [p.expanduser().resolve() for p in paths if p.expanduser().is_dir()]
        seen = {str(path) for path in files}
        report.files.extend(_prune(settings, collection, folders, seen))
    report.seconds = time.perf_counter() - started
    return report


def _ingest_file(
    settings: Settings,
    path: Path,
    collection: str,
    tokenize: Callable[[str], list[str]],
    access_channels: Sequence[str] | None,
) -> FileResult:
    source = str(path)
    try:
        size_mb = path.stat().st_size / 1e6
        if size_mb > settings.max_file_mb:
            raise LoadError(
                f"file is {size_mb:.1f} MB, over the {settings.max_file_mb:g} MB limit (POLICYBOT_MAX_FILE_MB)"
            )
        if path.suffix.lower() not in SUPPORTED_SUFFIXES:
            load_document(path)  # raises the "unsupported" error with the list of formats
        content = path.read_bytes()
        content_hash, file_hash = document_hash(content), hashlib.sha256(content).hexdigest()
        with db.session(settings) as session:
            existing = _find(session, collection, source)
            if existing and not existing.deleted and existing.content_hash == content_hash and access_channels is None:
                return FileResult(source, existing.name, "unchanged", existing.chunk_count)
            twin = (
                None if existing and not existing.deleted else _live_twin(session, collection, content_hash, file_hash)
            )
            if twin is not None:
                return FileResult(
                    source,
                    path.name,
                    "skipped",
                    detail=(
                        f"same content as {twin.name} (from {twin.source}), already in {collection}: not ingested twice; "
                        f"remove that one first (`policybot docs remove {twin.id}`) to ingest this copy instead"
                    ),
                )
        # Slow work (parsing, embedding) happens outside any transaction.
        loaded = load_document(path)
        drafts = chunk_markdown(loaded.text, tokenize, settings.chunk_tokens, settings.chunk_overlap)
        if not drafts:
            raise LoadError("no text found after removing headings")
        vectors = embedding.embed_texts(settings, [_embedding_text(loaded.title, d.section, d.text) for d in drafts])
        with db.session(settings) as session:
            document = _find(session, collection, source, for_update=True)
            status: FileStatus = "updated" if document and not document.deleted else "added"
            if document is None:
                document = Document(collection=collection, source=source, name=path.name, version=0)
                session.add(document)
            document.name = path.name
            document.title = loaded.title
            document.content_hash = content_hash
            document.file_hash = file_hash
            document.version = (document.version or 0) + 1
            document.chunk_count = len(drafts)
            document.deleted = False
            document.ingested_at = datetime.now(UTC)
            if access_channels is not None:
                document.access_channels = list(access_channels) or None
            session.flush()  # assigns document.id for new rows
            store.replace_chunks(session, settings, document, store.build_nodes(document, drafts, vectors))
        return FileResult(source, path.name, status, len(drafts))
    except (LoadError, OSError) as error:
        return FileResult(source, path.name, "failed", detail=str(error))
    except DataError as error:  # a value PostgreSQL refuses fails this file, not the rest of the batch
        return FileResult(source, path.name, "failed", detail=f"the database refused its text: {error.orig}")


def _embedding_text(title: str, section: str, body: str) -> str:
    # The heading path disambiguates chunks such as "Deadlines" under Domestic vs International.
    heading = section or title
    return f"{heading}\n{body}" if heading else body


def _find(session, collection: str, source: str, for_update: bool = False) -> Document | None:
    query = select(Document).where(Document.collection == collection, Document.source == source)
    if for_update:
        query = query.with_for_update()
    return session.execute(query).scalar_one_or_none()


def _live_twin(session, collection: str, content_hash: str, file_hash: str) -> Document | None:
    """A live document of `collection` with exactly this content, if any, read by this reader
    version or an earlier one."""
    same = or_(Document.content_hash == content_hash, Document.file_hash == file_hash)
    query = select(Document).where(Document.collection == collection, same, Document.deleted.is_(False))
    return session.execute(query.order_by(Document.id).limit(1)).scalar_one_or_none()


def _prune(settings: Settings, collection: str, folders: Iterable[Path], seen: set[str]) -> list[FileResult]:
    removed: list[FileResult] = []
    with db.session(settings) as session:
        documents = session.execute(
            select(Document).where(Document.collection == collection, Document.deleted.is_(False))
        ).scalars()
        for document in documents:
            inside = any(Path(document.source).is_relative_to(folder) for folder in folders)
            if inside and document.source not in seen:
                store.delete_chunks(session, settings, document.id)
                document.deleted = True
                document.chunk_count = 0
                removed.append(FileResult(document.source, document.name, "removed"))
    return removed


def remove_document(settings: Settings, document_id: int) -> Document | None:
    """Remove a document from search (the row stays, flagged deleted, for the audit trail)."""
    with db.session(settings) as session:
        document = session.get(Document, document_id, with_for_update=True)
        if document is None or document.deleted:
            return None
        store.delete_chunks(session, settings, document.id)
        document.deleted = True
        document.chunk_count = 0
        return document
