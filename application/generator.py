"""Optional answer generator: any OpenAI-compatible chat endpoint, through LlamaIndex.

The model sees only the kept evidence, numbered like the citations, and must cite it.
A reply that cites nothing, or cites a number that does not exist, is discarded and the
extractive answer is used instead (as it is when the endpoint fails).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from core.config import Settings, secret_value
from crag.pipeline import Generator
from crag.strips import recompose
from crag.types import Citation, Strip

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You answer employees' questions about company policy using ONLY the numbered evidence given. "
    "Cite every claim with its evidence number in square brackets, like [1]. Keep conditions "
    "(scope, dates, negations, units) exactly as written. If the evidence does not answer the "
    "question, reply exactly: NOT IN EVIDENCE."
)
_MARKER = re.compile(r"\[(\d+)\]")


def _evidence(strips: Sequence[Strip], citations: Sequence[Citation]) -> str:
    numbers = {(c.source, c.document, c.section): c.n for c in citations}
    blocks: dict[int, list[Strip]] = {}
    for strip in strips:
        n = numbers.get((strip.passage.source, strip.passage.document, strip.passage.section))
        if n is not None:
            blocks.setdefault(n, []).append(strip)
    return "\n\n".join(f"[{n}] {recompose(group)}" for n, group in sorted(blocks.items()))


def checked_reply(reply: str, citations: Sequence[Citation]) -> str | None:
    """The reply if it is grounded in the given citations, else None."""
    text = reply.strip()
    cited = {int(n) for n in _MARKER.findall(text)}
    valid = {c.n for c in citations}
    if not text or "NOT IN EVIDENCE" in text or not cited or not cited <= valid:
        return None
    return text


def openai_generator(settings: Settings) -> Generator | None:
    if not settings.generator_url:
        return None
    # LlamaIndex's OpenAI-like client (a second): only where a generator endpoint is configured
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(
        model=settings.generator_model or "default",
        api_base=settings.generator_url,
        api_key=secret_value(settings.generator_api_key) or "unused",
        is_chat_model=True,
        timeout=20.0,
        max_retries=0,
        temperature=0.0,
    )

    def generate(question: str, strips: Sequence[Strip], citations: Sequence[Citation]) -> str | None:
        messages = [
            ChatMessage(role="system", content=SYSTEM_PROMPT),
            ChatMessage(role="user", content=f"Evidence:\n{_evidence(strips, citations)}\n\nQuestion: {question}"),
        ]
        reply = llm.chat(messages).message.content or ""
        checked = checked_reply(reply, citations)
        if checked is None:
            log.warning("generator reply was not grounded in the evidence; using the extractive answer")
        return checked

    return generate
