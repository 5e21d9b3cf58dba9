"""Train, calibrate and measure the evaluator on weak supervision from the corpus.

`train_evaluator` runs four phases inside one time budget (data, train, calibrate, save) and
reports the trained evaluator *and* cosine similarity on the same validation split, so an
admin can see whether training was worth it (`TrainingResult.beats_cosine`).
`evaluate_evaluator` reuses the same metric code for any Evaluator (`policybot evaluator eval`).

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
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import torch

from crag.checkpoint import METADATA_FILE, load_weights, save_evaluator, update_metadata
from crag.decision import decide
from crag.inference import CachedEvaluator, CosineEvaluator, evaluator_from_bundle, quantize_int8_linear
from crag.judge import EvaluatorConfig, JudgeBundle, MiniLMT5Judge, T5EncoderJudge, build_judge, collate, encode_pairs
from crag.types import Action, Evaluator, Thresholds
from crag.weak_supervision import (
    CandidateSet,
    CorpusChunk,
    Embed,
    Pair,
    StripExample,
    WeakSupervision,
    build_weak_supervision,
)

Progress = Callable[[dict[str, Any]], None]

# Calibration knobs (see calibrate()).
# upper: the highest threshold within this of the best Youden's J. Zero: on weak-supervision
# sets J is flat (best 0.30-0.36), and a slack of 0.02 put upper at the strict end of a wide
# plateau, 0.1-0.3 above the best cut and decided by noise (docs/quality.md, "Calibration").
UPPER_J_SLACK = 0.0
STRIP_J_SLACK = 0.05  # strip: the lowest threshold within this of the best J (keep answers)
ABSENT_QUANTILE = 0.9  # lower: at least this share of answer-absent sets fall below it ...
PRESENT_QUANTILE = 0.05  # ... and at most this share of answer-present sets do
MIN_CALIBRATION_QUESTIONS = 40  # fewer held-out questions give thresholds too noisy to trust
REVIEW_WEIGHT = 3  # a real labelled pair counts this many weak ones: rare, and how people really ask
CALIBRATION_OVERHEAD = 1.3  # cosine on the same split, metrics, progress: on top of the model's scoring
GATE_SHARE = 0.25  # of the budget, for scoring the labelled held-out questions that decide activation
MIN_GATE_QUESTIONS = 100


@dataclass
class Metrics:
    auc: float
    auc_by_kind: dict[str, float]  # "hard", "random", "swap", "focus", and per question kind
    routing_accuracy: float
    action_rates: dict[str, dict[str, float]]  # {"present"|"absent": {action: share}}
    thresholds: dict[str, float]  # {"upper", "lower", "strip"} calibrated on all held-out sets
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
        return _beats(self.evaluator, self.cosine)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "beats_cosine": self.beats_cosine}


@dataclass
class TrainingResult:
    folder: Path
    version: str
    evaluator: Metrics
    cosine: Metrics
    thresholds: dict[str, float]
    n_train_pairs: int
    n_val_pairs: int
    steps: int
    epochs: float
    seconds: float
    phase_seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def beats_cosine(self) -> bool:
        return _beats(self.evaluator, self.cosine)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["folder"] = str(self.folder)
        out["beats_cosine"] = self.beats_cosine
        return out


@dataclass(frozen=True)
class HeldOut:
    """What metrics and calibration score, as `WeakSupervision` holds it for pseudo-queries:
    labelled pairs (AUC), retrieval sets with or without their answer (routing, upper and
    lower thresholds) and strips (strip threshold)."""

    val_pairs: list[Pair]
    calibration_sets: list[CandidateSet]
    strip_examples: list[StripExample]


@dataclass(frozen=True)
class LabelledData:
    """Labelled questions from outside the knowledge base (the policy-qa corpus): pairs to train
    on, and held-out questions of other organisations, asked through real retrieval, that gate
    the evaluator against cosine and calibrate its thresholds beside the weak-supervision sets."""

    train_pairs: list[Pair]
    held_out: HeldOut
    embeddings: dict[str, np.ndarray]  # passage text -> its stored embedding, for cosine
    description: str  # for notes: where the labels come from


def _merged(*parts: HeldOut | WeakSupervision) -> HeldOut:
    return HeldOut(
        [p for part in parts for p in part.val_pairs],
        [s for part in parts for s in part.calibration_sets],
        [e for part in parts for e in part.strip_examples],
    )


def _beats(model: Metrics, cosine: Metrics) -> bool:
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


def _youden(pos: np.ndarray, neg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Candidate thresholds (midpoints between observed scores) and Youden's J at each."""
    values = np.unique(np.concatenate([pos, neg]))
    cuts = np.concatenate([[values[0] - 1e-6], (values[:-1] + values[1:]) / 2.0, [values[-1] + 1e-6]])
    tpr = (pos[None, :] >= cuts[:, None]).mean(1)
    fpr = (neg[None, :] >= cuts[:, None]).mean(1)
    return cuts, tpr - fpr


def calibrate(
    present_max: Sequence[float],
    absent_max: Sequence[float],
    strip_pos: Sequence[float] = (),
    strip_neg: Sequence[float] = (),
) -> dict[str, float]:
    """(upper, lower, strip) from max-scores of answer-present and answer-absent sets.

    upper: separates present from absent sets best (Youden's J); among equally good
      thresholds the highest, since a wrong "Correct" answers from the wrong passage.
    lower: below it fall most absent sets and almost no present set, so "Incorrect"
      (knowledge base dropped) is only chosen when evidence is clearly missing.
    strip: separates answer-bearing strips from strips of unrelated chunks, taking the lowest
      nearly-best threshold, because refinement also keeps only the top strips.
    """
    pos, neg = np.asarray(present_max, float), np.asarray(absent_max, float)
    if len(pos) == 0 or len(neg) == 0:
        raise ValueError("calibration needs answer-present and answer-absent sets")
    cuts, j = _youden(pos, neg)
    upper = float(cuts[np.flatnonzero(j >= j.max() - UPPER_J_SLACK).max()])
    lower = float(min(upper, np.quantile(neg, ABSENT_QUANTILE), np.quantile(pos, PRESENT_QUANTILE)))
    if len(strip_pos) and len(strip_neg):
        cuts_s, j_s = _youden(np.asarray(strip_pos, float), np.asarray(strip_neg, float))
        strip = float(cuts_s[np.flatnonzero(j_s >= j_s.max() - STRIP_J_SLACK).min()])
        strip = min(strip, upper)
    else:
        strip = lower
    return {"upper": upper, "lower": lower, "strip": strip}


def _route(
    sets: Sequence[CandidateSet], scores: dict[tuple[str, str], float], thresholds: dict[str, float]
) -> list[tuple[bool, Action]]:
    t = Thresholds(upper=thresholds["upper"], lower=thresholds["lower"])
    return [(s.present, decide([scores[(s.question, p)] for p in s.passages], t)) for s in sets]


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
    for s in ws.calibration_sets:
        needed.setdefault(s.question, {}).update(dict.fromkeys(s.passages))
    for e in ws.strip_examples:
        needed.setdefault(e.question, {})[e.text] = None
    return needed


HeldOutData = TypeVar("HeldOutData", WeakSupervision, HeldOut)


def within_time(
    ws: HeldOutData, seconds_per_pair: float, seconds_left: float, min_questions: int = MIN_CALIBRATION_QUESTIONS
) -> tuple[HeldOutData, str | None]:
    """The held-out questions that can be scored in the time left, and a note when some were left out.

    Questions that calibrate thresholds (template and heading questions) come first, in a
    fixed hashed order so the subset spans the whole corpus; at least `min_questions` are
    always kept, because fewer give thresholds too noisy to trust.
    """
    needed = held_out_passages(ws)
    if sum(len(passages) for passages in needed.values()) * seconds_per_pair <= seconds_left:
        return ws, None
    calibrating = {s.question for s in ws.calibration_sets}
    order = sorted(needed, key=lambda q: (q not in calibrating, hashlib.sha1(q.encode()).hexdigest()))
    chosen: set[str] = set()
    cost = 0.0
    for question in order:
        question_cost = len(needed[question]) * seconds_per_pair
        if len(chosen) >= min_questions and cost + question_cost > seconds_left:
            break
        chosen.add(question)
        cost += question_cost
    subset = replace(
        ws,
        val_pairs=[p for p in ws.val_pairs if p.question in chosen],
        calibration_sets=[s for s in ws.calibration_sets if s.question in chosen],
        strip_examples=[e for e in ws.strip_examples if e.question in chosen],
    )
    return (
        subset,
        f"measured and calibrated on {len(chosen)} of {len(needed)} held-out questions to stay within the time budget",
    )


def _score_everything(
    evaluator: Evaluator, ws: WeakSupervision | HeldOut, progress: Progress | None, t0: float
) -> dict[tuple[str, str], float]:
    """Score every (question, passage) that any metric needs, one call per question."""
    needed = held_out_passages(ws)
    scores: dict[tuple[str, str], float] = {}
    total = len(needed)
    for i, (question, passages) in enumerate(needed.items()):
        texts = list(passages)
        for text, value in zip(texts, evaluator.score(question, texts)):
            scores[(question, text)] = float(value)
        if progress and (i % 5 == 0 or i == total - 1):
            progress(
                {"phase": "calibrate", "step": i + 1, "total": total, "loss": None, "elapsed": time.monotonic() - t0}
            )
    return scores


def measure(
    evaluator: Evaluator,
    ws: WeakSupervision | HeldOut,
    *,
    fixed_thresholds: dict[str, float] | None = None,
    progress: Progress | None = None,
    t0: float | None = None,
) -> Metrics:
    """All metrics of one evaluator on the held-out part of `ws`."""
    t0 = time.monotonic() if t0 is None else t0
    scores = _score_everything(evaluator, ws, progress, t0)

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

    def set_max(s: CandidateSet) -> float:
        return max(scores[(s.question, p)] for p in s.passages)

    def fit(subset: Sequence[CandidateSet]) -> dict[str, float]:
        questions = {s.question for s in subset}
        strips = [e for e in ws.strip_examples if e.question in questions]
        return calibrate(
            [set_max(s) for s in subset if s.present],
            [set_max(s) for s in subset if not s.present],
            [scores[(e.question, e.text)] for e in strips if e.label == 1],
            [scores[(e.question, e.text)] for e in strips if e.label == 0],
        )

    if not sets:
        thresholds = {"upper": 0.0, "lower": 0.0, "strip": 0.0}
        return Metrics(auc, by_kind, float("nan"), {}, thresholds, "none", len(pairs), 0, _std(scores))
    thresholds = fit(sets)
    if fixed_thresholds is not None:
        routed = _route(sets, scores, fixed_thresholds)
        source = "fixed"
    else:
        # Cross-fitting: thresholds from one half of the questions route the other half.
        questions = sorted({s.question for s in sets})
        fold = {q: int(hashlib.sha1(q.encode()).hexdigest(), 16) % 2 for q in questions}
        halves = [[s for s in sets if fold[s.question] == f] for f in (0, 1)]
        routed, source = [], "cross-fitted"
        for train_half, test_half in ((halves[0], halves[1]), (halves[1], halves[0])):
            if any(s.present for s in train_half) and any(not s.present for s in train_half) and test_half:
                routed += _route(test_half, scores, fit(train_half))
        if not routed:  # too few questions to split: in-sample, and say so
            routed, source = _route(sets, scores, thresholds), "in-sample"
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


def _std(scores: dict[Any, float]) -> float:
    return float(np.std(list(scores.values()))) if scores else 0.0


def cosine_with_known(embed: Embed, known: dict[str, np.ndarray]) -> CosineEvaluator:
    """Cosine similarity that reuses the vectors already stored for these passages."""
    return CosineEvaluator(_EmbedCache(embed, known))


def _cosine_for(ws: WeakSupervision, embed: Embed) -> CosineEvaluator:
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
    fixed = None
    if isinstance(thresholds, Thresholds):
        fixed = {"upper": thresholds.upper, "lower": thresholds.lower}
    elif isinstance(thresholds, dict):
        fixed = dict(thresholds)
    model_metrics = measure(CachedEvaluator(evaluator), ws, fixed_thresholds=fixed, progress=progress, t0=t0)
    cosine_metrics = measure(_cosine_for(ws, embed), ws)
    return EvaluationReport(
        evaluator=model_metrics,
        cosine=cosine_metrics,
        n_val_pairs=len(ws.val_pairs),
        n_sets=len(ws.calibration_sets),
        seconds=time.monotonic() - t0,
        evaluator_version=evaluator.version,
    )


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------


def _batches(lengths: Sequence[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Shuffled batches of similar lengths (less padding), in random order."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    window = batch_size * 16
    batches: list[list[int]] = []
    for start in range(0, len(order), window):
        block = sorted(order[start : start + window], key=lambda i: lengths[i])
        batches += [block[i : i + batch_size] for i in range(0, len(block), batch_size)]
    rng.shuffle(batches)
    return batches


def _inference_seconds_per_pair(
    model: torch.nn.Module, pairs: Sequence[Pair], tokenizer: Any, config: EvaluatorConfig, pad_id: int
) -> float:
    """Time one inference batch of held-out pairs (scoring them is what calibration costs)."""
    sample = pairs[: config.batch_size]
    rows = [encode_pairs(tokenizer, config.kind, p.question, [p.passage], config.max_length)[0] for p in sample]
    model.eval()
    with torch.inference_mode():
        model(**collate(rows[:2], pad_id))  # the first call pays one-off setup costs
        started = time.monotonic()
        model(**collate(rows, pad_id))
    model.train()
    return (time.monotonic() - started) / max(1, len(rows))


class PhaseEmitter(Protocol):
    def __call__(self, phase: str, step: int, total: int, loss: float | None = None) -> None: ...


def _phase_emitter(progress: Progress | None, t0: float) -> PhaseEmitter:
    """A progress callback taking (phase, step, total, loss), with the time since `t0`."""

    def emit(phase: str, step: int, total: int, loss: float | None = None) -> None:
        if progress:
            progress({"phase": phase, "step": step, "total": total, "loss": loss, "elapsed": time.monotonic() - t0})

    return emit


@dataclass(frozen=True)
class Fitted:
    """How far one run of `fit_judge` got."""

    steps: int
    pairs_seen: int
    epochs: float
    logit_std: float  # of the last batch: near zero means the scores collapsed


def fit_judge(
    bundle: JudgeBundle,
    pairs: Sequence[Pair],
    config: EvaluatorConfig,
    seed: int,
    seconds_left: Callable[[], float],
    emit: PhaseEmitter,
) -> Fitted:
    """Train `bundle.model` in place with BCE on `pairs`, for `config.max_epochs` (or
    `config.max_steps`) or until `seconds_left()` runs out, whichever comes first; never fewer
    than `config.min_steps` steps. The planned total (and the LR schedule) follows the measured
    step time, replanned every 10 steps."""
    rng = random.Random(seed)
    model = bundle.model
    if not isinstance(model, MiniLMT5Judge | T5EncoderJudge):
        raise TypeError(f"only the judges built here can be trained, not {type(model).__name__}")
    model.train()
    rows = [
        encode_pairs(bundle.tokenizer, config.kind, p.question, [p.passage], config.train_max_length)[0] for p in pairs
    ]
    labels = torch.tensor([float(p.label) for p in pairs])
    n_pos = float(labels.sum())
    # Negatives outnumber positives about 3:1; weigh positives up so both classes count alike.
    pos_weight = torch.tensor((len(labels) - n_pos) / max(n_pos, 1.0))
    pad_id = bundle.tokenizer.pad_token_id or 0
    lengths = [len(r["input_ids"]) for r in rows]
    steps_per_epoch = math.ceil(len(rows) / config.train_batch_size)
    max_steps = config.max_epochs * steps_per_epoch
    if config.max_steps is not None:
        max_steps = min(max_steps, config.max_steps)
    max_steps = max(max_steps, config.min_steps)

    optimizer = torch.optim.AdamW(model.param_groups(config), weight_decay=config.weight_decay)
    plan = {"total": max_steps}  # replanned from measured step time; the LR schedule follows it

    def lr_factor(step: int) -> float:
        warmup = max(1, int(config.warmup_frac * plan["total"]))
        if step < warmup:
            return (step + 1) / warmup
        return max(0.05, 1.0 - (step - warmup) / max(1, plan["total"] - warmup))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    step, seen, loss_ema, logit_std = 0, 0, None, 0.0
    epoch_batches: list[list[int]] = []
    step_times: list[float] = []
    while step < plan["total"]:
        if not epoch_batches:
            epoch_batches = _batches(lengths, config.train_batch_size, rng)
        idx = epoch_batches.pop()
        started = time.monotonic()
        batch = collate([rows[i] for i in idx], pad_id)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16):
            logits = model(**batch)
        logits = logits.float()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels[idx], pos_weight=pos_weight)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        step += 1
        seen += len(idx)
        step_times.append(time.monotonic() - started)
        value = loss.item()
        loss_ema = value if loss_ema is None else 0.9 * loss_ema + 0.1 * value
        logit_std = float(logits.detach().std()) if len(idx) > 1 else logit_std
        if step == 3 or step % 10 == 0:
            # Replan: how many steps fit in the time left.
            per_step = float(np.median(step_times[-10:]))
            fits = step + int(max(0.0, seconds_left()) / per_step)
            plan["total"] = max(config.min_steps, min(max_steps, fits))
        emit("train", step, plan["total"], loss_ema)
    model.eval()
    return Fitted(steps=step, pairs_seen=seen, epochs=seen / max(1, len(rows)), logit_std=logit_std)


def general_fingerprint(pairs: Sequence[Pair], config: EvaluatorConfig, seed: int) -> str:
    """What a general evaluator learnt from, by content: its pairs, its shape and its seed."""
    h = hashlib.sha1(json.dumps([config.to_dict(), seed], sort_keys=True).encode())
    for p in pairs:
        h.update(hashlib.sha1(f"{p.question}\n{p.passage}\n{p.label}".encode()).digest())
    return h.hexdigest()[:12]


def train_general(
    labelled: LabelledData,
    folder: str | Path,
    budget_s: float,
    config: EvaluatorConfig | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    resume: bool = False,
) -> Path:
    """Train the general part, the same for every customer: the judge on the corpus's labelled
    pairs alone, for `config.max_epochs` or `budget_s`, saved to `folder` with no thresholds.
    `train_evaluator(start_from=folder)` then adapts it to one knowledge base.

    `resume` trains the general evaluator already in `folder` further (a machine that could
    not spare the hours at once): batches are drawn in another order than its earlier runs',
    and its metadata counts the steps and epochs of every run."""
    if config is None:  # a fresh default each call: the dataclass is mutable
        config = EvaluatorConfig()
    t0 = time.monotonic()

    emit = _phase_emitter(progress, t0)

    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(seed)
    bundle = build_judge(config)
    earlier: dict[str, Any] = {"runs": 0, "steps": 0, "pairs_seen": 0, "epochs": 0.0, "seconds": 0.0}
    if resume:
        metadata = json.loads((Path(folder) / METADATA_FILE).read_text())
        if metadata.get("fingerprint") != general_fingerprint(labelled.train_pairs, config, seed):
            raise ValueError(f"{folder} learnt from other pairs, another shape or another seed: train it afresh")
        earlier = {"runs": 1} | metadata["training"]
        load_weights(bundle, folder)
    run_seed = seed + 7919 * int(earlier.get("runs", 1))  # a new batch order for each run
    fitted = fit_judge(
        bundle, labelled.train_pairs, config, run_seed, lambda: t0 + budget_s - 5.0 - time.monotonic(), emit
    )
    emit("save", 0, 1)
    folder = save_evaluator(
        bundle,
        folder,
        {
            "version": Path(folder).name,
            "kind": config.kind,
            "general": True,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "fingerprint": general_fingerprint(labelled.train_pairs, config, seed),
            "training": {
                "seed": seed,
                "runs": int(earlier.get("runs", 1)) + 1,
                "budget_s": budget_s,
                "steps": earlier["steps"] + fitted.steps,
                "pairs_seen": earlier["pairs_seen"] + fitted.pairs_seen,
                "epochs": earlier["epochs"] + fitted.epochs,
                "n_train_pairs": len(labelled.train_pairs),
                "seconds": earlier["seconds"] + time.monotonic() - t0,
            },
            "trained_on": labelled.description,
        },
    )
    emit("save", 1, 1)
    return folder


def _corpus_fingerprint(chunks: Sequence[CorpusChunk]) -> str:
    """What the evaluator was trained on, by content: not the chunk ids, which hash the path."""
    h = hashlib.sha1()
    for c in sorted(chunks, key=lambda c: (c.document, c.section, c.text)):
        h.update(hashlib.sha1(f"{c.document}\n{c.section}\n{c.text}".encode()).digest())
    return h.hexdigest()[:12]


def _new_version(out_dir: Path, kind: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    version, n = f"{kind}-{stamp}", 1
    while (out_dir / version).exists():
        n += 1
        version = f"{kind}-{stamp}-{n}"
    return version


def train_evaluator(
    chunks: Sequence[CorpusChunk],
    embed: Embed,
    out_dir: str | Path,
    budget_s: float = 600,
    config: EvaluatorConfig | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    extra_pairs: Sequence[Pair] = (),
    extra_weight: int = REVIEW_WEIGHT,
    labelled: LabelledData | None = None,
    start_from: str | Path | None = None,
) -> TrainingResult:
    """Train an evaluator on weak supervision from `chunks`, calibrate it, save it.

    With `labelled` (the policy-qa corpus), its pairs join the training pairs; its held-out
    questions gate the evaluator (the result's `evaluator` and `cosine` metrics are theirs), and
    the thresholds are calibrated on them together with the weak-supervision sets.

    `extra_pairs` (real questions labelled by admins' reviews or askers' votes) join the
    training pairs, each seen `extra_weight` times as often as a weak pair; validation and
    calibration stay on the weak-supervision split, so the metrics compare with cosine as before.

    The whole run (data, training, calibration, saving) aims at `budget_s`: training stops
    early enough to leave time for calibration, but always runs `config.min_steps` steps.
    The evaluator is saved to `out_dir/<version>/`; the result says where and how it did.
    """
    if config is None:  # a fresh default each call: the dataclass is mutable
        config = EvaluatorConfig()
    t0 = time.monotonic()
    phases: dict[str, float] = {}
    notes: list[str] = []
    out_dir = Path(out_dir)

    emit = _phase_emitter(progress, t0)

    # Phase 1: weak supervision.
    emit("data", 0, 1)
    ws = build_weak_supervision(chunks, embed, seed=seed)
    if not ws.train_pairs or not ws.val_pairs:
        raise ValueError("the corpus gave no training or validation pairs; it is too small")
    phases["data"] = time.monotonic() - t0
    emit("data", 1, 1)

    # Phase 2: training.
    t_train = time.monotonic()
    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(seed)
    bundle = build_judge(config)
    if start_from is not None:
        load_weights(bundle, start_from)
        notes.append(f"adapted from the general evaluator {Path(start_from).name}")
    labelled_pairs = labelled.train_pairs if labelled else []
    train_pairs = [*ws.train_pairs, *labelled_pairs, *(list(extra_pairs) * max(1, extra_weight))]
    if labelled:
        notes.append(
            f"trained with {len(labelled_pairs)} pairs and gated on {len(labelled.held_out.calibration_sets)} "
            f"retrieval sets from {labelled.description}"
        )
    if extra_pairs:
        notes.append(
            f"trained with {len(extra_pairs)} pairs from labelled real questions (each weighted x{max(1, extra_weight)})"
        )
    # Time kept for calibration: measured inference speed times the pairs it will score.
    pad_id = bundle.tokenizer.pad_token_id or 0
    n_eval_pairs = sum(len(passages) for passages in held_out_passages(ws).values())
    infer_per_pair = _inference_seconds_per_pair(bundle.model, ws.val_pairs, bundle.tokenizer, config, pad_id)
    reserve = n_eval_pairs * infer_per_pair * CALIBRATION_OVERHEAD + 5.0
    if labelled:
        gate_pairs = sum(len(passages) for passages in held_out_passages(labelled.held_out).values())
        reserve += min(gate_pairs * infer_per_pair * CALIBRATION_OVERHEAD, GATE_SHARE * budget_s)
    if config.quantize_int8:
        reserve *= 1.6  # the int8 variant is calibrated too
    # Training gets at least 60% of the budget even if calibration then overruns it: a model
    # trained for a handful of steps is not worth calibrating.
    reserve = min(reserve, 0.4 * budget_s)
    train_until = t0 + budget_s - reserve
    fitted = fit_judge(bundle, train_pairs, config, seed, lambda: train_until - time.monotonic(), emit)
    model = bundle.model
    phases["train"] = time.monotonic() - t_train
    if fitted.logit_std < 1e-3:
        notes.append("scores collapsed to a constant during training (logit std < 1e-3)")

    # Phase 3: calibration and metrics, for the evaluator and for cosine on the same split.
    t_cal = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    version = _new_version(out_dir, config.kind)
    evaluator = evaluator_from_bundle(bundle, version)
    # Training may have run past its share (min_steps, a slower machine than measured): score
    # only as many held-out questions as the budget still allows, re-timed now.
    per_pair = _inference_seconds_per_pair(model, ws.val_pairs, bundle.tokenizer, config, pad_id) * CALIBRATION_OVERHEAD
    model.eval()
    seconds_left = budget_s - (time.monotonic() - t0) - 2.0
    gate: HeldOut | None = None
    if labelled:
        # The labelled questions decide activation: they get their share of the budget even when
        # training overran, and at least MIN_GATE_QUESTIONS of them are scored (a question with its
        # candidates and strips costs about 1 s on 2 CPU cores).
        gate, gate_note = within_time(
            labelled.held_out, per_pair, max(GATE_SHARE * budget_s, seconds_left / 2), min_questions=MIN_GATE_QUESTIONS
        )
        if gate_note:
            notes.append(gate_note.replace("held-out questions", "labelled held-out questions"))
        seconds_left -= sum(map(len, held_out_passages(gate).values())) * per_pair
    eval_ws, subset_note = within_time(ws, per_pair * (1.6 if config.quantize_int8 else 1.0), seconds_left)
    if subset_note:
        notes.append(subset_note)
    scored = CachedEvaluator(evaluator)
    weak_metrics = measure(scored, eval_ws, progress=progress, t0=t0)
    weak_cosine = measure(_cosine_for(eval_ws, embed), eval_ws)
    if labelled and gate is not None:
        cosine = cosine_with_known(embed, labelled.embeddings)
        model_metrics = measure(scored, gate, progress=progress, t0=t0)
        cosine_metrics = measure(cosine, gate)
        # Scores are cached: calibrating on both kinds of sets together scores nothing again.
        thresholds = measure(scored, _merged(eval_ws, gate)).thresholds
    else:
        model_metrics, cosine_metrics, thresholds = weak_metrics, weak_cosine, weak_metrics.thresholds
    calibration_data = _merged(eval_ws, gate) if gate is not None else eval_ws
    int8_metrics = None
    if config.quantize_int8:
        quantized = evaluator_from_bundle(
            JudgeBundle(quantize_int8_linear(copy.deepcopy(model)), bundle.tokenizer, config), version + "+int8"
        )
        int8_metrics = measure(CachedEvaluator(quantized), calibration_data)
    phases["calibrate"] = time.monotonic() - t_cal
    if model_metrics.score_std < 1e-3:
        notes.append("held-out scores are constant: the evaluator did not learn")
    if not model_metrics.auc > cosine_metrics.auc:
        notes.append(f"evaluator AUC {model_metrics.auc:.3f} does not beat cosine {cosine_metrics.auc:.3f}")

    # Phase 4: save the versioned folder.
    t_save = time.monotonic()
    emit("save", 0, 1)
    seconds = time.monotonic() - t0
    metadata: dict[str, Any] = {
        "version": version,
        "kind": config.kind,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "score": "2*sigmoid(logit)-1",
        "thresholds": thresholds,
        "metrics": {
            "evaluator": model_metrics.to_dict(),
            "cosine": cosine_metrics.to_dict(),
            **({"weak": {"evaluator": weak_metrics.to_dict(), "cosine": weak_cosine.to_dict()}} if labelled else {}),
        },
        "gate": labelled.description if labelled else "weak supervision's held-out pseudo-queries",
        **(
            {"thresholds_int8": int8_metrics.thresholds, "metrics_int8": int8_metrics.to_dict()} if int8_metrics else {}
        ),
        "beats_cosine": _beats(model_metrics, cosine_metrics),
        "training": {
            "seed": seed,
            "budget_s": budget_s,
            "steps": fitted.steps,
            "pairs_seen": fitted.pairs_seen,
            "epochs": fitted.epochs,
            "started_from": Path(start_from).name if start_from is not None else "MiniLM",
            "n_train_pairs": len(train_pairs),
            "n_review_pairs": len(extra_pairs),
            "n_labelled_pairs": len(labelled_pairs),
            "n_val_pairs": len(ws.val_pairs),
            "seconds": seconds,
            "phase_seconds": phases,
        },
        "corpus": {"n_chunks": len(ws.chunks), "fingerprint": _corpus_fingerprint(ws.chunks)},
        "notes": notes,
    }
    folder = save_evaluator(bundle, out_dir / version, metadata)
    phases["save"] = time.monotonic() - t_save
    seconds = time.monotonic() - t0
    update_metadata(folder, {"training": {**metadata["training"], "seconds": seconds, "phase_seconds": phases}})
    emit("save", 1, 1)
    return TrainingResult(
        folder=folder,
        version=version,
        evaluator=model_metrics,
        cosine=cosine_metrics,
        thresholds=thresholds,
        n_train_pairs=len(train_pairs),
        n_val_pairs=len(ws.val_pairs),
        steps=fitted.steps,
        epochs=fitted.epochs,
        seconds=seconds,
        phase_seconds=phases,
        notes=notes,
    )
