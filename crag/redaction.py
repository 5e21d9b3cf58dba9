"""Keep personal data out of everything sent to fallback sources.

`redact` replaces contact details, IDs, Slack mentions and the asker's names with
placeholders. `keyword_query` then rewrites the redacted question into a few keywords, as
the CRAG paper rewrites questions for search (section 4.5), but deterministically: no LLM
and no third party sees the question. The rewrite is only ever sent to sources; the answer
is still composed for the user's original question.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Sequence

from wordfreq import zipf_frequency

EMAIL_PLACEHOLDER = "[email]"
PHONE_PLACEHOLDER = "[phone]"
EMPLOYEE_ID_PLACEHOLDER = "[employee-id]"
USER_PLACEHOLDER = "[user]"
NAME_PLACEHOLDER = "[name]"
URL_PLACEHOLDER = "[url]"

# Default employee ID shapes: "EMP-12345", "EMP12345", "E123456". Deployments with other
# formats pass their own pattern.
DEFAULT_EMPLOYEE_ID_PATTERN = r"\b(?:EMP[\s_-]?\d{4,8}|E\d{5,8})\b"
# Whatever the ID's shape, a number the asker calls their employee number or ID.
_CALLED_AN_EMPLOYEE_ID = re.compile(
    r"\b((?:employee|staff|personnel|badge|payroll)\s*(?:id|number|no\.?|num|#)\s*(?:is\s+)?[:#]?\s*)"
    r"([A-Z]{0,4}[-_]?\d{3,10})\b",
    re.IGNORECASE,
)

# Slack markup: "<@U123ABC>", "<@U123ABC|jane>", "<mailto:a@b.co|a@b.co>", "<tel:+15551234|...>".
_SLACK_USER = re.compile(r"<@[UW][A-Z0-9]+(?:\|[^>]*)?>")
_SLACK_MAILTO = re.compile(r"<mailto:[^>|]+(?:\|[^>]*)?>", re.IGNORECASE)
_SLACK_TEL = re.compile(r"<tel:[^>|]+(?:\|[^>]*)?>", re.IGNORECASE)
_SLACK_LINK = re.compile(r"<https?://[^>]+>", re.IGNORECASE)
_BARE_URL = re.compile(r"\bhttps?://\S+", re.IGNORECASE)
# Starts only where a run of address characters starts: tried from inside a run too, a long
# run with no "@" after it cost time quadratic in its length.
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")

# A phone candidate: optional "+country", digits in groups split by spaces, dots, dashes or
# parentheses, and an optional extension. Validated by `_looks_like_phone`.
# "ext555-1234", "tel+41 ...": a label glued to the number, split off so the number is seen.
_PHONE_LABEL = re.compile(r"\b(ext|extension|tel|ph|phone|mobile|cell|fax)\.?(?=[+(]?\d)", re.IGNORECASE)
_PHONE = re.compile(
    r"(?<![\w$€£.-])"
    r"(?P<number>\+?\(?\d[\d\s().-]{5,}\d)"
    r"(?P<ext>\s*(?:x|ext\.?|extension)\s*\d{1,6})?"
    r"(?![\w%])",
    re.IGNORECASE,
)
_DATE_LIKE = re.compile(r"^\d{4}[-.]\d{1,2}[-.]\d{1,2}$|^\d{1,2}[-.]\d{1,2}[-.]\d{2,4}$")


def redact(
    text: str,
    asker_names: Sequence[str] = (),
    employee_id_pattern: str = DEFAULT_EMPLOYEE_ID_PATTERN,
) -> str:
    """Replace emails, phone numbers, employee IDs, Slack mentions and the asker's names.

    The text is folded first (accents and curly quotes: "José O’Brien" → "Jose O'Brien"), as
    are the names, so a name typed without its accents is still found. Only the keyword
    rewrite reads the result.
    """
    text = _fold(text)
    text = _SLACK_USER.sub(USER_PLACEHOLDER, text)
    text = _SLACK_MAILTO.sub(EMAIL_PLACEHOLDER, text)
    text = _SLACK_TEL.sub(PHONE_PLACEHOLDER, text)
    text = _SLACK_LINK.sub(URL_PLACEHOLDER, text)
    text = _BARE_URL.sub(URL_PLACEHOLDER, text)  # URLs may carry names or tokens
    text = _EMAIL.sub(EMAIL_PLACEHOLDER, text)
    text = _CALLED_AN_EMPLOYEE_ID.sub(lambda m: m.group(1) + EMPLOYEE_ID_PLACEHOLDER, text)
    text = re.sub(employee_id_pattern, EMPLOYEE_ID_PLACEHOLDER, text, flags=re.IGNORECASE)
    text = _PHONE.sub(_phone_replacement, _PHONE_LABEL.sub(r"\1 ", text))
    return _redact_names(text, [_fold(name) for name in asker_names])


def _fold(text: str) -> str:
    """Accents off, curly quotes straight ("Núñez" → "Nunez", "O’Brien" → "O'Brien")."""
    decomposed = unicodedata.normalize("NFKD", text.replace("’", "'").replace("‘", "'"))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _phone_replacement(match: re.Match[str]) -> str:
    number = match.group("number").strip()
    if _looks_like_phone(number):
        return PHONE_PLACEHOLDER
    return _phones_in_a_row(match.group(0))


# A phone number written in words: "+1 (555) 123 4567 x 12" is six; no number has more groups
# than digits allowed. Bounding the run keeps the search linear: unbounded, a message shaped
# "1 . . . . 1" took minutes (every start times every end times the run's length).
_MAX_PHONE_WORDS = 8


def _phones_in_a_row(candidate: str) -> str:
    """"555-123-4567 555-987-6543" reads as one 20-digit candidate: redact each number in it."""
    parts = re.split(r"(\s+)", candidate)
    words, gaps = parts[0::2], parts[1::2]
    out: list[str] = []
    i = 0
    while i < len(words):
        # The longest run of words from here that is one phone number.
        last = min(len(words), i + _MAX_PHONE_WORDS)
        end = next((j for j in range(last, i, -1) if _looks_like_phone(" ".join(words[i:j]))), None)
        if end is None:
            out.append(words[i])
            i += 1
        else:
            out.append(PHONE_PLACEHOLDER)
            i = end
        if i < len(words):
            out.append(gaps[i - 1])
    return "".join(out)


def _looks_like_phone(candidate: str) -> bool:
    """7-15 digits, not a date, and written like a phone number (why: avoid eating amounts)."""
    digits = re.sub(r"\D", "", candidate)
    if not 7 <= len(digits) <= 15 or _DATE_LIKE.match(candidate):
        return False
    if all(re.fullmatch(r"(?:19|20)\d\d", group) for group in re.findall(r"\d+", candidate)):
        return False  # "2025 2026", "2025-2026": years, not a number to call
    has_separator = re.search(r"\d[\s().-]+\d", candidate) is not None
    return candidate.startswith(("+", "(")) or has_separator or len(digits) >= 10


def _redact_names(text: str, asker_names: Sequence[str]) -> str:
    """Whole-word, case-insensitive; full names first, then each part of a multi-word name."""
    names: list[str] = []
    for name in asker_names:
        name = name.strip().lstrip("@")
        if not name:
            continue
        names.append(name)
        names.extend(part for part in re.split(r"[\s._-]+", name) if len(part) >= 2)
    for name in sorted(set(names), key=len, reverse=True):  # longest first: "Jane Doe" before "Jane"
        text = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", NAME_PLACEHOLDER, text, flags=re.IGNORECASE)
    return text


# --- keyword query ---------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\[[a-z-]+\]")

# Chatty openers and filler, removed as phrases before tokenising.
_FILLER_PHRASES = re.compile(
    r"\b(?:quick question|do you know|does anyone know|anyone know|i was wondering|i'm wondering|"
    r"im wondering|i wonder|wondering if|can i|could i|may i|am i allowed to|am i|can you|could you|"
    r"would you|will you|can someone|could someone|tell me|let me know|i need to know|i'd like to know|"
    r"any idea|any ideas|thank you|thanks in advance|sorry to bother|just checking|"
    r"hey there|hi there|hello there|good morning|good afternoon)\b"
)

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

# Common policy nouns: a light boost so they win over generic words when trimming to N.
_DOMAIN_TERMS = frozenset(
    """
    pto leave vacation holiday holidays sick parental maternity paternity bereavement sabbatical
    expense expenses reimbursement reimburse reimbursed receipt receipts per diem mileage travel
    flight flights hotel lodging meal meals allowance laptop device devices password passwords vpn
    mfa security badge remote hybrid overtime payroll salary bonus benefits benefit insurance
    pension 401k dental vision harassment conduct discrimination onboarding offboarding equipment
    approval approvals contractor contractors relocation visa training stipend parking gift gifts
    conflict interest confidential data privacy retention phone timesheet
    """.split()
)

# Frequent words that carry little for search: slightly demoted.
_COMMON_WORDS = frozenset(
    "day days week weeks month months year years time work working company policy rule rules new use"
    " used using take taking people person".split()
)

_ACRONYM = re.compile(r"\b[A-Z]{2,5}\b")
WORD_TOKEN = re.compile(r"[^\W_]+(?:[.,'’-][^\W_]+)*")  # any script's letters and digits


def keyword_query(question: str, max_keywords: int = 3) -> str:
    """Rewrite an (already redacted) question into at most `max_keywords` search keywords.

    Lower-cases, drops placeholders, punctuation, stopwords, question words and filler,
    keeps numbers, acronyms ("IT", "HSA") and domain words, prefers the words that are
    rarest in English when trimming (what makes a question specific: "dog", "bike"), and
    keeps the chosen words in their original order.
    """
    redacted = redact(question)  # defence in depth: never send contact details or IDs
    acronyms = _acronyms(redacted)
    text = _PLACEHOLDER.sub(" ", redacted.lower())
    text = _FILLER_PHRASES.sub(" ", text)
    words: list[str] = []
    for token in WORD_TOKEN.findall(text):
        word = re.sub(r"['’]s$", "", token).replace("’", "'")
        if word in words or (len(word) < 2 and not word.isdigit()):
            continue
        if word in STOPWORDS and word not in acronyms:  # "IT support" is not "it"
            continue
        words.append(word)
    if max_keywords <= 0:
        return ""
    ranked = sorted(range(len(words)), key=lambda i: (-_keyword_weight(words[i], acronyms), i))
    chosen = sorted(ranked[:max_keywords])
    return " ".join(words[i] for i in chosen)


def _acronyms(text: str) -> frozenset[str]:
    """Lower-cased all-caps words of 2-5 letters ("IT", "HSA"), unless the whole text is shouted."""
    found = _ACRONYM.findall(text)
    lower_words = re.findall(r"\b[a-z][a-z]+\b", text)
    if len(found) > len(lower_words):  # "CAN I BRING MY DOG": caps lock, not acronyms
        return frozenset()
    return frozenset(a.lower() for a in found)


@lru_cache(maxsize=4096)
def _rarity(word: str) -> float:
    """How rare `word` is in English: 7 minus its Zipf frequency ("the" ~0, "dog" ~1.9, unknown 7)."""
    return max(0.0, 7.0 - zipf_frequency(word, "en"))


def _keyword_weight(word: str, acronyms: frozenset[str] = frozenset()) -> float:
    """Prefer numbers, then rare words; acronyms and policy nouns get a lift, generic ones a cut."""
    if any(ch.isdigit() for ch in word):
        return 8.0
    weight = _rarity(word)
    if word in acronyms:
        weight = max(weight, 4.0)
    if word in _DOMAIN_TERMS:
        weight += 1.0
    if word in _COMMON_WORDS:
        weight -= 1.0
    return weight
