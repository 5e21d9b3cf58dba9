"""What the tests and the replies benchmark (bench/replies.py) count of a reply."""

from __future__ import annotations

import re

_ANY_MARKER = re.compile(r"\[\d+\]")


def reply_words(text: str) -> int:
    """Words an employee reads: citation markers are not words."""
    return len(_ANY_MARKER.sub(" ", text).split())
