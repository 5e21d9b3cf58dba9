"""Render small Markdown sources into PDF and DOCX policy files: the samples (samples/src/ into
samples/policies/) and the policy-qa corpus (datasets/policy-qa/build.py).

Usage: python -m devtools.render_markdown    (rebuilds the samples)

Supports the small Markdown subset the sources use: `#`/`##`/`###` headings,
paragraphs (consecutive lines, joined) and `- ` bullet items.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import docx
from fpdf import FPDF

from crag.text import fold_punctuation

REPO = Path(__file__).resolve().parent.parent
SAMPLES_SRC = REPO / "samples" / "src"
SAMPLES_OUT = REPO / "samples" / "policies"

# sample source file -> output format
SAMPLE_TARGETS: dict[str, Literal["pdf", "docx"]] = {
    "devices-security.md": "pdf",
    "code-of-conduct.md": "docx",
}

# fixed document dates, so rebuilding does not change the metadata
DOC_DATE = datetime(2026, 1, 1, tzinfo=UTC)

# fpdf2 core fonts are latin-1 only
_LATIN1 = str.maketrans({"\u2026": "...", "\u2022": "-"})  # beyond crag.text's quote and dash folding


@dataclass(frozen=True)
class Block:
    kind: Literal["heading", "para", "bullet"]
    text: str
    level: int = 0


def parse(markdown: str) -> list[Block]:
    blocks: list[Block] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            blocks.append(Block("para", " ".join(para)))
            para.clear()

    for raw in markdown.splitlines():
        line = raw.strip()
        if not line:
            flush()
        elif line.startswith("#"):
            flush()
            hashes, _, text = line.partition(" ")
            blocks.append(Block("heading", text.strip(), min(len(hashes), 3)))
        elif line.startswith("- "):
            flush()
            blocks.append(Block("bullet", line[2:].strip()))
        else:
            para.append(line)
    flush()
    return blocks


def write_pdf(blocks: list[Block], title: str, path: Path, author: str) -> None:
    pdf = FPDF(format="A4")
    pdf.set_title(title)
    pdf.set_author(author)
    pdf.set_creation_date(DOC_DATE)
    pdf.set_auto_page_break(auto=True, margin=18)
    pdf.set_margins(20, 18, 20)
    pdf.add_page()
    sizes = {1: 18, 2: 14, 3: 12}
    for b in blocks:
        text = fold_punctuation(b.text).translate(_LATIN1)
        if b.kind == "heading":
            pdf.ln(4 if b.level > 1 else 0)
            pdf.set_font("Helvetica", "B", sizes[b.level])
            pdf.multi_cell(0, sizes[b.level] * 0.5, text, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1.5)
        elif b.kind == "bullet":
            pdf.set_font("Helvetica", "", 10.5)
            pdf.set_x(pdf.l_margin + 5)
            pdf.multi_cell(0, 5.5, "- " + text, new_x="LMARGIN", new_y="NEXT")
        else:
            pdf.set_font("Helvetica", "", 10.5)
            pdf.multi_cell(0, 5.5, text, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
    pdf.output(str(path))


def write_docx(blocks: list[Block], title: str, path: Path, author: str) -> None:
    document = docx.Document()
    document.core_properties.title = title
    document.core_properties.author = author
    document.core_properties.created = document.core_properties.modified = DOC_DATE
    for b in blocks:
        if b.kind == "heading":
            document.add_heading(b.text, level=b.level)
        elif b.kind == "bullet":
            document.add_paragraph(b.text, style="List Bullet")
        else:
            document.add_paragraph(b.text)
    document.save(str(path))


def render(source: Path, target: Path, author: str) -> None:
    """Write `target` (.pdf or .docx) from the Markdown file `source`; its first heading is the title."""
    blocks = parse(source.read_text(encoding="utf-8"))
    title = next((b.text for b in blocks if b.kind == "heading"), target.stem)
    if target.suffix == ".pdf":
        write_pdf(blocks, title, target, author)
    elif target.suffix == ".docx":
        write_docx(blocks, title, target, author)
    else:
        raise ValueError(f"cannot render {target.name}: only .pdf and .docx")


def main() -> None:
    SAMPLES_OUT.mkdir(parents=True, exist_ok=True)
    for name, fmt in SAMPLE_TARGETS.items():
        target = SAMPLES_OUT / f"{Path(name).stem}.{fmt}"
        render(SAMPLES_SRC / name, target, author="Northwind Analytics")
        print(f"wrote {target.relative_to(REPO)}")


if __name__ == "__main__":
    main()
