"""Sentence evidence: does any sentence answer the question, not only is a passage on topic.

A passage on the topic whose detail is absent ("hotel caps" for a city the policy never names)
scores well as a passage, yet none of its sentences answers. So an evaluator trained on the
corpus's answer sentences (crag/training/train.py marks it `sentence_evidence`) routes on both:
each of the best passages gets an answer score, the mean of its own score and its best
sentence's (`SENTENCE_WEIGHT`), as the CRAG paper's evaluator scores passages and strips alike. Calibration
(crag/training/metrics.py) computes the same score, from the same functions, on held-out sets.
"""

from __future__ import annotations

from collections.abc import Sequence

from crag.strips import decompose, strip_text_for_scoring
from crag.types import Evaluator, Passage, Strip

SENTENCE_PASSAGES = 3  # the best passages whose sentences are read for routing
# The best sentence's share of an answer score, the passage's own the rest: 0.5, the CRAG
# paper's even reading of passages and strips (bench/cost_weight.py compares others on dev).
SENTENCE_WEIGHT = 0.5


def sentence_strips(passage: Passage) -> list[Strip]:
    """A passage's sentences as strips of one, each with its scope context."""
    return decompose(passage, "sentences", sentences_per_strip=1)


def sentence_texts(passage: Passage) -> list[str]:
    """What the evaluator reads for each sentence: its context line (section, scope), then it."""
    return [strip_text_for_scoring(strip) for strip in sentence_strips(passage)]


def answer_score(passage_score: float, best_sentence: float | None, sentence_weight: float = SENTENCE_WEIGHT) -> float:
    """A passage's score as evidence of an answer: its own and its best sentence's, weighed."""
    if best_sentence is None:
        return passage_score
    return (1 - sentence_weight) * passage_score + sentence_weight * best_sentence


def best_passages(passage_scores: Sequence[float]) -> list[int]:
    """The indices of the `SENTENCE_PASSAGES` best-scored passages, best first: the passages
    `answer_scores` scores, in its order."""
    return sorted(range(len(passage_scores)), key=lambda i: -passage_scores[i])[:SENTENCE_PASSAGES]


def answer_scores(
    evaluator: Evaluator,
    question: str,
    passages: Sequence[Passage],
    passage_scores: Sequence[float],
    sentence_weight: float = SENTENCE_WEIGHT,
) -> list[float]:
    """Answer scores of the `SENTENCE_PASSAGES` best passages (best first); their sentences are
    scored in one call. The others' scores play no part: a question is answered, if at all, by
    its best passages."""
    best = best_passages(passage_scores)
    texts = [sentence_texts(passages[i]) for i in best]
    flat = [text for group in texts for text in group]
    scores = list(evaluator.score(question, flat)) if flat else []
    out, start = [], 0
    for i, group in zip(best, texts, strict=True):
        mine = scores[start : start + len(group)]
        start += len(group)
        out.append(answer_score(passage_scores[i], max(mine) if mine else None, sentence_weight))
    return out
