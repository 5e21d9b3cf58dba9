"""Whether a message in a conversation continues the question before it.

"What about contractors?" means nothing alone: it is asked together with the earlier
question. A question that stands on its own ("How many sick days do I get?") is asked alone,
or the earlier topic would pull its retrieval and its answer off course.
"""

from __future__ import annotations

import re

from crag.text import STOPWORDS, WORD_TOKEN

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
    r"^\W*(?:for|in|with|without|from|during|after|before|on|at|under|over|by|per)\b", re.IGNORECASE
)
# A question that is nothing but a name: "When is payday?", "What is PTO?", "What does TOIL
# mean?". It stands alone when the name is a policy topic (below); "What's the timeline?" or
# "What's the stipend?" means the earlier topic's.
_NAMES_ITS_TOPIC = re.compile(
    r"^\W*(?:(?:what|when|where)(?:'s|\s+(?:is|are|was|were))\s+(?:(?:the|a|an|my|our)\s+)?[\w-]+"
    r"|what\s+does\s+[\w-]+\s+(?:mean|stand\s+for))\W*$",
    re.IGNORECASE,
)
_ASKS_IF_THERE_IS = re.compile(r"^\W*(?:is|are) there\b", re.IGNORECASE)
# "Is it allowed to ...?", "It's fine if ...": an "it" that stands for what follows, not for the earlier topic.
_DUMMY_IT = re.compile(
    r"\b(?:(?:is|was|isn't|wasn't)\s+it|it(?:'s|\s+is|\s+was))\s+(?:\w+\s+){1,2}?(?:to|that|if|whether)\b",
    re.IGNORECASE,
)
# What a rule has, asked about without naming the rule: "Is there a limit?" means the earlier topic's.
_ASPECTS = frozenset(
    "limit limits cap caps maximum minimum deadline form forms fee fees cost costs exception exceptions process "
    "approval threshold allowance rate rates template waiting period notice difference policy rule rules budget "
    "amount cutoff procedure requirement requirements".split()
)
# Whether a rule reaches a group of people, asked without naming the rule: "Are contractors
# eligible?" (but "Is tuition covered?" names its topic).
_REACH = frozenset("eligible covered included entitled exempt qualify apply applies".split())
_PEOPLE = frozenset(
    "contractor contractors intern interns employee employees staff temp temps temporary part-time full-time "
    "freelancer freelancers consultant consultants student students manager managers executive executives director "
    "directors hire hires hourly seasonal apprentice apprentices trainee trainees volunteer volunteers spouse spouses "
    "partner partners dependent dependents dependant dependants family kids children remote new".split()
)
# Words that point back at the earlier topic ("Can I carry them over?"). Not "it" ("Is it
# allowed to ...?") nor "there" ("Is there a dress code?"): those stand alone.
_POINTING_BACK = frozenset({"that", "this", "those", "these", "they", "them", "same"})
# Policy topics a one-word question names on its own. Only these: a word like "stipend",
# "SLA" or "Workday" may just as well ask about the earlier topic's, and a follow-up asked
# alone loses its topic, where a question asked with the one before only shares retrieval.
_TOPICS = frozenset(
    "payday payslip payslips paycheck payroll handbook enrollment w-2 w2 1099 severance pto vpn mfa 401k cobra "
    "pension sabbatical bereavement harassment whistleblowing onboarding offboarding relocation timesheet "
    "rsu rsus espp hsa fsa toil itdept".split()
)
# "IT" the department is a topic, not the pronoun ("Is IT open on weekends?"), unless the
# whole message is in capitals ("IS IT TAXABLE?").
_IT_DEPARTMENT = re.compile(r"\bIT\b")


def continues_earlier(message: str) -> bool:
    """True when `message` reads as a follow-up that needs the earlier question's context."""
    if not message.isupper():
        message = _IT_DEPARTMENT.sub("ITdept", message)
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
        # "What's the deadline?", "Who do I contact?", "contractors?" lean back; a question that
        # only names its topic ("When is payday?", "What is PTO?") stands alone.
        return not (content and content[0] in _TOPICS and _NAMES_ITS_TOPIC.search(message))
    reach = [word for word in content if word in _REACH]
    if reach and all(word in _PEOPLE for word in content if word not in _REACH):
        return True  # "Are contractors eligible?": eligible for what was asked before
    if _SOFT_OPENING.search(message) or refers_with_it:
        return len(content) < 3
    return bool(_PREPOSITION_OPENING.search(message)) and len(words) <= 6
