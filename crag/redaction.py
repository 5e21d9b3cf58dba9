"""Keep personal data out of everything sent to fallback sources.

`redact` replaces contact details, IDs, Slack mentions and the asker's names with
placeholders. `keyword_query` then rewrites the redacted question into a few keywords, as
the CRAG paper rewrites questions for search (section 4.5), but deterministically: no LLM
and no third party sees the question. Keywords come only from an allow-list (policy terms,
the organisation's own words, common English), so names and identifiers the redaction
missed still stay. The rewrite is only ever sent to sources; the answer
is still composed for the user's original question.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from wordfreq import zipf_frequency

from crag.text import STOPWORDS, WORD_TOKEN, fold_accents

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
# ("employee id = 48213", "emp no. 48213" and "my id is 48213" too: people write all of them.)
_CALLED_AN_EMPLOYEE_ID = re.compile(
    r"\b((?:(?:employee|emp|staff|personnel|badge|payroll)\s*(?:id|number|no\.?|num|#)|my\s+id)"
    r"\s*(?:is\s+)?[:#=]?\s*)"
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
    text = fold_accents(text)
    text = _SLACK_USER.sub(USER_PLACEHOLDER, text)
    text = _SLACK_MAILTO.sub(EMAIL_PLACEHOLDER, text)
    text = _SLACK_TEL.sub(PHONE_PLACEHOLDER, text)
    text = _SLACK_LINK.sub(URL_PLACEHOLDER, text)
    text = _BARE_URL.sub(URL_PLACEHOLDER, text)  # URLs may carry names or tokens
    text = _EMAIL.sub(EMAIL_PLACEHOLDER, text)
    text = _CALLED_AN_EMPLOYEE_ID.sub(lambda m: m.group(1) + EMPLOYEE_ID_PLACEHOLDER, text)
    text = re.sub(employee_id_pattern, EMPLOYEE_ID_PLACEHOLDER, text, flags=re.IGNORECASE)
    text = _PHONE.sub(_phone_replacement, _PHONE_LABEL.sub(r"\1 ", text))
    return _redact_names(text, [fold_accents(name) for name in asker_names])


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
    """ "555-123-4567 555-987-6543" reads as one 20-digit candidate: redact each number in it."""
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
#
# What a fallback source receives (#26). Keywords come only from an allow-list, never from
# "whatever is rare": ranking rare words first is exactly what sent IDs and names out.
#
# - A lower-case word goes out if it is a policy term, a word the organisation's own documents
#   use in lower case (`document_vocabulary`), or common English (Zipf >= COMMON_ENGLISH_ZIPF).
#   Rare words that are none of these (most names, in every culture, and made-up tokens) stay.
# - A capitalised or mixed-case word ("Priyanka", "Berlin", "McDonald") is a proper noun the
#   way the asker wrote it: only policy terms go out ("Bereavement leave?"). Many names are also
#   common words ("John", "Grace", "Maria", "Khan"), so frequency cannot vouch for them.
# - An acronym ("HSA", "IT") goes out only if it is a policy term or the documents use it.
# - After a word that introduces a person ("my manager", "my mother", "I'm", "Dr", "thanks"),
#   the next few words are taken for a name when the asker types it in lower case.
# - Numbers go out only as an amount or a duration with its unit ("$50", "30 days"); any
#   other token with a digit, or shaped like an address or ID ("jane.doe", "a-12"), stays.
# - In a question that may reach the open web (not a policy question), health words stay too.

_PLACEHOLDER = re.compile(r"\[[a-z-]+\]")

# Chatty openers and filler, skipped as phrases.
_FILLER_PHRASES = re.compile(
    r"\b(?:quick question|do you know|does anyone know|anyone know|i was wondering|i'm wondering|"
    r"im wondering|i wonder|wondering if|can i|could i|may i|am i allowed to|am i|can you|could you|"
    r"would you|will you|can someone|could someone|tell me|let me know|i need to know|i'd like to know|"
    r"any idea|any ideas|thank you|thanks in advance|sorry to bother|just checking|"
    r"hey there|hi there|hello there|good morning|good afternoon)\b",
    re.IGNORECASE,
)


# Policy vocabulary: always sendable, even capitalised, and lifted when trimming to N.
# Words rarer than common English that policy questions need ("bereavement", "sabbatical") belong here.
POLICY_TERMS = frozenset(
    """
    pto leave vacation holiday holidays sick parental maternity paternity bereavement sabbatical
    expense expenses reimbursement reimburse reimbursed receipt receipts diem mileage travel
    flight flights hotel lodging meal meals allowance laptop device devices password passwords vpn
    mfa sso security badge remote hybrid overtime payroll payslip payslips paycheck salary bonus
    benefits benefit insurance pension 401k 403b dental vision harassment conduct discrimination
    onboarding offboarding equipment approval approvals contractor contractors relocation visa
    training stipend parking gift gifts conflict interest confidential data privacy retention phone
    timesheet timesheets accrual accrue accrued carryover prorated dependents dependent airfare
    childcare tuition commute wellness ergonomic coworking garnishment hr it hsa fsa eap wfh fmla
    cobra jury w-2 w2 w-4 w4 1099 i-9 p45 p60
    """.split()
)
POLICY_PHRASES = ("per diem",)  # sent as one keyword; "per" alone is a stopword

# Frequent words that carry little for search: slightly demoted.
_COMMON_WORDS = frozenset(
    "day days week weeks month months year years time work working company policy rule rules new use"
    " used using take taking people person".split()
)

# Zipf 3.5: about 3 uses per million words. "lodging", "mileage" and "remotely" are above it;
# "raghunathan" (1.3), "oluwaseun" (0), "priyanka" (2.7) and "svetlana" (2.8) are below.
COMMON_ENGLISH_ZIPF = 3.5

# Words that introduce a person: the next _NAME_SPAN words are taken for a name, unless policy
# terms (a lower-case "my manager john smith" is otherwise all common English).
_PERSON_CUES = frozenset(
    """
    manager boss supervisor lead colleague colleagues coworker coworkers co-worker teammate teammates
    mother mom mum mommy mama father dad daddy papa parent parents sister brother sibling son daughter
    child kid kids baby wife husband partner spouse fiance fiancee girlfriend boyfriend grandmother
    grandma granny nana grandfather grandpa grandparent aunt auntie uncle cousin niece nephew friend
    director recruiter assistant intern neighbour neighbor
    mr mrs ms miss mx mister dr prof sir madam
    named called aka dear hi hey hello thanks thx cheers regards im i'm
    """.split()
)
_PERSON_CUE_PAIRS = frozenset(
    {("i", "am"), ("this", "is"), ("name", "is"), ("call", "me"), ("thank", "you"), ("it's", "me")}
)
_NAME_SPAN = 4
_HONORIFICS = frozenset("mr mrs ms miss mx mister dr prof sir madam".split())
# Lower-case parts of names ("Maria de la Cruz", "Ludwig van Beethoven", "Khalid bin Saleh").
_NAME_PARTICLES = frozenset(
    "de del della da das dos di du la le van von der den ter ten bin binti bint ibn al el ap abu".split()
)
# Spelled-out digits: "one two three four five six seven eight nine" is an SSN too.
_NUMBER_WORDS = frozenset(
    """
    zero oh one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred
    thousand million
    """.split()
)

# Health details, never sent with a question that may reach the open web.
HEALTH_TERMS = frozenset(
    """
    hiv aids cancer cancers tumor tumour tumors tumours diabetes diabetic asthma epilepsy epileptic
    depression depressed anxiety bipolar schizophrenia schizophrenic adhd autism autistic ptsd ocd
    dementia alzheimer alzheimers alzheimer's parkinson parkinsons parkinson's stroke seizure seizures
    covid coronavirus flu influenza hepatitis herpes std stds sti stis chlamydia gonorrhea syphilis
    pregnant pregnancy miscarriage abortion ivf fertility infertility chemotherapy chemo radiotherapy
    radiation dialysis surgery transplant diagnosis diagnosed diagnose symptom symptoms disease
    diseases disorder disorders syndrome illness ill injury injured disability disabled addiction
    addicted alcoholism alcoholic rehab overdose suicide suicidal anorexia bulimia obesity insulin
    medication medications prescription prescriptions antidepressant antidepressants therapy
    therapist psychiatrist psychiatric psychologist mental lupus sclerosis arthritis migraine
    migraines tuberculosis malaria biopsy lymphoma leukemia leukaemia melanoma carcinoma sarcoma
    infection infected vaccine vaccinated unvaccinated positive hospital hospitalized hospitalised
    """.split()
)
_HEALTH_SUFFIX = re.compile(r"(?:itis|osis|emia|aemia|ectomy|algia|plegia|pathy)$")

_UNIT = (
    r"(?:days?|weeks?|months?|years?|hours?|hrs?|minutes?|mins?|nights?|km|kilomet(?:er|re)s?|miles?|"
    r"percent|dollars?|euros?|pounds?|usd|eur|gbp|chf|cad|aud)\b"
)
# A term of the question, in order. Amounts and durations are matched whole and only where the
# number stands alone: "$123456789", "1234 days" and the last group of "123 456 789 days" are not.
# No nested repetition: each alternative runs in time linear in what it reads.
_TERM = re.compile(
    r"(?P<amount>[$€£¥]\s?\d{1,3}(?:,\d{3}){0,2}(?:\.\d{1,2})?(?![\d,.]?\d))"
    r"|(?P<duration>(?<![\w.,])(?<!\d[\s/.:-])\d{1,3}(?:\.\d{1,2})?(?!\d)\s?(?:%|" + _UNIT + r"))"
    r"|(?P<spelled>\b(?:one|two|three|four|five|six|seven|eight|nine|ten|twelve|fifteen|twenty|thirty|"
    r"sixty|ninety)\s+" + _UNIT + r")"
    r"|(?P<phrase>\b(?:" + "|".join(p.replace(" ", r"\s+") for p in POLICY_PHRASES) + r")\b)"
    r"|(?P<word>[^\W_]+(?:[.,'-][^\W_]+)*)",
    re.IGNORECASE,
)
_ACRONYM = re.compile(r"\b[A-Z]{2,5}\b")
_SENTENCE_END = re.compile(r"[?!;\n]")


def keyword_query(
    question: str, max_keywords: int = 3, *, vocabulary: frozenset[str] = frozenset(), keep_health_terms: bool = False
) -> str:
    """Rewrite an (already redacted) question into at most `max_keywords` search keywords.

    Only allow-listed words go out (see the rules above). `vocabulary` is the organisation's own
    (`document_vocabulary`). `keep_health_terms` only for a policy question, which never reaches
    an open-web source. The chosen terms keep their order; when trimming, policy terms, acronyms
    and the rarer of the allowed words win.
    """
    if max_keywords <= 0:
        return ""
    text = _PLACEHOLDER.sub(" ", redact(question))  # defence in depth: never send contact details or IDs
    shouted = _is_shouted(text)
    filler = [m.span() for m in _FILLER_PHRASES.finditer(text)]
    next_filler = 0  # both lists run in text order: one pass over each
    matches = list(_TERM.finditer(text))
    terms: list[tuple[str, float]] = []  # (term, weight)
    seen: set[str] = set()
    name_span = 0  # words still to be taken for a name after a person cue
    previous = ""
    for index, match in enumerate(matches):
        if index and _SENTENCE_END.search(text, matches[index - 1].end(), match.start()):
            name_span, previous = 0, ""
        raw = match.group()
        word = re.sub(r"'s$", "", raw.lower())
        in_name = name_span > 0
        name_span = max(0, name_span - 1)
        if word in _PERSON_CUES or (previous, word) in _PERSON_CUE_PAIRS or word.split("-")[0] in _PERSON_CUES:
            name_span = _NAME_SPAN
        previous = word
        while next_filler < len(filler) and filler[next_filler][1] <= match.start():
            next_filler += 1
        if next_filler < len(filler) and filler[next_filler][0] <= match.start():
            continue  # inside a filler phrase
        if match.lastgroup in ("amount", "duration", "spelled"):
            term, weight = re.sub(r"\s+", " ", word), 5.0
        elif match.lastgroup == "phrase":
            term, weight = re.sub(r"\s+", " ", word), 8.0
        else:
            following = matches[index + 1].group() if index + 1 < len(matches) else ""
            kind = _word_kind(raw, shouted)
            if not _sendable(word, kind, vocabulary, in_name, following, shouted) or (
                not keep_health_terms and _is_health(word)
            ):
                continue
            term, weight = word, _keyword_weight(word, kind == "acronym")
        if term not in seen:
            seen.add(term)
            terms.append((term, weight))
    ranked = sorted(range(len(terms)), key=lambda i: (-terms[i][1], i))
    return " ".join(terms[i][0] for i in sorted(ranked[:max_keywords]))


def _word_kind(raw: str, shouted: bool) -> str:
    """ "lower", "acronym" ("HSA", unless the whole text is shouted) or "proper" (any other capital)."""
    if not any(ch.isupper() for ch in raw):
        return "lower"
    if raw.isupper() and raw.isalpha() and 2 <= len(raw) <= 5 and not shouted:
        return "acronym"
    return "proper"


def _sendable(word: str, kind: str, vocabulary: frozenset[str], in_name: bool, following: str, shouted: bool) -> bool:
    if len(word) < 2 or (word in STOPWORDS and kind != "acronym"):  # "IT support" is not "it"
        return False
    if any(ch.isdigit() for ch in word) or "." in word or "," in word:
        return word in POLICY_TERMS  # "401k", "w-2"; not "48213", "emp-12345", "jane.doe"
    if word in POLICY_TERMS:
        return True
    if in_name or word in _HONORIFICS or word in _NUMBER_WORDS:
        return False
    if (
        word in _NAME_PARTICLES
        and following
        and (_word_kind(following, shouted) == "proper" or following.lower() in _NAME_PARTICLES)
    ):
        return False  # "de" in "Maria de la Cruz"
    if kind == "acronym":
        return word.upper() in vocabulary
    if kind == "proper":
        return False
    return word in vocabulary or zipf_frequency(word, "en") >= COMMON_ENGLISH_ZIPF


def _is_health(word: str) -> bool:
    return word in HEALTH_TERMS or _HEALTH_SUFFIX.search(word) is not None


def _is_shouted(text: str) -> bool:
    """More all-caps words than lower-case ones: caps lock, so capitals say nothing."""
    return len(_ACRONYM.findall(text)) > len(re.findall(r"\b[a-z][a-z]+\b", text))


@lru_cache(maxsize=4096)
def _rarity(word: str) -> float:
    """How rare `word` is in English: 7 minus its Zipf frequency ("the" ~0, "dog" ~1.9, unknown 7)."""
    return max(0.0, 7.0 - zipf_frequency(word, "en"))


def _keyword_weight(word: str, acronym: bool) -> float:
    """Prefer rarer words; acronyms and policy terms get a lift, generic ones a cut."""
    weight = _rarity(word)
    if acronym:
        weight = max(weight, 4.0)
    if word in POLICY_TERMS:
        weight += 1.0
    if word in _COMMON_WORDS:
        weight -= 1.0
    return weight


def document_vocabulary(texts: Iterable[str]) -> frozenset[str]:
    """The words the organisation's documents use, for `keyword_query(vocabulary=...)`.

    Lower-case words as they are, acronyms (2-5 capitals) in capitals. Capitalised words are
    left out: in documents they are mostly names of people and places. Addresses, URLs,
    handles and tokens with digits are left out too.
    """
    vocabulary: set[str] = set()
    for text in texts:
        text = fold_accents(text)
        text = _BARE_URL.sub(" ", _EMAIL.sub(" ", text))
        text = re.sub(r"@\S+", " ", text)
        for token in WORD_TOKEN.findall(text):
            token = re.sub(r"'s$", "", token)
            if "." in token or "," in token or any(ch.isdigit() for ch in token):
                continue
            if token.islower() or (token.isupper() and token.isalpha() and 2 <= len(token) <= 5):
                vocabulary.add(token)
    return frozenset(vocabulary)
