"""Measuring an evaluator on held-out questions, against cosine similarity, and calibrating its thresholds.

Metrics:
* ``auc``: pair-level ROC AUC, positives against hard and random negatives of held-out
  questions (entity swaps and focus swaps are reported apart in ``auc_by_kind``: cosine
  cannot see swaps by construction, and both would make the number incomparable across
  versions of the data).
* ``routing_accuracy``: simulated retrieval sets of held-out template and heading questions,
  with the answer present (source chunk among the candidates) or absent (source chunk and its
  near-duplicates removed), routed by the CRAG decision. Present->Correct and
  absent->Incorrect count 1, Ambiguous counts 0.5 (safe but costs a fallback query), the
  opposite action 0. Thresholds are cross-fitted: calibrated on one half of the questions and
  applied to the other, so the number is not measured on the data that set the thresholds.

`evaluate_evaluator` measures any Evaluator so (`policybot evaluator eval`); crag/training/train.py
measures and calibrates a freshly trained one with the same code.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from crag.decision import decide
from crag.evidence import SENTENCE_WEIGHT, answer_scores, best_passages
from crag.inference import CachedEvaluator, CosineEvaluator
from crag.training.progress import PhaseEmitter, Progress, phase_emitter
from crag.training.weak_supervision import (
    CandidateSet,
    CorpusChunk,
    Embed,
    Pair,
    StripExample,
    WeakSupervision,
    build_weak_supervision,
)
from crag.types import Action, Evaluator, Thresholds

# Calibration knobs (see calibrate()).
# upper: the highest threshold within this of the best Youden's J. Zero: on weak-supervision
# sets J is flat (best 0.30-0.36), and a slack of 0.02 put upper at the strict end of a wide
# plateau, 0.1-0.3 above the best cut and decided by noise (docs/quality-history.md, "Calibration: the best cut").
UPPER_J_SLACK = 0.0
# upper: a wrong Correct (an answer quoted from a passage that does not hold it) costs this many
# missed ones: the cut maximises TPR - WRONG_CORRECT_COST * FPR. 1 is Youden's J. The fallback
# bar is chosen the same way. Measured on the dev organisations (docs/quality.md, "Why, measured").
WRONG_CORRECT_COST = 2.0
# upper, when one calibration mixes labelled corpus questions and weak supervision's
# pseudo-queries: both kinds count alike, however many of each were scored. The product no longer
# mixes them (crag/training/train.py, `_calibrate`: the dev questions alone when there are);
# bench/cost_weight.py --mixes measures what mixing did (docs/quality.md, "Both kinds weighing alike").
BALANCE_KINDS = False
STRIP_J_SLACK = 0.05  # strip: the lowest threshold within this of the best J (keep answers)
ABSENT_QUANTILE = 0.9  # lower: at least this share of answer-absent sets fall below it ...
PRESENT_QUANTILE = 0.05  # ... and at most this share of answer-present sets do
MIN_CALIBRATION_QUESTIONS = 40  # fewer held-out questions give thresholds too noisy to trust


@dataclass
class Metrics:
    auc: float
    auc_by_kind: dict[str, float]  # "hard", "random", "swap", "focus", and per question kind
    routing_accuracy: float
    action_rates: dict[str, dict[str, float]]  # {"present"|"absent": {action: share}}
    thresholds: Thresholds  # calibrated on all held-out sets
    thresholds_source: str  # "cross-fitted" or "fixed" (given thresholds were applied)
    n_pairs: int
    n_sets: int
    score_std: float  # a collapsed model scores everything alike

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class EvaluationReport:
    evaluator: Metrics
    cosine: Metrics
    n_val_pairs: int
    n_sets: int
    seconds: float
    evaluator_version: str = ""

    @property
    def beats_cosine(self) -> bool:
        return better_than_cosine(self.evaluator, self.cosine)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "beats_cosine": self.beats_cosine}


@dataclass(frozen=True)
class HeldOut:
    """What metrics and calibration score, as `WeakSupervision` holds it for pseudo-queries:
    labelled pairs (AUC), retrieval sets with or without their answer (routing, upper and
    lower thresholds) and strips (strip threshold)."""

    val_pairs: list[Pair]
    calibration_sets: list[CandidateSet]
    strip_examples: list[StripExample]
    # Fallback results of fallback-only questions (present) and of unanswerable ones (absent):
    # the fallback's own bar (Thresholds.fallback) separates them.
    fallback_sets: list[CandidateSet] = field(default_factory=list)


def _fallback_sets(part: HeldOut | WeakSupervision) -> list[CandidateSet]:
    return part.fallback_sets if isinstance(part, HeldOut) else []


def merged_held_out(*parts: HeldOut | WeakSupervision) -> HeldOut:
    return HeldOut(
        [p for part in parts for p in part.val_pairs],
        [s for part in parts for s in part.calibration_sets],
        [e for part in parts for e in part.strip_examples],
        [s for part in parts for s in _fallback_sets(part)],
    )


def better_than_cosine(model: Metrics, cosine: Metrics) -> bool:
    """Better ranking (AUC) without routing worse: the two things the pipeline uses."""
    return model.auc > cosine.auc and model.routing_accuracy >= cosine.routing_accuracy


# ---------------------------------------------------------------------------------------
# Metrics and calibration
# ---------------------------------------------------------------------------------------


def roc_auc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Mann-Whitney AUC with tied scores counted half; NaN without both classes."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    i = 0
    while i < len(s):  # average ranks over ties
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def _separation(
    pos: np.ndarray,
    neg: np.ndarray,
    cost: float = 1.0,
    pos_weight: np.ndarray | None = None,
    neg_weight: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Candidate thresholds (midpoints between observed scores) and TPR - cost * FPR at each
    (cost 1: Youden's J); with weights, each set counts its weight's share of its side."""
    values = np.unique(np.concatenate([pos, neg]))
    cuts = np.concatenate([[values[0] - 1e-6], (values[:-1] + values[1:]) / 2.0, [values[-1] + 1e-6]])
    pos_w = np.ones(len(pos)) if pos_weight is None else pos_weight
    neg_w = np.ones(len(neg)) if neg_weight is None else neg_weight
    tpr = (pos[None, :] >= cuts[:, None]).astype(float) @ pos_w / pos_w.sum()
    fpr = (neg[None, :] >= cuts[:, None]).astype(float) @ neg_w / neg_w.sum()
    return cuts, tpr - cost * fpr


def kind_weights(kinds: Sequence[str]) -> np.ndarray:
    """Weights under which every kind of set (labelled corpus questions, weak supervision's
    pseudo-queries) counts alike, however many of each calibration happened to score."""
    counts = Counter(kinds)
    return np.array([1.0 / counts[kind] for kind in kinds])


def calibrate(
    present_max: Sequence[float],
    absent_max: Sequence[float],
    strip_pos: Sequence[float] = (),
    strip_neg: Sequence[float] = (),
    *,
    wrong_lead: Sequence[float] = (),
    fallback_present: Sequence[float] = (),
    fallback_absent: Sequence[float] = (),
    fallback_wrong_lead: Sequence[float] = (),
    cost: float = WRONG_CORRECT_COST,
    present_kinds: Sequence[str] = (),
    absent_kinds: Sequence[str] = (),
    wrong_lead_kinds: Sequence[str] = (),
) -> Thresholds:
    """(upper, lower, strip, fallback) from max-scores of answer-present and answer-absent sets.

    upper: separates present from absent sets best, a wrong Correct costing `cost` missed ones
      (TPR - cost * FPR); among equally good thresholds the highest, since a wrong "Correct"
      answers from the wrong passage.
    lower: below it fall most absent sets and almost no present set, so "Incorrect"
      (knowledge base dropped) is only chosen when evidence is clearly missing.
    strip: separates answer-bearing strips from strips of unrelated chunks, taking the lowest
      nearly-best threshold, because refinement also keeps only the top strips.
    fallback: separates the fallback results of fallback-only questions from those of
      unanswerable ones, as upper does (None without both kinds: the fallback answers from upper).
    wrong_lead, fallback_wrong_lead: max-scores of answer-present sets whose best-scored
      candidate does not hold the answer. Routed Correct (or answered from the fallback), the reply
      would quote that candidate: a wrong answer. So upper and the fallback bar count them with
      the absent sets, and lower with the present ones (the answer is there).
    present_kinds, absent_kinds, wrong_lead_kinds: each set's kind, when calibration mixes kinds
      of questions; upper then weighs every kind alike (`kind_weights`).
    """
    pos, absent, wrong = np.asarray(present_max, float), np.asarray(absent_max, float), np.asarray(wrong_lead, float)
    if len(pos) == 0:  # no present set leads with its answer (a handful of sets): all count as present
        pos, wrong, present_kinds, wrong_lead_kinds = wrong, wrong[:0], wrong_lead_kinds, ()
    if len(pos) == 0 or len(absent) == 0:
        raise ValueError("calibration needs answer-present and answer-absent sets")
    neg = np.concatenate([absent, wrong])
    kinds = [*absent_kinds, *wrong_lead_kinds]
    weights = (kind_weights(present_kinds), kind_weights(kinds)) if present_kinds else (None, None)
    cuts, j = _separation(pos, neg, cost, *weights)
    upper = float(cuts[np.flatnonzero(j >= j.max() - UPPER_J_SLACK).max()])
    present_all = np.concatenate([pos, wrong])
    lower = float(min(upper, np.quantile(absent, ABSENT_QUANTILE), np.quantile(present_all, PRESENT_QUANTILE)))
    if len(strip_pos) and len(strip_neg):
        cuts_s, j_s = _separation(np.asarray(strip_pos, float), np.asarray(strip_neg, float))
        strip = float(cuts_s[np.flatnonzero(j_s >= j_s.max() - STRIP_J_SLACK).min()])
        strip = min(strip, upper)
    else:
        strip = lower
    fallback = None
    fallback_pos, fallback_wrong = list(fallback_present), list(fallback_wrong_lead)
    if not fallback_pos:  # as for upper
        fallback_pos, fallback_wrong = fallback_wrong, []
    if len(fallback_pos) and len(fallback_absent):
        fallback_neg = np.asarray([*fallback_absent, *fallback_wrong], float)
        cuts_f, j_f = _separation(np.asarray(fallback_pos, float), fallback_neg, cost)
        fallback = float(cuts_f[np.flatnonzero(j_f >= j_f.max() - UPPER_J_SLACK).max()])
    return Thresholds(upper=upper, lower=lower, strip=strip, fallback=fallback)


def _route(sets: Sequence[CandidateSet], routing: RoutingScores, thresholds: Thresholds) -> list[tuple[bool, Action]]:
    return [(s.present, decide(routing[id(s)], thresholds)) for s in sets]


RoutingScores = dict[int, list[float]]  # by id() of a CandidateSet: the scores the decision reads


def _routing_scores(
    evaluator: Evaluator,
    sets: Sequence[CandidateSet],
    scores: dict[tuple[str, str], float],
    sentence_evidence: bool,
    sentence_weight: float = SENTENCE_WEIGHT,
) -> RoutingScores:
    """What the pipeline decides on for each set: its passages' scores, or with a sentence judge
    the answer scores of its best passages (crag/evidence.py, the same function)."""
    routing: RoutingScores = {}
    for s in sets:
        passage_scores = [scores[(s.question, p)] for p in s.passages]
        if sentence_evidence:
            routing[id(s)] = answer_scores(evaluator, s.question, s.as_passages(), passage_scores, sentence_weight)
        else:
            routing[id(s)] = passage_scores
    return routing


def leads_with_answer(
    s: CandidateSet, routing: Sequence[float], scores: dict[tuple[str, str], float], sentence_evidence: bool
) -> bool:
    """Whether the candidate with the best routing score (the passage a Correct reply quotes
    first) holds the answer; True where the set does not say which candidates do."""
    if not s.answer_ids:
        return True
    if sentence_evidence:  # the routing scores are those of the best passages, best first (crag/evidence.py)
        order = best_passages([scores[(s.question, p)] for p in s.passages])
    else:
        order = list(range(len(s.passages)))
    best = max(range(len(routing)), key=lambda i: routing[i])
    return s.chunk_ids[order[best]] in s.answer_ids


def _routing_credit(routed: Sequence[tuple[bool, Action]]) -> float:
    credit = []
    for present, action in routed:
        if action == Action.AMBIGUOUS:
            credit.append(0.5)
        else:
            credit.append(1.0 if (action == Action.CORRECT) == present else 0.0)
    return float(np.mean(credit)) if credit else float("nan")


class _EmbedCache:
    """An `embed` that remembers vectors, seeded with the chunk embeddings we already have."""

    def __init__(self, embed: Embed, known: dict[str, np.ndarray] | None = None):
        self.embed = embed
        self.known: dict[str, np.ndarray] = dict(known or {})

    def __call__(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.known))
        if missing:
            for text, vec in zip(missing, np.asarray(self.embed(missing), dtype=np.float32)):
                self.known[text] = vec
        return np.stack([self.known[t] for t in texts])


def held_out_passages(ws: WeakSupervision | HeldOut) -> dict[str, dict[str, None]]:
    """Every passage each held-out question is scored against by some metric (question -> passages)."""
    needed: dict[str, dict[str, None]] = {}
    for p in ws.val_pairs:
        needed.setdefault(p.question, {})[p.passage] = None
    for s in [*ws.calibration_sets, *_fallback_sets(ws)]:
        needed.setdefault(s.question, {}).update(dict.fromkeys(s.passages))
    for e in ws.strip_examples:
        needed.setdefault(e.question, {})[e.text] = None
    return needed


HeldOutData = TypeVar("HeldOutData", WeakSupervision, HeldOut)


def score_until(
    evaluator: CachedEvaluator,
    ws: HeldOutData,
    deadline: float,
    *,
    sentence_evidence: bool,
    min_questions: int = MIN_CALIBRATION_QUESTIONS,
    emit: PhaseEmitter | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[HeldOutData, str | None]:
    """Score held-out questions into `evaluator`'s cache until the `deadline` (a `clock()` time)
    has passed and at least `min_questions` are scored, because fewer give thresholds too noisy to
    trust. Returns the questions scored, and a note when some were left out; `measure` then
    scores nothing again.

    Questions that calibrate thresholds (template and heading questions) come first, in a fixed
    hashed order so that a subset spans the whole corpus. It stops on the clock, not on a speed
    measured once, so a machine that slows down mid-way (another job starting) still ends near
    the deadline.
    """
    needed = held_out_passages(ws)
    sets_of: dict[str, list[CandidateSet]] = {}
    for s in [*ws.calibration_sets, *_fallback_sets(ws)]:
        sets_of.setdefault(s.question, []).append(s)
    chosen: set[str] = set()
    for i, question in enumerate(scoring_order(ws)):
        if len(chosen) >= min_questions and clock() >= deadline:
            break
        if emit is not None and i % 5 == 0:
            emit("calibrate", i, len(needed))
        texts = list(needed[question])
        scores = dict(zip(texts, evaluator.score(question, texts), strict=True))
        if sentence_evidence:  # the sentences routing reads, as measure() will ask for them
            for s in sets_of.get(question, ()):
                answer_scores(evaluator, question, s.as_passages(), [scores[p] for p in s.passages])
        chosen.add(question)
    if len(chosen) == len(needed):
        return ws, None
    return _only(ws, chosen), _left_out_note(len(chosen), len(needed))


def scoring_order(ws: WeakSupervision | HeldOut) -> list[str]:
    """Held-out questions, those that calibrate thresholds first, in a fixed hashed order."""
    calibrating = {s.question for s in ws.calibration_sets}
    return sorted(held_out_passages(ws), key=lambda q: (q not in calibrating, hashlib.sha1(q.encode()).hexdigest()))


def _only(ws: HeldOutData, chosen: set[str]) -> HeldOutData:
    """`ws` with only the held-out questions in `chosen`."""
    subset = replace(
        ws,
        val_pairs=[p for p in ws.val_pairs if p.question in chosen],
        calibration_sets=[s for s in ws.calibration_sets if s.question in chosen],
        strip_examples=[e for e in ws.strip_examples if e.question in chosen],
    )
    if isinstance(subset, HeldOut):  # Any: mypy cannot narrow the TypeVar to one of its values here
        held: Any = subset
        subset = replace(held, fallback_sets=[s for s in held.fallback_sets if s.question in chosen])
    return subset


def _left_out_note(n_chosen: int, n_needed: int) -> str:
    return f"measured and calibrated on {n_chosen} of {n_needed} held-out questions to stay within the time budget"


def _score_everything(
    evaluator: Evaluator, ws: WeakSupervision | HeldOut, emit: PhaseEmitter
) -> dict[tuple[str, str], float]:
    """Score every (question, passage) that any metric needs, one call per question."""
    needed = held_out_passages(ws)
    scores: dict[tuple[str, str], float] = {}
    total = len(needed)
    for i, (question, passages) in enumerate(needed.items()):
        texts = list(passages)
        for text, value in zip(texts, evaluator.score(question, texts)):
            scores[(question, text)] = float(value)
        if i % 5 == 0 or i == total - 1:
            emit("calibrate", i + 1, total)
    return scores


def measure(
    evaluator: Evaluator,
    ws: WeakSupervision | HeldOut,
    *,
    fixed_thresholds: Thresholds | None = None,
    progress: Progress | None = None,
    t0: float | None = None,
    sentence_evidence: bool = False,
    cost: float = WRONG_CORRECT_COST,
    sentence_weight: float = SENTENCE_WEIGHT,
    balance_kinds: bool = BALANCE_KINDS,
) -> Metrics:
    """All metrics of one evaluator on the held-out part of `ws`. `sentence_evidence`: route
    as the pipeline does for an evaluator trained on answer sentences (crag/evidence.py, with
    `sentence_weight`); the sentences it reads are scored through `evaluator` (wrap it in a
    CachedEvaluator)."""
    emit = phase_emitter(progress, time.monotonic() if t0 is None else t0)
    scores = _score_everything(evaluator, ws, emit)

    pairs = ws.val_pairs
    main = [p for p in pairs if p.kind in ("positive", "hard", "random")]  # swaps and focus pairs are reported apart
    auc = roc_auc([scores[(p.question, p.passage)] for p in main], [p.label for p in main])
    by_kind: dict[str, float] = {}
    positives = [p for p in pairs if p.label == 1]
    for kind in ("hard", "random", "swap", "focus"):
        subset = positives + [p for p in pairs if p.kind == kind]
        if any(p.kind == kind for p in pairs):
            by_kind[kind] = roc_auc([scores[(p.question, p.passage)] for p in subset], [p.label for p in subset])
    for qkind in ("cloze", "template", "heading", "corpus"):
        subset = [p for p in main if p.query_kind == qkind]
        if subset:
            by_kind[f"q:{qkind}"] = roc_auc(
                [scores[(p.question, p.passage)] for p in subset], [p.label for p in subset]
            )

    sets = ws.calibration_sets
    fallback_sets = _fallback_sets(ws)
    routing = _routing_scores(evaluator, [*sets, *fallback_sets], scores, sentence_evidence, sentence_weight)

    def set_max(s: CandidateSet) -> float:
        return max(routing[id(s)])

    # Present sets led by a candidate that holds the answer: decided once, whatever the fold.
    led_right = {
        id(s)
        for s in [*sets, *fallback_sets]
        if s.present and leads_with_answer(s, routing[id(s)], scores, sentence_evidence)
    }

    def right_lead(s: CandidateSet) -> bool:
        return id(s) in led_right

    def fit(subset: Sequence[CandidateSet]) -> Thresholds:
        questions = {s.question for s in subset}
        strips = [e for e in ws.strip_examples if e.question in questions]
        fallback = [s for s in fallback_sets if s.question in questions]
        wrong = [s for s in subset if s.present and not right_lead(s)]
        return calibrate(
            [set_max(s) for s in subset if right_lead(s)],
            [set_max(s) for s in subset if not s.present],
            [scores[(e.question, e.text)] for e in strips if e.label == 1],
            [scores[(e.question, e.text)] for e in strips if e.label == 0],
            wrong_lead=[set_max(s) for s in wrong],
            fallback_present=[set_max(s) for s in fallback if right_lead(s)],
            fallback_absent=[set_max(s) for s in fallback if not s.present],
            fallback_wrong_lead=[set_max(s) for s in fallback if s.present and not right_lead(s)],
            cost=cost,
            present_kinds=[_set_kind(s) for s in subset if right_lead(s)] if balance_kinds else (),
            absent_kinds=[_set_kind(s) for s in subset if not s.present] if balance_kinds else (),
            wrong_lead_kinds=[_set_kind(s) for s in wrong] if balance_kinds else (),
        )

    if not sets:
        thresholds = Thresholds(upper=0.0, lower=0.0, strip=0.0)
        return Metrics(auc, by_kind, float("nan"), {}, thresholds, "none", len(pairs), 0, _std(scores))
    thresholds = fit(sets)
    if fixed_thresholds is not None:
        routed = _route(sets, routing, fixed_thresholds)
        source = "fixed"
    else:
        # Cross-fitting: thresholds from one half of the questions route the other half.
        questions = sorted({s.question for s in sets})
        fold = {q: int(hashlib.sha1(q.encode()).hexdigest(), 16) % 2 for q in questions}
        halves = [[s for s in sets if fold[s.question] == f] for f in (0, 1)]
        routed, source = [], "cross-fitted"
        for train_half, test_half in ((halves[0], halves[1]), (halves[1], halves[0])):
            if any(s.present for s in train_half) and any(not s.present for s in train_half) and test_half:
                routed += _route(test_half, routing, fit(train_half))
        if not routed:  # too few questions to split: in-sample, and say so
            routed, source = _route(sets, routing, thresholds), "in-sample"
    rates: dict[str, dict[str, float]] = {}
    for label, present in (("present", True), ("absent", False)):
        actions = [a for p, a in routed if p == present]
        rates[label] = {a.value: (sum(x == a for x in actions) / len(actions) if actions else 0.0) for a in Action}
    return Metrics(
        auc=auc,
        auc_by_kind=by_kind,
        routing_accuracy=_routing_credit(routed),
        action_rates=rates,
        thresholds=thresholds,
        thresholds_source=source,
        n_pairs=len(pairs),
        n_sets=len(sets),
        score_std=_std(scores),
    )


def _set_kind(s: CandidateSet) -> str:
    return "labelled" if s.query_kind == "corpus" else "weak"


def _std(scores: dict[Any, float]) -> float:
    return float(np.std(list(scores.values()))) if scores else 0.0


def cosine_with_known(embed: Embed, known: dict[str, np.ndarray]) -> CosineEvaluator:
    """Cosine similarity that reuses the vectors already stored for these passages."""
    return CosineEvaluator(_EmbedCache(embed, known))


def cosine_for(ws: WeakSupervision, embed: Embed) -> CosineEvaluator:
    return cosine_with_known(embed, {c.text: ws.embeddings[i] for i, c in enumerate(ws.chunks)})


def evaluate_evaluator(
    evaluator: Evaluator,
    chunks: Sequence[CorpusChunk],
    embed: Embed,
    *,
    seed: int = 0,
    val_fraction: float = 0.2,
    thresholds: Thresholds | dict[str, float] | None = None,
    progress: Progress | None = None,
) -> EvaluationReport:
    """Measure an evaluator and cosine similarity on the held-out split of this corpus.

    With the seed used in training, the split is the one training held out. Given
    `thresholds` (default: the evaluator's own calibrated ones, if it has any), routing is
    measured with them; the report also carries freshly calibrated thresholds (recalibration).
    """
    t0 = time.monotonic()
    ws = build_weak_supervision(chunks, embed, seed=seed, val_fraction=val_fraction)
    if thresholds is None:
        thresholds = getattr(evaluator, "thresholds", None)
    fixed = Thresholds.from_dict(thresholds) if isinstance(thresholds, dict) else thresholds
    sentences = bool((getattr(evaluator, "metadata", None) or {}).get("sentence_evidence"))
    model_metrics = measure(
        CachedEvaluator(evaluator), ws, fixed_thresholds=fixed, progress=progress, t0=t0, sentence_evidence=sentences
    )
    cosine_metrics = measure(cosine_for(ws, embed), ws)
    return EvaluationReport(
        evaluator=model_metrics,
        cosine=cosine_metrics,
        n_val_pairs=len(ws.val_pairs),
        n_sets=len(ws.calibration_sets),
        seconds=time.monotonic() - t0,
        evaluator_version=evaluator.version,
    )
