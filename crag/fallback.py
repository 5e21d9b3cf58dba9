"""The action policy: which allow-listed fallback sources a question may reach.

The CRAG paper falls back to web search. For company policy the web proves nothing about
*this* company's rules, so fallback goes only to sources an admin registered in advance,
and the application decides per question class which of them may be queried. Policy
questions never reach an open-web source, whatever the configuration says.

Pure decisions, no I/O: the hardened HTTP source lives in ingestion/http_source.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from crag.types import FallbackSource

QuestionClass = Literal["policy", "general"]
SourceKind = Literal["collection", "http"]


class FallbackError(Exception):
    """A fallback source could not be queried or its answer could not be used."""


# --- question classes and the action policy ----------------------------------------------------

DEFAULT_POLICY_KEYWORDS: tuple[str, ...] = (
    r"polic(?:y|ies)",
    r"leave",
    r"pto",
    r"vacation",
    r"holiday",
    r"sick",
    r"parental|maternity|paternity",
    r"expens\w*",
    r"reimburs\w*",
    r"receipts?",
    r"per diem",
    r"meals?|lunch|dinner",
    r"trip|pay|paid",
    r"travel\w*",
    r"security",
    r"laptops?",
    r"devices?",
    r"passwords?",
    r"vpn",
    r"conduct",
    r"harass\w*",
    r"discriminat\w*",
    r"benefits?",
    r"insurance",
    r"pension|401k",
    r"salar(?:y|ies)|payroll|payslip|paycheck|bonus|overtime",
    r"remote|hybrid|wfh|work from home",
    r"allowed",
    r"can i",
    r"am i allowed",
    r"may i",
    r"permitted",
    r"rules?",
    r"approv\w*",
    r"complian\w*",
    r"handbook",
    r"hr",
    r"onboarding|offboarding",
    r"equipment",
    r"confidential\w*|privacy|gdpr",
    r"gifts?",
    r"dress code",
    r"eligib\w*",
    r"entitle\w*",
)

# Clear signs of a general (non-policy) question. Used only when no policy keyword matches;
# anything else counts as policy, the safer class.
_GENERAL_SIGNS = re.compile(
    r"\b(?:python|javascript|typescript|java|sql|regex|excel formula|spreadsheet formula|"
    r"weather|translate|translation|capital of|define|definition of|meaning of|synonym|"
    r"convert|how do you spell|time zone|timezone|what time is it|recipe|"
    r"who (?:is|was|invented)|history of|explain (?:what|how))\b",
    re.IGNORECASE,
)


def classify_question(question: str, policy_keywords: Sequence[str] | None = None) -> QuestionClass:
    """Classify a question as "policy" or "general"; anything unclear counts as "policy".

    `policy_keywords` are regular expressions matched as whole words, case-insensitively,
    each also in the plural ("holiday" matches "holidays").
    """
    keywords = DEFAULT_POLICY_KEYWORDS if policy_keywords is None else tuple(policy_keywords)
    # A plural counts as its word ("holidays", "bonuses"): missing one would let a policy
    # question through to open-web sources.
    if keywords and re.search(rf"\b(?:{'|'.join(keywords)})(?:e?s)?\b", question, re.IGNORECASE):
        return "policy"
    if _GENERAL_SIGNS.search(question):
        return "general"
    return "policy"


@dataclass(frozen=True)
class SourceRule:
    """Which registered sources one question class may query.

    kinds: permitted source kinds; names: if set, only these source names;
    allow_open_web: whether open-web sources are permitted (ignored for "policy").
    """

    kinds: frozenset[str] = frozenset({"collection", "http"})
    names: frozenset[str] | None = None
    allow_open_web: bool = False

    def permits(self, source: FallbackSource) -> bool:
        if source.kind not in self.kinds:
            return False
        if self.names is not None and source.name not in self.names:
            return False
        return self.allow_open_web or not source.open_web


def default_rules() -> dict[str, SourceRule]:
    return {
        "policy": SourceRule(allow_open_web=False),  # internal allow-listed sources only
        "general": SourceRule(allow_open_web=True),  # every registered source
    }


@dataclass(frozen=True)
class ActionPolicy:
    """The rule table: question class -> permitted fallback sources."""

    rules: Mapping[str, SourceRule] = field(default_factory=default_rules)

    def permitted_sources(self, question_class: str, sources: Sequence[FallbackSource]) -> list[FallbackSource]:
        """The sources this class may query, in registration order.

        An unknown class is treated as "policy". HARD RULE: a policy question never reaches
        an open-web source, even if the rule table allows it.
        """
        effective_class = question_class if question_class in self.rules else "policy"
        rule = self.rules.get(effective_class)
        if rule is None:
            return []  # no rule for policy questions: fall back nowhere
        permitted = [source for source in sources if rule.permits(source)]
        if effective_class == "policy":
            permitted = [source for source in permitted if not source.open_web]
        return permitted
