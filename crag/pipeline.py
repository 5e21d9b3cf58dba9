"""The CRAG pipeline, top to bottom like the method:

retrieve → evaluate → decide → fall back (Ambiguous, Incorrect) → choose the evidence
the action calls for → refine it into strips (and, when Correct evidence names a fallback
source, ask that source too) → compose a cited answer, or abstain.

Every piece is passed in (retriever, evaluator, fallback sources, policy), so the
pipeline runs the same in a CLI, a Celery worker or a test.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from crag.compose import REPLY_SHAPE, ReplyShape, abstention_text, compose_extractive
from crag.decision import decide
from crag.evidence import SENTENCE_PASSAGES, answer_scores
from crag.fallback import ActionPolicy, FallbackError, classify_question
from crag.redaction import keyword_query, redact
from crag.strips import StripMode, refine
from crag.text import plain_text
from crag.types import (
    Action,
    Answer,
    Citation,
    Evaluator,
    FallbackSource,
    Passage,
    Retriever,
    ScoredPassage,
    Strip,
    Thresholds,
)

log = logging.getLogger(__name__)


# The Ambiguous band answers from the knowledge base only when its evidence is this share of the
# way up from lower to upper. 1.0: never, since the band is below upper. Measured on the dev
# organisations (bench/admission.py; docs/quality.md, "The Ambiguous band"): with a pretrained
# judge and with cosine the band's knowledge-base answers were right about half the time at every
# height of the band, and a wrong answer costs WRONG_CORRECT_COST missed ones
# (crag/training/metrics.py); 1.0 had the best net over those and a judge trained without
# pretraining together. The band still answers from the fallback.
AMBIGUOUS_BAR_SHARE = 1.0


@dataclass(frozen=True)
class PipelineConfig:
    thresholds: Thresholds
    top_k: int = 10
    strip_mode: StripMode = "sentences"
    strips_top_n: int = 5
    # An evaluator trained on answer sentences (crag/evidence.py): route on whether a sentence
    # answers, refine into strips of one sentence, and lead the reply with the best-judged one.
    sentence_evidence: bool = False
    reply_shape: ReplyShape = REPLY_SHAPE  # what follows a reply's first line (crag/compose.py)
    # How far up the Ambiguous band (from lower to upper) knowledge-base evidence must score.
    ambiguous_bar_share: float = AMBIGUOUS_BAR_SHARE
    fallback_limit: int = 5
    max_keywords: int = 3
    contact: str = "your manager or the policy owner"
    policy: ActionPolicy = field(default_factory=ActionPolicy)
    policy_keywords: Sequence[str] | None = None
    # The organisation's own words (crag.redaction.document_vocabulary): they may be sent to
    # fallback sources besides policy terms and common English. Built by the application.
    vocabulary: frozenset[str] = frozenset()


@dataclass(frozen=True)
class AskContext:
    """Who asks and where: decides which documents are visible and what gets redacted."""

    asker: str | None = None
    asker_names: Sequence[str] = ()
    channel: str | None = None


# Generates an answer from the question and kept strips; returns None to use the extractive answer.
Generator = Callable[[str, Sequence[Strip], Sequence[Citation]], str | None]


@dataclass(frozen=True)
class FallbackPlan:
    """What a fallback step would send, and where: the admin console's "test query" shows this."""

    question_class: str
    redacted: str
    keywords: str  # the only text that ever leaves the knowledge base
    sources: Sequence[FallbackSource]  # the registered sources the action policy permits, in order


def plan_fallback(
    question: str, context: AskContext, sources: Sequence[FallbackSource], config: PipelineConfig
) -> FallbackPlan:
    """Classify, pick the permitted sources, then redact and rewrite the question into keywords.

    Only the redacted keyword rewrite ever leaves the knowledge base; the evaluator still
    scores what comes back against the user's original question.
    """
    question_class = classify_question(question, config.policy_keywords)
    redacted = redact(question, context.asker_names)
    # Health words only with a policy question: it never reaches an open-web source.
    keywords = keyword_query(
        redacted, config.max_keywords, vocabulary=config.vocabulary, keep_health_terms=question_class == "policy"
    )
    return FallbackPlan(question_class, redacted, keywords, config.policy.permitted_sources(question_class, sources))


@dataclass
class CragPipeline:
    retriever_for: Callable[[AskContext], Retriever]
    evaluator: Evaluator
    fallback_sources: Sequence[FallbackSource]
    config: PipelineConfig
    generator: Generator | None = None

    def answer(self, question: str, context: AskContext | None = None) -> Answer:
        context = context or AskContext()
        config = self.config
        timings: dict[str, float] = {}
        started = time.perf_counter()

        # 1. Retrieve the candidates this asker may see.
        with _timer(timings, "retrieve"):
            candidates = self.retriever_for(context).retrieve(question, config.top_k)

        # 2. Evaluate every (question, candidate) pair in one batch; with a sentence judge, also
        # the sentences of the best candidates: is there a sentence that answers?
        with _timer(timings, "evaluate"):
            scores = self.evaluator.score(question, [plain_text(p.text) for p in candidates]) if candidates else []
            scored = [ScoredPassage(p, float(s)) for p, s in zip(candidates, scores, strict=True)]
            evidence_scored = self._as_evidence(question, scored)

        # 3. Decide the action.
        action = decide([s.score for s in evidence_scored], config.thresholds)
        answer = Answer(
            question=question,
            action=action,
            found=False,
            text="",
            scores=list(scored),  # a copy: fallback scores are appended to it, never to the candidates
            evaluator_version=self.evaluator.version,
            thresholds=config.thresholds,
            question_class=classify_question(question, config.policy_keywords),
        )

        # 4. Fall back (Ambiguous, Incorrect) to allow-listed sources that the policy permits.
        fallback: list[ScoredPassage] = []
        with _timer(timings, "fallback"):
            if action in (Action.AMBIGUOUS, Action.INCORRECT):
                fallback = self._as_evidence(question, self._fall_back(question, context, answer))

        # 5. Refine the evidence the action calls for into the strips that matter.
        with _timer(timings, "refine"):
            answer.evidence_best = {
                origin: max(s.score for s in side)
                for origin, side in (("kb", evidence_scored), ("fallback", fallback))
                if side
            }
            evidence = choose_evidence(action, evidence_scored, fallback, config.thresholds, config.ambiguous_bar_share)
            kept = self._refine(question, [s.passage for s in evidence])
            if not kept:
                kept = self._best_strip_of_the_best_evidence(question, evidence)

        # 5b. Knowledge-base evidence that defers to an allow-listed source ("dates are
        # published on the HR portal") sends the question there too, as an employee would.
        if action == Action.CORRECT and kept:
            with _timer(timings, "fallback"):
                named = {source.name for source in sources_named_in(kept, self.fallback_sources)}
                referred = self._fall_back(question, context, answer, only=named) if named else []
            with _timer(timings, "refine"):
                referred = choose_evidence(  # as after Incorrect
                    Action.INCORRECT, [], self._as_evidence(question, referred), config.thresholds
                )
                if referred:
                    answer.notes.append("the knowledge base refers to " + ", ".join(sorted(named)) + "; asked it too")
                    kept += self._refine(question, [s.passage for s in referred])

        # 6. Compose a cited answer, or 7. abstain.
        with _timer(timings, "compose"):
            kept = sorted(kept, key=lambda strip: -(strip.score or 0.0))[: config.strips_top_n]
            if kept:
                answer.text, answer.citations = compose_extractive(
                    question,
                    document_order(kept),
                    config.reply_shape,
                    floor=config.thresholds.strip,
                    lead_by_score=config.sentence_evidence,
                )
                # The sources the reply cites, not every source asked nor every strip kept.
                answer.sources_used += sorted(
                    {"knowledge base" if citation.origin == "kb" else citation.source for citation in answer.citations}
                )
                answer.found = True
                answer.strips = kept
                if self.generator is not None:
                    answer.text = self._generate(question, kept, answer) or answer.text
            else:
                # In the band, the knowledge base's best evidence was on the topic but fell short:
                # name its section (AMBIGUOUS_BAR_SHARE). Below lower nothing was on the topic.
                if action == Action.AMBIGUOUS and evidence_scored:
                    answer.closest = max(evidence_scored, key=lambda s: s.score).passage
                answer.text = abstention_text(config.contact, answer.closest)
        timings["total"] = (time.perf_counter() - started) * 1000
        answer.timings_ms = {name: round(value, 1) for name, value in timings.items()}
        return answer

    def _refine(
        self, question: str, passages: Sequence[Passage], strip_threshold: float | None = None, top_n: int | None = None
    ) -> list[Strip]:
        if not passages:
            return []
        return refine(
            question,
            passages,
            self.evaluator,
            strip_threshold=self.config.thresholds.strip if strip_threshold is None else strip_threshold,
            top_n=self.config.strips_top_n if top_n is None else top_n,
            mode="sentences" if self.config.sentence_evidence else self.config.strip_mode,
            sentences_per_strip=1 if self.config.sentence_evidence else 3,
        )

    def _as_evidence(self, question: str, scored: Sequence[ScoredPassage]) -> list[ScoredPassage]:
        """The passages as evidence of an answer: with a sentence judge, the best few with their
        answer scores (crag/evidence.py); otherwise all of them with their own scores."""
        if not self.config.sentence_evidence or not scored:
            return list(scored)
        ranked = sorted(scored, key=lambda s: -s.score)[:SENTENCE_PASSAGES]
        combined = answer_scores(self.evaluator, question, [s.passage for s in ranked], [s.score for s in ranked])
        return [ScoredPassage(s.passage, score) for s, score in zip(ranked, combined, strict=True)]

    def _best_strip_of_the_best_evidence(self, question: str, evidence: Sequence[ScoredPassage]) -> list[Strip]:
        """When no strip clears the strip threshold but a passage cleared the bar its action sets
        for evidence (upper for Correct and Incorrect, the band's admission bar for Ambiguous), the
        best such passage's best strip. The strip threshold is calibrated on pseudo-queries and
        runs stricter on real questions than the passage verdict; abstaining against the
        evaluator's own verdict on the passage would throw the answer away."""
        best = max(evidence, key=lambda s: s.score, default=None)
        if best is None:
            return []
        return self._refine(question, [best.passage], strip_threshold=float("-inf"), top_n=1)

    def _fall_back(
        self, question: str, context: AskContext, answer: Answer, only: set[str] | None = None
    ) -> list[ScoredPassage]:
        """Ask the permitted fallback sources (or those of them named in `only`) and score the results."""
        config = self.config
        plan = plan_fallback(question, context, self.fallback_sources, config)
        sources = [s for s in plan.sources if only is None or s.name in only]
        if not sources:
            if only is None:
                answer.notes.append("no fallback source is permitted for this question")
            return []
        keywords = plan.keywords
        if not keywords:
            answer.notes.append("no search words left in the question after redaction and the keyword rewrite")
            return []
        results: list[Passage] = []
        for source in sources:
            answer.fallback_queries.append({"source": source.name, "query": keywords})
            try:
                found = [_usable(passage) for passage in source.search(keywords, config.fallback_limit)]
            except FallbackError as error:
                log.warning("fallback source %s failed: %s", source.name, error)
                answer.notes.append(f"fallback source {source.name} failed: {error}")
            except Exception as error:  # any source's odd reply skips that source, never fails the question
                log.warning("fallback source %s failed: %s", source.name, type(error).__name__)
                answer.notes.append(f"fallback source {source.name} failed: {type(error).__name__}")
            else:
                results += found
        if not results:
            return []
        # Fallback results are judged by the same evaluator against the original question.
        result_scores = self.evaluator.score(question, [plain_text(p.text) for p in results])
        scored = [ScoredPassage(p, float(s)) for p, s in zip(results, result_scores, strict=True)]
        answer.scores += scored
        return scored

    def _generate(self, question: str, strips: Sequence[Strip], answer: Answer) -> str | None:
        assert self.generator is not None
        try:
            return self.generator(question, strips, answer.citations)
        except Exception as error:  # any generator failure falls back to the extractive answer
            log.warning("generator failed, using the extractive answer: %s", error)
            answer.notes.append(f"generator failed: {error}")
            return None


def choose_evidence(
    action: Action,
    internal: Sequence[ScoredPassage],
    fallback: Sequence[ScoredPassage],
    thresholds: Thresholds,
    bar_share: float = AMBIGUOUS_BAR_SHARE,
) -> list[ScoredPassage]:
    """Which passages an answer may draw on.

    - Correct: the internal passages that are not clearly irrelevant (>= lower).
    - Incorrect: fallback results that clear the fallback's own bar (`Thresholds.fallback_bar`:
      upper unless calibrated apart), as knowledge-base evidence must clear upper.
    - Ambiguous: the paper mixes both; for policy, mixing a half-relevant internal rule with
      a fallback page cites the wrong source. The internal passages, if they are the stronger
      side and clear `bar_share` of the way up the band (at the default 1.0, never: see
      AMBIGUOUS_BAR_SHARE); otherwise the fallback results that clear the middle of the band
      and the fallback's calibrated bar, when there is one; otherwise abstain.
    """
    if action == Action.CORRECT:
        return [s for s in internal if s.score >= thresholds.lower]
    if action == Action.INCORRECT:
        return [s for s in fallback if s.score >= thresholds.fallback_bar]
    internal_bar = thresholds.lower + bar_share * (thresholds.upper - thresholds.lower)
    best_internal = max((s.score for s in internal), default=float("-inf"))
    best_fallback = max((s.score for s in fallback), default=float("-inf"))
    if best_internal >= internal_bar and best_internal >= best_fallback:
        return [s for s in internal if s.score >= internal_bar]
    middle = (thresholds.upper + thresholds.lower) / 2
    fallback_bar = middle if thresholds.fallback is None else max(middle, thresholds.fallback)
    return [s for s in fallback if s.score >= fallback_bar]


def sources_named_in(strips: Sequence[Strip], sources: Sequence[FallbackSource]) -> list[FallbackSource]:
    """The fallback sources whose name the strips mention, as in "published on the HR portal"
    (case and "-"/"_" between words ignored)."""
    text = " ".join(strip.text for strip in strips)
    named = []
    for source in sources:
        words = [re.escape(word) for word in re.split(r"[\s_-]+", source.name.strip()) if word]
        if words and re.search(r"\b" + r"[\s_-]+".join(words) + r"\b", text, re.IGNORECASE):
            named.append(source)
    return named


def _usable(passage: Passage) -> Passage:
    """A fallback result whose every text can be stored and posted: a lone surrogate ("\\ud83d")
    would fail the question later, when the answer is logged or sent to Slack."""
    for value in (passage.text, passage.title, passage.document, passage.section, passage.source, passage.url):
        if value:
            value.encode("utf-8")
    return passage


def document_order(strips: Sequence[Strip]) -> list[Strip]:
    """Best passage first, then each passage's strips in their order in the document."""
    order: dict[tuple[str, str, str], float] = {}
    for strip in strips:
        key = (strip.passage.origin, strip.passage.source, strip.passage.id)
        order[key] = max(order.get(key, float("-inf")), strip.score or 0.0)
    return sorted(
        strips,
        key=lambda s: (-order[(s.passage.origin, s.passage.source, s.passage.id)], s.passage.id, s.index),
    )


class _timer:
    def __init__(self, timings: dict[str, float], name: str) -> None:
        self.timings, self.name = timings, name

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(self, *_exc: object) -> None:
        self.timings[self.name] = self.timings.get(self.name, 0.0) + (time.perf_counter() - self.started) * 1000
