"""Train an evaluator on weak supervision from the corpus, measure it against cosine, calibrate it, save it.

`train_evaluator` runs its phases inside one time budget: weak supervision (data), the judge
fitted to it (train; crag/training/fitting.py), metrics and thresholds on held-out questions (calibrate;
crag/training/metrics.py), and the versioned folder (save; crag/checkpoint.py). It reports the trained
evaluator *and* cosine similarity on the same held-out questions, so an admin can see whether
training was worth it (`TrainingResult.beats_cosine`). `train_general` fits the general
evaluator that `train_evaluator(start_from=...)` adapts to one knowledge base.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from crag.checkpoint import METADATA_FILE
from crag.inference import CachedEvaluator, evaluator_from_bundle, quantize_int8_linear
from crag.judge import EvaluatorConfig, JudgeBundle, build_judge
from crag.training.fitting import Fitted, fit_judge, inference_seconds_per_pair
from crag.training.metrics import (
    MIN_CALIBRATION_QUESTIONS,
    HeldOut,
    Metrics,
    better_than_cosine,
    cosine_for,
    cosine_with_known,
    held_out_passages,
    measure,
    score_until,
    scoring_order,
)
from crag.training.progress import PhaseEmitter, Progress, phase_emitter
from crag.training.saving import load_weights, save_evaluator, update_metadata
from crag.training.weak_supervision import CorpusChunk, Embed, Pair, WeakSupervision, build_weak_supervision
from crag.types import Thresholds

REVIEW_WEIGHT = 3  # a real labelled pair counts this many weak ones: rare, and how people really ask
CALIBRATION_OVERHEAD = 1.3  # cosine on the same split, metrics, progress: on top of the model's scoring
CALIBRATION_PASSAGE_CACHE_MB = 512  # MiniLM states of the passages calibration scores, read once each
GATE_SHARE = 0.25  # of the budget, for scoring the labelled held-out questions that decide activation
MIN_GATE_QUESTIONS = 100
OVERRUN_TOLERANCE = 1.15  # a run this far past its budget says so, and why (_overrun_note)


@dataclass
class TrainingResult:
    folder: Path
    version: str
    evaluator: Metrics
    cosine: Metrics
    thresholds: Thresholds
    n_train_pairs: int
    n_val_pairs: int
    steps: int
    epochs: float
    seconds: float
    phase_seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def beats_cosine(self) -> bool:
        return better_than_cosine(self.evaluator, self.cosine)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["folder"] = str(self.folder)
        out["beats_cosine"] = self.beats_cosine
        return out


@dataclass(frozen=True)
class LabelledData:
    """Labelled questions from outside the knowledge base (the policy-qa corpus): pairs to train
    on, and held-out questions of other organisations, asked through real retrieval, that gate
    the evaluator against cosine and calibrate its thresholds beside the weak-supervision sets."""

    train_pairs: list[Pair]
    held_out: HeldOut
    embeddings: dict[str, np.ndarray]  # passage text -> its stored embedding, for cosine
    description: str  # for notes: where the labels come from


def general_fingerprint(pairs: Sequence[Pair], config: EvaluatorConfig, seed: int) -> str:
    """What a general evaluator learnt from, by content: its pairs, its shape and its seed."""
    shape = config.to_dict()
    for knob in ("rank_weight", "joint_minilm_layers"):
        if not shape[knob]:
            del shape[knob]  # off: the fingerprint of a general evaluator trained before the knob existed
    h = hashlib.sha1(json.dumps([shape, seed], sort_keys=True).encode())
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
    after_step: Callable[[int, JudgeBundle], None] | None = None,
    version: str | None = None,
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

    emit = phase_emitter(progress, t0)

    bundle = _new_judge(config, seed)
    earlier: dict[str, Any] = {"runs": 0, "steps": 0, "pairs_seen": 0, "epochs": 0.0, "seconds": 0.0}
    if resume:
        metadata = json.loads((Path(folder) / METADATA_FILE).read_text())
        if metadata.get("fingerprint") != general_fingerprint(labelled.train_pairs, config, seed):
            raise ValueError(f"{folder} learnt from other pairs, another shape or another seed: train it afresh")
        earlier = {"runs": 1} | metadata["training"]
        load_weights(bundle, folder)
    run_seed = seed + 7919 * int(earlier.get("runs", 1))  # a new batch order for each run
    fitted = fit_judge(
        bundle,
        labelled.train_pairs,
        config,
        run_seed,
        lambda: t0 + budget_s - 5.0 - time.monotonic(),
        emit,
        after_step=after_step,
    )
    emit("save", 0, 1)
    folder = save_evaluator(
        bundle,
        folder,
        {
            "version": version or Path(folder).name,  # a folder trained under a temporary name passes its own
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
    questions gate the evaluator (the result's `evaluator` and `cosine` metrics are theirs) and
    calibrate its thresholds (`_calibrate`).

    `extra_pairs` (real questions labelled by admins' reviews or askers' votes) join the
    training pairs, each seen `extra_weight` times as often as a weak pair; validation and
    calibration stay on the held-out questions above, so the metrics compare with cosine as before.

    The whole run (data, training, calibration, saving) aims at `budget_s`: training stops
    early enough to leave time for calibration, but always runs `config.min_steps` steps.
    The evaluator is saved to `out_dir/<version>/`; the result says where and how it did.
    """
    if config is None:  # a fresh default each call: the dataclass is mutable
        config = EvaluatorConfig()
    t0 = time.monotonic()
    phases: dict[str, float] = {}
    out_dir = Path(out_dir)
    emit = phase_emitter(progress, t0)

    emit("data", 0, 1)
    ws = _weak_supervision(chunks, embed, seed)
    phases["data"] = time.monotonic() - t0
    emit("data", 1, 1)

    t_train = time.monotonic()
    bundle = _new_judge(config, seed)
    notes: list[str] = []
    if start_from is not None:
        load_weights(bundle, start_from)
        notes.append(f"adapted from the general evaluator {Path(start_from).name}")
    pairs = _training_pairs(ws, labelled, extra_pairs, extra_weight)
    notes += pairs.notes
    train_until = t0 + budget_s - _calibration_reserve(bundle, ws, labelled, budget_s)
    fitted = fit_judge(bundle, pairs.pairs, config, seed, lambda: train_until - time.monotonic(), emit)
    phases["train"] = time.monotonic() - t_train
    if fitted.logit_std < 1e-3:
        notes.append("scores collapsed to a constant during training (logit std < 1e-3)")

    t_cal = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    version = _new_version(out_dir, config.kind)
    # Calibration asks many questions of the same passages (a knowledge base's chunks, their
    # sentences): their MiniLM states are read once (exact, tests/test_evaluator.py). TorchEvaluator
    # puts the model in eval mode.
    scored = CachedEvaluator(evaluator_from_bundle(bundle, version, passage_cache_mb=CALIBRATION_PASSAGE_CACHE_MB))
    held_out = _score_held_out_within_budget(
        scored, ws, labelled, budget_s, t0, quantize_int8=bundle.config.quantize_int8, emit=emit
    )
    notes += held_out.notes
    measured = _measure_against_cosine(scored, held_out, labelled, embed, progress, t0)
    scored.drop_passage_cache()  # fp32 states: not the int8 variant's, and kept out of memory
    calibrated = _calibrate(scored, bundle, version, held_out, measured)
    phases["calibrate"] = time.monotonic() - t_cal
    notes += _doubts(measured)
    overrun = _overrun_note(budget_s, time.monotonic() - t0, phases, held_out)
    if overrun:
        notes.append(overrun)

    t_save = time.monotonic()
    emit("save", 0, 1)
    metadata = _metadata(
        version=version,
        config=config,
        seed=seed,
        budget_s=budget_s,
        start_from=start_from,
        ws=ws,
        pairs=pairs,
        fitted=fitted,
        measured=measured,
        calibrated=calibrated,
        labelled=labelled,
        notes=notes,
        seconds=time.monotonic() - t0,
        phases=phases,
    )
    folder = save_evaluator(bundle, out_dir / version, metadata)
    phases["save"] = time.monotonic() - t_save
    seconds = time.monotonic() - t0
    update_metadata(folder, {"training": {**metadata["training"], "seconds": seconds, "phase_seconds": phases}})
    emit("save", 1, 1)
    return TrainingResult(
        folder=folder,
        version=version,
        evaluator=measured.evaluator,
        cosine=measured.cosine,
        thresholds=calibrated.thresholds,
        n_train_pairs=len(pairs.pairs),
        n_val_pairs=len(ws.val_pairs),
        steps=fitted.steps,
        epochs=fitted.epochs,
        seconds=seconds,
        phase_seconds=phases,
        notes=notes,
    )


# ---------------------------------------------------------------------------------------
# The phases of train_evaluator, in the order it runs them
# ---------------------------------------------------------------------------------------


def _weak_supervision(chunks: Sequence[CorpusChunk], embed: Embed, seed: int) -> WeakSupervision:
    """Data: pseudo-queries and their labelled pairs, split into training and held-out questions."""
    ws = build_weak_supervision(chunks, embed, seed=seed)
    if not ws.train_pairs or not ws.val_pairs:
        raise ValueError("the corpus gave no training or validation pairs; it is too small")
    return ws


def _new_judge(config: EvaluatorConfig, seed: int) -> JudgeBundle:
    """A fresh judge whose new blocks are drawn from `seed` (torch's global generator)."""
    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(seed)
    return build_judge(config)


@dataclass(frozen=True)
class TrainingPairs:
    """What the judge is fitted to, and where those pairs came from."""

    pairs: list[Pair]
    n_labelled: int  # from the labelled corpus
    n_review: int  # real questions labelled by reviews and votes, before weighting
    notes: list[str]


def _training_pairs(
    ws: WeakSupervision, labelled: LabelledData | None, extra_pairs: Sequence[Pair], extra_weight: int
) -> TrainingPairs:
    """Weak pairs, the labelled corpus's pairs and the reviewed pairs (each repeated `extra_weight` times)."""
    labelled_pairs = labelled.train_pairs if labelled else []
    notes = []
    if labelled:
        notes.append(
            f"trained with {len(labelled_pairs)} pairs and gated on {len(labelled.held_out.calibration_sets)} "
            f"retrieval sets from {labelled.description}"
        )
    if extra_pairs:
        notes.append(
            f"trained with {len(extra_pairs)} pairs from labelled real questions (each weighted x{max(1, extra_weight)})"
        )
    return TrainingPairs(
        pairs=[*ws.train_pairs, *labelled_pairs, *(list(extra_pairs) * max(1, extra_weight))],
        n_labelled=len(labelled_pairs),
        n_review=len(extra_pairs),
        notes=notes,
    )


def _calibration_reserve(
    bundle: JudgeBundle, ws: WeakSupervision, labelled: LabelledData | None, budget_s: float
) -> float:
    """Seconds of the budget kept for measuring and calibration: measured inference speed times
    the pairs they will score, at most 40% of the budget. As `_score_held_out_within_budget`
    scores them: with labelled questions, weak supervision's minimum and every labelled question
    (more than a short budget scores, and each one steadies upper); without, all of weak
    supervision's."""
    config = bundle.config
    pad_id = bundle.tokenizer.pad_token_id or 0
    weak = held_out_passages(ws)
    pairs_per_question = [len(weak[question]) for question in scoring_order(ws)]
    if labelled:
        pairs_per_question = pairs_per_question[:MIN_CALIBRATION_QUESTIONS]
        pairs_per_question += [len(passages) for passages in held_out_passages(labelled.held_out).values()]
    infer_per_pair = inference_seconds_per_pair(bundle.model, ws.val_pairs, bundle.tokenizer, config, pad_id)
    reserve = sum(pairs_per_question) * infer_per_pair * CALIBRATION_OVERHEAD + 5.0
    if config.quantize_int8:
        reserve *= 1.6  # the int8 variant is calibrated too
    # Training gets at least 60% of the budget even if calibration then overruns it: a model
    # trained for a handful of steps is not worth calibrating.
    return min(reserve, 0.4 * budget_s)


@dataclass(frozen=True)
class HeldOutScored:
    """The held-out questions there is time to score: weak supervision's, and the labelled gate's."""

    weak: WeakSupervision
    gate: HeldOut | None  # None without labelled data
    notes: list[str]  # which questions were left out for time


def _score_held_out_within_budget(
    scored: CachedEvaluator,
    ws: WeakSupervision,
    labelled: LabelledData | None,
    budget_s: float,
    t0: float,
    *,
    quantize_int8: bool,
    emit: PhaseEmitter | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> HeldOutScored:
    """Score as many held-out questions as the budget still allows (training may have run past its
    share: min_steps, a slower machine than measured), on the clock (`score_until`): a machine
    that slows down mid-way still ends near the budget. The scores land in `scored`'s cache.

    With labelled questions, they calibrate the thresholds (`_calibrate`), so they get the time:
    weak supervision's sets are scored only to their minimum, for the metrics kept beside the
    gate's. Upper from 145 dev questions drawn at random spread from 0.20 to 0.59 (q10 to q90)
    for one evaluator, so every dev question the budget allows steadies it (docs/quality.md,
    "Upper from the written questions")."""
    notes = []
    # What cosine's metrics, the thresholds and the int8 variant's own scoring take on top of this
    # model's scoring.
    share = 1 / (CALIBRATION_OVERHEAD * (1.6 if quantize_int8 else 1.0))
    if not labelled:
        seconds_left = t0 + budget_s - 2.0 - clock()
        weak, subset_note = score_until(
            scored, ws, clock() + max(seconds_left, 0.0) * share, sentence_evidence=True, emit=emit, clock=clock
        )
        if subset_note:
            notes.append(subset_note)
        return HeldOutScored(weak, None, notes)
    weak, subset_note = score_until(scored, ws, clock(), sentence_evidence=True, emit=emit, clock=clock)
    if subset_note:
        notes.append(
            f"measured weak supervision on {len(held_out_passages(weak))} of {len(held_out_passages(ws))} "
            "held-out questions: the labelled questions calibrate, so they get the time"
        )
    # The labelled questions decide activation: they get at least GATE_SHARE of the budget even
    # when training overran, and at least MIN_GATE_QUESTIONS of them are scored (a question with
    # its candidates and strips costs about 0.9 s on 2 CPU cores).
    seconds_left = t0 + budget_s - 2.0 - clock()
    gate, gate_note = score_until(
        scored,
        labelled.held_out,
        clock() + max(GATE_SHARE * budget_s, seconds_left * share),
        sentence_evidence=True,
        min_questions=MIN_GATE_QUESTIONS,
        emit=emit,
        clock=clock,
    )
    if gate_note:
        notes.append(gate_note.replace("held-out questions", "labelled held-out questions"))
    return HeldOutScored(weak, gate, notes)


def _overrun_note(budget_s: float, seconds: float, phases: dict[str, float], held_out: HeldOutScored) -> str | None:
    """When the run went well past its budget, a note saying by how much and where the time went.
    Calibration scores its minimums however long they take (MIN_GATE_QUESTIONS labelled,
    MIN_CALIBRATION_QUESTIONS weak), so a busy or slow machine overruns a short budget there."""
    if seconds <= budget_s * OVERRUN_TOLERANCE:
        return None
    scored = len(held_out_passages(held_out.weak)) + (len(held_out_passages(held_out.gate)) if held_out.gate else 0)
    minimums = f"{MIN_CALIBRATION_QUESTIONS} weak-supervision"
    if held_out.gate is not None:
        minimums = f"{MIN_GATE_QUESTIONS} labelled and " + minimums
    calibration = phases.get("calibrate", 0.0)
    return (
        f"overran its budget: {seconds:.0f} s against {budget_s:.0f} s (data {phases.get('data', 0.0):.0f} s, "
        f"training {phases.get('train', 0.0):.0f} s, "
        f"calibration {calibration:.0f} s for {scored} held-out questions, {calibration / max(scored, 1):.1f} s each). "
        f"Calibration always scores at least {minimums} questions, because fewer give thresholds too noisy to "
        "trust; other work on this machine's cores slows that down"
    )


@dataclass(frozen=True)
class Measured:
    """The trained evaluator and cosine on the questions that gate it (the labelled ones when
    there are, else weak supervision's), and on weak supervision's."""

    evaluator: Metrics
    cosine: Metrics
    weak: Metrics
    weak_cosine: Metrics


def _measure_against_cosine(
    scored: CachedEvaluator,
    held_out: HeldOutScored,
    labelled: LabelledData | None,
    embed: Embed,
    progress: Progress | None,
    t0: float,
) -> Measured:
    """Metrics of the evaluator and of cosine on the same held-out questions."""
    weak = measure(scored, held_out.weak, progress=progress, t0=t0, sentence_evidence=True)
    weak_cosine = measure(cosine_for(held_out.weak, embed), held_out.weak)
    if labelled and held_out.gate is not None:
        cosine = cosine_with_known(embed, labelled.embeddings)
        evaluator = measure(scored, held_out.gate, progress=progress, t0=t0, sentence_evidence=True)
        return Measured(evaluator, measure(cosine, held_out.gate), weak, weak_cosine)
    return Measured(weak, weak_cosine, weak, weak_cosine)


@dataclass(frozen=True)
class Calibrated:
    thresholds: Thresholds
    int8: Metrics | None  # the int8 variant's metrics and thresholds, when config.quantize_int8


def _calibrate(
    scored: CachedEvaluator, bundle: JudgeBundle, version: str, held_out: HeldOutScored, measured: Measured
) -> Calibrated:
    """Thresholds from the labelled held-out sets when there are (the corpus's dev questions),
    else from the weak-supervision sets; and the int8 variant's own.

    Not both pooled: weak supervision's pseudo-queries are templated ("What is the notice
    period?") and their answer-absent sets score high, so pooled, upper followed whichever kind
    the budget happened to score more of: 0.85 for one evaluator whose dev questions alone put it
    at 0.57, and a reply to 14% of the test organisations' KB questions (docs/quality.md,
    "Upper from the written questions"). The dev questions are written as people ask."""
    calibration_data: HeldOut | WeakSupervision = held_out.weak
    thresholds = measured.weak.thresholds
    if held_out.gate is not None:
        calibration_data = held_out.gate
        thresholds = measured.evaluator.thresholds  # measure() calibrates on all the sets it is given
    int8 = None
    if bundle.config.quantize_int8:
        quantized = evaluator_from_bundle(
            JudgeBundle(quantize_int8_linear(copy.deepcopy(bundle.model)), bundle.tokenizer, bundle.config),
            version + "+int8",
        )
        int8 = measure(CachedEvaluator(quantized), calibration_data, sentence_evidence=True)
    return Calibrated(thresholds, int8)


def _doubts(measured: Measured) -> list[str]:
    """Notes for the admin when the gate's metrics say the evaluator is not worth activating."""
    doubts = []
    if measured.evaluator.score_std < 1e-3:
        doubts.append("held-out scores are constant: the evaluator did not learn")
    if not measured.evaluator.auc > measured.cosine.auc:
        doubts.append(f"evaluator AUC {measured.evaluator.auc:.3f} does not beat cosine {measured.cosine.auc:.3f}")
    return doubts


def _metadata(
    *,
    version: str,
    config: EvaluatorConfig,
    seed: int,
    budget_s: float,
    start_from: str | Path | None,
    ws: WeakSupervision,
    pairs: TrainingPairs,
    fitted: Fitted,
    measured: Measured,
    calibrated: Calibrated,
    labelled: LabelledData | None,
    notes: list[str],
    seconds: float,
    phases: dict[str, float],
) -> dict[str, Any]:
    """metadata.json of a trained evaluator: its thresholds, its metrics beside cosine's, how it was trained."""
    int8 = calibrated.int8
    return {
        "version": version,
        "kind": config.kind,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "score": "2*sigmoid(logit)-1",
        # Trained here, on answer sentences when the corpus is there: the pipeline routes on
        # sentence evidence and leads with the best-judged sentence (crag/evidence.py).
        "sentence_evidence": True,
        "thresholds": calibrated.thresholds.to_dict(),
        "metrics": {
            "evaluator": measured.evaluator.to_dict(),
            "cosine": measured.cosine.to_dict(),
            **(
                {"weak": {"evaluator": measured.weak.to_dict(), "cosine": measured.weak_cosine.to_dict()}}
                if labelled
                else {}
            ),
        },
        "gate": labelled.description if labelled else "weak supervision's held-out pseudo-queries",
        **({"thresholds_int8": int8.thresholds.to_dict(), "metrics_int8": int8.to_dict()} if int8 else {}),
        "beats_cosine": better_than_cosine(measured.evaluator, measured.cosine),
        "training": {
            "seed": seed,
            "budget_s": budget_s,
            "steps": fitted.steps,
            "pairs_seen": fitted.pairs_seen,
            "epochs": fitted.epochs,
            "started_from": Path(start_from).name if start_from is not None else "MiniLM",
            "n_train_pairs": len(pairs.pairs),
            "n_review_pairs": pairs.n_review,
            "n_labelled_pairs": pairs.n_labelled,
            "n_val_pairs": len(ws.val_pairs),
            "seconds": seconds,
            "phase_seconds": phases,
        },
        "corpus": {"n_chunks": len(ws.chunks), "fingerprint": _corpus_fingerprint(ws.chunks)},
        "notes": notes,
    }
