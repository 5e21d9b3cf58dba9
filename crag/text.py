"""The text toolkit every part of policybot shares: sentence splitting, stopwords, content
words, the folding of quotes, dashes and accents, and Markdown's inline marks (links, code,
emphasis). One home for each, so the pipeline, the training data, the redaction, the corpus
checks and the replies read text the same way."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence

# --- folding ---------------------------------------------------------------------------------

# Typographic quotes, dashes and spaces to their plain forms: how phrases are looked up, names
# matched and Latin-1 PDFs written.
PUNCTUATION_FOLD = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u00a0": " ",
        "\u2011": "-",
        "\u202f": " ",
    }
)


def fold_punctuation(text: str) -> str:
    """Curly quotes straight, dashes to hyphens, odd spaces to spaces."""
    return text.translate(PUNCTUATION_FOLD)


def fold_accents(text: str) -> str:
    """Accents off, curly quotes straight ("Núñez" → "Nunez", "O’Brien" → "O'Brien")."""
    decomposed = unicodedata.normalize("NFKD", fold_punctuation(text))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


# --- words -----------------------------------------------------------------------------------

WORD_TOKEN = re.compile(r"[^\W_]+(?:[.,'’-][^\W_]+)*")  # any script's letters and digits

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't doing
    don't down during each few for from further had hadn't has hasn't have haven't having he he'd
    he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into
    is isn't it it's its itself let's me more most mustn't my myself no nor not of off on once only
    or other ought our ours ourselves out over own same shan't she she'd she'll she's should
    shouldn't so some such than that that's the their theirs them themselves then there there's
    these they they'd they'll they're they've this those through to too under until up very was
    wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while
    who who's whom why why's with won't would wouldn't you you'd you'll you're you've your yours
    yourself yourselves
    im ive id dont doesnt didnt cant wont isnt arent whats hows
    whose whether whats also just still ever even really actually basically maybe perhaps
    may might must shall will get gets got getting go going make need needs want wants like
    know knows tell ask asking question questions quick hey hi hello thanks thank please pls plz
    wondering wonder anyone someone somebody anybody everyone everybody something anything
    thing things stuff way ok okay yes yeah folks team guys lot lots much many long able allowed
    possible kind sort bit currently now today per next another other others ext
    """.split()
)


def content_words(text: str) -> set[str]:
    """Lower-cased, stemmed words that are not stopwords ("Expenses" and "expense" match)."""
    words = re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())
    return {_stem(w) for w in words if w not in STOPWORDS}


def _stem(word: str) -> str:
    """A tiny suffix stripper: enough to match plurals and -ed/-ing forms."""
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2]:
        word = word[:-1]  # "submitt" -> "submit"
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]  # "expense" and "expens" meet
    return word


# --- Markdown inline marks -------------------------------------------------------------------

# A link's text: brackets nest one level ("[![badge](img)](url)"), "\]" is a bracket.
LINK_TEXT = r"(?:[^\[\]\n\\]|\\.|\[(?:[^\[\]\n\\]|\\.)*\])*"
# Its destination: "<any thing>", or no spaces with balanced parentheses ("wiki/Leave_(UK)").
LINK_DESTINATION = r"(?:<[^<>\n]*>|(?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))+)"
LINK_TITLE = r"""(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\))"""
# An inline link or image, "[text](url)", "[text](url "title")", "![alt](url)".
MARKDOWN_LINK = re.compile(
    rf"(?P<image>!?)\[(?P<text>{LINK_TEXT})\]\(\s*(?P<url>{LINK_DESTINATION})?(?:\s+{LINK_TITLE})?\s*\)"
)
# A URL written out: its last character is not punctuation that ends the sentence around it.
BARE_URL = re.compile(
    r"""\b(?:(?:https?|ftp)://|mailto:|www\.)"""
    r"""(?:[^\s<>()\[\]{}"'`]|\([^\s<>()]*\))*(?:[^\s<>()\[\]{}"'`.,;:!?*_~]|\([^\s<>()]*\))"""
)
# A link or a bare URL, without groups: for splitters that must never cut one (the chunker).
LINK_OR_URL = rf"!?\[{LINK_TEXT}\]\(\s*{LINK_DESTINATION}?(?:\s+{LINK_TITLE})?\s*\)|{BARE_URL.pattern}"
INLINE_CODE = re.compile(r"(?<!`)(?P<ticks>`+)(?!`)(?P<code>.+?)(?<!`)(?P=ticks)(?!`)")
# Numbers with inner separators: "2.5", "1,250.50", "v1.2.3", "10:30".
_NUMBER = re.compile(r"\b[vV]?\d+(?:[.,:]\d+)+\b")
# Emphasis only where Markdown reads it as such: "**" may sit inside a word, "__", "*" and "_"
# not ("snake_case", "2*3*4" and "* item" stay as they are).
_EMPHASIS = (
    re.compile(r"(?<![\w*])(\*\*\*|\*\*|\*)(?=[^\s*])(.+?)(?<=[^\s*])\1(?![\w*])"),
    re.compile(r"\*\*(?=[^\s*])(.+?)(?<=[^\s*])\*\*"),
    re.compile(r"(?<![\w\\])(___|__|_)(?=[^\s_])(.+?)(?<=[^\s_])\1(?!\w)"),
)
_LINK_TEXT_ESCAPE = re.compile(r"\\([\\\[\]])")  # "\[", "\]" and "\\" in a link's text: the character itself
_SLOT = "\ue000{}\ue001"  # private-use characters: what plain_text keeps aside while it works
_SLOT_PATTERN = re.compile("\ue000(\\d+)\ue001")


def link_url(match: re.Match[str]) -> str:
    """The destination of a MARKDOWN_LINK match, without its angle brackets ("" if none)."""
    url = match.group("url") or ""
    return url[1:-1] if url.startswith("<") else url


def markdown_link(text: str, url: str) -> str:
    """`text` as a Markdown link to `url`, that MARKDOWN_LINK reads back whole whatever brackets
    the text or spaces and parentheses the URL hold."""
    label = re.sub(r"([\\\[\]])", r"\\\1", text)
    destination = f"<{url}>" if re.search(r"[\s()]", url) else url
    return f"[{label}]({destination})"


def render_links(
    text: str,
    link: Callable[[str, str], str],
    between: Callable[[str], str] = lambda part: part,
    image: Callable[[str, str], str] | None = None,
) -> str:
    """`text` with each Markdown link as `link(text, url)`, each image as `image(alt, url)`
    (default: as a link) and the text between as `between(part)`."""
    parts: list[str] = []
    position = 0
    for match in MARKDOWN_LINK.finditer(text):
        parts.append(between(text[position : match.start()]))
        render = image if match.group("image") and image is not None else link
        parts.append(render(match.group("text"), link_url(match)))
        position = match.end()
    parts.append(between(text[position:]))
    return "".join(parts)


def link_text(label: str) -> str:
    """A link's text as a reader sees it: a badge (an image inside the link) as its alt text,
    "\\]" as a bracket (LINK_TEXT), inline marks as plain_text shows them."""
    return _LINK_TEXT_ESCAPE.sub(r"\1", plain_text(label))


def plain_text(markdown: str) -> str:
    """Markdown's inline marks as a reader sees them: a link or an image as its text, inline
    code as its content, no emphasis markers. URLs and code keep every character; lines,
    list and heading markers stay. Text without these marks comes back unchanged."""
    if not any(mark in markdown for mark in "[`*_"):
        return markdown
    kept: list[str] = []

    def keep(part: str) -> str:
        kept.append(part)
        return _SLOT.format(len(kept) - 1)

    text = INLINE_CODE.sub(lambda match: keep(_code_content(match.group("code"))), markdown)

    text = render_links(text, lambda label, _url: link_text(label))
    text = BARE_URL.sub(lambda match: keep(match.group(0)), text)
    previous = None
    while previous != text:  # "*a *b* c*": a marker one reading leaves unpaired pairs in the next
        previous, text = text, render_emphasis(text, lambda _marker, inner: inner)

    def restore(match: re.Match[str]) -> str:
        index = int(match.group(1))
        return kept[index] if index < len(kept) else match.group(0)

    previous = None
    while previous != text:  # a URL kept aside may hold a code span's slot ("https://a.example`x`")
        previous, text = text, _SLOT_PATTERN.sub(restore, text)
    return text


# What keeps every character where a person reads a reply: code spans and URLs.
_LITERAL = re.compile(rf"{INLINE_CODE.pattern}|{BARE_URL.pattern}")
_EMPHASIS_SLOT = "\ue002{}\ue003"  # not _SLOT: plain_text calls render_emphasis with its own slots in the text
_EMPHASIS_SLOT_PATTERN = re.compile("\ue002(\\d+)\ue003")


def render_emphasis(text: str, mark: Callable[[str, str], str]) -> str:
    """`text` with each Markdown emphasis as `mark(marker, inner)`: the marker as written ("*",
    "**", "***", "_", "__", "___") and the text inside, its own emphasis rendered first
    ("**a _b_ c**"). Code spans and URLs stay as they are ("snake_case_name" in code)."""
    if "*" not in text and "_" not in text:
        return text
    kept: list[str] = []

    def keep(part: str) -> str:
        kept.append(part)
        return _EMPHASIS_SLOT.format(len(kept) - 1)

    def restore(part: str) -> str:
        return _EMPHASIS_SLOT_PATTERN.sub(lambda match: kept[int(match.group(1))], part)

    def render(part: str) -> str:
        for emphasis in _EMPHASIS:
            part = emphasis.sub(lambda match: keep(emphasis_match(match)), part)
        return part

    def emphasis_match(match: re.Match[str]) -> str:
        marker = match.group(1) if match.lastindex == 2 else "**"  # the second pattern: "**" inside a word
        return mark(marker, restore(render(match.group(match.lastindex or 0))))

    return restore(render(_LITERAL.sub(lambda match: keep(match.group(0)), text)))


def reader_text(markdown: str) -> str:
    """Markdown as a person reads it in a terminal or a web page: `plain_text`, with GitHub's
    emoji shortcodes (":tada:", ":+1:") as the emoji, outside code spans and URLs. Slack draws
    the shortcodes itself, and the judge reads the words (`plain_text`)."""
    if ":" not in markdown:
        return plain_text(markdown)
    import emoji  # 30 ms: only for a reply shown to a person, not for every importer of this module

    parts: list[str] = []
    position = 0
    for match in _LITERAL.finditer(markdown):
        parts += [emoji.emojize(markdown[position : match.start()], language="alias"), match.group(0)]
        position = match.end()
    parts.append(emoji.emojize(markdown[position:], language="alias"))
    return plain_text("".join(parts))


def _code_content(code: str) -> str:
    """A code span's text: one space each side is padding when both are there ("`` `x` ``")."""
    return code[1:-1] if len(code) > 2 and code.startswith(" ") and code.endswith(" ") and code.strip() else code


def _unbreakable_spans(text: str) -> list[tuple[int, int]]:
    """Where a sentence must not end: links (text and URL), bare URLs, inline code, numbers."""
    spans = [
        match.span() for pattern in (MARKDOWN_LINK, INLINE_CODE, BARE_URL, _NUMBER) for match in pattern.finditer(text)
    ]
    return sorted(spans)


# --- sentence splitting -------------------------------------------------------------

# Abbreviations after which a period never ends a sentence (they precede a name, number or
# more words). Compared lower-case, without the final period.
_NEVER_FINAL_ABBREVIATIONS = frozenset(
    """
    mr mrs ms mx dr prof sr jr st rev hon gen col capt lt sgt
    no nos nr art sec sect ch fig figs vol vols pp p para paras ref refs
    e.g eg i.e ie cf viz vs approx appx ca incl excl min max dept div est ext tel ph
    jan feb mar apr jun jul aug sep sept oct nov dec
    mon tue tues wed thu thur thurs fri sat sun
    """.split()
)

# Abbreviations that may end a sentence too. After these we split only when the next word
# is a typical sentence opener; otherwise we keep going (merging two sentences is safe,
# cutting one is not).
_MAYBE_FINAL_ABBREVIATIONS = frozenset("etc inc ltd co corp llc plc bros a.m p.m am pm u.s u.k e.u".split())

_SENTENCE_OPENERS = frozenset(
    """
    the this that these those there it its if when where while all any each every some no
    you your we our they their he she i a an in on at for from to by as after before during
    please note employees employee managers staff contractors submit
    """.split()
)

# What may close a sentence after its final punctuation, and open the next before its first
# letter: quotes, brackets and emphasis marks ("30 days. *Questions? Ask in #ask-people.* Last
# edit: May." is four sentences).
_CLOSING_MARKS = r"""["'”’)\]*_]*"""
_OPENING_MARKS = r"""["'“‘(\[*_]*"""
# Sentence-final punctuation, its closing marks, then whitespace.
_BOUNDARY = re.compile(rf"[.!?]+{_CLOSING_MARKS}\s+")
# The next sentence must start like one (capital, digit or currency, after its opening marks).
_SENTENCE_START = re.compile(rf"{_OPENING_MARKS}[A-Z0-9$€£]")
_WORD_BEFORE_PERIOD = re.compile(rf"""(?:^|[\s(\["'“‘*_])([A-Za-z][A-Za-z.]*)[.!?]+{_CLOSING_MARKS}\s+$""")
_FIRST_WORD = re.compile(rf"{_OPENING_MARKS}([A-Za-z]+)")
_QUESTION_OR_EXCLAMATION_END = re.compile(rf"[?!]{_CLOSING_MARKS}$")

BULLET_LINE = re.compile(r"^\s*(?:[-*+•·▪◦–—]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)](?=\s)|\([ivxlc]+\))\s+")
HEADING_LINE = re.compile(r"^\s*#{1,6}\s+")
TABLE_ROW = re.compile(r"^\s*\|")
# A Markdown thematic break ("---", "***", "_ _ _"): a line between sections, no text.
_THEMATIC_BREAK = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LIST_MARKER_ONLY = re.compile(r"^\(?(?:\d{1,3}|[a-zA-Z]|[ivxlc]+)[.)]$")


def split_sentences(text: str) -> list[str]:
    """Split text into whole sentences.

    Blocks first (blank lines, headings, bullet items and table rows each start a new
    block; wrapped lines are joined; a table's body rows carry its column names,
    `_labelled_tables`), then sentences inside each block. A period ends a
    sentence only when whitespace and a sentence-like start follow and the word before it
    is not a known abbreviation or an initial, so "U.S.", "e.g.", "No. 5", "Jan. 5, 2026",
    "$1,250.50" and "2.5 days" never cause a cut; nor does anything inside a Markdown link
    (its text and URL), a bare URL, inline code or a number ("v1.2.3").
    """
    sentences: list[str] = []
    for block in _blocks(_labelled_tables(text)):
        sentences.extend(_split_block(block))
    return sentences


TABLE_SEPARATOR = re.compile(r"^\s*\|(?:\s*:?-{3,}:?\s*\|)+\s*$")  # "| --- | :---: |", under a header row


def table_cells(row: str) -> list[str]:
    """A Markdown table row's cells ("| a | b \\| c |" → ["a", "b \\| c"]: an escaped pipe stays)."""
    inner = row.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", inner)]


def _labelled_tables(text: str) -> str:
    """Each body row of a Markdown table (a header row over a "| --- |" rule) with its column
    names in its cells, and the header and the rule left out: a row is read, scored and quoted
    alone, and "| Belfast | DSO | 028 9055 0177 |" says nothing without its header, where
    "| Office: Belfast | Role: DSO | Phone: 028 9055 0177 |" does. Header cells that are empty
    (a table headed down its first column) label nothing."""
    lines = text.splitlines()
    if not any(TABLE_SEPARATOR.match(line) for line in lines):
        return text
    out: list[str] = []
    header: list[str] | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if TABLE_ROW.match(line) and TABLE_SEPARATOR.match(following) and not TABLE_SEPARATOR.match(line):
            header = [cell.rstrip(":").strip() for cell in table_cells(line)]
            index += 2
            continue
        if header is not None and TABLE_ROW.match(line):
            cells = table_cells(line)
            labelled = [
                f"{name}: {cell}" if name and cell and cell != name else cell
                for name, cell in zip(header + [""] * len(cells), cells)
            ]
            out.append("| " + " | ".join(cell for cell in labelled if cell) + " |")
        else:
            if not TABLE_ROW.match(line):
                header = None  # the table has ended
            out.append(line)
        index += 1
    return "\n".join(out)


def _blocks(text: str) -> list[str]:
    """Group lines into blocks: paragraphs, single headings, bullet items, table rows."""
    blocks: list[list[str]] = []
    current: list[str] = []
    current_is_item = False  # the current block is a bullet item

    def close() -> None:
        nonlocal current, current_is_item
        if current:
            blocks.append(current)
        current, current_is_item = [], False

    lines = text.splitlines()
    for line, in_code in zip(lines, code_lines(lines)):
        if in_code:
            close()
            if line.strip() and not fence_marker(line):  # a line of code is one span: "# not policy" is no heading
                blocks.append([code_span(line.strip())])
        elif not line.strip() or _THEMATIC_BREAK.match(line):
            close()  # a thematic break (or a "---" setext underline) holds no sentence: not "30 days. ---."
        elif HEADING_LINE.match(line) or TABLE_ROW.match(line):
            close()
            blocks.append([line])
        elif BULLET_LINE.match(line):
            close()
            current, current_is_item = [line], True
        elif current_is_item and not _continues_item(line, current[-1]):
            close()
            current = [line]
        else:
            current.append(line)
        if current and not current_is_item and current[-1].rstrip().endswith(":"):
            # "The following are reimbursable:" introduces a list: a block of its own.
            close()
    close()
    return [" ".join(part.strip() for part in block) for block in blocks]


def code_lines(lines: Sequence[str]) -> list[bool]:
    """For each line, whether it belongs to a fenced code block (fences included), as in
    Markdown: a fence opens with "```" or "~~~" indented at most three spaces, anywhere, and
    closes with the same marker. A fence that never closes is a rule, not code: it must not
    swallow every heading after it. Readers of plain text indent fence-like lines of their
    own (ingestion/chunking.py's `keep_as_text`), so they never open one."""
    markers = [fence_marker(line) for line in lines]
    flags = [False] * len(lines)
    index = 0
    while index < len(lines):
        marker = markers[index]
        close = next((j for j in range(index + 1, len(lines)) if markers[j] == marker), None) if marker else None
        if close is None:
            index += 1
            continue
        flags[index : close + 1] = [True] * (close + 1 - index)
        index = close + 1
    return flags


def fence_marker(line: str) -> str:
    stripped = line.lstrip(" ")
    marker = stripped[:3] if len(line) - len(stripped) <= 3 else ""
    return marker if marker in ("```", "~~~") else ""


def code_span(code: str) -> str:
    """`code` as one inline code span, its fence longer than any run of backticks inside."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    ticks = "`" * (longest + 1)
    padding = " " if code.startswith("`") or code.endswith("`") else ""
    return f"{ticks}{padding}{code}{padding}{ticks}"


def _continues_item(line: str, previous: str) -> bool:
    """A wrapped bullet line is indented, starts in lower case, or follows a line that stops
    mid-sentence ("- Hotels are reimbursed up to" / "200 USD per night.")."""
    unfinished = not previous.rstrip().endswith((".", "!", "?", ":", ";"))
    return line[:1].isspace() or line.lstrip()[:1].islower() or unfinished


def _split_block(block: str) -> list[str]:
    block = re.sub(r"\s+", " ", block).strip()
    if not block:
        return []
    if HEADING_LINE.match(block) or TABLE_ROW.match(block):
        # A heading names a section ("## 2. Travel" is not "## 2." and "Travel"), and a table row
        # is read with its column names: a cell of two sentences stays in its row.
        return [block]
    sentences: list[str] = []
    start = 0
    unbreakable = _unbreakable_spans(block)
    for match in _BOUNDARY.finditer(block):
        end = match.end()
        if end >= len(block):
            break
        if any(left <= match.start() < right for left, right in unbreakable):
            continue  # "[Dr. Lee's page](...)", "https://a.example/x. y", "`make. all`"
        if _LIST_MARKER_ONLY.match(block[start:end].strip()):
            continue  # "1. Book via the portal.": the marker belongs to its item
        if _is_sentence_end(block[start:end], block[end:]):
            sentences.append(block[start:end].strip())
            start = end
    tail = block[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def _is_sentence_end(before: str, after: str) -> bool:
    """Decide whether the punctuation ending `before` closes a sentence."""
    if not _SENTENCE_START.match(after):
        return False  # "e.g. the", "per diem. and": lower case continues the sentence
    punctuation = before.rstrip()
    if _QUESTION_OR_EXCLAMATION_END.search(punctuation):
        return True
    word_match = _WORD_BEFORE_PERIOD.search(before)
    if word_match is None:
        return True  # a number, amount or closing bracket before the period
    word = word_match.group(1).lower().rstrip(".")
    if word in _NEVER_FINAL_ABBREVIATIONS:
        return False
    is_initial = len(word) == 1 or re.fullmatch(r"(?:[a-z]\.)+[a-z]", word) is not None
    if word in _MAYBE_FINAL_ABBREVIATIONS or is_initial:
        first_word = _FIRST_WORD.match(after)
        return first_word is not None and first_word.group(1).lower() in _SENTENCE_OPENERS
    return True


_PLAIN_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")


def plain_sentences(text: str) -> list[str]:
    """Sentences without their list or heading markers ("- Claims are ..." → "Claims are ...")."""
    cleaned = (_PLAIN_BULLET.sub("", sentence).strip().lstrip("#").strip() for sentence in split_sentences(text))
    return [sentence for sentence in cleaned if sentence]
