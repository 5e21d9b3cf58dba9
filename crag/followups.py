"""Whether a message in a conversation continues the question before it.

"What about contractors?" means nothing alone: it is asked together with the earlier
question. A question that stands on its own ("How many sick days do I get?") is asked alone,
or the earlier topic would pull its retrieval and its answer off course.
"""

from __future__ import annotations

import re

from crag.redaction import STOPWORDS, WORD_TOKEN

# Openings that lean on what was said before.
_CONTINUATION = re.compile(
    r"^\W*(?:and|but|also|or|so|then|what about|how about|what if|same for|and for|as for|"
    r"(?:does|do|is|are|would|will|can|could|did|was) (?:that|this|those|these|they|the same)|"
    r"(?:for|in|with|without|from|during|after|before) (?:a|an|the|my|our)?\s*\w+\W*$)\b",
    re.IGNORECASE,
)
# Words that point back at the earlier topic ("carry them over"). Not "it": "Is it allowed
# to ...?" stands alone.
_POINTING_BACK = frozenset({"that", "this", "those", "these", "they", "them", "same", "there"})


def continues_earlier(message: str) -> bool:
    """True when `message` reads as a follow-up that needs the earlier question's context."""
    words = [word.lower() for word in WORD_TOKEN.findall(message)]
    content = [word for word in words if word not in STOPWORDS]
    if _CONTINUATION.search(message):
        return True
    if len(content) < 2:  # "contractors?", "What's the deadline?"
        return True
    return len(content) < 3 and any(word in _POINTING_BACK for word in words)

