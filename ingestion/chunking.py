"""Structure-aware chunking: split on headings, then on paragraphs and whole sentences.

Each chunk keeps its heading path ("Leave > Paid Time Off > Sabbatical"). Sizes are
counted in the embedding model's own word pieces, because MiniLM truncates at 256.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from crag.text import LINK_OR_URL, TABLE_SEPARATOR, code_lines, fence_marker

HEADING_SEPARATOR = " > "
# Pieces of a sentence too long for one chunk: LlamaIndex's default ("[^,.;。？！]+[,.;。？！]?"),
# except that a link or URL is one piece: "(https://www.amazon." must not end a chunk.
CLAUSES = rf"(?:{LINK_OR_URL}|[^,.;。？！])+[,.;。？！]?|[,.;。？！]"
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


@dataclass(frozen=True)
class Section:
    heading_path: tuple[str, ...]
    body: str


@dataclass(frozen=True)
class ChunkDraft:
    text: str
    section: str  # heading path joined with " > "
    position: int  # order within the document


def split_sections(markdown: str) -> list[Section]:
    """Sections in document order.

    A heading whose body is only its subsections yields no section of its own (it lives on
    in their heading paths). A heading with neither body nor subsections keeps its text as
    its body, so nothing is lost when a list item was taken for a heading ("1. Book
    flights in the portal" followed by "2. ...").
    """
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    has_content: list[bool] = []  # per stack entry: a body or a subsection of its own
    body: list[str] = []

    def flush() -> None:
        text = "\n".join(body).strip()
        if text:
            sections.append(Section(tuple(title for _, title in stack), text))
            if stack:  # its ancestors were marked when their subsections began
                has_content[-1] = True
        body.clear()

    def pop() -> None:
        if not has_content[-1]:
            sections.append(Section(tuple(title for _, title in stack), stack[-1][1]))
        stack.pop()
        has_content.pop()

    lines = markdown.splitlines()
    for line, in_code in zip(lines, code_lines(lines)):
        match = None if in_code else _HEADING.match(line)
        if match:
            flush()
            level, title = len(match.group(1)), match.group(2).strip()
            while stack and stack[-1][0] >= level:
                pop()
            if stack:
                has_content[-1] = True  # a subsection counts as the parent's content
            stack.append((level, title))
            has_content.append(False)
        else:
            body.append(line)
    flush()
    while stack:
        pop()
    return sections


def heading_text(line: str) -> str | None:
    """The text of a "#" heading line, None for any other line."""
    match = _HEADING.match(line)
    return match.group(2).strip() if match else None


def keep_as_text(text: str) -> str:
    """Plain text whose lines the chunker must read as text even when one looks like Markdown:
    a "# " line ("# of nights covered: 3" in a Word file) gets a leading space, a "```" or
    "~~~" line (a rule under a line of text) four, which Markdown reads as no fence."""

    def literal(line: str) -> str:
        if _HEADING.match(line):
            return " " + line
        return "    " + line if fence_marker(line) else line

    return "\n".join(literal(line) for line in text.split("\n"))


def first_title(markdown: str) -> str | None:
    """The text of the first "# " heading outside code blocks."""
    lines = markdown.splitlines()
    for line, in_code in zip(lines, code_lines(lines)):
        match = None if in_code else _HEADING.match(line)
        if match and len(match.group(1)) == 1:
            return match.group(2).strip()
    return None


@lru_cache(maxsize=4)
def word_piece_counter(model_folder: str) -> Callable[[str], list[str]]:
    """The embedding model's tokenizer as SentenceSplitter's token counter."""
    # transformers (seconds): only to chunk; the readers and upload checks import this module for its Markdown helpers
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_folder, local_files_only=True)
    return tokenizer.tokenize


def chunk_markdown(
    markdown: str,
    tokenize: Callable[[str], list[str]],
    chunk_tokens: int = 200,
    overlap_tokens: int = 20,
) -> list[ChunkDraft]:
    from llama_index.core.node_parser import SentenceSplitter  # LlamaIndex (a second): only to chunk, as above

    # "\n\n" between paragraphs: SentenceSplitter splits on paragraphs first, then
    # sentences, then (for a single giant sentence) after its commas and periods, never inside
    # a link or URL, and only then on words.
    splitter = SentenceSplitter(
        chunk_size=chunk_tokens,
        chunk_overlap=min(overlap_tokens, chunk_tokens // 4),
        tokenizer=tokenize,
        paragraph_separator="\n\n",
        secondary_chunking_regex=CLAUSES,
    )
    drafts: list[ChunkDraft] = []
    for section in split_sections(markdown):
        section_name = HEADING_SEPARATOR.join(section.heading_path)
        body = tables_in_row_groups(section.body, tokenize, chunk_tokens)
        for piece in splitter.split_text(body):
            piece = piece.strip()
            if piece:
                drafts.append(ChunkDraft(text=piece, section=section_name, position=len(drafts)))
    return drafts


def tables_in_row_groups(body: str, tokenize: Callable[[str], list[str]], chunk_tokens: int) -> str:
    """A table too long for one chunk as groups of whole rows, each under its header row, one
    paragraph each: the splitter then cuts between groups, never inside a row, and every
    chunk says which column a number is in. A table that fits one chunk stays as it is."""
    budget = int(chunk_tokens * 0.9)  # the splitter counts its separators too
    lines = body.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        is_table = (
            lines[index].startswith("|") and index + 1 < len(lines) and TABLE_SEPARATOR.match(lines[index + 1].strip())
        )
        if not is_table:
            out.append(lines[index])
            index += 1
            continue
        end = index + 2
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        header, rows = lines[index : index + 2], lines[index + 2 : end]
        # Costs row by row: a whole long table in one call would exceed the tokenizer's length.
        header_cost = sum(len(tokenize(line)) for line in header)
        row_costs = [len(tokenize(row)) for row in rows]
        if header_cost + sum(row_costs) <= chunk_tokens:
            out.extend(lines[index:end])
        else:
            # The header as written: an empty one (a table headed down its first column) stays
            # empty, since a first data row repeated over the others would read as their header.
            group, cost = [*header], header_cost
            for row, row_cost in zip(rows, row_costs):
                if len(group) > len(header) and cost + row_cost > budget:
                    out.extend([*group, ""])
                    group, cost = [*header], header_cost
                group.append(row)
                cost += row_cost
            out.extend(group)
        index = end
    return "\n".join(out)
