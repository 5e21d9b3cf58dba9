"""Chunking: sections under their heading paths, tables split between rows."""

from __future__ import annotations

import re

from ingestion.chunking import Section, split_sections


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


def test_a_long_table_is_chunked_between_rows_under_its_header() -> None:
    """Every chunk of a 60-row rate table says which column a number is in."""
    from crag.minilm import minilm_folder
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


def test_a_sentence_too_long_for_one_chunk_is_never_cut_inside_a_link_or_url() -> None:
    """A sentence over the chunk size is cut after its commas: never in a link's URL, where
    "(https://www.amazon." once ended a chunk and "com/...%2Caps" began the next."""
    from crag.minilm import minilm_folder
    from ingestion.chunking import chunk_markdown, word_piece_counter

    from support.markdown_handbook import AMAZON

    link = f"[standing desk]({AMAZON}&keywords=standing+desk,adjustable&qid=1700000000.5)"
    sentence = (
        f"Buy a {link}, a {link.replace('standing desk', 'monitor arm')}, and a chair from "
        f"https://www.ikea.com/pt/en/p/markus-office-chair.v2.{AMAZON[-40:]}, each reimbursed in full"
    )
    tokenize = word_piece_counter(str(minilm_folder()))
    assert len(tokenize(sentence)) > 200
    chunks = chunk_markdown(f"# Home office\n\n{sentence}.\n", tokenize)
    assert len(chunks) > 1
    for chunk in chunks:
        assert chunk.text.count("](") == chunk.text.count("&qid=1700000000.5)"), chunk.text
        assert all(url.endswith(AMAZON[-40:]) for url in re.findall(r"https://www\.ikea[^\s,]+", chunk.text)), (
            chunk.text
        )
