"""Ingestion into the database: every format, idempotency, replacement, pruning, bad files."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from sqlalchemy import select, text

from core import db
from core.models import CHUNKS_TABLE, Document
from ingestion.ingest import ingest_paths, remove_document

from support.environment import SAMPLES


def _chunk_rows(settings, document_id: int) -> list[tuple[str, str]]:
    with db.session(settings) as session:
        rows = session.execute(
            text(f"SELECT node_id, text FROM {CHUNKS_TABLE} WHERE metadata_->>'doc_id' = :d"), {"d": str(document_id)}
        ).all()
    return [(row[0], row[1]) for row in rows]


def test_every_format_is_ingested_with_heading_paths(settings, ingested_samples):
    by_suffix = {Path(item.path).suffix: item for item in ingested_samples.files}
    for suffix in (".md", ".txt", ".html", ".pdf", ".docx"):
        assert suffix in by_suffix, f"no sample with {suffix}"
        assert by_suffix[suffix].chunks > 0
        assert by_suffix[suffix].status in ("added", "unchanged")
    with db.session(settings) as session:
        for suffix, item in by_suffix.items():
            document = session.execute(select(Document).where(Document.source == item.path)).scalar_one()
            sections = (
                session.execute(
                    text(f"SELECT DISTINCT metadata_->>'section' FROM {CHUNKS_TABLE} WHERE metadata_->>'doc_id' = :d"),
                    {"d": str(document.id)},
                )
                .scalars()
                .all()
            )
            # Every format keeps nested headings: "Title > Section > Subsection".
            assert any(section and section.count(" > ") >= 1 for section in sections), (suffix, sections)


def test_a_new_reader_version_reads_unchanged_files_again(settings, tmp_path, monkeypatch):
    """After an upgrade that changes what files become, re-ingesting re-reads them."""
    from ingestion import ingest

    path = tmp_path / "gamma.md"
    path.write_text("# Gamma\n\n## Rules\n\nGamma staff may park in lot G.\n")
    assert ingest_paths(settings, [path], collection="versions").files[0].status == "added"
    assert ingest_paths(settings, [path], collection="versions").files[0].status == "unchanged"
    monkeypatch.setattr(ingest, "READER_VERSION", ingest.READER_VERSION + "-next")
    assert ingest_paths(settings, [path], collection="versions").files[0].status == "updated"
    assert ingest_paths(settings, [path], collection="versions").files[0].status == "unchanged"


def test_a_copy_is_known_across_reader_versions(settings, tmp_path, monkeypatch):
    """A copy of an ingested file, from another folder after an upgrade, is skipped as before."""
    from ingestion import ingest

    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    text = "# Delta\n\n## Rules\n\nDelta staff may park in lot D.\n"
    (tmp_path / "old" / "delta.md").write_text(text)
    (tmp_path / "new" / "delta.md").write_text(text)
    assert ingest_paths(settings, [tmp_path / "old"], collection="copies").files[0].status == "added"
    monkeypatch.setattr(ingest, "READER_VERSION", ingest.READER_VERSION + "-next")
    copy = ingest_paths(settings, [tmp_path / "new"], collection="copies").files[0]
    assert copy.status == "skipped" and "same content as delta.md" in (copy.detail or "")


def test_reingest_unchanged_changed_and_pruned(settings, tmp_path):
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpha\n\n## Rules\n\nAlpha staff may park in lot A. Visitors use lot C.\n")
    (folder / "b.md").write_text("# Beta\n\n## Rules\n\nBeta meetings start at nine. They end at ten.\n")

    first = ingest_paths(settings, [folder], collection="idem")
    assert [f.status for f in first.files] == ["added", "added"]
    document_a = next(f for f in first.files if f.document == "a.md")
    with db.session(settings) as session:
        doc_a = session.execute(select(Document).where(Document.source == document_a.path)).scalar_one()
    before = _chunk_rows(settings, doc_a.id)

    second = ingest_paths(settings, [folder], collection="idem")
    assert [f.status for f in second.files] == ["unchanged", "unchanged"]
    assert _chunk_rows(settings, doc_a.id) == before  # no writes

    (folder / "a.md").write_text(
        "# Alpha\n\n## Rules\n\nAlpha staff now park in lot B.\n\n## Hours\n\nThe office opens at eight.\n"
    )
    third = ingest_paths(settings, [folder], collection="idem")
    assert {f.document: f.status for f in third.files} == {"a.md": "updated", "b.md": "unchanged"}
    after = _chunk_rows(settings, doc_a.id)
    texts = " ".join(t for _, t in after)
    assert "lot B" in texts and "lot A" not in texts
    assert len(after) == len({node_id for node_id, _ in after}) == third.files[0].chunks
    with db.session(settings) as session:
        assert session.get(Document, doc_a.id).version == 2

    (folder / "b.md").unlink()
    fourth = ingest_paths(settings, [folder], collection="idem", prune=True)
    assert {f.document: f.status for f in fourth.files} == {"a.md": "unchanged", "b.md": "removed"}
    with db.session(settings) as session:
        doc_b = session.execute(
            select(Document).where(Document.collection == "idem", Document.name == "b.md")
        ).scalar_one()
        assert doc_b.deleted and doc_b.chunk_count == 0
    assert _chunk_rows(settings, doc_b.id) == []


def test_replacement_is_atomic_for_readers(settings, tmp_path):
    path = tmp_path / "swap.md"
    old = "# Swap\n\n" + "\n\n".join(f"## Part {i}\n\nOld rule number {i} applies to everyone." for i in range(6))
    new = "# Swap\n\n" + "\n\n".join(f"## Part {i}\n\nNew rule number {i} applies to everyone." for i in range(3))
    path.write_text(old)
    report = ingest_paths(settings, [path], collection="atomic")
    with db.session(settings) as session:
        document_id = session.execute(select(Document.id).where(Document.source == str(path.resolve()))).scalar_one()
    seen: set[tuple[int, int]] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            rows = _chunk_rows(settings, document_id)
            seen.add((sum("Old" in t for _, t in rows), sum("New" in t for _, t in rows)))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for round_ in range(3):
            path.write_text(new if round_ % 2 == 0 else old)
            ingest_paths(settings, [path], collection="atomic")
    finally:
        stop.set()
        watcher.join()
    old_count, new_count = report.files[0].chunks, 3
    assert seen <= {(old_count, 0), (0, new_count)}, seen  # never empty, never both


def test_a_copy_of_an_ingested_file_is_skipped_not_doubled(settings, tmp_path):
    text = "# Gamma\n\n## Lockers\n\nGamma lockers are on floor 2. Keys are at reception.\n"
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    (tmp_path / "one" / "gamma.md").write_text(text)
    (tmp_path / "two" / "gamma-copy.md").write_text(text)
    (tmp_path / "two" / "delta.md").write_text("# Delta\n\nDelta desks are booked in Robin.\n")

    first = ingest_paths(settings, [tmp_path / "one"], collection="twins")
    second = ingest_paths(settings, [tmp_path / "two"], collection="twins")
    statuses = {f.document: f.status for f in second.files}
    assert statuses == {"gamma-copy.md": "skipped", "delta.md": "added"}  # the rest of the batch lands
    skipped = next(f for f in second.files if f.status == "skipped")
    assert "same content as gamma.md" in skipped.detail and "docs remove" in skipped.detail
    assert second.as_json()["skipped"] == 1 and not second.failed
    with db.session(settings) as session:
        names = session.execute(select(Document.name).where(Document.collection == "twins")).scalars().all()
    assert sorted(names) == ["delta.md", "gamma.md"]
    # Elsewhere the same content is welcome, and once the original is removed the copy goes in.
    assert [
        f.status for f in ingest_paths(settings, [tmp_path / "two" / "gamma-copy.md"], collection="other").files
    ] == ["added"]
    remove_document(settings, next(d for d in _documents(settings, "twins") if d.name == "gamma.md").id)
    again = ingest_paths(settings, [tmp_path / "two"], collection="twins")
    assert {f.document: f.status for f in again.files} == {"gamma-copy.md": "added", "delta.md": "unchanged"}
    assert first.files[0].status == "added"


def _documents(settings, collection: str) -> list[Document]:
    with db.session(settings) as session:
        return list(
            session.execute(
                select(Document).where(Document.collection == collection, Document.deleted.is_(False))
            ).scalars()
        )


def test_corrupt_and_unsupported_files_are_reported_and_the_rest_lands(settings, tmp_path):
    folder = tmp_path / "batch"
    folder.mkdir()
    shutil.copy(SAMPLES / "travel-expenses.md", folder / "travel-expenses.md")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\n this is not really a pdf \x00\x01\x02")
    (folder / "notes.xlsx").write_bytes(b"PK\x03\x04 not a policy")
    (folder / "handbook.docx").write_bytes(b"\xd0\xcf\x11\xe0 an old Word file, renamed")
    (folder / "empty.md").write_text("   \n")
    report = ingest_paths(settings, [folder], collection="batch")
    statuses = {f.document: (f.status, f.detail) for f in report.files}
    assert statuses["travel-expenses.md"][0] == "added"
    assert statuses["broken.pdf"][0] == "failed"
    # pypdf's own reason, read once, not the reader's retry wrapper around it
    detail = statuses["broken.pdf"][1]  # e.g. "could not read PDF file: PdfStreamError: Stream has ended unexpectedly"
    assert detail.startswith("could not read PDF file: Pdf") and "RetryError" not in detail, detail
    assert statuses["notes.xlsx"][0] == "failed" and "unsupported" in statuses["notes.xlsx"][1]
    assert statuses["empty.md"][0] == "failed" and "no text" in statuses["empty.md"][1]
    assert statuses["handbook.docx"] == (
        "failed",
        "not a valid DOCX file (not a Word document package; an old .doc renamed?)",
    )
    assert len(report.failed) == 4
