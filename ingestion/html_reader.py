"""An HTML policy page as Markdown-shaped text (BeautifulSoup, then markdownify).

What a careful reader of the page would take for its policy text, and only that:
- the page's main content when it marks one (`<main>`, `role="main"`, one `<article>`), and
  never its furniture (scripts, navigation, banners, site headers, asides, cookie notices,
  form controls, footers outside the content);
- no struck or deleted text (`<del>`, `<s>`, line-through styles and classes): a rule that
  no longer applies must not be cited next to the one that does (hidden elements stay: tab
  panels and accordions hide policy text until clicked);
- footnote markers kept apart from the numbers they follow (`200<sup>1</sup>` is `200¹`, not
  `2001`), a table's merged cells repeated in each row they span, `|` in a cell kept in it;
- a text line that starts with "#" stays text (only `<h1>`…`<h6>` are headings), and
  addresses and codes keep their underscores (no Markdown escaping: the text is chunked,
  never rendered).
"""

from __future__ import annotations

import copy
import re
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import charset_normalizer
from bs4 import BeautifulSoup, Comment, Declaration, ProcessingInstruction, XMLParsedAsHTMLWarning
from bs4.dammit import EncodingDetector
from markdownify import MarkdownConverter

from crag.text import code_lines
from ingestion.chunking import first_title, heading_text

# Marks the "#" of a real heading while the page is converted: every other "#" line is text.
_HEADING_MARK = "\x00"
SUPERSCRIPT_DIGITS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
_STRUCK_STYLE = re.compile(r"text-decoration(?:-line)?\s*:[^;]*line-through", re.IGNORECASE)
_CSS_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
# Consent banners and site menus by their usual id or class names, matched whole: not
# "gdpr-notice-content" (a privacy notice) or "menu-item".
_COOKIE_NOTICE = re.compile(
    r"(?:cookie|consent|gdpr)[-_]?(?:banner|bar|popup|modal|dialog|overlay|prompt)"
    r"|onetrust-consent-sdk|cookiebot|cc-window",
    re.IGNORECASE,
)
_FURNITURE_ROLES = {"banner", "navigation", "contentinfo", "search"}
_FURNITURE_NAME = re.compile(
    r"(?:(?:top|main|site|global|primary|page|side)[-_]?)?(?:nav|navbar|navigation|menu|"
    r"breadcrumbs?|footer|sidebar|skip-?links?)",
    re.IGNORECASE,
)
_PERMALINK_TEXT = {"", "¶", "#", "§", "🔗", "link"}
_WORD_BULLETS = {"·", "•", "o", "§", "▪", "", "Ø", "ü", "-", "–"}
# Tags that carry no structure, only looks: unwrapped, so that pages built of thousands of
# unclosed <font> or <span> tags do not nest past the converter's recursion.
_LOOKS_ONLY = ["font", "span", "o:p", "b", "strong", "em", "i", "u", "small", "big", "mark", "abbr", "center"]
_RECURSION_LIMIT = 20_000
_MAX_DEPTH = 1_000  # levels of elements converted as nested; below, an element is read as its text


def html_to_markdown(raw: bytes) -> str:
    with warnings.catch_warnings():  # XHTML is read as HTML on purpose: no warning per file
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        soup = BeautifulSoup(_decode(raw), "html.parser")
    title = soup.title.get_text(strip=True) if soup.title else ""
    struck_classes = _line_through_classes(soup)
    _drop_non_text(soup)
    root = _main_content(soup)
    if root is soup.body or root is soup:
        _drop_page_furniture(root)
    else:
        _take_in_the_policy_header(soup, root)
    _drop_struck(root, struck_classes)
    _prepare(root)
    _flatten_deep_nesting(soup, root)
    title = _site_name_dropped(title, root)
    _title_heading_at_level_one(root, title)
    with _deeper_recursion():
        try:
            # table_infer_header: a table without header cells (Word, LibreOffice) is headed by its
            # first row, its labels, rather than by an empty row.
            text = _PolicyMarkdown(
                heading_style="ATX",
                bullets="-",
                strip=["a"],
                escape_underscores=False,
                escape_asterisks=False,
                escape_misc=False,
                table_infer_header=True,
            ).convert_soup(root)
        except RecursionError:
            raise ValueError("the page nests its elements too deeply to read") from None
    text = _headings_only_from_tags(text)
    if title and first_title(text) is None:
        text = f"# {title}\n\n{text}"
    return text


def _site_name_dropped(title: str, root: Any) -> str:
    """ "Travel Policy - Acme Intranet" is "Travel Policy" when the content's first heading says so."""
    first = root.find(re.compile(r"^h[1-6]$"))
    heading = " ".join(first.get_text().split()) if first is not None else ""
    for separator in (" - ", " | ", " – ", " — ", " : "):
        parts = [part.strip() for part in title.split(separator)]
        if heading and heading in (parts[0], parts[-1]) and len(parts) > 1:
            return heading
    return title


def _title_heading_at_level_one(root: Any, title: str) -> None:
    """Content whose first heading is the page's title at <h2> (the site's logo was the <h1>)
    starts at "#", its other headings under it."""
    headings = root.find_all(re.compile(r"^h[1-6]$"))
    if not headings or " ".join(headings[0].get_text().split()) != title:
        return
    shift = int(headings[0].name[1]) - 1
    if shift > 0 and all(int(h.name[1]) > shift for h in headings):
        for heading in headings:
            heading.name = f"h{int(heading.name[1]) - shift}"


def _decode(raw: bytes) -> str:
    """UTF-8 when the bytes are UTF-8 (whatever the page declares), else the declared
    charset, else what `_undeclared` makes of them."""
    for bom, encoding in ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16")):
        if raw.startswith(bom):
            return raw.decode(encoding, errors="replace").lstrip("\ufeff")
    if raw.count(0) * 4 > len(raw):  # UTF-16 without a byte-order mark: every other byte is 0
        return raw.decode("utf-16-le" if raw[1::2].count(0) > raw[0::2].count(0) else "utf-16-be", errors="replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    declared = EncodingDetector.find_declared_encoding(raw, is_html=True, search_entire_document=True)
    # Browsers read a page labelled ISO-8859-1 or ASCII as windows-1252 (WHATWG Encoding), and
    # pages so labelled hold its €, curly quotes and dashes.
    if declared and declared.lower().replace("_", "-") in ("iso-8859-1", "latin-1", "latin1", "us-ascii", "ascii"):
        declared = "cp1252"
    if declared and declared.lower().replace("_", "-") not in ("utf-8", "utf8"):
        try:
            return raw.decode(declared, errors="replace")
        except LookupError:  # a charset Python does not know
            pass
    return _undeclared(raw)


def _undeclared(raw: bytes) -> str:
    """A page that is not UTF-8 and declares nothing. Western pages (a few accented letters
    among ASCII) are windows-1252, what browsers assume; charset_normalizer's guess misreads
    them ("G³ltig"). A page mostly of other letters (Cyrillic, Japanese) gets its guess."""
    western = raw.decode("cp1252", errors="replace")
    letters = [char for char in western if char.isalpha()]
    if sum(not char.isascii() for char in letters) * 10 <= 3 * len(letters):
        return western
    guess = charset_normalizer.from_bytes(raw).best()
    return str(guess) if guess is not None else western


def _line_through_classes(soup: Any) -> set[str]:
    """Classes a page's style sheets strike through (Google Docs writes `.c3{text-decoration:line-through}`)."""
    classes: set[str] = set()
    for style in soup.find_all("style"):
        for selectors, body in _CSS_RULE.findall(style.get_text()):
            if _STRUCK_STYLE.search(body):
                for selector in selectors.split(","):
                    # Only a class on its own (".c3", "span.c3"): ".expired .date" strikes dates
                    # only inside something expired.
                    simple = re.fullmatch(r"\s*[a-z0-9]*\.([\w-]+)\s*", selector, re.IGNORECASE)
                    if simple:
                        classes.add(simple.group(1))
    return classes


def _drop_non_text(soup: Any) -> None:
    for node in soup(["head", "script", "style", "nav", "noscript", "template", "input", "textarea", "iframe"]):
        node.decompose()
    # Word's downlevel conditionals (<![if !supportLists]>), XML declarations, comments.
    for node in soup.find_all(string=lambda s: isinstance(s, (Comment, Declaration, ProcessingInstruction))):
        node.extract()


def _drop_page_furniture(root: Any) -> None:
    """On a page that marks no content element: what is the site's, not the policy's. Only
    elements that say what they are (a role, a usual id or class name, a header or footer
    outside any section) and are mostly links (menus, link footers), or are consent banners;
    a header with the policy's title and effective date, a sidebar of key limits, tab labels stay."""
    page_text = len(root.get_text(" ", strip=True))
    named = [
        node for node in root.find_all(attrs={"role": True}) if str(node.get("role", "")).lower() in _FURNITURE_ROLES
    ]
    named += [
        node
        for node in root.find_all(["div", "ul", "ol", "section", "dialog"])
        if any(_FURNITURE_NAME.fullmatch(name) for name in _names(node))
    ]
    # A site's header and footer are the body's own; a section's or an article's are its.
    named += [
        node for node in root.find_all(["header", "footer"]) if node.find_parent(["article", "section", "main"]) is None
    ]
    banners = [
        node
        for node in root.find_all(["div", "section", "dialog"])
        if any(_COOKIE_NOTICE.fullmatch(name) for name in _names(node))
    ]
    furniture = [node for node in named if _mostly_links(node) and not _is_tab_list(node)] + banners
    _decompose_outermost([node for node in furniture if len(node.get_text(" ", strip=True)) * 3 < page_text])


def _names(node: Any) -> list[str]:
    return [name for name in [node.get("id") or "", *node.get("class", [])] if name]


def _mostly_links(node: Any) -> bool:
    text = len(node.get_text(" ", strip=True))
    linked = sum(len(link.get_text(" ", strip=True)) for link in node.find_all("a"))
    return text == 0 or linked * 2 >= text


def _is_tab_list(node: Any) -> bool:
    """Bootstrap's `nav nav-tabs` and ARIA tab lists label the panels' text ("Germany", "France")."""
    return (
        str(node.get("role", "")).lower() == "tablist"
        or any(name in ("nav-tabs", "nav-pills", "tabs") for name in node.get("class", []))
        or node.find(attrs={"role": "tablist"}) is not None
    )


def _drop_struck(root: Any, struck_classes: set[str]) -> None:
    """Struck text is not policy any more. A struck table cell is emptied, not removed, so the
    row's other cells stay under their columns."""
    struck = [
        node
        for node in root.find_all(True)
        if node.name in ("del", "s", "strike")
        or _STRUCK_STYLE.search(node.get("style") or "")
        or any(name in struck_classes for name in node.get("class", []))
    ]
    cells = [node for node in struck if node.name in ("td", "th")]
    for cell in cells:
        cell.clear()
    _decompose_outermost([node for node in struck if node.name not in ("td", "th")])


def _decompose_outermost(nodes: list[Any]) -> None:
    """Remove these elements, each once: one inside another goes with it. (bs4's `decomposed`
    searches a live tag's subtree for a child tag of that name, so it is not used.)"""
    chosen = {id(node) for node in nodes}
    outermost = [node for node in nodes if not any(id(parent) in chosen for parent in node.parents)]
    for node in outermost:
        node.decompose()


def _take_in_the_policy_header(soup: Any, root: Any) -> None:
    """A page header before the content that says more than a name (the policy's title over
    "Version 3, effective 1 March 2026") is the policy's: it goes first in the content. A
    site header (a logo, links, a search box) says no more than a name."""
    for header in reversed(soup.find_all("header")):
        before_root = any(element is root for element in header.next_elements)
        if before_root and root not in header.parents and header.find("p") is not None and not _mostly_links(header):
            root.insert(0, header.extract())


def _main_content(soup: Any) -> Any:
    """The element holding the page's content when the page marks one and it holds at least
    half the page's text (not Drupal's empty "main-content" skip-link anchor, not a teaser
    article); else the body."""
    body = soup.body or soup
    page_text = len(body.get_text(" ", strip=True))
    articles, mains = soup.find_all("article"), soup.find_all("main")
    candidates = [
        mains[0] if len(mains) == 1 else None,
        soup.find(attrs={"role": "main"}),
        soup.find(id="main-content"),
        articles[0] if len(articles) == 1 else None,
    ]
    for candidate in candidates:
        if candidate is not None and len(candidate.get_text(" ", strip=True)) * 2 >= page_text:
            return candidate
    return body


def _prepare(root: Any) -> None:
    """Reshape what markdownify would misread."""
    for link in root.find_all(["ac:link"]):  # Confluence storage format: the page title is the link text
        page = link.find("ri:page")
        if not link.get_text(strip=True) and page is not None and page.get("ri:content-title"):
            link.replace_with(page["ri:content-title"])
    for heading in root.find_all(re.compile(r"^h[1-6]$")):
        for anchor in heading.find_all("a"):  # permalinks ("¶", "#") are not part of the heading
            if anchor.get_text(strip=True) in _PERMALINK_TEXT:
                anchor.decompose()
    # Word's and Google Docs' title style, as the page's first text (Confluence's panels also
    # have a "title" paragraph: "Note", "Warning").
    first_text = next((t for t in root.find_all(string=True) if t.strip()), None)
    titles = [
        p
        for p in root.find_all("p")
        if _is_document_title(p) and any(text is first_text for text in p.find_all(string=True))
    ]
    if titles:  # the title, and every heading one level under it
        for heading in root.find_all(re.compile(r"^h[1-5]$")):
            heading.name = f"h{int(heading.name[1]) + 1}"
        for paragraph in titles[:1]:
            paragraph.name = "h1"
    for marker in root.find_all("span", style=re.compile(r"mso-list\s*:\s*ignore", re.IGNORECASE)):
        # Word's own list marker ("·" and spaces, "1." and spaces) as Markdown's.
        label = " ".join(marker.get_text().split())
        marker.replace_with("- " if not label or label in _WORD_BULLETS else f"{label} ")
    for summary in root.find_all("summary"):  # a <details> question is not run into its answer
        summary.name = "p"
    for label in root.select("svg text, svg title"):  # a diagram's labels ("Manager approves"), one per line
        label.name = "p"
    for table in root.find_all("table"):
        _rows_first(table)
        _repeat_row_spans(table)
        _merge_header_rows(table)
        _one_body(table)
        _no_header_from_row_headers(table)
    for name in _LOOKS_ONLY:
        for node in root.find_all(name):
            node.unwrap()


def _is_document_title(paragraph: Any) -> bool:
    """Word's title style, or Google Docs' ("title" among its generated "c2"-style classes)."""
    classes = paragraph.get("class", [])
    return "MsoTitle" in classes or ("title" in classes and any(re.fullmatch(r"c\d+", name) for name in classes))


def _repeat_row_spans(table: Any) -> None:
    """A cell spanning rows is repeated in each of them, so every row has its columns in place."""
    spanning: dict[int, tuple[Any, int]] = {}  # column -> (cell, rows still to fill)
    section = None
    for row in table.find_all("tr"):
        if row.find_parent("table") is not table:
            continue  # a nested table's row
        if row.parent is not section:  # a span ends with its <thead>, <tbody> or <tfoot>
            section, spanning = row.parent, {}
        cells = row.find_all(["td", "th"], recursive=False)
        placed: list[Any] = []
        column = 0
        while cells or any(col >= column for col in spanning):
            if column in spanning:
                cell, left = spanning[column]
                placed.append(copy.copy(cell))
                spanning[column] = (cell, left - 1)
                if left - 1 == 0:
                    del spanning[column]
            elif cells:
                cell = cells.pop(0)
                rows = _span(cell, "rowspan")
                if rows > 1:
                    del cell["rowspan"]
                    spanning[column] = (cell, rows - 1)
                placed.append(cell)
            else:
                column += 1  # a gap left of a spanning cell further right
                continue
            column += _span(placed[-1], "colspan")
        for cell in row.find_all(["td", "th"], recursive=False):
            cell.extract()
        for space in row.find_all(string=True, recursive=False):  # a pretty-printed row's indentation,
            if not space.strip():  # now all before its cells: markdownify would write it into the row
                space.extract()
        for cell in placed:
            row.append(cell)


def _merge_header_rows(table: Any) -> None:
    """Header rows stacked over one another ("Hotel cap" over "Staff" and "Directors") become
    one row ("Hotel cap Staff", "Hotel cap Directors"): Markdown has one header row, and the
    chunker repeats it when a long table is cut. A row of one cell across the table (a title
    over the header, a group label under it: "Europe") is no header row: nothing is merged."""
    # Footer rows are no header, whatever their place; header rows share one section (a
    # second <tbody>'s label row "Europe | EUR" labels its group, not the columns).
    rows = [row for row in table.find_all("tr") if row.find_parent("table") is table and row.parent.name != "tfoot"]
    header: list[Any] = []
    for row in rows:
        cells = row.find_all(["td", "th"], recursive=False)
        if not cells or any(cell.name != "th" for cell in cells) or row.parent is not rows[0].parent:
            break
        if len(cells) == 1:
            return
        header.append(row)
    if len(header) < 2 or len(header) == len(rows):
        return
    if not any(_span(cell, "colspan") > 1 for row in header[:-1] for cell in row.find_all("th", recursive=False)):
        return  # stacked headers span columns ("Hotel cap" over two); "Leave | Days" over "Sick | 10" are rows
    columns: list[list[Any]] = []  # each column's header cells, top down, each wording once
    for row in header:
        placed = [cell for cell in row.find_all("th", recursive=False) for _ in range(_span(cell, "colspan"))]
        for column, cell in enumerate(placed):
            if column == len(columns):
                columns.append([])
            wording = _wording_key(cell)
            if wording and wording not in (_wording_key(other) for other in columns[column]):
                columns[column].append(cell)
    model = header[0].find("th", recursive=False)
    merged = []
    for cells in columns:  # copies of the cells, so footnotes, images' alt text and runs stay as written
        label = copy.copy(model)
        label.clear()
        label.attrs.pop("colspan", None)
        for position, cell in enumerate(cells):
            if position:
                label.append(" ")
            part = copy.copy(cell)
            part.name, part.attrs = "span", {}
            for block in part.find_all(["h1", "h2", "h3", "h4", "h5", "h6", "p", "div"]):
                block.insert_after(" ")  # inline, or markdownify drops the space beside it
                block.unwrap()
            label.append(part)
        merged.append(label)
    for cell in header[0].find_all("th", recursive=False):
        cell.extract()
    for label in merged:
        header[0].append(label)
    for row in header[1:]:
        row.decompose()


def _wording_key(cell: Any) -> str:
    """What a cell says, to tell two labels apart: its text and its images' alt text, without
    the spaces that runs and paragraphs put in or leave out ("Reg"+"ion", "Hotel" / "cap")."""
    alt = " ".join(str(image.get("alt") or "") for image in cell.find_all("img"))
    return "".join(f"{cell.get_text(' ')} {alt}".split()).casefold()


def _rows_first(table: Any) -> None:
    """Column groups (no text) go and a caption moves before the table: markdownify takes a
    row for the first only when no element stands before it, and writes no header line for
    a table whose first row it misses (LibreOffice and Confluence write <col> elements first)."""
    for group in table.find_all("colgroup", recursive=False) + table.find_all("col", recursive=False):
        group.decompose()
    for caption in table.find_all("caption", recursive=False):
        caption.name = "p"  # a paragraph of its own: markdownify writes a caption without line breaks
        table.insert_before(caption.extract())


def _one_body(table: Any) -> None:
    """A table with a <tfoot> or several <tbody>: its rows straight under it, after its
    <thead>, with the footer last (the source may put it first, browsers show it last).
    markdownify starts a new, empty header row at a <tfoot> or a second <tbody>, breaking the
    table in two."""
    sections = table.find_all(["tbody", "tfoot"], recursive=False)
    if len(sections) < 2 and not any(section.name == "tfoot" for section in sections):
        return
    for head in table.find_all("thead", recursive=False):
        if not any(
            _wording_key(cell) for cell in head.find_all(["th", "td"])
        ):  # empty: it would stand before the first row
            head.decompose()
    for footer in table.find_all("tfoot", recursive=False):
        table.append(footer.extract())
    for section in table.find_all(["tbody", "tfoot"], recursive=False):
        section.unwrap()


def _no_header_from_row_headers(table: Any) -> None:
    """A table headed down its first column (every row opens with a <th>: "Sick leave | 10
    days", "Vacation | 20 days") and without a header row gets an empty one. Else its first
    row would head it (markdownify's table_infer_header, for Word's tables without header
    cells), and the chunker would repeat "Sick leave | 10 days" over the vacation row."""
    rows = [row for row in table.find_all("tr") if row.find_parent("table") is table]
    first_cells = [row.find(["td", "th"], recursive=False) for row in rows]
    if (
        not rows
        or table.find("thead", recursive=False) is not None
        or any(cell is None or cell.name != "th" for cell in first_cells)
        or all(cell.name == "th" for cell in rows[0].find_all(["td", "th"], recursive=False))
    ):
        return
    width = max(sum(_span(cell, "colspan") for cell in row.find_all(["td", "th"], recursive=False)) for row in rows)
    header, label = copy.copy(rows[0]), copy.copy(first_cells[0])  # tags of this document, emptied
    header.clear()
    label.clear()
    header.attrs, label.attrs = {}, {}
    for _ in range(width):
        header.append(copy.copy(label))
    rows[0].insert_before(header)


def _span(cell: Any, attribute: str) -> int:
    value = str(cell.get(attribute, "1")).strip()
    return max(1, min(int(value), 1000)) if value.isdigit() else 1


def _flatten_deep_nesting(soup: Any, root: Any, max_depth: int = _MAX_DEPTH) -> None:
    """Legacy pages of unclosed <div> or <p> tags nest thousands deep. An element at
    `max_depth` is replaced by its text, one paragraph per piece of text, so the page is read
    (without the structure below that depth) instead of failing."""
    too_deep: list[Any] = []
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        for child in node.find_all(True, recursive=False):
            if depth + 1 >= max_depth:
                too_deep.append(child)  # its subtree goes with it: not walked
            else:
                stack.append((child, depth + 1))
    for node in too_deep:
        flat = soup.new_tag("div")
        for text in node.stripped_strings:
            paragraph = soup.new_tag("p")
            paragraph.string = text
            flat.append(paragraph)
        node.replace_with(flat)


@contextmanager
def _deeper_recursion() -> Iterator[None]:
    """markdownify converts the tree recursively (three frames per level); legacy pages
    nest hundreds of levels. Python 3.11+ runs Python-to-Python calls without C stack."""
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, _RECURSION_LIMIT))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def _headings_only_from_tags(text: str) -> str:
    """A "#" line that no <hN> made ("# of carry-over days: 5") gets a leading space, which the
    chunker reads as text, and spaces left where struck text was collapse; code blocks stay
    as they are."""
    lines = text.split("\n")
    in_code = code_lines(lines)
    out = []
    for line, code in zip(lines, in_code):
        if line.startswith(_HEADING_MARK):
            line = line[len(_HEADING_MARK) :]
        elif not code and heading_text(line) is not None:  # the chunker's own test of a heading
            line = " " + line
        if not code:
            line = re.sub(r"(?<=\S) {2,}(?=\S)", " ", line)
        out.append(line.replace(_HEADING_MARK, ""))
    return "\n".join(out)


class _PolicyMarkdown(MarkdownConverter):
    def convert_hN(self, n: int, el: Any, text: str, parent_tags: set[str]) -> str:
        converted = super().convert_hN(n, el, text, parent_tags)  # type: ignore[misc]  # missing from markdownify's stub
        if "_inline" in parent_tags:
            return converted
        return re.sub(r"^(\s*)#", lambda m: m.group(1) + _HEADING_MARK + "#", converted, count=1)

    def convert_img(self, el: Any, text: str, parent_tags: set[str]) -> str:
        return str(el.get("alt") or "").strip()  # the picture's words, never its address

    def convert_sup(self, el: Any, text: str, parent_tags: set[str]) -> str:
        """Digits become superscript digits (a footnote on "200" reads "200¹", not "2001");
        an ordinal's letters stay on their number ("1st"); other markers stand apart."""
        text = text.strip()
        before = el.previous_sibling
        after_digit = isinstance(before, str) and before[-1:].isdigit()
        if text.isdigit():
            return text.translate(SUPERSCRIPT_DIGITS)
        if after_digit and text.isalpha() and len(text) <= 3:
            return text
        return f" {text} " if text else ""

    def convert_td(self, el: Any, text: str, parent_tags: set[str]) -> str:
        return super().convert_td(el, text.replace("|", "\\|"), parent_tags)  # type: ignore[misc]  # missing from markdownify's stub

    def convert_th(self, el: Any, text: str, parent_tags: set[str]) -> str:
        return super().convert_th(el, text.replace("|", "\\|"), parent_tags)  # type: ignore[misc]  # missing from markdownify's stub
