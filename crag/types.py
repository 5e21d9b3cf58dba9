"""The data that flows through the CRAG pipeline.

Plain, immutable dataclasses: no framework types cross these boundaries, so every
step (retrieve, evaluate, decide, refine, fall back, compose) can be tested alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, Protocol

Origin = Literal["kb", "fallback"]


class Action(StrEnum):
    """The three CRAG actions (arXiv 2401.15884, section 4.3)."""

    CORRECT = "correct"
    AMBIGUOUS = "ambiguous"
    INCORRECT = "incorrect"


@dataclass(frozen=True)
class Thresholds:
    """Decision thresholds of one evaluator on one corpus (calibrated, never hard-coded)."""

    upper: float
    lower: float
    strip: float = -0.5  # refinement drops strips below it (the CRAG paper's value, until calibrated)
    # Fallback results answer only from this score (calibrated on fallback-only against
    # unanswerable questions); None: from upper, as knowledge-base evidence.
    fallback: float | None = None

    def __post_init__(self) -> None:
        if self.lower > self.upper:
            raise ValueError(f"lower threshold {self.lower} is above upper threshold {self.upper}")

    @property
    def fallback_bar(self) -> float:
        return self.upper if self.fallback is None else self.fallback

    def to_dict(self) -> dict[str, float]:
        """As metadata.json and the API write it."""
        values = {"upper": self.upper, "lower": self.lower, "strip": self.strip}
        return values if self.fallback is None else values | {"fallback": self.fallback}

    @classmethod
    def from_dict(cls, values: Mapping[str, float]) -> Thresholds:
        """From metadata.json; a folder calibrated without strips keeps the default strip."""
        strip, fallback = values.get("strip"), values.get("fallback")
        return cls(
            upper=float(values["upper"]),
            lower=float(values["lower"]),
            strip=float(strip) if strip is not None else cls.strip,
            fallback=float(fallback) if fallback is not None else None,
        )


@dataclass(frozen=True)
class Passage:
    """One unit of evidence: a retrieved knowledge-base chunk or a fallback result."""

    id: str
    text: str
    origin: Origin
    source: str  # collection name (kb) or fallback source name
    document: str  # ingested file name, or the fallback result's title
    title: str = ""  # document title
    section: str = ""  # heading path, e.g. "Travel > Expense claims"
    url: str | None = None
    position: int = 0  # chunk position within its document
    retrieval_score: float = 0.0


@dataclass(frozen=True)
class Strip:
    """A piece of a passage (a few whole sentences), scored against the original question.

    `context` holds the scope the strip depends on (section heading and the passage's
    applicability sentences), so a kept strip never loses the conditions that make it true.
    """

    passage: Passage
    index: int  # order of the strip inside its passage
    text: str
    context: str = ""
    score: float | None = None


@dataclass(frozen=True)
class Citation:
    n: int
    origin: Origin
    source: str
    document: str
    title: str
    section: str
    url: str | None
    score: float


@dataclass(frozen=True)
class ScoredPassage:
    passage: Passage
    score: float


@dataclass
class Answer:
    question: str
    action: Action
    found: bool
    text: str
    citations: list[Citation] = field(default_factory=list)
    scores: list[ScoredPassage] = field(default_factory=list)
    evaluator_version: str = "cosine"
    thresholds: Thresholds | None = None
    strips: list[Strip] = field(default_factory=list)
    fallback_queries: list[dict[str, str]] = field(default_factory=list)  # [{"source", "query"}]
    sources_used: list[str] = field(default_factory=list)
    question_class: str = "policy"
    timings_ms: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # The best evidence score on each side the decision weighed ("kb", "fallback"): what the
    # action's bars were compared with (with a sentence judge, answer scores, crag/evidence.py).
    evidence_best: dict[str, float] = field(default_factory=dict)
    # An abstention's closest knowledge-base passage, named in its text, never quoted.
    closest: Passage | None = None


class Evaluator(Protocol):
    """Scores how well a passage supports answering a question, roughly in [-1, 1]."""

    @property
    def version(self) -> str: ...

    def score(self, question: str, passages: Sequence[str]) -> list[float]: ...


class Retriever(Protocol):
    """Top-k candidate passages for a question, restricted to what the asker may see."""

    def retrieve(self, question: str, top_k: int) -> list[Passage]: ...


class FallbackSource(Protocol):
    """An allow-listed source queried only when the knowledge base falls short."""

    name: str
    kind: Literal["collection", "http"]
    open_web: bool

    def search(self, keywords: str, limit: int) -> list[Passage]: ...
