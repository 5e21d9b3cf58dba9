"""Whether a message in a conversation continues the question before it.

"What about contractors?" means nothing alone: it is asked together with the earlier
question. A question that stands on its own ("How many sick days do I get?") is asked alone,
or the earlier topic would pull its retrieval and its answer off course.

`continues_earlier` decides what joins an earlier question in a thread; `needs_earlier`,
stricter, what cannot be answered at all without one ("What about parking?" asked with no
earlier question), where a short question that names its subject ("Where do I park?") can.
"""

from __future__ import annotations

import re
from typing import Literal

from crag.text import STOPWORDS, WORD_TOKEN

# Openings that lean on what was said before, whatever follows. The named groups say on what:
# a phrase ("What about ...?"), a pointer ("Does that ...?"), "it" or "they".
_LEANING_OPENING = re.compile(
    r"^\W*(?:(?P<phrase>what about|how about|same for|and for|as for|is it the same)|"
    r"(?:does|do|did|is|are|was|were|would|will|can|could) (?P<pointer>that|this|those|these|they|the same)\b|"
    r"(?:does|do|did|would|will|can|could) (?P<it>it)\b|"
    r"how (?:does|do|would|will|is|are) (?P<how>that|this|it|they)\b)",
    re.IGNORECASE,
)
# Asked with no earlier question (needs_earlier), an opening that points back counts only in a
# message this short (content words, fewer than): "Does that apply to interns?", "Does it
# include weekends?", "Do they?"; but "Does this leave policy apply to our Jakarta office?",
# "Will it rain tomorrow in Quezon City?" and "Can they extend my probation?" (they: the
# company) are answerable as they stand.
_POINTER_REACH = {"it": 3, "they": 2}
_POINTER_REACH_OTHERWISE = 4
# Openings that often lean back, but also start fresh questions ("Also, how do I request a
# laptop?"): they count only for a short message.
_SOFT_OPENING = re.compile(r"^\W*(?:and|but|also|or|so|then|what if)\b", re.IGNORECASE)
# A short message that opens with a preposition ("With a doctor's note?", "For interns?").
_PREPOSITION_OPENING = re.compile(
    r"^\W*(?:for|in|with|without|from|during|after|before|on|at|under|over|by|per)\b", re.IGNORECASE
)
_PER_DIEM = re.compile(r"^\W*per\s+diem\b", re.IGNORECASE)  # a noun, not the preposition
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
# Not pointing back: "this year", "next week" (for needs_earlier; "same" there only in "the
# same for ..." or at the end: "on the same team" points nowhere).
_WHEN = re.compile(
    r"\b(?:this|that|these|those|next|last)\s+(?:year|years|month|months|week|weeks|weekend|weekends|quarter|"
    r"season|morning|afternoon|evening|time|summer|winter|spring|autumn|fall|semester|term|cycle|round)\b",
    re.IGNORECASE,
)
_SAME_POINTING_BACK = re.compile(r"\bsame(?:\s+(?:for|as before)\b|\W*$)", re.IGNORECASE)
# What a message may open with before its question ("hey", "ok so", "hi there,").
_GREETING = re.compile(r"^(?:\W*\b(?:hi|hey|hello|hiya|yo|ok|okay|ah|oh|cool|great|thanks|there)\b[\s,.!:;-]*)+", re.I)
# Where a message's clauses part ("..., and how long is it?", "...? don't want it").
_CLAUSE_BREAK = re.compile(r"[,;:?!.]+|\b(?:and|but|or)\b", re.IGNORECASE)
# Policy topics a one-word question names on its own. Only these: a word like "stipend",
# "SLA" or "Workday" may just as well ask about the earlier topic's, and a follow-up asked
# alone loses its topic, where a question asked with the one before only shares retrieval.
_TOPICS = frozenset(
    "payday payslip payslips paycheck payroll handbook enrollment w-2 w2 1099 severance pto vpn mfa 401k cobra "
    "pension sabbatical bereavement harassment whistleblowing onboarding offboarding relocation timesheet "
    "rsu rsus espp hsa fsa toil itdept".split()
)
# What a short question asks of a rule it does not name ("Who approves?", "Who do I contact?",
# "What are the steps?"): asked alone, it names no subject at all.
_FACETS = frozenset(
    "long soon often approve approves approved approver approvers contact contacts step steps timeline timelines "
    "covered allowed permitted required needed due".split()
)
# "IT" the department is a topic, not the pronoun ("Is IT open on weekends?"), unless the
# whole message is in capitals ("IS IT TAXABLE?").
_IT_DEPARTMENT = re.compile(r"\bIT\b")


def continues_earlier(message: str) -> bool:
    """True when `message` reads as a follow-up that needs the earlier question's context
    (whatever needs_earlier takes, too: in a thread, it is never asked alone)."""
    return _leaning(message) is not None or needs_earlier(message)


def needs_earlier(message: str) -> bool:
    """True when `message` cannot be answered without the question it follows: its form leans
    back ("What about parking?", "And for interns?", "Is that taxable?", "For contractors?") or
    it names no subject ("What's the deadline?", "Who approves?"). Stricter than
    continues_earlier, since a question it takes is not answered at all: a short question that
    names its subject ("Do I need a receipt?", "Where do I park?") is answered as it stands,
    and so is one whose pronoun points back within the message ("When do I get the sabbatical
    and how long is it?": its first clause says what "it" is)."""
    message = _GREETING.sub("", message)  # "Hi, what about parking?" leans as "What about parking?" does
    if not WORD_TOKEN.search(message) or _leaning(message, strict=True) != "leans":
        return False  # a bare "Hi" follows nothing
    clauses = [clause for clause in _CLAUSE_BREAK.split(message) if WORD_TOKEN.search(clause)]
    # The first clause that says anything ("Hi, what about parking?" skips "Hi") must lean too.
    first = next((clause for clause in clauses if _says_something(clause)), message)
    return len(clauses) < 2 or _leaning(first, strict=True) == "leans"


def _says_something(clause: str) -> bool:
    return any(word.lower() not in STOPWORDS for word in WORD_TOKEN.findall(clause))


def _leaning(message: str, *, strict: bool = False) -> Literal["leans", "short"] | None:
    """How `message` leans on an earlier question: "leans", a follow-up by its form or for want of
    a subject; "short", a short question that names a subject, joined to an earlier one only
    when there is one; None, not at all. `strict` (needs_earlier): a pointer or pronoun leans
    back only in a short message; "this year", "the same team" and "per diem" point nowhere."""
    if not message.isupper():
        message = _IT_DEPARTMENT.sub("ITdept", message)
    words = [word.lower() for word in WORD_TOKEN.findall(message)]
    content = [word for word in words if word not in STOPWORDS]
    if strict:
        pointing = {"that", "this", "those", "these", "them"} | (
            {"same"} if _SAME_POINTING_BACK.search(message) else set()
        )
        points_back = any(word in pointing for word in (w.lower() for w in WORD_TOKEN.findall(_WHEN.sub("", message))))
    else:
        points_back = any(word in _POINTING_BACK for word in words)
    opening = _LEANING_OPENING.search(message)
    if opening and strict and not opening.group("phrase"):
        pointer = (opening.group("pointer") or opening.group("it") or opening.group("how")).lower()
        if len(content) >= _POINTER_REACH.get(pointer, _POINTER_REACH_OTHERWISE):
            opening = None
    if opening or (points_back and len(content) < 3):  # "Is there a form for that?"
        return "leans"
    if _ASKS_IF_THERE_IS.search(message):  # "Is there a limit?" leans back; "Is there a dress code?" asks anew
        return "leans" if all(word in _ASPECTS for word in content) else None
    # "Can I use it for my kids?" means the earlier thing; "Is it allowed to ...?" does not.
    refers_with_it = "it" in words and not _DUMMY_IT.search(message)
    # "And in Germany?", "Is it taxable?", "For interns?": short, and leaning back by how it opens.
    if _SOFT_OPENING.search(message) or refers_with_it:
        opens_short = len(content) < 3
    else:
        preposition = _PREPOSITION_OPENING.search(message) and not (strict and _PER_DIEM.search(message))
        opens_short = bool(preposition) and len(words) <= 6
    if len(content) < 2:
        # "What's the deadline?", "Who do I contact?", "contractors?" lean back; a question that
        # only names its topic ("When is payday?", "What is PTO?") stands alone.
        if content and content[0] in _TOPICS and _NAMES_ITS_TOPIC.search(message):
            return None
        unnamed = all(word in _ASPECTS or word in _REACH or word in _PEOPLE or word in _FACETS for word in content)
        return "leans" if opens_short or unnamed else "short"
    reach = [word for word in content if word in _REACH]
    if reach and all(word in _PEOPLE for word in content if word not in _REACH):
        return "leans"  # "Are contractors eligible?": eligible for what was asked before
    return "leans" if opens_short else None
