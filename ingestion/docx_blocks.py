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
from collections.abc import Iterator
from dataclasses import dataclass
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
INS, MOVE_TO, SYM = W + "ins", W + "moveTo", W + "sym"
# Not the document's text: a drawing's compatibility copy, moved-from runs, phonetic guides.
SKIPPED = {MC_FALLBACK, MOVE_FROM, RUBY_TEXT}
# Wrappers whose block content is the document's (tracked insertions and moves, content
# controls, custom XML); tracked deletions and moved-from blocks are not.
BLOCK_WRAPPERS = {INS, MOVE_TO, CUSTOM_XML}

# Symbol-font characters (w:sym) that carry meaning in a rule: comparisons, units, arrows,
# check boxes. Word stores them as the font's own code, usually in the private-use range
# F0xx; other decorative glyphs are left out rather than read as private-use characters.
SYMBOL_FONT = {
    0x22: "∀", 0x24: "∃", 0x2D: "−", 0x40: "≅", 0x7E: "∼", 0xA2: "′", 0xA3: "≤", 0xA5: "∞",
    0xAB: "↔", 0xAC: "←", 0xAD: "↑", 0xAE: "→", 0xAF: "↓", 0xB0: "°", 0xB1: "±", 0xB2: "″",
    0xB3: "≥", 0xB4: "×", 0xB7: "•", 0xB8: "÷", 0xB9: "≠", 0xBA: "≡", 0xBB: "≈", 0xBC: "…",
    0xD2: "®", 0xD3: "©", 0xD4: "™", 0xD6: "√", 0xD7: "⋅", 0xD8: "¬", 0xDB: "⇔", 0xDE: "⇒",
    0xE2: "®", 0xE3: "©", 0xE4: "™", 0xE5: "∑",
    **dict(zip(range(0x41, 0x5B), "ΑΒΧΔΕΦΓΗΙϑΚΛΜΝΟΠΘΡΣΤΥςΩΞΨΖ")),
    **dict(zip(range(0x61, 0x7B), "αβχδεφγηιϕκλμνοπθρστυϖωξψζ")),
}
# Per symbol font, the codes read as text: Symbol's above, the dingbats' check boxes and
# crosses (Wingdings 2 draws them as "O", "P", "R", "S").
DINGBATS = {
    "symbol": SYMBOL_FONT,
    "wingdings": {0xA8: "☐", 0xFB: "✗", 0xFC: "✓", 0xFD: "☒", 0xFE: "☑"},
    "wingdings 2": {0x4F: "✗", 0x50: "✓", 0x52: "☑", 0x53: "☒", 0xA3: "☐"},
}

BlockKind = Literal["title", "heading", "item", "text", "table"]


@dataclass(frozen=True)
class DocxBlock:
    kind: BlockKind
    text: str  # for a table: its rows, one "| a | b |" line each
    level: int = 0  # for a heading: N of "Heading N"


class NotADocx(ValueError):
    """The file is not a Word document package."""


def read_docx_blocks(path: Path) -> list[DocxBlock]:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

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
        neighbours = numbered[max(index - 1, 0):index] + numbered[index + 1:index + 2]
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
    from docx.enum.style import WD_STYLE_TYPE

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
        if any(ancestor.tag in SKIPPED or (ancestor.tag == SDT and _shows_placeholder(ancestor))
               for ancestor in element.iterancestors()):
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
    font = " ".join(symbol.get(f"{W}font", "").lower().split())
    shifted = 0xF000 <= code <= 0xF0FF  # the font's own code, moved into the private-use area
    code = code - 0xF000 if shifted else code
    if font in DINGBATS or font.startswith(("wingdings", "webdings", "zapf")):
        known = DINGBATS.get(font, {})
        if code in known:
            return known[code]
        # The Symbol font keeps digits and punctuation where ASCII has them; other glyphs are decoration.
        return chr(code) if font == "symbol" and 0x20 <= code < 0x7F and not chr(code).isalpha() else ""
    if shifted or code <= 0xFF:  # a text font's code: its code page, taken as Latin-1
        return chr(code) if 0x20 <= code < 0x7F or 0xA0 <= code <= 0xFF else ""
    return "" if 0xE000 <= code <= 0xF8FF else chr(code)


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
