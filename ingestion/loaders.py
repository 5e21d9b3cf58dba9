"""Read policy files into Markdown-shaped text through LlamaIndex's file readers.

Every format ends up as text where headings are `#` lines, so one chunker keeps the
heading path for all of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docx.table import Table
from docx.text.paragraph import Paragraph

from ingestion.chunking import code_fence_after

SUPPORTED_SUFFIXES = {".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".docx"}


class LoadError(ValueError):
    """A file could not be read; the message is shown to the admin next to the file name."""


@dataclass(frozen=True)
class LoadedDocument:
    title: str
    text: str  # Markdown-shaped: headings are "#" lines, paragraphs separated by blank lines


def load_document(path: Path) -> LoadedDocument:
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
        raise LoadError(f"unsupported file type '{suffix or path.name}' (supported: {supported})")
    try:
        if suffix in {".md", ".markdown"}:
            text = _markdown_for_chunking(_read_flat(path))
        elif suffix == ".txt":
            text = _mark_plain_headings(_read_flat(path))
        elif suffix in {".html", ".htm"}:
            text = _html_to_markdown(path.read_bytes())
        elif suffix == ".pdf":
            text = _mark_plain_headings(_reflow_pdf_lines(_read_pdf(path)))
        else:
            text = _read_docx(path)
    except LoadError:
        raise
    except UnicodeDecodeError as error:
        raise LoadError(f"not valid UTF-8 text ({error.reason} at byte {error.start})") from None
    except Exception as error:  # readers raise many kinds; the admin needs the reason, not a traceback
        raise LoadError(f"could not read {suffix.lstrip('.').upper()} file: {type(error).__name__}: {error}") from None
    text = _normalise(text)
    if not text.strip():
        hint = " (a scanned PDF without a text layer?)" if suffix == ".pdf" else ""
        raise LoadError(f"no text found{hint}")
    return LoadedDocument(title=_title(text, path), text=text)


def _read_flat(path: Path) -> str:
    from llama_index.readers.file import FlatReader

    raw = path.read_bytes()
    raw.decode("utf-8")  # FlatReader decodes leniently; a binary file should fail loudly instead
    text = "\n".join(doc.text for doc in FlatReader().load_data(path))
    return text.removeprefix("\ufeff")  # a byte-order mark (Windows editors) would hide the first heading


_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(?P<fields>(?:.*\n){0,60}?)(?:---|\.\.\.)[ \t]*(?:\n|\Z)")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_EMBEDDED_IMAGE = re.compile(r"!\[([^\]]*)\]\(\s*<?data:[^)]*\)")
_DATA_URI = re.compile(r"data:[\w.+/-]+;base64,[A-Za-z0-9+/=]+")


def _markdown_for_chunking(text: str) -> str:
    """Markdown in the one shape the chunker reads: YAML front matter (static-site exports)
    is metadata, not policy text, and gives the title when no "# " line does; setext
    headings ("Title" over "=====") become "#" lines; images embedded as base64 (editors
    such as Typora and Notion export them inline) keep only their alt text, instead of
    thousands of word pieces of noise in the chunks."""
    front_matter = _FRONT_MATTER.match(text)
    title = ""
    if front_matter and all(":" in line or not line.strip() or line.startswith((" ", "-"))
                            for line in front_matter.group("fields").splitlines()):
        fields = front_matter.group("fields")
        text = text[front_matter.end():]
        found = re.search(r"^title:[ \t]*(.+?)[ \t]*$", fields, flags=re.MULTILINE)
        title = found.group(1).strip("'\"") if found else ""
    lines = text.splitlines()
    out: list[str] = []
    fence = ""
    for index, line in enumerate(lines):
        fence = code_fence_after(line, fence)
        underline = None if fence or index == 0 else _SETEXT_UNDERLINE.match(line)
        previous = lines[index - 1] if index else ""
        single_line_paragraph = index < 2 or not lines[index - 2].strip()
        if (underline and previous.strip() and single_line_paragraph and out
                and not re.match(r"^\s*([-*+>#|]|\d+[.)]\s)", previous)):
            out[-1] = ("# " if underline.group(1)[0] == "=" else "## ") + previous.strip()
            continue
        out.append(line)
    text = _EMBEDDED_IMAGE.sub(r"\1", "\n".join(out))
    text = _DATA_URI.sub("", text)
    if title and not re.search(r"^# ", text, flags=re.MULTILINE):
        text = f"# {title}\n\n{text}"
    return text


def _read_pdf(path: Path) -> str:
    from llama_index.readers.file import PDFReader
    from tenacity import stop_after_attempt

    # PDFReader retries every failure three times: a corrupt local file fails the same way
    # each time, and the retry would hide pypdf's reason behind tenacity's RetryError.
    read_once = PDFReader.load_data.retry_with(stop=stop_after_attempt(1), reraise=True)
    pages = read_once(PDFReader(return_full_document=False), path)
    # One line break between pages: a paragraph may run on across a page break.
    return "\n".join(_without_page_furniture([page.text for page in pages]))


_PAGE_NUMBER = re.compile(r"^(?:page\s*)?\d+(?:\s*(?:of|/)\s*\d+)?$", re.IGNORECASE)
EDGE_LINES = 2  # running headers and footers sit in the first or last lines of a page


def _without_page_furniture(pages: list[str]) -> list[str]:
    """Drop running headers, footers and page numbers from each page's first and last lines.

    A page number ("Page 2 of 5", "7") is furniture wherever it sits at an edge; another
    edge line is when it recurs (digits aside) at the edges of at least half the pages of
    a document of two or more (except at the top of the first page, where it is usually the
    title). Left in, such lines look like headings and would take over the section path of
    whatever follows them.
    """
    def shape(line: str) -> str:
        return re.sub(r"\d+", "#", " ".join(line.split()).lower())

    def top_and_bottom(lines: list[str]) -> tuple[set[int], set[int]]:
        filled = [i for i, line in enumerate(lines) if line.strip()]
        return set(filled[:EDGE_LINES]), set(filled[-EDGE_LINES:])

    split = [page.splitlines() for page in pages]
    edges = [top_and_bottom(lines) for lines in split]
    counts: dict[str, int] = {}
    for lines, (top, bottom) in zip(split, edges):
        for shape_ in {shape(lines[i]) for i in top | bottom}:
            counts[shape_] = counts.get(shape_, 0) + 1
    recurring = {k for k, n in counts.items() if len(pages) >= 2 and n >= max(2, len(pages) / 2)}
    cleaned = []
    for number, (lines, (top, bottom)) in enumerate(zip(split, edges)):
        # The first page's top lines stay: a running header there is often the document's title.
        repeat_zone = bottom if number == 0 else top | bottom
        drop = {i for i in top | bottom if _PAGE_NUMBER.match(lines[i].strip())}
        drop |= {i for i in repeat_zone if shape(lines[i]) in recurring}
        cleaned.append("\n".join(line for i, line in enumerate(lines) if i not in drop))
    return cleaned


def _read_docx(path: Path) -> str:
    """DOCX through python-docx, in document order: Word's heading styles become "#" levels,
    list styles "- " items and tables Markdown rows. Headers and footers (page furniture)
    are left out. A document whose headings are only typed, not styled, gets the plain-text
    heading detection instead."""
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(str(path))
    except PackageNotFoundError:  # its own message names the path, not the problem
        raise LoadError("not a valid DOCX file (not a Word document package; an old .doc renamed?)") from None
    blocks = list(_docx_blocks(document.element.body, document))
    levels = {_docx_heading_level(block) for block in blocks if isinstance(block, Paragraph)} - {None}
    if not levels:
        return _mark_plain_headings("\n\n".join(_docx_markdown(block, None) for block in blocks))
    shift = 1 if 0 in levels else 0  # "Title" is the top level; "Heading 1" then sits below it
    return "\n\n".join(_docx_markdown(block, shift) for block in blocks)


def _docx_blocks(container: Any, parent: Any) -> Iterator[Paragraph | Table]:
    """Body paragraphs and tables in order, including those inside content controls (w:sdt),
    which python-docx's own iteration skips."""
    from docx.oxml.ns import qn

    for child in container.iterchildren():
        if child.tag == qn("w:p"):
            yield Paragraph(child, parent)
        elif child.tag == qn("w:tbl"):
            yield Table(child, parent)
        elif child.tag == qn("w:sdt"):
            content = child.find(qn("w:sdtContent"))
            if content is not None:
                yield from _docx_blocks(content, parent)


def _docx_style_names(paragraph: Paragraph) -> Iterator[str]:
    """The paragraph's style and the styles it is based on (a custom "Policy Heading" based
    on "Heading 2" is a heading too)."""
    style = paragraph.style
    while style is not None:
        yield style.name or ""
        style = style.base_style


def _docx_heading_level(paragraph: Paragraph) -> int | None:
    """0 for "Title", N for "Heading N", None for body text."""
    for name in _docx_style_names(paragraph):
        if name == "Title":
            return 0
        match = re.fullmatch(r"Heading ([1-9])", name)
        if match:
            return int(match.group(1))
    return None


def _docx_markdown(block: Paragraph | Table, heading_shift: int | None) -> str:
    """One block as Markdown; heading_shift None means the styles say nothing about headings."""
    if isinstance(block, Table):
        return _docx_table_rows(block)
    text = block.text.strip()
    if not text:
        return ""
    level = _docx_heading_level(block) if heading_shift is not None else None
    if level is not None and heading_shift is not None:
        return "#" * min(level + heading_shift, 6) + " " + " ".join(text.split())
    if any(name.startswith("List") for name in _docx_style_names(block)):
        return "- " + text
    return text


def _docx_table_rows(table: Table) -> str:
    """A table as Markdown rows under its first row, as HTML tables come out: each row keeps
    its own header context, and short cells are never taken for headings."""
    rows: list[str] = []
    header_width = 0
    for row in table.rows:
        cells: list[str] = []
        previous = None
        for cell in row.cells:
            if cell is previous:  # a merged cell is listed once per column it spans
                continue
            previous = cell
            cells.append(_docx_cell_text(cell).replace("|", "\\|"))
        if any(cells):
            rows.append("| " + " | ".join(cells) + " |")
            header_width = header_width or len(cells)
    if len(rows) > 1:  # the first row heads the others
        rows.insert(1, "| " + " | ".join(["---"] * header_width) + " |")
    return "\n".join(rows)


def _docx_cell_text(cell: Any) -> str:
    parts = [_docx_cell_text_of_table(item) if isinstance(item, Table) else item.text for item in cell.iter_inner_content()]
    return " ".join(" ".join(parts).split())


def _docx_cell_text_of_table(table: Table) -> str:
    return " ".join(_docx_cell_text(cell) for row in table.rows for cell in row.cells)


def _html_to_markdown(raw: bytes) -> str:
    """HTML as Markdown (markdownify): headings as "#" lines, every block of text once,
    nested lists indented, tables as rows; links, images and emphasis as their plain text."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(raw, "html.parser")
    title = soup.title.get_text(strip=True) if soup.title else ""
    for unwanted in soup(["head", "script", "style", "nav", "footer", "noscript", "template"]):
        unwanted.decompose()
    converter = MarkdownConverter(heading_style="ATX", bullets="-",
                                  strip=["a", "img", "b", "strong", "em", "i", "u", "span"])
    text = converter.convert_soup(soup.body or soup)
    if title and not re.search(r"^# ", text, flags=re.MULTILINE):
        text = f"# {title}\n\n{text}"
    return text


def _reflow_pdf_lines(text: str) -> str:
    """PDF text comes as wrapped lines with no blank lines: rebuild paragraphs and heading lines.

    A line is a heading when it looks like one and the line before it closed a sentence,
    was a list item or was itself a heading; every other line continues its paragraph.
    """
    blocks: list[str] = []
    paragraph: list[str] = []
    previous = ""
    previous_was_heading = True

    def flush() -> None:
        if paragraph:
            blocks.append(" ".join(paragraph))
            paragraph.clear()

    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            flush()
            continue
        # A list item ends its line: bullets rarely close with a period, and a heading that
        # follows a list ("- Meals" / "Non-Reimbursable Items") must not join its last item.
        after_item = previous.startswith(("-", "*", "•"))
        after_sentence = previous_was_heading or not previous or previous[-1] in ".!?:)" or after_item
        if after_sentence and _looks_like_heading(line):
            flush()
            blocks.append(line)
            previous_was_heading = True
        else:
            if line.startswith(("-", "*", "•")):
                flush()
            paragraph.append(line)
            previous_was_heading = False
        previous = line
    flush()
    return "\n\n".join(blocks)


_NUMBERED_HEADING = re.compile(r"^(\d+(?:\.\d+)*)\.?\s+\S")


def _mark_plain_headings(text: str) -> str:
    """Turn heading-looking lines of extracted text (PDF, DOCX, TXT) into Markdown headings.

    A heading is a short line on its own without closing punctuation: numbered
    ("2.1 Booking travel") or in Title Case. The first such line is the title (level 1).
    Numbered lines that follow each other with nothing between ("1. Book flights", then
    "2. Get approval") are a list, not headings: as headings, the last item would become
    the section of the paragraph after it.
    """
    if re.search(r"^#{1,6} ", text, flags=re.MULTILINE):
        return text  # already Markdown
    lines = text.splitlines()
    numbers: dict[int, str | None] = {}  # heading-looking line -> its number ("2.1"), None if unnumbered
    for index, line in enumerate(lines):
        stripped = line.strip()
        previous_blank = index == 0 or not lines[index - 1].strip()
        next_blank = index + 1 >= len(lines) or not lines[index + 1].strip()
        if stripped and previous_blank and next_blank and _looks_like_heading(stripped):
            numbered = _NUMBERED_HEADING.match(stripped)
            numbers[index] = numbered.group(1) if numbered else None
    list_items = _numbered_list_lines(lines, numbers)
    out: list[str] = []
    seen_title = False
    for index, line in enumerate(lines):
        if index not in numbers or index in list_items:
            out.append(line)
            continue
        number = numbers[index]
        if not seen_title:
            level = 1
        elif number:
            level = min(2 + number.count("."), 6)
        else:
            level = 2
        seen_title = True
        out.append("#" * level + " " + line.strip())
    return "\n".join(out)


def _numbered_list_lines(lines: list[str], numbers: dict[int, str | None]) -> set[int]:
    """Numbered heading-looking lines whose next text line is the next number ("3." then "4.",
    "2.1" then "2.2"): list items, since a heading would have a body between them."""
    filled = [index for index, line in enumerate(lines) if line.strip()]
    items: set[int] = set()
    for here, after in zip(filled, filled[1:]):
        first, second = numbers.get(here), numbers.get(after)
        if first and second and _next_number(first) == second:
            items.update((here, after))
    return items


def _next_number(number: str) -> str:
    *parents, last = number.split(".")
    return ".".join([*parents, str(int(last) + 1)])


def _looks_like_heading(line: str) -> bool:
    if len(line) > 80 or line[-1] in ".,;:!?" or line.startswith(("-", "*", "•", "|")):
        return False
    words = line.split()
    if len(words) > 10:
        return False
    if _NUMBERED_HEADING.match(line):
        return True
    small = {"a", "an", "and", "or", "of", "the", "for", "to", "in", "on", "with", "at", "by", "&", "vs"}
    return all(word[0].isupper() or word.lower() in small or not word[0].isalpha() for word in words)


def _normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u00a0", " ")
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def _title(text: str, path: Path) -> str:
    match = re.search(r"^# (.+)$", text, flags=re.MULTILINE)
    if match:
        return match.group(1).strip()
    return path.stem.replace("-", " ").replace("_", " ").strip().title()
