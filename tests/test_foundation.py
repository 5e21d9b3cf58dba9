"""Foundation: migrations, ingestion of every format, idempotency, pruning, retrieval, services."""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine, inspect, select, text

from ingestion.chunking import Section, first_title, split_sections
from ingestion.ingest import ingest_paths, remove_document
from ingestion.loaders import load_document
from ingestion.retriever import ChunkRetriever
from ingestion.store import chunk_table
from policybot import db, services
from policybot.models import CHUNKS_TABLE, Document

from conftest import REPO, SAMPLES

EXPECTED_TABLES = {"documents", CHUNKS_TABLE, "questions", "feedback", "fallback_sources", "evaluator_versions"}


def _chunk_rows(settings, document_id: int) -> list[tuple[str, str]]:
    with db.session(settings) as session:
        rows = session.execute(
            text(f"SELECT node_id, text FROM {CHUNKS_TABLE} WHERE metadata_->>'doc_id' = :d"), {"d": str(document_id)}
        ).all()
    return [(row[0], row[1]) for row in rows]


def test_migrations_from_empty_twice(settings):
    admin_url = services.database_url(settings).replace("/policybot?", "/postgres?")
    with psycopg.connect(admin_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as connection:
        connection.execute("DROP DATABASE IF EXISTS migration_check")
        connection.execute("CREATE DATABASE migration_check")
    fresh = create_engine(services.database_url(settings).replace("/policybot?", "/migration_check?"))
    try:
        first = db.upgrade(fresh, settings)
        # Every migration file ran, the head last (iterate_revisions lists newest first).
        migrations = sorted(path.stem.split("_")[0] for path in (REPO / "migrations" / "versions").glob("0*.py"))
        assert sorted(first) == migrations and first[0] == db.head_revision(settings)
        assert set(inspect(fresh).get_table_names()) >= EXPECTED_TABLES
        with fresh.connect() as connection:
            assert connection.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar()
            indexes = {
                row[0]
                for row in connection.execute(
                    text(f"SELECT indexname FROM pg_indexes WHERE tablename = '{CHUNKS_TABLE}'")
                )
            }
        assert any("hnsw" in name for name in indexes)
        assert db.upgrade(fresh, settings) == []  # second run is a no-op
        # The migrations build everything the models declare. (They also build what the models
        # leave to SQL: the chunks table of LlamaIndex's store and a few indexes.)
        from alembic.autogenerate import compare_metadata
        from alembic.migration import MigrationContext

        from policybot.models import Base

        with fresh.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        drift = [d for d in differences if not (isinstance(d, tuple) and d[0] in ("remove_index", "remove_table"))]
        assert drift == [], "\n".join(map(str, drift))
    finally:
        fresh.dispose()


def test_a_failed_statement_does_not_carry_its_values_into_error_messages(settings):
    """Errors are logged with their message; a question's text must not ride along."""
    import sqlalchemy

    from policybot import db

    with pytest.raises(sqlalchemy.exc.DBAPIError) as raised, db.engine(settings).connect() as connection:
        connection.execute(
            sqlalchemy.text("INSERT INTO no_such_table (question) VALUES (:question)"),
            {"question": "priya@example.com asks about leave"},
        )
    assert "priya@example.com" not in str(raised.value) and "hidden" in str(raised.value)


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


def test_a_heading_with_no_body_and_no_subsections_keeps_its_text() -> None:
    """List items taken for headings ("1. Book flights") must not vanish; a heading whose body
    is its subsections lives on in their paths only."""
    sections = split_sections(
        "# Travel\n\nBefore you go:\n\n## 1. Book flights\n\n## 2. Get approval\n\n"
        "## Claims\n\n### Deadline\n\nWithin 30 days.\n\n## Last words\n"
    )
    assert sections == [
        Section(("Travel",), "Before you go:"),
        Section(("Travel", "1. Book flights"), "1. Book flights"),
        Section(("Travel", "2. Get approval"), "2. Get approval"),
        Section(("Travel", "Claims", "Deadline"), "Within 30 days."),
        Section(("Travel", "Last words"), "Last words"),
    ]


def test_hash_lines_in_either_kind_of_code_fence_are_not_headings() -> None:
    sections = split_sections("# Setup\n\n~~~\n# not a heading\n```\n# still code\n~~~\n\n## Next\n\nText.\n")
    assert [s.heading_path for s in sections] == [("Setup",), ("Setup", "Next")]
    assert "# not a heading" in sections[0].body and "# still code" in sections[0].body
    # A fence may follow a line of text directly, as Markdown allows.
    sections = split_sections(
        "# Laptop Setup\n\nRun the installer:\n```bash\n# install the VPN client\nvpn up\n\n```\n\n"
        "## Passwords\n\nFourteen characters.\n"
    )
    assert [s.heading_path for s in sections] == [("Laptop Setup",), ("Laptop Setup", "Passwords")]


def test_a_numbered_list_in_plain_text_is_not_a_run_of_headings(tmp_path) -> None:
    """Loose list items look like numbered headings; as headings, the last item would own
    the paragraph after it ("2. Get approval" > "Flights over 6 hours ...")."""
    path = tmp_path / "travel.txt"
    path.write_text(
        "Travel Policy\n\nBefore you travel:\n\n1. Book flights through Navan\n\n"
        "2. Get approval from your manager\n\nFlights over 6 hours may be business class.\n\n"
        "3. Hotels\n\nUp to 200 USD per night.\n\n3.1 Conference hotels\n\nAny rate.\n"
    )
    sections = split_sections(load_document(path).text)
    assert [s.heading_path for s in sections] == [
        ("Travel Policy",),
        ("Travel Policy", "3. Hotels"),
        ("Travel Policy", "3. Hotels", "3.1 Conference hotels"),
    ]
    assert sections[0].body.splitlines()[-1] == "Flights over 6 hours may be business class."


def test_markdown_front_matter_and_setext_headings(tmp_path) -> None:
    """Static-site exports: YAML front matter is metadata (its title names the document) and
    "====" / "----" underlines are headings. An underline after a list item stays a rule."""
    path = tmp_path / "travel.md"
    path.write_text(
        '---\ntitle: "Travel Policy"\nowner: finance\ntags:\n  - travel\n---\n'
        "Applies to all staff.\n\nHotels\n------\n\nUp to 200 USD per night.\n\n- Taxis\n---\n\n"
        "```\ncode\n===\n```\n"
    )
    document = load_document(path)
    assert document.title == "Travel Policy"
    assert "owner: finance" not in document.text
    sections = split_sections(document.text)
    assert [s.heading_path for s in sections] == [("Travel Policy",), ("Travel Policy", "Hotels")]
    assert sections[1].body.startswith("Up to 200 USD per night.") and "- Taxis\n---" in sections[1].body
    assert "code\n===" in sections[1].body


def test_markdown_images_embedded_as_base64_keep_only_their_alt_text(tmp_path) -> None:
    blob = "iVBORw0KGgo" + "A" * 20_000
    path = tmp_path / "offices.md"
    path.write_text(
        f"# Offices\n\nThe Lisbon office opens at 8.\n\n![Floor plan](data:image/png;base64,{blob})\n\n"
        f'<img src="data:image/png;base64,{blob}"> Badges are collected at reception.\n'
    )
    text = load_document(path).text
    assert "AAAA" not in text and len(text) < 200
    assert "Floor plan" in text and "Badges are collected at reception." in text


def test_numbered_lists_and_numbered_headings_apart(tmp_path) -> None:
    """A list numbered "1." "2." does not swallow a heading numbered "3" after it, and a run of
    Title-Case numbered headings (a section with no text yet) stays headings."""
    path = tmp_path / "leave.txt"
    path.write_text(
        "Leave Policy\n\nTo request leave:\n\n1. Open the HR portal\n\n2. Submit the request\n\n"
        "3 Sick Leave\n\nTen days a year.\n\n4 Approval\n\n5 Per Diem\n\n40 EUR a day.\n"
    )
    sections = split_sections(load_document(path).text)
    assert [s.heading_path[-1] for s in sections] == ["Leave Policy", "3 Sick Leave", "4 Approval", "5 Per Diem"]
    assert sections[0].body.endswith("2. Submit the request")


def test_plain_text_rules_and_markdown_fences_and_faq_headings(tmp_path) -> None:
    """A "~~~" rule under a sentence in plain text is no fence; a bare "````" fence after a
    line of text in Markdown is one; FAQ-style "# ...?" headings keep a text file Markdown."""
    rule = tmp_path / "travel.txt"
    rule.write_text(
        "Travel Policy\n\nRead this before booking\n~~~\n\nHotels\n\nUp to 200 USD.\n\nMeals\n\n50 USD a day.\n"
    )
    assert [s.heading_path[-1] for s in split_sections(load_document(rule).text)][-2:] == ["Hotels", "Meals"]
    fence = tmp_path / "backups.md"
    fence.write_text("# Backups\n\nRestore:\n````\n# restore the database\n````\n\nBackups are kept for 30 days.\n")
    sections = split_sections(load_document(fence).text)
    assert [s.heading_path for s in sections] == [("Backups",)] and "kept for 30 days" in sections[0].body
    faq = tmp_path / "faq.txt"
    faq.write_text("# How do I request leave?\n\nIn Workday.\n\n# Who approves it?\n\nYour manager.\n")
    assert [s.heading_path for s in split_sections(load_document(faq).text)] == [
        ("How do I request leave?",),
        ("Who approves it?",),
    ]


def test_one_hash_comment_in_plain_text_and_an_unclosed_fence_in_markdown(tmp_path) -> None:
    """A "# Is the VPN up?" comment in a snippet does not make a text file Markdown; a "~~~~"
    rule under a title in Markdown opens no fence that would swallow every later heading."""
    remote = tmp_path / "remote.txt"
    remote.write_text(
        "Remote Work Policy\n\n1. Eligibility\n\nAll staff.\n\n2. Equipment\n\nCheck the VPN:\n\n"
        "# Is the VPN up?\nvpn status\n\n3. Expenses\n\nUp to 50 USD a month.\n"
    )
    document = load_document(remote)
    assert document.title == "Remote Work Policy"
    assert [s.heading_path[-1] for s in split_sections(document.text)][-1] == "3. Expenses"
    rule = tmp_path / "travel.md"
    rule.write_text("Travel Policy\n~~~~~~~~~~~~~\n\n# Booking\n\nUse Navan.\n\n# Hotels\n\nUp to 200 USD.\n")
    assert [s.heading_path for s in split_sections(load_document(rule).text)][-2:] == [("Booking",), ("Hotels",)]


def test_a_plain_text_table_header_over_a_rule_is_not_a_heading(tmp_path) -> None:
    path = tmp_path / "limits.txt"
    path.write_text("Travel Limits\n\nCity          Limit\n-------------------\nBoston        250 USD\n\nBook early.\n")
    sections = split_sections(load_document(path).text)
    assert [s.heading_path for s in sections] == [("Travel Limits",)]
    assert "City          Limit\n-------------------" in sections[0].body


def test_an_underlined_title_in_plain_text_is_a_heading_not_a_code_fence(tmp_path) -> None:
    path = tmp_path / "travel.txt"
    path.write_text("Travel Policy\n~~~~~~~~~~~~~\n\nBooking\n\nBook through Navan.\n\nHotels\n\nUp to 200 USD.\n")
    sections = split_sections(load_document(path).text)
    assert [s.heading_path for s in sections] == [("Travel Policy", "Booking"), ("Travel Policy", "Hotels")]


def test_front_matter_is_only_yaml_and_its_title_ignores_code(tmp_path) -> None:
    prose = tmp_path / "notice.md"
    prose.write_text(
        "---\n**Effective date:** 1 March 2025. All earlier versions are withdrawn.\n---\n\n# Notice\n\nText.\n"
    )
    assert "All earlier versions are withdrawn." in load_document(prose).text
    titled = tmp_path / "remote.md"
    titled.write_text(
        "---\ntitle: Remote Work Policy\n---\n\nConnect first:\n\n```bash\n# connect to the VPN first\nvpn up\n```\n"
    )
    assert load_document(titled).title == "Remote Work Policy"
    spaced = tmp_path / "travel.md"
    spaced.write_text("---\ntitle: Travel Policy\nLast reviewed: 2026-01-10\n---\n\nBook through Navan.\n")
    document = load_document(spaced)
    assert document.title == "Travel Policy" and "reviewed" not in document.text
    for stripped in (
        "---\n# exported by the wiki, do not edit\ntitle: Travel Policy\nowner: Finance\n---\n\nBook early.\n",
        "---\nsidebar_position: 3\n---\n\n# Travel Policy\n\nBook early.\n",
    ):
        spaced.write_text(stripped)
        document = load_document(spaced)
        assert document.title == "Travel Policy" and "---" not in document.text and ":" not in document.text
    for kept in (
        "---\n# Travel Policy\nOwner: People Team\n---\n\nBook through Navan.\n",
        "---\nPlease note: this policy replaces the 2024 version.\n---\n\n# Travel\n\nBook early.\n",
    ):
        spaced.write_text(kept)
        document = load_document(spaced)
        assert document.title == "Travel Policy" if "# Travel Policy" in kept else "replaces the 2024" in document.text


def test_an_embedded_image_with_a_title_leaves_no_debris(tmp_path) -> None:
    path = tmp_path / "logo.md"
    path.write_text(
        '# Brand\n\n![Company logo](data:image/png;base64,iVBORw0KGgo "Logo (v2)") is used everywhere.\n\n'
        '![Map](<data:image/png;base64,iVBORw0KGgo> "Floors (all)") shows the floors.\n\n'
        "![Plan](data:image/png;base64,iVBORw0KGgo\nAAAABBBB\n) hangs at reception.\n\n"
        "![Team](data:image/svg+xml;utf8,%3Csvg%3EHR's%20team%3C/svg%3E) meets weekly.\n\n"
        '![Floors](data:image/svg+xml;utf8,<svg fill="rgb(0,0,0)" width="10"></svg>) are marked.\n\n'
        "![Desk](\n  data:image/png;base64,AAAA\n  BBBB\n  ) is assigned.\n\n"
        "Employees get 25 days of leave.\n\nCarry-over is capped (5 days).\n"
    )
    text = load_document(path).text
    assert "Company logo is used everywhere." in text and "Map shows the floors." in text
    assert "Plan hangs at reception." in text and "data:" not in text and "Team meets weekly." in text
    assert "Floors are marked." in text and "Desk is assigned." in text and "BBBB" not in text
    assert "Employees get 25 days of leave." in text and "Carry-over is capped (5 days)." in text


def test_a_hash_line_in_plain_text_or_word_is_text_not_markdown(tmp_path) -> None:
    """One "# " line no longer turns a text file into Markdown (which switched off heading
    detection), and it never becomes a heading itself."""
    import docx

    path = tmp_path / "leave.txt"
    path.write_text("Leave Policy\n\n# of days: 25 for everyone.\n\nSick Leave\n\nTen days a year.\n")
    sections = split_sections(load_document(path).text)
    assert [s.heading_path for s in sections] == [("Leave Policy",), ("Leave Policy", "Sick Leave")]
    assert sections[0].body.strip() == "# of days: 25 for everyone."
    document = docx.Document()
    document.add_heading("Per Diem", level=1)
    document.add_paragraph("# of nights covered: 3")
    document.add_paragraph("Per diem is 40 EUR.")
    path = tmp_path / "per-diem.docx"
    document.save(str(path))
    sections = split_sections(load_document(path).text)
    assert [s.heading_path for s in sections] == [("Per Diem",)]
    assert sections[0].body.splitlines()[-1] == "Per diem is 40 EUR."


def test_html_reads_the_content_not_the_page_around_it(tmp_path) -> None:
    """An intranet page: site header with its logo heading, menus, a cookie banner, a sidebar and
    the site footer are not policy; the article's own footer is. The page's title loses the site name."""
    path = tmp_path / "travel.html"
    path.write_text(
        "<html><head><title>Travel Policy - Acme Intranet</title></head><body>"
        "<header><h1>Acme Intranet</h1><input placeholder='Search'></header>"
        "<div id='topnav'><ul><li>Home</li><li>HR</li></ul></div>"
        "<div class='cookie-banner'><h2>We value your privacy</h2><button>Accept all</button></div>"
        "<aside><h3>Related articles</h3><p>Old travel FAQ</p></aside>"
        "<article><h2>Travel Policy</h2><h3>Flights</h3><p>Economy only. Business class needs the CFO's approval "
        "for flights over eight hours, booked through the travel portal at least fourteen days ahead.</p>"
        "<footer>Supersedes version 3.</footer></article>"
        "<div id='footer'>© 2024 Acme Corp | Privacy</div></body></html>",
        encoding="utf-8",
    )
    loaded = load_document(path)
    assert loaded.title == "Travel Policy"
    sections = split_sections(loaded.text)
    assert [(s.heading_path, s.body) for s in sections] == [
        (
            ("Travel Policy", "Flights"),
            "Economy only. Business class needs the CFO's approval for flights over eight "
            "hours, booked through the travel portal at least fourteen days ahead.\n\n"
            "Supersedes version 3.",
        )
    ]


def test_html_drops_struck_and_hidden_text_and_keeps_numbers_and_cells_in_place(tmp_path) -> None:
    """A struck rule no longer applies and must not stand next to the one that does; a footnote must
    not glue onto an amount; a merged cell must not shift a row's values into other columns."""
    path = tmp_path / "expenses.html"
    path.write_text(
        "<html><head><style>.c3{color:red;text-decoration:line-through}</style></head><body><h1>Expense Policy</h1>"
        "<p>Meals: <strike>$50</strike><del>$55</del><s>$60</s> $75 per day.</p>"
        "<p>Per diem <span style='text-decoration: line-through'>$40</span> $60.</p>"
        "<p><span class='c3'>Fathers receive 2 weeks.</span>All parents receive 16 weeks.</p>"
        "<div hidden>Draft: meals up to 100 EUR.</div><div style='display:none'>Old rule: receipts above 10 EUR.</div>"
        "<p># of carry-over days: 5</p>"
        "<p>The nightly cap is 200<sup>1</sup> EUR, from the 1<sup>st</sup> of May.</p>"
        "<p>Write to hr_benefits@acme.com about PTO_CARRY <img src='flow.png' alt='(Finance pays within 30 days)'></p>"
        "<details><summary>Hotel cap in London?</summary>250 EUR per night.</details>"
        "<h2>Rates <a class='headerlink' href='#rates'>¶</a></h2>"
        "<table><tr><th>Region</th><th>City</th><th>Hotel cap</th><th>Meals</th></tr>"
        "<tr><td rowspan='2'>Europe</td><td>Paris</td><td>250</td><td>80</td></tr>"
        "<tr><td>Berlin</td><td>180</td><td>60</td></tr><tr><td>Asia</td><td>Tokyo | Osaka</td><td>300</td><td>90</td></tr>"
        "</table></body></html>",
        encoding="utf-8",
    )
    text = load_document(path).text
    for gone in ("$50", "$55", "$60 ", "$40", "Fathers"):
        assert gone not in text, (gone, text)
    # Hidden is not deleted: tab panels and accordions hide policy text until clicked.
    assert "Draft: meals up to 100 EUR." in text and "Old rule: receipts above 10 EUR." in text
    for kept in (
        "$75 per day.",
        "Per diem $60.",
        "All parents receive 16 weeks.",
        "200¹ EUR, from the 1st of May",
        "hr_benefits@acme.com about PTO_CARRY (Finance pays within 30 days)",
        "Hotel cap in London?\n\n250 EUR per night.",
        "| Europe | Berlin | 180 | 60 |",
        "| Asia | Tokyo \\| Osaka | 300 | 90 |",
    ):
        assert kept in text, (kept, text)
    assert [s.heading_path for s in split_sections(text)] == [("Expense Policy",), ("Expense Policy", "Rates")]


def test_html_from_word_and_legacy_pages(tmp_path) -> None:
    """Word's "Save as Web Page": its title style is the title, its conditional list markers
    are not text; a page of unclosed <font> tags nests thousands deep; no charset declared
    and not UTF-8 is windows-1252, what browsers assume."""
    word = tmp_path / "travel.html"
    word.write_text(
        "<html><head><title>Travel Policy</title></head><body><p class=MsoTitle>Travel Policy</p><h1>1. Booking</h1>"
        "<p class=MsoListParagraph><![if !supportLists]><span style='mso-list:Ignore'>·<span>&nbsp;&nbsp;</span></span>"
        "<![endif]>Economy for domestic flights</p>"
        "<p class=MsoListParagraph><![if !supportLists]><span style='mso-list:Ignore'>1.<span>&nbsp;</span></span>"
        "<![endif]>Get approval</p></body></html>",
        encoding="utf-8",
    )
    text = load_document(word).text
    assert "if !supportLists" not in text and "endif" not in text
    assert "- Economy for domestic flights" in text and "1. Get approval" in text
    assert [s.heading_path for s in split_sections(text)] == [("Travel Policy", "1. Booking")]

    legacy = tmp_path / "legacy.html"
    legacy.write_bytes(
        (
            "<html><body><h1>Richtlinie</h1>"
            + "<p><font face=Arial>Regel." * 1500
            + "<p>Übernachtung bis 150 € pro Nacht.</body></html>"
        ).encode("cp1252")
    )
    text = load_document(legacy).text
    assert text.count("Regel.") == 1500 and "Übernachtung bis 150 € pro Nacht." in text


def test_html_content_markers_and_names_are_trusted_only_so_far(tmp_path) -> None:
    """A "main-content" skip-link anchor holds nothing; a privacy notice's class names its
    content, not a banner; a section's header is the section's; accordion questions are buttons;
    a struck cell is emptied in place; a descendant selector strikes nothing on its own."""
    from ingestion.html_reader import html_to_markdown

    def read(html: str) -> str:
        return html_to_markdown(html.encode("utf-8"))

    text = read(
        '<html><head><title>Travel Policy | Acme</title></head><body><div id="content">'
        '<a id="main-content"></a><h1>Travel Policy</h1><p>Economy class for flights under 6 hours.</p></div>'
    )
    assert "Economy class for flights under 6 hours." in text
    assert "We keep payroll data for 10 years." in read(
        '<div class="gdpr-notice-content"><h1>Privacy Notice</h1><p>We keep payroll data for 10 years.</p></div>'
    )
    text = read(
        "<h1>Leave Policy</h1><section><header><h2>Annual leave</h2><p>Applies to all employees</p></header>"
        "<p>25 days per year.</p></section><h3><button>Can I carry over leave?</button></h3><p>5 days.</p>"
    )
    assert [s.heading_path for s in split_sections(text)] == [
        ("Leave Policy", "Annual leave"),
        ("Leave Policy", "Annual leave", "Can I carry over leave?"),
    ]
    text = read(
        "<style>.expired .effective-date{text-decoration:line-through}</style><h1>Meals</h1>"
        "<p class='effective-date'>Effective 1 January 2026</p><table><tr><th>Item</th><th>Old</th>"
        "<th>Limit</th></tr><tr><td>Meals</td><td style='text-decoration:line-through'>40</td><td>50</td></tr>"
        "</table>"
    )
    assert "Effective 1 January 2026" in text and "| Meals | | 50 |" in text
    assert (
        read(
            "<table><thead><tr><th rowspan='2'>Grade</th><th>Cap</th></tr></thead>"
            "<tbody><tr><td>G1</td><td>100</td></tr></tbody></table>"
        ).count("| G1 | 100 |")
        == 1
    )
    assert "Gültig ab 1. März – 50 €" in html_to_markdown(
        '<meta charset="iso-8859-1"><p>Gültig ab 1. März – 50 €</p>'.encode("cp1252")
    )


def test_html_tables_have_one_header_row_and_one_body() -> None:
    """ "Hotel cap" over "Staff" and "Directors": Markdown has one header row, so each column
    carries both labels, not "Hotel cap" with an empty neighbour and the sub-labels as data."""
    from ingestion.html_reader import html_to_markdown

    text = html_to_markdown(
        b"<h1>Travel</h1><table><thead><tr><th rowspan='2'>Region</th><th colspan='2'>Hotel cap</th></tr>"
        b"<tr><th>Staff</th><th>Directors</th></tr></thead>"
        b"<tbody><tr><td>EU</td><td>150 EUR</td><td>250 EUR</td></tr></tbody></table>"
        b"<table><tr><th>Region</th><th>Meals</th></tr><tr><th>EU</th><td>40 EUR</td></tr></table>"
    )
    assert "| Region | Hotel cap Staff | Hotel cap Directors |\n| --- | --- | --- |\n| EU | 150 EUR | 250 EUR |" in text
    assert "| Region | Meals |\n| --- | --- |\n| EU | 40 EUR |" in text  # a row header under one header row stays data
    # A <tfoot> written before the body is read after it, and no section starts a second table.
    text = html_to_markdown(
        b"<table><thead><tr><th>Item</th><th>Cap</th></tr></thead><tfoot><tr><td>Total</td><td>300</td></tr></tfoot>"
        b"<tbody><tr><td>Hotel</td><td>200</td></tr></tbody><tbody><tr><td>Meals</td><td>100</td></tr></tbody></table>"
    )
    assert text.strip() == "| Item | Cap |\n| --- | --- |\n| Hotel | 200 |\n| Meals | 100 |\n| Total | 300 |"
    # Confluence writes column groups; a caption stays a caption; the header line stays.
    text = html_to_markdown(
        b"<table><caption>Caps</caption><colgroup><col/><col/></colgroup><tbody><tr><th>Item</th><th>Cap</th></tr>"
        b"<tr><td>Hotel</td><td>200</td></tr></tbody><tfoot><tr><td>Total</td><td>300</td></tr></tfoot></table>"
    )
    assert text.strip() == "Caps\n\n| Item | Cap |\n| --- | --- |\n| Hotel | 200 |\n| Total | 300 |"
    # Word splits words into runs; a footnote and an image's alt text are part of a label.
    text = html_to_markdown(
        b"<table><tr><th rowspan=2><b>Reg</b><b>ion</b></th><th colspan=2>Hotel c<span>ap</span><sup>1</sup></th></tr>"
        b"<tr><th><b>Direct</b><b>ors</b></th><th><img alt='Staff'></th></tr><tr><td>EU</td><td>1</td><td>2</td></tr>"
        b"</table>"
    )
    assert "| Region | Hotel cap¹ Directors | Hotel cap¹ Staff |\n| --- | --- | --- |\n| EU | 1 | 2 |" in text
    # A footer of header cells written first, a group's label row in a second <tbody>, an empty
    # <thead>, headings inside header cells: none of them joins or breaks the header.
    text = html_to_markdown(
        b"<table><thead></thead><tfoot><tr><th>Total</th><th>260</th></tr></tfoot><tbody><tr><th>Country</th>"
        b"<th>Per diem</th></tr><tr><td>DE</td><td>60</td></tr></tbody><tbody><tr><th>Asia</th><th>JPY</th></tr>"
        b"<tr><td>JP</td><td>8000</td></tr></tbody></table>"
    )
    assert text.strip() == (
        "| Country | Per diem |\n| --- | --- |\n| DE | 60 |\n| Asia | JPY |\n| JP | 8000 |\n| Total | 260 |"
    )
    text = html_to_markdown(
        b"<table><tr><th rowspan=2><h3>Region</h3></th><th colspan=2><h3>Hotel cap</h3></th></tr>"
        b"<tr><th><h3>Staff</h3></th><th><p>Directors</p></th></tr><tr><td>EU</td><td>1</td>"
        b"<td>2</td></tr></table>"
    )
    assert "| Region | Hotel cap Staff | Hotel cap Directors |" in text
    # Rows of header cells that span no columns are rows ("Sick | 10" under "Leave | Days"); an
    # empty <thead> row is no header.
    text = html_to_markdown(
        b"<table><tbody><tr><th>Leave</th><th>Days</th></tr><tr><th>Sick</th><th>10</th></tr>"
        b"<tr><td>Vacation</td><td>25</td></tr></tbody></table>"
    )
    assert "| Leave | Days |\n| --- | --- |\n| Sick | 10 |\n| Vacation | 25 |" in text
    text = html_to_markdown(
        b"<table><thead><tr><th></th></tr></thead><tbody><tr><th>Item</th><th>Cap</th></tr>"
        b"<tr><td>Hotel</td><td>200</td></tr></tbody><tfoot><tr><td>Total</td><td>200</td></tr>"
        b"</tfoot></table>"
    )
    assert text.strip() == "| Item | Cap |\n| --- | --- |\n| Hotel | 200 |\n| Total | 200 |"
    # A group label under the header ("Europe") is no header row.
    text = html_to_markdown(
        b"<table><tr><th>Region</th><th>Cap</th></tr><tr><th colspan=2>Europe</th></tr>"
        b"<tr><td>Germany</td><td>150</td></tr></table>"
    )
    assert "| Region | Cap |\n| --- | --- |\n| Europe | |\n| Germany | 150 |" in text


def test_html_tables_as_word_processors_and_editors_write_them() -> None:
    """Pretty-printed rows, LibreOffice's <col> elements before the first row, a caption, no
    header cells at all: one Markdown table headed by its first row, each row on one line."""
    from ingestion.html_reader import html_to_markdown

    libreoffice = b"""<h2 class="western">Hotel caps</h2>
<table width="100%" cellpadding="4" cellspacing="0">
	<col width="128*"/>
	<col width="128*"/>
	<tr valign="top">
		<td width="50%" style="border: 1px solid #000000"><p>Grade</p></td>
		<td width="50%" style="border: 1px solid #000000"><p>Hotel cap per night</p></td>
	</tr>
	<tr valign="top">
		<td width="50%"><p>Staff</p></td>
		<td width="50%"><p>$200</p></td>
	</tr>
</table>
<p>Receipts are required.</p>"""
    table = "| Grade | Hotel cap per night |\n| --- | --- |\n| Staff | $200 |\n"
    assert table + "\nReceipts are required." in html_to_markdown(libreoffice)
    indented = b"""<table>
  <caption>Caps</caption>
  <thead>
    <tr>
      <th>Grade</th>
      <th>Cap</th>
    </tr>
  </thead>
  <tbody>
    <tr>
      <td rowspan="2">Staff</td>
      <td>$200</td>
    </tr>
    <tr>
      <td>$250</td>
    </tr>
  </tbody>
</table>"""
    assert (
        html_to_markdown(indented).strip()
        == "Caps\n\n| Grade | Cap |\n| --- | --- |\n| Staff | $200 |\n| Staff | $250 |"
    )
    # A caption is a paragraph of its own, wherever the table stands.
    assert "See the rates below\n\nRates 2026\n\n| A | B |" in html_to_markdown(
        b"<div>See the rates below<table><caption>Rates 2026</caption><tr><th>A</th><th>B</th></tr>"
        b"<tr><td>1</td><td>2</td></tr></table></div>"
    )


def test_an_html_table_headed_down_its_first_column_is_not_headed_by_its_first_row() -> None:
    """Row headers (<th> opening every row) and no header row: an empty header, so a long
    table's chunks do not repeat the first rule over the others. A table with a header row
    over row headers keeps it."""
    from ingestion.html_reader import html_to_markdown

    row_headed = (
        b"<table><tbody><tr><th scope='row'>Sick leave</th><td>10 days</td></tr>"
        b"<tr><th scope='row'>Vacation</th><td>20 days</td></tr></tbody></table>"
    )
    assert (
        html_to_markdown(row_headed).strip() == "| | |\n| --- | --- |\n| Sick leave | 10 days |\n| Vacation | 20 days |"
    )
    both = b"<table><tr><th>Leave</th><th>Days</th></tr><tr><th>Sick leave</th><td>10</td></tr></table>"
    assert html_to_markdown(both).strip() == "| Leave | Days |\n| --- | --- |\n| Sick leave | 10 |"
    # Cut into chunks, a long one keeps its empty header: no chunk is headed by the first rule.
    from crag.evaluator import minilm_folder
    from ingestion.chunking import chunk_markdown, word_piece_counter

    long_table = (
        b"<h1>Leave</h1><table>"
        + b"".join(
            f"<tr><th>Leave kind {i}</th><td>{i + 1} days a year, asked for in the HR portal</td></tr>".encode()
            for i in range(60)
        )
        + b"</table>"
    )
    chunks = chunk_markdown(html_to_markdown(long_table), word_piece_counter(str(minilm_folder())))
    assert len(chunks) > 1
    for chunk in chunks:
        table = [line for line in chunk.text.split("\n") if line.startswith("|")]
        assert table[:2] == ["| | |", "| --- | --- |"], chunk.text
    assert sum(chunk.text.count("| Leave kind 0 |") for chunk in chunks) == 1


def test_html_keeps_what_names_itself_furniture_but_is_policy(tmp_path) -> None:
    """A policy header with its effective date, tab labels, a sidebar of key limits, a second
    <main>: policy text, kept. Link menus still go. Undeclared non-Western pages get detected."""
    from ingestion.html_reader import html_to_markdown

    def read(html: str, encoding: str = "utf-8") -> str:
        return html_to_markdown(html.encode(encoding))

    text = read(
        "<header><h1>Remote Work Policy</h1><p>Version 3, effective 2026-03-01</p></header><main>"
        "<h2>Eligibility</h2><p>All staff after probation may work remotely two days a week, agreed "
        "with their manager in advance.</p></main>"
    )
    assert "Version 3, effective 2026-03-01" in text and first_title(text) == "Remote Work Policy"
    text = read(
        "<h1>Leave</h1><ul class='nav nav-tabs'><li><a href='#de'>Germany</a></li><li><a href='#fr'>France</a>"
        "</li></ul><div>30 days in Germany.</div><div class='sidebar'><p>Key limits: hotel 180 EUR a night."
        "</p></div><div id='topnav'><a href='/'>Home</a> <a href='/hr'>HR</a></div>"
    )
    assert "- Germany" in text and "Key limits: hotel 180 EUR a night." in text and "Home" not in text
    text = read(
        "<main><h1>Annual leave</h1><p>25 days for all staff, carried over until March.</p></main>"
        "<main><h2>Sick leave</h2><p>10 days paid.</p></main>"
    )
    assert "10 days paid." in text
    assert "Сотрудники получают 28 дней отпуска." in read(
        "<h1>Отпуск</h1><p>Сотрудники получают 28 дней отпуска.</p>", "cp1251"
    )
    assert "25 days." in read("<h1>Leave</h1><p>25 days.</p>", "utf-16-le")
    assert "Manager approves\n\nFinance pays" in read(
        "<h1>Flow</h1><svg><text x='1'>Manager approves</text><text>Finance pays</text></svg>"
    )


@pytest.mark.timeout(60)  # the first rewrite took minutes here: a hang, not a speed target
def test_html_nested_ten_thousand_deep_is_read() -> None:
    from ingestion.html_reader import html_to_markdown

    text = html_to_markdown(("<html><body><h1>Rules</h1>" + "<div>Rule. " * 10_000 + "</body></html>").encode())
    assert text.count("Rule.") == 10_000


@pytest.mark.timeout(30)  # the old pattern took minutes on this input: a hang, not a speed target
def test_markdown_drafts_struck_text_and_unclosed_inline_svg(tmp_path) -> None:
    path = tmp_path / "expenses.md"
    svg = "![Approval flow](data:image/svg+xml;utf8,<svg " + " ".join(f'a{i}="{i}"' for i in range(30))
    path.write_text(
        "# Expense Policy\n\n## Meals\n\nMeals: ~~50~~ 75 EUR a day, <del>taxis</del> trains.\n\n"
        "<!--\n## Draft section (not approved)\nMeals up to 100 EUR.\n-->\n\n"
        f"{svg}\n\nClaims over 500 EUR need approval.\n\n```\n<!-- kept in code -->\n```\n",
        encoding="utf-8",
    )
    text = load_document(path).text
    assert "Meals: 75 EUR a day, trains." in text.replace("  ", " ")
    assert "Draft" not in text and "100 EUR" not in text and "<!-- kept in code -->" in text
    assert "Claims over 500 EUR need approval." in text
    assert [s.heading_path for s in split_sections(text)] == [("Expense Policy", "Meals")]


def test_a_long_table_is_chunked_between_rows_under_its_header() -> None:
    """Every chunk of a 60-row rate table says which column a number is in."""
    from crag.evaluator import minilm_folder
    from ingestion.chunking import chunk_markdown, word_piece_counter

    rows = "\n".join(f"| City{i} | {100 + i} | {40 + i} |" for i in range(60))
    markdown = (
        "# Per Diem\n\nRates by city:\n\n| City | Hotel cap EUR | Meals EUR |\n| --- | --- | --- |\n"
        f"{rows}\n\nAfter the table.\n"
    )
    chunks = chunk_markdown(markdown, word_piece_counter(str(minilm_folder())))
    assert len(chunks) > 1
    for chunk in chunks:
        table = [line for line in chunk.text.split("\n") if line.startswith("|")]
        assert table[:2] == ["| City | Hotel cap EUR | Meals EUR |", "| --- | --- | --- |"], chunk.text
        assert all(re.fullmatch(r"\| City(\d+) \| 1\d\d \| \d+ \|", row) for row in table[2:]), chunk.text
    assert sum(len(re.findall(r"^\| City\d+ ", c.text, re.M)) for c in chunks) == 60


def test_html_keeps_every_block_of_text_once(tmp_path) -> None:
    """Confluence-style exports: text in divs and definition lists, nested lists, tables."""
    path = tmp_path / "expenses.html"
    path.write_text(
        "<html><head><title>Expenses</title></head><body><h1>Expenses</h1><div>Claims are paid monthly.</div>"
        "<ul><li>Outer rule<ul><li>Inner rule</li></ul></li></ul><dl><dt>PTO</dt><dd>25 days</dd></dl>"
        "<h2>Limits</h2><table><tr><th>Item</th><th>Limit</th></tr><tr><td><p>Hotel</p></td><td>200 USD</td></tr></table>"
        "<script>var secret = 1;</script></body></html>"
    )
    text = load_document(path).text
    for phrase in (
        "Claims are paid monthly.",
        "Outer rule",
        "Inner rule",
        "PTO",
        "25 days",
        "| Item | Limit |",
        "| Hotel | 200 USD |",
    ):
        assert text.count(phrase) == 1, (phrase, text)
    assert "secret" not in text
    assert [s.heading_path for s in split_sections(text)] == [("Expenses",), ("Expenses", "Limits")]


def test_pdf_running_headers_footers_and_page_numbers_are_not_headings(tmp_path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pages = [
        ("Leave Policy", "1. Sick Leave", "Employees get 10 sick days."),
        (None, "2. Vacation", "Employees get 25 vacation days."),
        (None, "3. Parental Leave", "Primary caregivers get 16 weeks."),
    ]
    for number, (title, heading, body) in enumerate(pages, start=1):
        pdf.add_page()
        pdf.cell(0, 8, "Acme Corp Confidential", new_x="LMARGIN", new_y="NEXT")
        for line in (title, heading, body):
            if line:
                pdf.cell(0, 8, line, new_x="LMARGIN", new_y="NEXT")
        pdf.set_y(-20)
        pdf.cell(0, 8, f"Page {number} of 3")
    path = tmp_path / "leave.pdf"
    pdf.output(str(path))
    text = load_document(path).text
    # Page 1's banner stays (at the top of a first page it is usually the title); its repeats
    # and the page numbers go, so they never become the section of what follows them.
    assert text.count("Acme Corp Confidential") == 1 and "Page" not in text
    assert [s.heading_path[-1] for s in split_sections(text)] == [
        "Leave Policy",
        "1. Sick Leave",
        "2. Vacation",
        "3. Parental Leave",
    ]


def test_pdf_heading_after_a_list_does_not_join_its_last_item(tmp_path) -> None:
    """ "- Meals" then "Non-Reimbursable Items": joined, the item would read as never reimbursed."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    for line in (
        "Expense Policy",
        "Reimbursable items include",
        "- Taxis",
        "- Meals",
        "Non-Reimbursable Items",
        "Alcohol is never reimbursed.",
    ):
        pdf.cell(0, 8, line, new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "expenses.pdf"
    pdf.output(str(path))
    sections = split_sections(load_document(path).text)
    assert [(s.heading_path[-1], s.body.splitlines()[-1]) for s in sections] == [
        ("Expense Policy", "- Meals"),
        ("Non-Reimbursable Items", "Alcohol is never reimbursed."),
    ]


def test_pdf_words_hyphenated_at_line_ends_are_joined(tmp_path) -> None:
    """ "reim-" / "bursed" must read "reimbursed" (search and the evaluator never match
    "reim- bursed"); a compound cut at its own hyphen keeps it: "part-time"; a suspended hyphen
    ("Pre- and post-trip") keeps its space; the document's own spelling elsewhere decides first
    ("onboarding"), and a line start that is no word ("ⓐ") leaves the break alone."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    for line in (
        "Expense Policy",
        "Claims must be reim-",
        "bursed within 30 days. Part-",
        "time staff and self-",
        "employed contractors are covered. Travel ex-",
        "penses over 500-",
        "EUR need approval. Ask HR-",
        "Ops first. Pre-",
        "and post-trip approvals apply to full-",
        "and/or part-time staff. Hotel-",
        "und Flugkosten. The fee is pay-",
        "able with per-",
        "mission of the on-",
        "boarding team.",
        "We mean onboarding.",
    ):
        pdf.cell(0, 8, line, new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "expenses.pdf"
    pdf.output(str(path))
    text = load_document(path).text
    assert (
        "Claims must be reimbursed within 30 days. Part-time staff and self-employed contractors are "
        "covered. Travel expenses over 500- EUR need approval. Ask HR- Ops first. Pre- and post-trip approvals "
        "apply to full- and/or part-time staff. Hotel- und Flugkosten. The fee is payable with permission of the "
        "onboarding team."
    ) in text, text
    from ingestion.loaders import _reflow_pdf_lines

    # A line that opens with a lowercase letter that is no word character must not fail the file.
    assert _reflow_pdf_lines("Gifts are non-\n\u24d0 listed below.") == "Gifts are non- \u24d0 listed below."


def test_ligatures_and_invisible_break_hints_are_read_as_plain_letters(tmp_path) -> None:
    path = tmp_path / "finance.txt"
    path.write_text(
        "Finance Policy\n\nThe \ufb01nance team con\ufb01rms o\ufb00sites; reim\u00adbursement takes\u200b 5 days.\n",
        encoding="utf-8",
    )
    text = load_document(path).text
    assert "The finance team confirms offsites; reimbursement takes 5 days." in text, text


def test_docx_heading_styles_lists_and_tables(tmp_path) -> None:
    """Word's styles carry the structure: heading levels nest, list items stay items, table
    cells stay cells (short Title-Case cells are not headings), and text in a content
    control is kept. The running header is page furniture."""
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    document = docx.Document()
    document.sections[0].header.paragraphs[0].text = "Acme Corp Confidential"
    document.add_heading("Travel Policy", level=0)
    document.add_heading("Hotels", level=1)
    document.add_heading("Conference Hotels", level=2)
    document.add_paragraph("The conference hotel may be booked at any rate.")
    document.add_heading("Meals", level=1)
    document.add_paragraph("Reimbursable meals include", style="Normal")
    document.add_paragraph("Client Dinners", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    for (row, column), value in {
        (0, 0): "Role",
        (0, 1): "Daily Limit",
        (1, 0): "Senior Staff",
        (1, 1): "75 USD",
    }.items():
        table.cell(row, column).text = value
    document.element.body.append(
        parse_xml(
            f"<w:sdt {nsdecls('w')}><w:sdtContent><w:p><w:r><w:t>Alcohol is never reimbursed.</w:t></w:r></w:p>"
            "</w:sdtContent></w:sdt>"
        )
    )
    path = tmp_path / "travel.docx"
    document.save(str(path))

    loaded = load_document(path)
    assert loaded.title == "Travel Policy"
    assert "Acme Corp Confidential" not in loaded.text
    assert "- Client Dinners" in loaded.text
    assert "| Role | Daily Limit |" in loaded.text and "| Senior Staff | 75 USD |" in loaded.text
    sections = split_sections(loaded.text)
    assert [s.heading_path for s in sections] == [
        ("Travel Policy", "Hotels", "Conference Hotels"),
        ("Travel Policy", "Meals"),
    ]
    assert sections[-1].body.endswith("Alcohol is never reimbursed.")


W_NS = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def test_docx_text_in_word_wrappers_is_read_once(tmp_path) -> None:
    """Tracked insertions, inline content controls, fields, smart tags and text boxes hold text
    that python-docx's Paragraph.text skips; deleted text and a drawing's fallback copy are not
    part of the document."""
    import docx
    from docx.oxml import parse_xml

    mc = 'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
    paragraphs = [
        f'<w:p {W_NS}><w:r><w:t xml:space="preserve">Economy class is required. </w:t></w:r>'
        '<w:ins w:id="1" w:author="a"><w:r><w:t>Flights over 6 hours may be booked in business class.</w:t></w:r></w:ins>'
        '<w:del w:id="2" w:author="a"><w:r><w:delText>Never business.</w:delText></w:r></w:del></w:p>',
        f'<w:p {W_NS}><w:r><w:t xml:space="preserve">Employees get </w:t></w:r><w:sdt><w:sdtContent><w:r><w:t>25</w:t></w:r>'
        '</w:sdtContent></w:sdt><w:r><w:t xml:space="preserve"> days of leave.</w:t></w:r></w:p>',
        f'<w:p {W_NS}><w:r><w:t xml:space="preserve">Send claims to </w:t></w:r><w:fldSimple w:instr="MERGEFIELD email">'
        '<w:r><w:t>expenses@example.com</w:t></w:r></w:fldSimple><w:r><w:t xml:space="preserve"> within 30 days.</w:t></w:r></w:p>',
        f'<w:p {W_NS} {mc}><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><w:txbxContent><w:p><w:r>'
        "<w:t>Report lost laptops within 24 hours.</w:t></w:r></w:p></w:txbxContent></w:drawing></mc:Choice><mc:Fallback>"
        "<w:pict><w:txbxContent><w:p><w:r><w:t>Report lost laptops within 24 hours.</w:t></w:r></w:p></w:txbxContent>"
        "</w:pict></mc:Fallback></mc:AlternateContent></w:r></w:p>",
    ]
    document = docx.Document()
    document.add_heading("Travel Policy", level=1)
    for xml in paragraphs:
        document.element.body.append(parse_xml(xml))
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text, table.cell(1, 0).text = "Item", "Limit", "Meals"
    table.cell(1, 1)._tc.append(
        parse_xml(f"<w:sdt {W_NS}><w:sdtContent><w:p><w:r><w:t>50 EUR</w:t></w:r></w:p></w:sdtContent></w:sdt>")
    )
    document.element.body.append(document.element.body.sectPr)  # the section properties stay last
    path = tmp_path / "travel.docx"
    document.save(str(path))
    text = load_document(path).text
    for sentence in (
        "Economy class is required. Flights over 6 hours may be booked in business class.",
        "Employees get 25 days of leave.",
        "Send claims to expenses@example.com within 30 days.",
        "Report lost laptops within 24 hours.",
        "| Meals | 50 EUR |",
    ):
        assert text.count(sentence) == 1, (sentence, text)
    assert "Never business" not in text


def test_docx_tracked_blocks_and_symbol_font_characters(tmp_path) -> None:
    """Paragraphs inside a block-level tracked insertion or move are the document's, deleted and
    moved-from ones are not; Insert Symbol characters (w:sym) keep their meaning: "≥ 500 EUR"
    must not read "500 EUR"."""
    import docx
    from docx.oxml import parse_xml

    def sym(font: str, char: str) -> str:
        return f'<w:r><w:sym w:font="{font}" w:char="{char}"/></w:r>'

    def run(text: str) -> str:
        return f'<w:r><w:t xml:space="preserve">{text}</w:t></w:r>'

    document = docx.Document()
    document.add_heading("Approvals", level=1)
    for xml in (
        f'<w:ins {W_NS} w:id="1" w:author="a"><w:p>{run("Hotels need a quote.")}</w:p></w:ins>',
        f'<w:del {W_NS} w:id="2" w:author="a"><w:p>{run("Hotels are free.")}</w:p></w:del>',
        f'<w:moveTo {W_NS} w:id="3" w:author="a"><w:p>{run("Taxis need a receipt.")}</w:p></w:moveTo>',
        f'<w:moveFrom {W_NS} w:id="4" w:author="a"><w:p>{run("Taxis need a receipt.")}</w:p></w:moveFrom>',
        f"<w:p {W_NS}>{run('Claims ')}{sym('Symbol', 'F0B3')}{run(' 500 EUR need approval; claims ')}"
        f"{sym('Symbol', 'B3')}{run(' 5 days old need a reason; ')}{sym('Cambria Math', '2264')}"
        f"{run(' 20 ')}{sym('Symbol', 'F06D')}{run('g of caffeine.')}</w:p>",
        f"<w:p {W_NS}>{sym('Wingdings', 'F0A7')}{run(' Receipt attached ')}{sym('Wingdings', 'F0FC')}"
        f"{run(' Manager signed ')}{sym('Wingdings 2', 'F050')}{run(' Budget code ')}{sym('Wingdings', 'F0FB')}"
        f"{run(' Alcohol ')}{sym('Wingdings 2', 'F054')}{run(' Gifts ')}{sym('ZapfDingbats', 'F033')}</w:p>",
        # A deleted symbol has no deleted form (unlike w:delText); fonts named as PDF converters
        # write them; broken codes are skipped, not fatal.
        f'<w:p {W_NS}>{run("Meals ")}<w:del w:id="5" w:author="a">{sym("Symbol", "F0B3")}</w:del>'
        f'<w:ins w:id="6" w:author="a">{sym("SymbolMT", "F0A3")}</w:ins>{run(" ")}{sym("Symbol MT", "F0A0")}'
        f"{run('60 a day')}{sym('Arial', 'FFFFFFF')}{sym('Arial', 'D800')}{sym('Mystery Font', 'F0B3')}"
        f"{sym('Arial', '00E9')}{run('.')}</w:p>",
    ):
        document.element.body.append(parse_xml(xml))
    document.element.body.append(document.element.body.sectPr)
    path = tmp_path / "approvals.docx"
    document.save(str(path))
    text = load_document(path).text
    assert text.count("Hotels need a quote.") == 1 and text.count("Taxis need a receipt.") == 1, text
    assert "Hotels are free" not in text
    assert "Claims ≥ 500 EUR need approval; claims ≥ 5 days old need a reason; ≤ 20 μg of caffeine." in text, text
    assert "Receipt attached ✓ Manager signed ✓ Budget code ✗ Alcohol ☒ Gifts ✓" in text, text
    assert "Meals ≤ €60 a dayé." in text, text
    assert not any(0xE000 <= ord(c) <= 0xF8FF for c in text)


def test_docx_merged_cells_placeholders_numbering_and_second_titles(tmp_path) -> None:
    import docx
    from docx.oxml import parse_xml

    document = docx.Document()
    document.add_heading("Code of Conduct", level=0)
    document.add_heading("and Ethics Guide", level=0)
    numbered = '<w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr>'
    for xml in (
        f"<w:p {W_NS}>{numbered}<w:r><w:t>Gifts and Hospitality</w:t></w:r></w:p>",
        f"<w:p {W_NS}><w:r><w:t>Declare gifts over 50 EUR.</w:t></w:r></w:p>",
        f'<w:p {W_NS}><w:r><w:t xml:space="preserve">Owner: </w:t></w:r><w:sdt><w:sdtPr><w:showingPlcHdr/></w:sdtPr>'
        "<w:sdtContent><w:r><w:t>Click or tap here to enter text.</w:t></w:r></w:sdtContent></w:sdt></w:p>",
        f'<w:p {W_NS}><w:r><w:t>Name</w:t></w:r><w:r><w:ptab w:relativeTo="margin" w:alignment="right" '
        'w:leader="none"/></w:r><w:r><w:t>Value</w:t></w:r></w:p>',
        f"<w:p {W_NS}><w:r><w:ruby><w:rubyPr/><w:rt><w:r><w:t>kanji</w:t></w:r></w:rt><w:rubyBase><w:r>"
        "<w:t>漢字</w:t></w:r></w:rubyBase></w:ruby></w:r></w:p>",
    ):
        document.element.body.append(parse_xml(xml))
    table = document.add_table(rows=3, cols=3)
    for (row, column), value in {
        (0, 0): "Category",
        (0, 1): "Item",
        (0, 2): "Limit",
        (1, 0): "Travel",
        (1, 1): "Meals",
        (1, 2): "60 EUR",
        (2, 1): "Taxis",
        (2, 2): "40 EUR",
    }.items():
        table.cell(row, column).text = value
    table.cell(1, 0).merge(table.cell(2, 0))
    document.element.body.append(document.element.body.sectPr)
    path = tmp_path / "conduct.docx"
    document.save(str(path))
    text = load_document(path).text
    assert "and Ethics Guide" in text
    assert "Click or tap" not in text and "Name Value" in text and "漢字" in text and "kanji" not in text
    assert "| Travel | Taxis | 40 EUR |" in text
    sections = split_sections(text)
    assert ("Code of Conduct", "Gifts and Hospitality") in [s.heading_path for s in sections]


def test_docx_numbered_normal_paragraphs_next_to_each_other_are_a_list(tmp_path) -> None:
    import docx
    from docx.oxml import parse_xml

    numbered = '<w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr>'
    document = docx.Document()
    document.add_heading("Expenses", level=1)
    for line, is_numbered in (
        ("We reimburse:", False),
        ("Flights", True),
        ("Hotels", True),
        ("Meals", True),
        ("Receipts are required for every claim.", False),
    ):
        document.element.body.append(
            parse_xml(f"<w:p {W_NS}>{numbered if is_numbered else ''}<w:r><w:t>{line}</w:t></w:r></w:p>")
        )
    document.element.body.append(
        parse_xml(
            f'<w:p {W_NS}><w:sdt><w:sdtPr><w:showingPlcHdr w:val="false"/></w:sdtPr><w:sdtContent><w:r>'
            "<w:t>Employees get 25 days.</w:t></w:r></w:sdtContent></w:sdt></w:p>"
        )
    )
    document.element.body.append(document.element.body.sectPr)
    path = tmp_path / "expenses.docx"
    document.save(str(path))
    text = load_document(path).text
    assert "- Flights\n\n- Hotels\n\n- Meals" in text and "Employees get 25 days." in text
    assert [s.heading_path for s in split_sections(text)] == [("Expenses",)]


def test_docx_numbered_headings_over_numbered_subheadings_stay_headings(tmp_path) -> None:
    import docx
    from docx.oxml import parse_xml

    def numbered(text: str, level: int) -> str:
        return (
            f'<w:p {W_NS}><w:pPr><w:numPr><w:ilvl w:val="{level}"/><w:numId w:val="3"/></w:numPr></w:pPr>'
            f"<w:r><w:t>{text}</w:t></w:r></w:p>"
        )

    document = docx.Document()
    document.add_heading("Leave Policy", level=0)
    for xml in (
        numbered("Annual Leave", 0),
        numbered("Entitlement", 1),
        f"<w:p {W_NS}><w:r><w:t>25 days.</w:t></w:r></w:p>",
        numbered("Sick Leave", 0),
        numbered("Notification", 1),
        f"<w:p {W_NS}><w:r><w:t>Tell your manager before 10:00.</w:t></w:r></w:p>",
    ):
        document.element.body.append(parse_xml(xml))
    document.element.body.append(document.element.body.sectPr)
    path = tmp_path / "leave.docx"
    document.save(str(path))
    sections = split_sections(load_document(path).text)
    assert sections[-1].heading_path[-1] == "Notification" and sections[-1].body == "Tell your manager before 10:00."


def test_docx_styles_based_on_each_other_in_a_loop_still_load(tmp_path) -> None:
    import docx
    from docx.enum.style import WD_STYLE_TYPE

    document = docx.Document()
    first = document.styles.add_style("Policy A", WD_STYLE_TYPE.PARAGRAPH)
    second = document.styles.add_style("Policy B", WD_STYLE_TYPE.PARAGRAPH)
    first.base_style, second.base_style = second, first
    document.add_paragraph("Leave Policy")
    document.add_paragraph("Employees get 25 days.", style="Policy A")
    path = tmp_path / "loop.docx"
    document.save(str(path))
    assert "Employees get 25 days." in load_document(path).text


def test_docx_with_only_a_title_style_still_finds_typed_headings(tmp_path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Expense Policy", level=0)
    for line in ("1 Meals", "Dinners up to 50 EUR.", "2 Hotels", "Up to 200 EUR per night."):
        document.add_paragraph(line)
    path = tmp_path / "expenses.docx"
    document.save(str(path))
    assert [s.heading_path for s in split_sections(load_document(path).text)] == [
        ("Expense Policy", "1 Meals"),
        ("Expense Policy", "2 Hotels"),
    ]


def test_docx_without_heading_styles_still_finds_typed_headings(tmp_path) -> None:
    import docx

    document = docx.Document()
    for line in (
        "Leave Policy",
        "Sick Leave",
        "Employees get 10 sick days.",
        "Parental Leave",
        "Primary caregivers get 16 weeks.",
    ):
        document.add_paragraph(line)
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Carry Over", "Five Days"
    path = tmp_path / "leave.docx"
    document.save(str(path))
    sections = split_sections(load_document(path).text)
    assert [s.heading_path for s in sections] == [("Leave Policy", "Sick Leave"), ("Leave Policy", "Parental Leave")]
    assert sections[-1].body.splitlines()[-1] == "| Carry Over | Five Days |"


@pytest.mark.parametrize("suffix", [".md", ".txt"])
def test_a_byte_order_mark_does_not_hide_the_first_heading(tmp_path, suffix: str) -> None:
    path = tmp_path / f"leave{suffix}"
    path.write_bytes("\ufeff# Leave Policy\n\nEmployees get 25 days.\n".encode())
    document = load_document(path)
    assert document.title == "Leave Policy" and "\ufeff" not in document.text
    assert split_sections(document.text)[0].heading_path == ("Leave Policy",)


@pytest.mark.parametrize(
    ("question", "document", "phrase"),
    [
        (
            "How long do I have to submit expenses after a domestic business trip?",
            "travel-expenses.md",
            "30 calendar days",
        ),
        ("How many weeks of parental leave does a primary caregiver get?", "leave-policy.md", "16 weeks"),
        ("How long must my company account password be?", "devices-security.pdf", "14 characters"),
    ],
)
def test_similarity_query_returns_the_right_chunk(settings, ingested_samples, question, document, phrase):
    passages = ChunkRetriever(settings, ["policies"]).retrieve(question, top_k=3)
    assert passages, "nothing retrieved"
    assert any(p.document == document and phrase in p.text for p in passages), [
        (p.document, p.text[:60]) for p in passages
    ]


def test_training_reads_the_chunks_in_document_order_not_by_their_path_hashed_ids(settings, ingested_samples):
    """Chunk ids hash the file's path; the evaluator's training data must not depend on where
    the same documents were ingested from, so the corpus comes in document order."""
    from policybot.evaluators import corpus_chunks

    chunks = [chunk for chunk in corpus_chunks(settings) if chunk.document == "leave-policy.md"]
    assert len(chunks) > 3
    with db.session(settings) as session:
        table = chunk_table(settings.embed_dim)
        position = dict(session.execute(select(table.c.node_id, table.c.metadata_["position"].as_integer())).all())
    assert [position[chunk.id] for chunk in chunks] == sorted(position[chunk.id] for chunk in chunks)


def test_access_list_hides_documents_from_other_channels(settings, tmp_path):
    path = tmp_path / "secret.md"
    path.write_text("# Exec Offsite\n\n## Venue\n\nThe executive offsite venue is the Lakeview Lodge in Tahoe.\n")
    ingest_paths(settings, [path], collection="restricted", access_channels=["C0EXEC"])
    question = "Where is the executive offsite venue?"
    assert ChunkRetriever(settings, ["restricted"], channel="C0EXEC").retrieve(question, 3)
    assert ChunkRetriever(settings, ["restricted"], channel="C0OTHER").retrieve(question, 3) == []
    assert ChunkRetriever(settings, ["restricted"]).retrieve(question, 3) == []


def test_filter_values_cannot_inject_sql(settings):
    with pytest.raises(ValueError):
        ChunkRetriever(settings, ["policies') OR ('1'='1"]).retrieve("anything", 3)
    with pytest.raises(ValueError):
        ChunkRetriever(settings, ["policies"], channel="C1' OR '1'='1").retrieve("anything", 3)


def test_embedded_stack_survives_down_and_up(tmp_path, monkeypatch):
    from policybot.config import Settings

    own = Settings(POLICYBOT_HOME=tmp_path / "home", POLICYBOT_REDIS_PORT=6392)
    try:
        services.services_up(own)
        url = services.database_url(own).replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("CREATE TABLE keepsake (note text)")
            connection.execute("INSERT INTO keepsake VALUES ('still here')")
        import redis

        redis.Redis.from_url(services.redis_url(own)).set("keepsake", "queued")
        assert set(services.services_down(own)) == {"postgres", "redis"}
        assert not any(status.running for status in services.services_status(own))
        services.services_up(own)
        assert all(status.running for status in services.services_status(own))
        with psycopg.connect(
            services.database_url(own).replace("postgresql+psycopg://", "postgresql://")
        ) as connection:
            assert connection.execute("SELECT note FROM keepsake").fetchone() == ("still here",)
        assert redis.Redis.from_url(services.redis_url(own)).get("keepsake") == b"queued"
    finally:
        services.services_down(own)


def test_celery_configuration_loads_once_for_threads_that_enqueue_at_once() -> None:
    """Plain Celery lets a second thread read its half-built configuration (no broker_url,
    so a task goes to the default broker and is lost); ours makes it wait for the load."""
    import threading
    import time

    from celery import Celery

    from workers.celery_app import ThreadSafeCelery

    def brokers_seen(app_class: type[Celery]) -> list[str | None]:
        app = app_class("race")
        app.add_defaults(lambda: time.sleep(0.5) or {"broker_url": "memory://"})  # like starting Redis
        seen: list[str | None] = []
        threads = [threading.Thread(target=lambda: seen.append(app.conf.broker_url)) for _ in range(4)]
        for thread in threads:
            thread.start()
            time.sleep(0.05)
        for thread in threads:
            thread.join()
        return seen

    assert None in brokers_seen(Celery)  # the race this guards against, still in Celery
    assert brokers_seen(ThreadSafeCelery) == ["memory://"] * 4


def test_settings_never_show_a_secret_in_repr_str_or_dumps(tmp_path) -> None:
    from policybot.config import Settings

    values = {
        "DATABASE_URL": "postgresql://policybot:db-pass-4s3cr3t@db:5432/policybot",
        "REDIS_URL": "redis://:redis-pass-4s3cr3t@redis:6379/0",
        "POLICYBOT_CORPUS_DATABASE_URL": "postgresql://policybot:corpus-pass-4s3cr3t@db:5432/corpus",
        "POLICYBOT_GENERATOR_API_KEY": "sk-generator-4s3cr3t",
        "SLACK_BOT_TOKEN": "xoxb-bot-4s3cr3t",
        "SLACK_SIGNING_SECRET": "signing-4s3cr3t",
        "SLACK_APP_TOKEN": "xapp-app-4s3cr3t",
        "POLICYBOT_CONSOLE_SECRET": "console-4s3cr3t-" + "x" * 32,
        "POLICYBOT_CONSOLE_USERS": "ada:" + _PASSWORD_HASH,
    }
    settings = Settings(POLICYBOT_HOME=tmp_path, **values)
    for shown in (repr(settings), str(settings), settings.model_dump_json(), str(settings.model_dump())):
        assert "4s3cr3t" not in shown and _PASSWORD_HASH not in shown, shown
    # The values are still there for the calls that need them.
    assert settings.redis_url is not None and settings.redis_url.get_secret_value() == values["REDIS_URL"]
    assert settings.console_accounts == {"ada": _PASSWORD_HASH}
    # An empty value is unset, as before.
    assert Settings(POLICYBOT_HOME=tmp_path, SLACK_BOT_TOKEN="", DATABASE_URL="").slack_bot_token is None


# A valid scrypt hash (N=2, the smallest the parser takes): only its shape matters here.
_PASSWORD_HASH = "scrypt$2$8$1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2g"


def test_the_leak_check_names_a_logged_secret_and_one_in_a_log_file(tmp_path) -> None:
    import logging

    from leak_check import SecretLeakCheck

    check = SecretLeakCheck(lambda: {"SLACK_BOT_TOKEN": "xoxb-leaked-value"})
    logger = logging.getLogger("policybot.leak_check_test")
    logger.addHandler(check)
    logger.setLevel(logging.DEBUG)
    try:
        logger.debug("calling Slack with %s", "a masked token ***")
        assert check.leaks == []
        logger.debug("calling Slack with %s", "xoxb-leaked-value")
        try:
            raise RuntimeError("token xoxb-leaked-value refused")
        except RuntimeError:
            logger.exception("Slack failed")  # only the traceback holds it
    finally:
        logger.removeHandler(check)
    (tmp_path / "worker.log").write_text("INFO connected with xoxb-leaked-value\n")
    (tmp_path / "notes.txt").write_text("xoxb-leaked-value")  # not a log file
    check.check_files(tmp_path)
    assert check.leaks == ["SLACK_BOT_TOKEN in a log record of 'policybot.leak_check_test'"] * 2 + [
        f"SLACK_BOT_TOKEN in {tmp_path / 'worker.log'}"
    ]
    assert all("xoxb-leaked-value" not in leak for leak in check.leaks)


def test_the_embedded_redis_takes_only_its_homes_password_on_loopback(tmp_path, monkeypatch) -> None:
    import stat
    import subprocess

    import redis

    from policybot.config import Settings

    from slack_helpers import wait_until

    monkeypatch.delenv("POLICYBOT_REDIS_PORT", raising=False)
    own = Settings(POLICYBOT_HOME=tmp_path / "home")
    folder = own.home / "redis"
    # A Redis of this home started by an older policybot, without a password, on the home's port.
    folder.mkdir(parents=True)
    port = services._free_port()
    (folder / "port").write_text(f"{port}\n")
    subprocess.run(
        [
            services.find_redis_server(),
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--dir",
            str(folder),
            "--daemonize",
            "yes",
            "--pidfile",
            str(folder / "redis.pid"),
            "--logfile",
            str(folder / "redis.log"),
        ],
        check=True,
    )
    unprotected = f"redis://127.0.0.1:{port}/0"
    try:
        wait_until(lambda: services._redis_alive(unprotected), timeout=10, what="the old Redis", step=0.05)
        old_pid = (folder / "redis.pid").read_text().strip()

        url = services.redis_url(own)
        password_file = folder / "password"
        password = password_file.read_text().strip()
        assert len(password) >= 32 and stat.S_IMODE(password_file.stat().st_mode) == 0o600
        assert url == f"redis://:{password}@127.0.0.1:{port}/0" == services.configured_redis_url(own)
        assert (folder / "redis.pid").read_text().strip() == old_pid  # given the password, not doubled
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(unprotected).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(f"redis://:wrong-{password}@127.0.0.1:{port}/0").ping()

        # Started afresh, it is bound to loopback and persists append-only in the home, its password
        # out of the process list; `services status` shows the URL without it.
        assert services.stop_redis(own)
        url = services.redis_url(own)
        client = redis.Redis.from_url(url, decode_responses=True)
        assert client.config_get("bind")["bind"] == "127.0.0.1"
        assert client.config_get("appendonly")["appendonly"] == "yes"
        assert Path(client.config_get("dir")["dir"]).resolve() == folder.resolve()
        pid = (folder / "redis.pid").read_text().strip()
        assert password not in Path(f"/proc/{pid}/cmdline").read_text()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(unprotected).ping()
        shown = [status.url for status in services.services_status(own) if status.name == "redis"]
        assert shown == [f"redis://:***@127.0.0.1:{port}/0"]
    finally:
        services.stop_redis(own)
        try:  # the old one, had the test failed before giving it a password
            redis.Redis.from_url(unprotected).shutdown(nosave=True)
        except redis.RedisError:
            pass


def test_docker_composes_redis_wants_the_password_its_clients_use_and_persists_append_only() -> None:
    import yaml

    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    redis_service = compose["services"]["redis"]
    command = redis_service["command"]
    password = command[command.index("--requirepass") + 1]
    assert password.startswith("${REDIS_PASSWORD:?")  # Compose refuses to start without one
    assert command[command.index("--appendonly") + 1] == "yes"
    assert redis_service["environment"]["REDISCLI_AUTH"] == password  # the health check signs in
    for client in ("migrate", "bot", "worker"):
        assert compose["services"][client]["environment"]["REDIS_URL"] == f"redis://:{password}@redis:6379/0"
    # A Redis restart can end a Celery worker (docs/operations.md): the bot and workers come back by themselves.
    assert {compose["services"][name].get("restart") for name in ("bot", "worker")} == {"unless-stopped"}
