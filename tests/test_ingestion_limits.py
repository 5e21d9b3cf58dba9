"""Hostile documents (#26): a DOCX zip bomb is refused before it is inflated, and a NUL
character neither reaches PostgreSQL nor stops the rest of the batch."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from ingestion.docx_blocks import MAX_DOCX_PART_RATIO
from ingestion.ingest import ingest_paths
from ingestion.loaders import LoadError, load_document

REPO = Path(__file__).resolve().parent.parent
WORD_SAMPLE = REPO / "samples" / "policies" / "code-of-conduct.docx"


def _docx_with_part(tmp_path: Path, name: str, size: int) -> Path:
    """The sample Word document with one more part of `size` zero bytes (deflated to almost nothing)."""
    target = tmp_path / name
    shutil.copy(WORD_SAMPLE, target)
    with zipfile.ZipFile(target, "a", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as package:
        package.writestr("word/media/padding.bin", bytes(size))
    return target


def test_a_docx_part_that_inflates_past_the_total_cap_is_refused(tmp_path: Path) -> None:
    bomb = _docx_with_part(tmp_path, "bomb.docx", 70 * 1024 * 1024)
    assert bomb.stat().st_size < 1_000_000  # small on disk, as bombs are
    with pytest.raises(LoadError, match=r"would inflate to \d+ MB, over the 67 MB cap"):
        load_document(bomb)


def test_a_docx_part_compressed_far_beyond_real_documents_is_refused(tmp_path: Path) -> None:
    dense = _docx_with_part(tmp_path, "dense.docx", 2 * 1024 * 1024)
    with pytest.raises(
        LoadError, match=rf"part word/media/padding.bin inflates \d+:1, over the {MAX_DOCX_PART_RATIO}:1 cap"
    ):
        load_document(dense)


def test_ordinary_documents_pass_the_caps() -> None:
    assert "Code of Business Conduct" in load_document(WORD_SAMPLE).text


def test_a_nul_character_is_dropped_and_the_batch_goes_on(settings, tmp_path: Path) -> None:
    folder = tmp_path / "batch"
    folder.mkdir()
    (folder / "a-nul.md").write_text("# Parking\n\nStaff park free\x00 in lot B.\n")
    (folder / "b-plain.md").write_text("# Lockers\n\nLockers are on floor 2.\n")
    assert "\x00" not in load_document(folder / "a-nul.md").text
    report = ingest_paths(settings, [folder], collection="nul-test")
    assert [(f.document, f.status) for f in report.files] == [("a-nul.md", "added"), ("b-plain.md", "added")]
