"""A DOCX body as a list of blocks (headings, list items, paragraphs, tables), in order.

python-docx opens the package and resolves styles; the text is read from the XML itself,
because python-docx's `Paragraph.text` skips text that Word keeps in wrappers: tracked
insertions, content controls, fields, smart tags and text boxes. Deleted text (`w:delText`,
moved-from runs) and the compatibility copy of drawings (`mc:Fallback`) are left out, so
nothing is read twice. Symbols inserted from a symbol font (`w:sym`, Word's Insert Symbol)
are read as the Unicode characters they show. Headers and footers are not part of the body:
page furniture.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from lxml import etree

if TYPE_CHECKING:
    from docx.document import Document

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
P, TBL, TR, TC, R = W + "p", W + "tbl", W + "tr", W + "tc", W + "r"
T, TAB, PTAB, BR, CR = W + "t", W + "tab", W + "ptab", W + "br", W + "cr"
NO_BREAK_HYPHEN, RUBY_TEXT = W + "noBreakHyphen", W + "rt"
SDT, SDT_CONTENT, CUSTOM_XML, MOVE_FROM = W + "sdt", W + "sdtContent", W + "customXml", W + "moveFrom"
INS, DEL, MOVE_TO, SYM = W + "ins", W + "del", W + "moveTo", W + "sym"
# Not the document's text: a drawing's compatibility copy, moved-from and deleted runs (deleted
# text is w:delText, but a deleted symbol, tab or break has no deleted form), phonetic guides.
SKIPPED = {MC_FALLBACK, MOVE_FROM, DEL, RUBY_TEXT}
# Wrappers whose block content is the document's (tracked insertions and moves, content
# controls, custom XML); tracked deletions and moved-from blocks are not.
BLOCK_WRAPPERS = {INS, MOVE_TO, CUSTOM_XML}

# Characters inserted from a symbol font (w:sym, Word's Insert Symbol) carry meaning in a
# rule ("≥ 500 EUR", "☒ Alcohol"). Word stores the font's own code, usually shifted into the
# private-use range F0xx. Symbol and Zapf Dingbats follow Adobe's encodings (pypdf has them);
# Wingdings' check boxes and crosses are listed here. Other glyphs of these fonts are left out
# rather than read as private-use characters.
WINGDINGS = {0x6F: "☐", 0x78: "☒", 0xA8: "☐", 0xFB: "✗", 0xFC: "✓", 0xFD: "☒", 0xFE: "☑"}
WINGDINGS_2 = {0x4F: "✗", 0x50: "✓", 0x52: "☑", 0x53: "☒", 0x54: "☒", 0xA3: "☐"}
SYMBOL_LOOKALIKES = {0xD2: "®", 0xD3: "©", 0xD4: "™", 0xE2: "®", 0xE3: "©", 0xE4: "™"}  # serif and sans forms


@cache
def _symbol_font_table(font: str) -> dict[int, str] | None:
    """Code -> character for a symbol font (named as Word writes it: any case, spaces, "MT"
    suffixes), or None for a text font."""
    from pypdf._codecs import charset_encoding  # pypdf: only for a .docx with symbol fonts, not for every upload check

    name = "".join(font.lower().split())
    if name.startswith("wingdings2"):
        return WINGDINGS_2
    if name.startswith(("wingdings", "webdings")):
        return WINGDINGS if name.startswith("wingdings") else {}
    adobe = (
        "/Symbol" if name.startswith("symbol") else "/ZapfDingbats" if name.startswith(("zapf", "itczapf")) else None
    )
    if adobe is None:
        return None
    table = {
        code: char
        for code, char in enumerate(charset_encoding[adobe])
        if code >= 0x20 and char.isprintable() and not 0xE000 <= ord(char) <= 0xF8FF
    }
    return {**table, **SYMBOL_LOOKALIKES} if adobe == "/Symbol" else table


BlockKind = Literal["title", "heading", "item", "text", "table"]


@dataclass(frozen=True)
class DocxBlock:
    kind: BlockKind
    text: str  # for a table: its rows, one "| a | b |" line each
    level: int = 0  # for a heading: N of "Heading N"


class NotADocx(ValueError):
    """The file is not a Word document package (or one too inflated to open safely)."""


# A zip bomb: a 135 KB upload once inflated one part to 105 MB and the worker's memory by 231 MB.
# Real documents' parts stay far below these (XML compresses about 10:1, images not at all).
MAX_DOCX_UNCOMPRESSED_BYTES = 64 * 1024 * 1024
MAX_DOCX_PART_RATIO = 100
_RATIO_CHECKED_FROM = 1024 * 1024  # tiny parts may compress better; they cannot hurt


def check_zip_sizes(path: Path) -> None:
    """Refuse a package whose parts would inflate past the caps, before anything is inflated."""
    try:
        with zipfile.ZipFile(path) as package:
            parts = package.infolist()
    except zipfile.BadZipFile:
        raise NotADocx("not a valid DOCX file (not a Word document package; an old .doc renamed?)") from None
    total = sum(part.file_size for part in parts)
    if total > MAX_DOCX_UNCOMPRESSED_BYTES:
        raise NotADocx(
            f"refused: its parts would inflate to {total / 1e6:.0f} MB, over the "
            f"{MAX_DOCX_UNCOMPRESSED_BYTES / 1e6:.0f} MB cap (a zip bomb?)"
        )
    for part in parts:
        if part.file_size > _RATIO_CHECKED_FROM and part.file_size > MAX_DOCX_PART_RATIO * max(part.compress_size, 1):
            raise NotADocx(
                f"refused: part {part.filename} inflates {part.file_size // max(part.compress_size, 1)}:1, "
                f"over the {MAX_DOCX_PART_RATIO}:1 cap (a zip bomb?)"
            )


def read_docx_blocks(path: Path) -> list[DocxBlock]:
    # python-docx: only when a .docx is read, not for whoever imports the readers (application/uploads.py)
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    check_zip_sizes(path)
    try:
        document = docx.Document(str(path))
    except PackageNotFoundError:  # its own message names the path, not the problem
        raise NotADocx("not a valid DOCX file (not a Word document package; an old .doc renamed?)") from None
    styles = _paragraph_styles(document)
    blocks: list[DocxBlock] = []
    numbered: list[tuple[str, str] | None] = []  # per block: (list, level) of a numbered body paragraph
    for element in _children(document.element.body, {P, TBL}):
        if element.tag == TBL:
            rows = _table_rows(element)
            if rows:
                blocks.append(DocxBlock("table", "\n".join(rows)))
                numbered.append(None)
            continue
        text = _paragraph_text(element).strip()
        if text:
            block = _paragraph_block(element, text, styles)
            blocks.append(block)
            numbered.append(_numbering(element) if block.kind == "text" else None)
    # Numbered paragraphs next to each other at the same level of the same list are a list
    # (LibreOffice and Google Docs number Normal paragraphs instead of using list styles).
    # One on its own, or next to one of another level ("Annual Leave" over "1.1 Entitlement"),
    # is more likely an auto-numbered heading, left to heading detection.
    for index, block in enumerate(blocks):
        neighbours = numbered[max(index - 1, 0) : index] + numbered[index + 1 : index + 2]
        if numbered[index] is not None and numbered[index] in neighbours:
            blocks[index] = DocxBlock("item", block.text)
    return blocks


def _numbering(paragraph: etree._Element) -> tuple[str, str] | None:
    """(list id, level) of Word numbering on this paragraph; None without (numId 0 switches it off)."""
    properties = paragraph.find(f"{W}pPr/{W}numPr")
    number = properties.find(f"{W}numId") if properties is not None else None
    if number is None or number.get(f"{W}val", "0") == "0":
        return None
    level = properties.find(f"{W}ilvl")
    return number.get(f"{W}val", ""), level.get(f"{W}val", "0") if level is not None else "0"


def _paragraph_styles(document: Document) -> dict[str, list[str]]:
    """Paragraph style id -> its name and the names of the styles it is based on."""
    from docx.enum.style import WD_STYLE_TYPE  # python-docx: as in read_docx_blocks

    parents: dict[str, tuple[str, str | None]] = {}
    for style in document.styles:
        if style.type == WD_STYLE_TYPE.PARAGRAPH:
            base = style.base_style
            parents[style.style_id] = (style.name or "", base.style_id if base is not None else None)
    chains: dict[str, list[str]] = {}
    for style_id in parents:
        names: list[str] = []
        current: str | None = style_id
        while current in parents and len(names) < len(parents):  # a loop of "based on" ends too
            name, current = parents[current]
            names.append(name)
        chains[style_id] = names
    default = document.styles.default(WD_STYLE_TYPE.PARAGRAPH)
    chains[""] = chains.get(default.style_id, []) if default is not None else []
    return chains


def _paragraph_block(paragraph: etree._Element, text: str, styles: dict[str, list[str]]) -> DocxBlock:
    style_id = paragraph.find(f"{W}pPr/{W}pStyle")
    names = styles.get(style_id.get(f"{W}val", "") if style_id is not None else "", styles[""])
    for name in names:
        if name == "Title":
            return DocxBlock("title", " ".join(text.split()))
        heading = re.fullmatch(r"Heading ([1-9])", name)
        if heading:
            return DocxBlock("heading", " ".join(text.split()), int(heading.group(1)))
    if any(name == "List" or name.startswith("List ") for name in names):
        return DocxBlock("item", text)
    return DocxBlock("text", text)


def _children(element: etree._Element, tags: set[str]) -> Iterator[etree._Element]:
    """Child elements with one of these tags, looking through content controls and custom XML."""
    for child in element:
        if child.tag in tags:
            yield child
        elif child.tag == SDT:
            content = child.find(SDT_CONTENT)
            if content is not None and not _shows_placeholder(child):
                yield from _children(content, tags)
        elif child.tag in BLOCK_WRAPPERS:
            yield from _children(child, tags)


def _shows_placeholder(sdt: etree._Element) -> bool:
    """An empty content control shows its prompt ("Click or tap here to enter text.")."""
    flag = sdt.find(f"{W}sdtPr/{W}showingPlcHdr")
    return flag is not None and flag.get(f"{W}val", "true") not in ("false", "0", "off")


def _paragraph_text(paragraph: etree._Element) -> str:
    parts: list[str] = []
    for element in paragraph.iter(T, TAB, PTAB, BR, CR, NO_BREAK_HYPHEN, SYM, P):
        if any(
            ancestor.tag in SKIPPED or (ancestor.tag == SDT and _shows_placeholder(ancestor))
            for ancestor in element.iterancestors()
        ):
            continue
        if element.tag == T:
            parts.append(element.text or "")
        elif element.tag == NO_BREAK_HYPHEN:
            parts.append("-")
        elif element.tag == SYM:
            parts.append(_symbol_text(element))
        elif element.tag in (TAB, PTAB):
            if element.getparent() is not None and element.getparent().tag == R:  # not a tab stop definition
                parts.append(" ")
        elif element is not paragraph:  # a line break, or a paragraph of a text box inside this one
            parts.append("\n")
    return "".join(parts)


def _symbol_text(symbol: etree._Element) -> str:
    """The character a `w:sym` shows: Unicode as written, or a symbol font's code mapped."""
    try:
        code = int(symbol.get(f"{W}char", ""), 16)
    except ValueError:
        return ""
    table = _symbol_font_table(symbol.get(f"{W}font", ""))
    shifted = 0xF000 <= code <= 0xF0FF  # the font's own code, moved into the private-use area
    if table is not None:
        return table.get(code - 0xF000 if shifted else code, "")
    if shifted:  # a symbol-encoded font we do not know: its glyphs have no reliable reading
        return ""
    try:
        char = chr(code)
    except (ValueError, OverflowError):
        return ""
    return char if char.isprintable() and not 0xE000 <= code <= 0xF8FF else ""


def _table_rows(table: etree._Element) -> list[str]:
    """Rows under the first one, as HTML tables come out: each row keeps its own header
    context, and short cells are never taken for headings."""
    rows: list[str] = []
    header_width = 0
    above: dict[int, str] = {}  # grid column -> the text of the cell a vertical merge continues
    for row in _children(table, {TR}):
        cells: list[str] = []
        column = _int_value(row.find(f"{W}trPr/{W}gridBefore"), 0)
        for cell in _children(row, {TC}):
            merge = cell.find(f"{W}tcPr/{W}vMerge")
            continues = merge is not None and merge.get(f"{W}val", "continue") != "restart"
            text = above.get(column, "") if continues else _cell_text(cell).replace("|", "\\|")
            above[column] = text
            cells.append(text)
            column += _int_value(cell.find(f"{W}tcPr/{W}gridSpan"), 1)
        if any(cells):
            rows.append("| " + " | ".join(cells) + " |")
            header_width = header_width or len(cells)
    if len(rows) > 1:
        rows.insert(1, "| " + " | ".join(["---"] * header_width) + " |")
    return rows


def _int_value(element: etree._Element | None, default: int) -> int:
    value = element.get(f"{W}val", "") if element is not None else ""
    return int(value) if value.isdigit() else default


def _cell_text(cell: etree._Element) -> str:
    parts: list[str] = []
    for block in _children(cell, {P, TBL}):
        if block.tag == P:
            parts.append(_paragraph_text(block))
        else:  # a nested table: its cells' text, in order
            parts.extend(_cell_text(inner) for row in _children(block, {TR}) for inner in _children(row, {TC}))
    return " ".join(" ".join(parts).split())
