"""Read policy files into Markdown-shaped text: Markdown, text and PDF through LlamaIndex's
file readers, HTML through markdownify, DOCX through python-docx (`docx_blocks`).

Every format ends up as text where headings are `#` lines, so one chunker keeps the
heading path for all of them.
"""

from __future__ import annotations

import html
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tenacity import stop_after_attempt
from wordfreq import zipf_frequency

from crag.text import HEADING_LINE, LINK_DESTINATION, LINK_TEXT, LINK_TITLE, code_lines, render_links
from ingestion.chunking import first_title, heading_text, keep_as_text
from ingestion.docx_blocks import DocxBlock, NotADocx, read_docx_blocks
from ingestion.html_reader import SUPERSCRIPT_DIGITS, html_to_markdown

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
            text = _outside_code(html_to_markdown(path.read_bytes()), _without_quote_marks)  # <blockquote> as "> "
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
    # LlamaIndex's readers (a second): only to read a file, not for the upload checks that import this module
    from llama_index.readers.file import FlatReader

    raw = path.read_bytes()
    raw.decode("utf-8")  # FlatReader decodes leniently; a binary file should fail loudly instead
    text = "\n".join(doc.text for doc in FlatReader().load_data(path))
    return text.removeprefix("\ufeff")  # a byte-order mark (Windows editors) would hide the first heading


_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(?P<fields>(?:.*\n){0,60}?)(?:---|\.\.\.)[ \t]*(?:\n|\Z)")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
# An image whose URL is a data: URI, wrapped over lines or not, raw SVG with quoted ")" or a
# title holding one included; a lone quote is a character. Never past the end of its paragraph.
# The repetition is possessive: a quote can be read two ways, and an image that never closes
# would otherwise be tried every way (minutes for twenty quoted SVG attributes).
_EMBEDDED_IMAGE = re.compile(r"""!\[([^\]\n]*)\]\(\s*<?data:(?:[^)"'\n]|"[^"\n]*"|'[^'\n]*'|["']|\n(?![ \t]*\n))*+\)""")
_DATA_URI = re.compile(r"""data:[\w.+/-]+;base64,[A-Za-z0-9+/=]+|(?<==)(["'])data:[^"']*\1""")


def _markdown_for_chunking(text: str) -> str:
    """Markdown in the one shape the chunker reads: YAML front matter (static-site exports)
    is metadata, not policy text, and gives the title when no "# " line does; setext
    headings ("Title" over "=====") become "#" lines; images embedded as base64 (editors
    such as Typora and Notion export them inline) keep only their alt text, instead of
    thousands of word pieces of noise in the chunks; other images and badges go, links
    written by reference become inline links (`_read_links`)."""
    front_matter = _FRONT_MATTER.match(text)
    title = ""
    if front_matter and _is_yaml_mapping(front_matter.group("fields")):
        fields = front_matter.group("fields")
        text = text[front_matter.end() :]
        found = re.search(r"^title:[ \t]*(.+?)[ \t]*$", fields, flags=re.MULTILINE)
        title = found.group(1).strip("'\"") if found else ""
    lines = text.splitlines()
    in_code = code_lines(lines)
    out: list[str] = []
    for index, line in enumerate(lines):
        previous = lines[index - 1] if index else ""
        underline = _SETEXT_UNDERLINE.match(line) if index and not (in_code[index] or in_code[index - 1]) else None
        single_line_paragraph = index < 2 or not lines[index - 2].strip()
        if (
            underline
            and previous.strip()
            and single_line_paragraph
            and not re.match(r"^\s*([-*+>#|]|\d+[.)]\s)", previous)
        ):
            out[-1] = ("# " if underline.group(1)[0] == "=" else "## ") + previous.strip()
            continue
        out.append(line)
    text = _outside_code("\n".join(out), _without_drafts)
    text = _outside_code(text, _without_quote_marks)
    text = _outside_code(text, _without_html_tags)
    text = _outside_code(text, _without_site_generator_marks)
    text = _outside_code(text, _without_tables_of_contents)
    text = _EMBEDDED_IMAGE.sub(r"\1", text)
    text = _DATA_URI.sub("", text)
    definitions: dict[str, str] = {}
    text = _outside_code(text, lambda part: _take_link_definitions(part, definitions))
    text = _outside_code(text, lambda part: _read_links(part, definitions))
    if title and first_title(text) is None:
        text = f"# {title}\n\n{text}"
    return text


# What a Markdown author keeps out of the policy: HTML comments (drafts, notes to editors) and
# struck text (GitHub's ~~…~~, <del>, <s>): "Meals: ~~50~~ 75 EUR" is 75 EUR. Code spans and
# links are read first and kept as they are: `<!--` in a code span opens no comment.
_DRAFTS = re.compile(
    r"(?P<keep>(?P<ticks>`+)[^`]*?(?P=ticks)|<?https?://[^\s>)]+)"
    r"|<!--.*?-->|~~(?=\S)[^\n]*?(?<=\S)~~|<(?P<tag>del|s|strike)\b[^>]*>.*?</(?P=tag)\s*>",
    re.IGNORECASE | re.DOTALL,
)


def _without_drafts(text: str) -> str:
    return _DRAFTS.sub(lambda match: match.group("keep") or "", text)


# A code span ("`<br>`", "`&amp;`"): what the steps below read first and keep as written.
_CODE_SPAN = r"(?P<code>(?P<ticks>`+)(?!`).+?(?<!`)(?P=ticks)(?!`))"

# A blockquote is a callout ("> **Heads-up:** if you leave within 6 months, you pay back
# half"): its text is policy, its ">" marks are not. GitHub's alert line ("> [!WARNING]")
# only sets the box's colour.
_QUOTE_MARKS = re.compile(r"^[ \t]{0,3}(?:>[ \t]?)+", re.MULTILINE)
_ALERT_LINE = re.compile(r"^[ \t]*\[!(?:NOTE|TIP|IMPORTANT|WARNING|CAUTION)\][ \t]*\n?", re.MULTILINE | re.IGNORECASE)


def _without_quote_marks(text: str) -> str:
    return _ALERT_LINE.sub("", _QUOTE_MARKS.sub("", text))


# HTML that GitHub renders inside Markdown: "<details><summary>", "<br>", "<kbd>", "<a href>".
# The text stays and the tags go; a summary is a line of its own; a break inside a table row
# is a space, since a row must stay on one line; a superscript number stays raised, as the HTML
# reader keeps it ("EUR 900<sup>1</sup>" is "EUR 900¹", not "EUR 9001"; "m<sup>2</sup>" is "m²"),
# and another footnote mark goes. Code spans keep their tags as written.
_HTML_BLOCK_TAGS = "details|summary|div|p|section|article|aside|figure|figcaption|center|dl|dt|dd|hr|picture|source"
_HTML_INLINE_TAGS = "span|sup|sub|b|strong|i|em|u|mark|small|big|font|ins|abbr|nobr"
_TAG_END = r"(?=[\s/>])[^<>]*>"  # after a tag's name: "<hr@example.com>" is an address, not <hr>
_HTML = re.compile(
    _CODE_SPAN
    + r"""|<a\s[^<>]*?\bhref\s*=\s*(?P<quote>["'])(?P<url>[^"'<>]*)(?P=quote)[^<>]*>(?P<text>[^<]*?)</a\s*>"""
    rf"|<(?P<literal>code|kbd|tt){_TAG_END}(?P<literal_text>[^<`]*?)</(?P=literal)\s*>"
    rf"|<sup{_TAG_END}\s*(?:(?P<raised>\d{{1,3}})|[*†‡§a-z]|\[\d{{1,2}}\])\s*</sup\s*>"  # "m<sup>2</sup>", "EUR 900<sup>†</sup>"
    r"|(?P<break><br\s*/?>)"
    rf"|(?P<block></?(?:{_HTML_BLOCK_TAGS}){_TAG_END})"
    rf"|</?(?:{_HTML_INLINE_TAGS}){_TAG_END}",
    re.IGNORECASE,
)


def _without_html_tags(text: str) -> str:
    def read(match: re.Match[str], in_table_row: bool) -> str:
        if match.group("code"):
            return match.group(0)
        if match.group("url") is not None:
            label = match.group("text").strip()
            return f"[{label}]({match.group('url')})" if label else ""
        if match.group("literal"):
            return f"`{match.group('literal_text')}`"
        if match.group("raised"):
            return match.group("raised").translate(SUPERSCRIPT_DIGITS)
        if match.group("break"):
            return " " if in_table_row else "\n"
        if match.group("block"):
            return " " if in_table_row else "\n\n"
        return ""

    lines = text.split("\n")
    for index, line in enumerate(lines):
        if "<" in line:
            in_table_row = line.lstrip().startswith("|")
            lines[index] = _HTML.sub(lambda match: read(match, in_table_row), line)  # noqa: B023  # used at once
    return "\n".join(lines)


def _outside_code(text: str, change: Callable[[str], str]) -> str:
    """`change` applied to the text between fenced code blocks; code stays as written."""
    lines = text.split("\n")
    in_code = code_lines(lines)
    parts: list[str] = []
    for code, run in itertools.groupby(zip(lines, in_code), key=lambda pair: pair[1]):
        segment = "\n".join(line for line, _ in run)
        parts.append(segment if code else change(segment))
    return "\n".join(parts)


# Links as a reader meets them. A code span is read first and kept as written (_CODE_SPAN).
# "[handbook]: https://... "Title"" on a line of its own; "[^1]: ..." is a footnote.
_LINK_DEFINITION = re.compile(
    rf"^ {{0,3}}\[(?P<label>(?!\^)[^\[\]\n]+)\]:[ \t]*(?P<url>{LINK_DESTINATION})(?:[ \t]+{LINK_TITLE})?[ \t]*$"
)
# "[text][ref]", "[text][]" and "[ref]" (an image too), not followed by "(" (an inline link).
_LINK_BY_REFERENCE = re.compile(
    _CODE_SPAN + rf"|(?P<bang>!?)\[(?P<text>{LINK_TEXT})\](?:\[(?P<ref>[^\[\]\n]*)\])?(?![(\[])"
)
_IMAGE = rf"!\[{LINK_TEXT}\]\(\s*{LINK_DESTINATION}?(?:\s+{LINK_TITLE})?\s*\)"
# What shows no policy: images, badges (images inside a link: build status, shields.io),
# HTML images and the links they leave empty.
_PICTURES = re.compile(
    _CODE_SPAN + rf"|\[\s*(?:{_IMAGE}\s*)+\]\(\s*{LINK_DESTINATION}?(?:\s+{LINK_TITLE})?\s*\)|{_IMAGE}"
    r"|<img\b[^>]*>|<a\b[^>]*>\s*</a>",
    re.IGNORECASE,
)
# "<https://...>", "<mailto:...>", "<hr@example.com>": the address as written out.
_AUTOLINK = re.compile(
    _CODE_SPAN + r"|<(?P<address>(?:https?|ftp)://[^\s<>]*|mailto:[^\s<>]+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+)>",
    re.IGNORECASE,
)
_EMPTIED_LINE = re.compile(r"\s*(?:[-*+>]|\d{1,9}[.)])?\s*")


def _link_label(label: str) -> str:
    return " ".join(label.split()).casefold()


def _take_link_definitions(text: str, definitions: dict[str, str]) -> str:
    """Reference links' definitions ("[ref]: url") out of the text, into `definitions` (the
    first of a label counts)."""
    kept: list[str] = []
    for line in text.split("\n"):
        definition = _LINK_DEFINITION.match(line)
        if definition is None:
            kept.append(line)
            continue
        url = definition.group("url")
        definitions.setdefault(_link_label(definition.group("label")), url[1:-1] if url.startswith("<") else url)
    return "\n".join(kept)


def _read_links(text: str, definitions: dict[str, str]) -> str:
    """Links as the chunks keep them: a link by reference becomes an inline link "[text](url)"
    (the URL is what the reply's link needs), "<https://...>" the bare URL; images, badges
    and HTML images go, with a line or list item they leave empty; a heading's link is its text."""

    def by_reference(match: re.Match[str]) -> str:
        if match.group("code"):
            return match.group(0)
        url = definitions.get(_link_label(match.group("ref") or match.group("text")))
        if url is None:
            return match.group(0)
        inner = _LINK_BY_REFERENCE.sub(by_reference, match.group("text"))  # a badge's image by reference
        destination = f"<{url}>" if re.search(r"[\s()]", url) else url
        return f"{match.group('bang')}[{inner}]({destination})"

    def autolink(match: re.Match[str]) -> str:
        return match.group("address") or match.group(0)

    lines: list[str] = []
    for line in text.split("\n"):
        read = _LINK_BY_REFERENCE.sub(by_reference, line) if definitions else line
        read = _PICTURES.sub(lambda match: match.group("code") or "", read)
        read = _AUTOLINK.sub(autolink, read)
        if HEADING_LINE.match(read):
            read = render_links(read, lambda label, _url: label)
        if read != line and _EMPTIED_LINE.fullmatch(read):
            continue
        lines.append(read)
    return "\n".join(lines)


# What static-site handbooks (Jekyll, Hugo, MkDocs) add to Markdown: a heading's attributes
# ("## Leave {#leave}", "{: .no_toc }"), attribute lines of their own ("{: .note }"), task
# boxes ("- [ ] Set up the VPN"), footnote marks ("25 days[^1]": the footnote's own line keeps
# its text) and HTML entities ("&nbsp;", "&amp;", "&rarr;"). Code spans stay as written.
_HEADING_ATTRIBUTES = re.compile(r"^(?P<heading>#{1,6}[ \t].*?)[ \t]*\{[ \t]*[#:.][^{}\n]*\}[ \t]*$", re.MULTILINE)
_ATTRIBUTE_LINE = re.compile(r"^[ \t]*\{:[^{}\n]*\}[ \t]*\n?", re.MULTILINE)
_TASK_BOX = re.compile(r"^(?P<item>[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+)\[[ xX]\][ \t]+", re.MULTILINE)
_FOOTNOTE_LABEL = re.compile(r"^[ \t]{0,3}\[\^[^\[\]\s]+\]:[ \t]*", re.MULTILINE)
_INLINE_EXTRAS = re.compile(
    _CODE_SPAN + r"|\[\^[^\[\]\s]+\](?!:)|(?P<entity>&(?:#\d{1,7}|#x[0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});)"
)


def _without_site_generator_marks(text: str) -> str:
    text = _HEADING_ATTRIBUTES.sub(r"\g<heading>", text)
    text = _ATTRIBUTE_LINE.sub("", text)
    text = _TASK_BOX.sub(r"\g<item>", text)
    text = _FOOTNOTE_LABEL.sub("", text)

    def inline(match: re.Match[str]) -> str:
        if match.group("code"):
            return match.group(0)
        return html.unescape(match.group("entity")) if match.group("entity") else ""

    return _INLINE_EXTRAS.sub(inline, text)


# A table of contents ("- [Time off](#time-off)" lines, under "## Contents" or not) names every
# topic and answers none: a question on any topic would retrieve it, and a reply quote it.
_CONTENTS_ITEM = re.compile(rf"^[ \t]*(?:[-*+]|\d{{1,9}}[.)])[ \t]+\[{LINK_TEXT}\]\(#[^()\s]*\)[ \t]*$")
# Its label, as a heading or a line of its own ("**On this page**"), goes with it.
_CONTENTS_LABEL = re.compile(
    r"^(?:#{1,6}[ \t]+)?[*_]{0,2}(?:table of contents|contents|toc|on this page|in this (?:page|document|handbook))"
    r"[ \t:]*[*_]{0,2}[ \t:]*$",
    re.IGNORECASE,
)


def _without_tables_of_contents(text: str) -> str:
    lines = text.split("\n")
    dropped = [bool(_CONTENTS_ITEM.match(line)) for line in lines]
    for index, line in enumerate(lines):  # a label followed by nothing but its links up to the next heading
        if _CONTENTS_LABEL.match(line):
            after = next((j for j in range(index + 1, len(lines)) if lines[j].strip() and not dropped[j]), len(lines))
            ends_there = after == len(lines) or HEADING_LINE.match(lines[after]) is not None
            dropped[index] = any(dropped[index + 1 : after]) and ends_there
    return "\n".join(line for line, drop in zip(lines, dropped) if not drop)


def _is_yaml_mapping(fields: str) -> bool:
    """Front matter is "key: value" lines (with indented or "- " continuations), not prose
    that happens to sit between two rules."""
    lines = [line for line in fields.splitlines() if line.strip() and not line.startswith("#")]  # "#": comments
    keys = [line for line in lines if re.match(r"^[A-Za-z_][\w.-]*(?: [\w.-]+){0,2}:(\s|$)", line)]  # "Last reviewed:"
    # One "Please note: ..." line between two rules is prose; metadata has a title, several
    # keys, or keys written as identifiers ("sidebar_position: 3").
    identifiers = all(re.match(r"^[a-z_][a-z0-9_-]*:", line) for line in keys)
    enough = len(keys) >= 2 or identifiers or any(line.startswith("title:") for line in keys)
    return bool(keys) and enough and all(line in keys or line.startswith((" ", "\t", "- ")) for line in lines)


def _read_pdf(path: Path) -> str:
    from llama_index.readers.file import PDFReader  # LlamaIndex's readers: as in _read_flat

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
    """Word's heading styles give the "#" levels, list styles and runs of numbered paragraphs
    the "- " items, tables come as rows. A document whose headings are typed rather than styled (a "Title"
    at most) gets the plain-text heading detection for the rest."""
    try:
        blocks = read_docx_blocks(path)
    except NotADocx as error:
        raise LoadError(str(error)) from None
    if any(block.kind == "heading" for block in blocks):
        shift = 1 if any(block.kind == "title" for block in blocks) else 0  # "Heading 1" sits below a Title
        return "\n\n".join(_docx_markdown(block, shift) for block in blocks)
    title_block = next((block for block in blocks if block.kind == "title"), None)
    rest = [
        block if block.kind != "title" else DocxBlock("text", block.text)
        for block in blocks
        if block is not title_block
    ]
    body = _mark_plain_headings(
        "\n\n".join(_docx_markdown(block, None) for block in rest), titled=title_block is not None
    )
    return f"# {title_block.text}\n\n{body}" if title_block else body


def _docx_markdown(block: DocxBlock, heading_shift: int | None) -> str:
    """One block as Markdown; heading_shift None: the styles say nothing about headings."""
    if block.kind == "title" or (block.kind == "heading" and heading_shift is not None):
        level = 0 if block.kind == "title" else block.level + (heading_shift or 0)
        return "#" * min(max(level, 1), 6) + " " + block.text
    if block.kind == "item":
        return "- " + block.text
    return keep_as_text(block.text)


def _reflow_pdf_lines(text: str) -> str:
    """PDF text comes as wrapped lines with no blank lines: rebuild paragraphs and heading lines.

    A line is a heading when it looks like one and the line before it closed a sentence,
    was a list item or was itself a heading; every other line continues its paragraph.
    """
    blocks: list[str] = []
    paragraph: list[str] = []
    previous = ""
    previous_was_heading = True
    # The document's own spellings. A word cut at a line end is not among them: a hyphen
    # counts only with a letter right after it.
    document_words = set(_DOCUMENT_WORD.findall(text.lower()))

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
            joined = _join_hyphenated(paragraph[-1], line, document_words) if paragraph else None
            if joined is not None:
                paragraph[-1] = joined
            else:
                paragraph.append(line)
            previous_was_heading = False
        previous = line
    flush()
    return "\n\n".join(blocks)


_LINE_END_HYPHEN = re.compile(r"(\w+)([-\u00ad])$")
_LINE_START_WORD = re.compile(r"[^\W\d_]+")
_DOCUMENT_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
# A hyphen before one of these is suspended ("pre-" / "and post-trip", "Hotel-" / "und
# Flugkosten"): the line break stays a space.
_SUSPENDED_HYPHEN_WORDS = {
    "and",
    "or",
    "nor",
    "to",
    "but",
    "as",
    "und",
    "oder",
    "bis",
    "et",
    "ou",
    "y",
    "o",
    "e",
    "en",
    "of",
}


def _join_hyphenated(before: str, after: str, document_words: set[str]) -> str | None:
    """`before` (a line ending in a hyphen) and `after` (the next line) as one, when the line
    break cut a word: "reim-" + "bursed" is "reimbursed", "part-" + "time" stays "part-time".
    None when the break is a space after all (a suspended hyphen, no word to join)."""
    end = _LINE_END_HYPHEN.search(before)
    start = _LINE_START_WORD.match(after)
    if end is None or start is None or not after[:1].islower():
        return None
    if after.split(maxsplit=1)[0].split("/")[0].rstrip(",;:").lower() in _SUSPENDED_HYPHEN_WORDS:
        return None
    head, tail = end.group(1), start.group(0)
    if end.group(2) == "\u00ad" or _is_one_word(head, tail, document_words):
        return before[:-1] + after
    return before + after


def _is_one_word(head: str, tail: str, document_words: set[str]) -> bool:
    """Whether a word cut at a line-end hyphen is one word, not a hyphenated compound. The
    document's own spelling elsewhere decides first; then English word frequencies (wordfreq):
    a common word ("payable", "without"), or a known word whose halves are not both common
    words ("reimbursable"; but "self-employed", "follow-up")."""
    joined, hyphenated = (head + tail).lower(), f"{head}-{tail}".lower()
    if hyphenated in document_words or joined in document_words:
        return joined in document_words
    frequency = zipf_frequency(joined, "en")
    return frequency >= 3.0 or (frequency > 0 and min(zipf_frequency(head, "en"), zipf_frequency(tail, "en")) < 3.0)


_PLAIN_UNDERLINE = re.compile(r"^\s*([=~-])\1{2,}\s*$")
_NUMBERED_HEADING = re.compile(r"^(\d+(?:\.\d+)*)(\.?)\s+(?=\S)")


def _mark_plain_headings(text: str, titled: bool = False) -> str:
    """Turn heading-looking lines of extracted text (PDF, DOCX, TXT) into Markdown headings.

    A heading is a short line on its own (or over a "=====" underline) without closing
    punctuation: numbered ("2.1 Booking travel") or in Title Case. The first such line is
    the title (level 1), unless the caller has the title already (`titled`). Numbered lines
    that follow each other with nothing between ("1. Book flights", then "2. Get approval")
    are a list, not headings: as headings, the last item would become the section of the
    paragraph after it. A run of Title-Case numbered lines stays headings (sections with no
    text yet).
    """
    if _is_markdown(text):
        return text
    lines = keep_as_text(text).splitlines()  # "# of days: 25", "# run the backup" are text here
    for index in range(len(lines) - 1):  # "Travel Policy" over "=====" (or "-----", "~~~~~"): the rule goes
        stripped = lines[index].strip()
        if (
            _PLAIN_UNDERLINE.match(lines[index + 1])
            and stripped
            and _looks_like_heading(stripped)
            and "  " not in stripped
            and "\t" not in stripped  # "City     Limit": a table's header
            and (index == 0 or not lines[index - 1].strip())
        ):
            lines[index + 1] = ""
    numbers: dict[int, str] = {}  # heading-looking line -> its number as written ("2.1", "3."), "" if none
    for index, line in enumerate(lines):
        stripped = line.strip()
        previous_blank = index == 0 or not lines[index - 1].strip()
        next_blank = index + 1 >= len(lines) or not lines[index + 1].strip()
        if stripped and previous_blank and next_blank and _looks_like_heading(stripped):
            numbered = _NUMBERED_HEADING.match(stripped)
            numbers[index] = numbered.group(1) + numbered.group(2) if numbered else ""
    list_items = _numbered_list_lines(lines, numbers)
    out: list[str] = []
    seen_title = titled
    for index, line in enumerate(lines):
        if index not in numbers or index in list_items:
            out.append(line)
            continue
        number = numbers[index].rstrip(".")
        if not seen_title:
            level = 1
        elif number:
            level = min(2 + number.count("."), 6)
        else:
            level = 2
        seen_title = True
        out.append("#" * level + " " + line.strip())
    return "\n".join(out)


def _numbered_list_lines(lines: list[str], numbers: dict[int, str]) -> set[int]:
    """Numbered heading-looking lines whose next text line carries the next number, written
    the same way ("3." then "4.", "2.1" then "2.2"), unless both read as titles."""
    filled = [index for index, line in enumerate(lines) if line.strip()]
    items: set[int] = set()
    for here, after in zip(filled, filled[1:]):
        first, second = numbers.get(here), numbers.get(after)
        if not (first and second) or _next_number(first) != second:
            continue
        titles = [_NUMBERED_HEADING.sub("", lines[index].strip(), count=1) for index in (here, after)]
        if not all(_is_title_case(title) for title in titles):
            items.update((here, after))
    return items


def _next_number(number: str) -> str:
    """ "3." -> "4.", "2.1" -> "2.2"."""
    dot = "." if number.endswith(".") else ""
    *parents, last = number.rstrip(".").split(".")
    return ".".join([*parents, str(int(last) + 1)]) + dot


def _is_markdown(text: str) -> bool:
    """Text written as Markdown: it opens with a "# " title, or has two "#" headings or more.
    One "#" line elsewhere is more likely a comment in a snippet ("# Is the VPN up?")."""
    lines = text.splitlines()
    outside_code = [line for line, in_code in zip(lines, code_lines(lines)) if not in_code]
    headings = [title for title in map(heading_text, outside_code) if title and _reads_like_heading(title)]
    first_line = next((line for line in outside_code if line.strip()), "")
    return len(headings) >= 2 or (bool(headings) and heading_text(first_line) == headings[0])


def _reads_like_heading(title: str) -> bool:
    """A "#" line that a writer meant as a Markdown heading: short, capitalised or numbered,
    a title or an FAQ's question, not a statement ("# of days: 25 for everyone." and
    "# run the backup" are not)."""
    return len(title) <= 120 and title[-1] not in ".,;:!" and (title[0].isupper() or title[0].isdigit())


def _looks_like_heading(line: str) -> bool:
    if len(line) > 80 or line[-1] in ".,;:!?" or line.startswith(("-", "*", "•", "|")):
        return False
    if len(line.split()) > 10:
        return False
    return bool(_NUMBERED_HEADING.match(line)) or _is_title_case(line)


def _is_title_case(text: str) -> bool:
    small = {"a", "an", "and", "or", "of", "the", "for", "to", "in", "on", "with", "at", "by", "&", "vs"}
    return all(word[0].isupper() or word.lower() in small or not word[0].isalpha() for word in text.split())


# Typographic ligatures (PDFs, text copied from them) and invisible break hints: "ﬁnance" must
# read "finance" for search and for the evaluator.
# NUL too: PostgreSQL refuses it in text, which failed the whole ingestion batch.
_INVISIBLE_AND_LIGATURES = str.maketrans(
    {
        "\x00": None,
        "\u00a0": " ",
        "\u00ad": None,
        "\u200b": None,
        "\ufb00": "ff",
        "\ufb01": "fi",
        "\ufb02": "fl",
        "\ufb03": "ffi",
        "\ufb04": "ffl",
        "\ufb05": "st",
        "\ufb06": "st",
    }
)


def _normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").translate(_INVISIBLE_AND_LIGATURES)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def _title(text: str, path: Path) -> str:
    return first_title(text) or path.stem.replace("-", " ").replace("_", " ").strip().title()
