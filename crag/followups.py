"""Whether a message in a conversation continues the question before it.

"What about contractors?" means nothing alone: it is asked together with the earlier
question. A question that stands on its own ("How many sick days do I get?") is asked alone,
or the earlier topic would pull its retrieval and its answer off course.
"""

from __future__ import annotations

import re

from crag.redaction import STOPWORDS, WORD_TOKEN

# Openings that lean on what was said before, whatever follows.
_LEANING_OPENING = re.compile(
    r"^\W*(?:what about|how about|same for|and for|as for|is it the same|"
    r"(?:does|do|did|is|are|was|were|would|will|can|could) (?:that|this|those|these|they|the same)\b|"
    r"(?:does|do|did|would|will|can|could) it\b|"
    r"how (?:does|do|would|will|is|are) (?:that|this|it|they)\b)",
    re.IGNORECASE,
)
# Openings that often lean back, but also start fresh questions ("Also, how do I request a
# laptop?"): they count only for a short message.
_SOFT_OPENING = re.compile(r"^\W*(?:and|but|also|or|so|then|what if)\b", re.IGNORECASE)
# A short message that opens with a preposition ("With a doctor's note?", "For interns?").
_PREPOSITION_OPENING = re.compile(
    r"^\W*(?:for|in|with|without|from|during|after|before|on|at|under|over|by|per)\b", re.IGNORECASE)
# A complete question: a question word or an auxiliary verb, then a verb or a subject.
# "When is payday?" is one; "contractors?" and "How long?" are fragments of the earlier question.
_QUESTION_FRAME = re.compile(
    r"^\W*(?:(?:what|when|where|who|which|why|how)(?:'s|\s+(?:is|are|was|were|do|does|did|can|could|should|"
    r"will|would|must|may|has|have|had)\b)|(?:is|are|do|does|can|could|should|will|would|must|may|has|have)\s+\w)",
    re.IGNORECASE)
_ASKS_IF_THERE_IS = re.compile(r"^\W*(?:is|are) there\b", re.IGNORECASE)
_DUMMY_IT = re.compile(r"\b(?:is|was|isn't|wasn't)\s+it\b|\bit(?:'s|\s+is|\s+was)\b", re.IGNORECASE)
# What a rule has, asked about without naming the rule: "Is there a limit?" means the earlier topic's.
_ASPECTS = frozenset(
    "limit limits cap caps maximum minimum deadline form forms fee fees cost costs exception exceptions process "
    "approval threshold allowance rate rates template waiting period notice difference long often soon".split())
# Whether a rule reaches someone, asked without naming the rule: "Are contractors eligible?"
_REACH = frozenset("eligible covered included entitled exempt qualify apply applies allowed".split())
# Words that point back at the earlier topic ("Can I carry them over?"). Not "it" ("Is it
# allowed to ...?") nor "there" ("Is there a dress code?"): those stand alone.
_POINTING_BACK = frozenset({"that", "this", "those", "these", "they", "them", "same"})


def continues_earlier(message: str) -> bool:
    """True when `message` reads as a follow-up that needs the earlier question's context."""
    words = [word.lower() for word in WORD_TOKEN.findall(message)]
    content = [word for word in words if word not in STOPWORDS]
    points_back = any(word in _POINTING_BACK for word in words)
    if _LEANING_OPENING.search(message) or (points_back and len(content) < 3):  # "Is there a form for that?"
        return True
    if _ASKS_IF_THERE_IS.search(message):  # "Is there a limit?" leans back; "Is there a dress code?" asks anew
        return all(word in _ASPECTS for word in content)
    # "Can I use it for my kids?" means the earlier thing; "Is it allowed to ...?" does not.
    refers_with_it = "it" in words and not _DUMMY_IT.search(message)
    if len(content) < 2:
        # "What's the deadline?", "contractors?", "How long?" lean back; "When is payday?" and
        # "What is PTO?" name their topic in a whole question.
        return (refers_with_it or all(word in _ASPECTS or word in _REACH for word in content)
                or not _QUESTION_FRAME.search(message) or bool(_SOFT_OPENING.search(message)))
    if _QUESTION_FRAME.search(message) and any(word in _REACH for word in content) \
            and len([word for word in content if word not in _REACH]) < 2:
        return True  # "Are contractors eligible?": eligible for what was asked before
    if _SOFT_OPENING.search(message) or refers_with_it:
        return len(content) < 3
    return bool(_PREPOSITION_OPENING.search(message)) and len(words) <= 6
