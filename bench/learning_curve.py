"""The general evaluator's learning curve (issue #32, section 3), measured on the dev organisations only.

    .venv/bin/python -m bench.learning_curve --home DIR [--seed 0] [--epochs 0.25,0.5,1]
        [--dev-questions 600] [--write FILE]

Trains the general evaluator as `policybot evaluator pretrain` does (the policy-qa corpus's train
pairs, the default model and optimiser, the frozen-state cache), for the last of `--epochs`, with
the LR schedule planned for that length, and measures the judge before training and at every
point of `--epochs` on an even sample of the dev organisations' questions:

- dev AUC: the judge's scores of the labelled answer chunks against the other retrieved chunks;
- dev routing: cross-fitted routing accuracy on answer scores (crag/evidence.py), with thresholds
  calibrated as the product calibrates them (crag/training/metrics.py `measure`);
- dev sentence choice: of the questions whose answer was retrieved, the share whose best-judged
  sentence (among the answer chunk's sentences and those of two other candidates) holds the
  answer: what leads the reply;
- dev document choice: of the same questions, the share whose best answer score is the answer's chunk.

The points are snapshots of one run, so an early point has had its warm-up but not its LR decay:
it understates what a run of that length alone reaches. Before training the judge is its
prior, the retriever's cosine, so the first row is cosine's figures. The trained judge is then
kept as that seed's general evaluator under DIR, so that `bench.quality --home DIR --seeds SEED`
adapts it rather than pretraining again. The test organisations are never read.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crag.training.metrics import HeldOut
    from crag.types import Evaluator


@dataclass(frozen=True)
class Point:
    epochs: float
    steps: int
    seconds: float  # training time so far, measuring excluded
    auc: float
    routing: float
    sentence_choice: float
    document_choice: float


def dev_sample(held_out: HeldOut, n_questions: int, seed: int) -> HeldOut:
    """An even sample of the held-out questions, every part of each question kept."""
    from crag.training.metrics import HeldOut

    questions = sorted({s.question for s in held_out.calibration_sets})
    if 0 < n_questions < len(questions):
        questions = random.Random(seed).sample(questions, n_questions)
    keep = set(questions)
    return HeldOut(
        [p for p in held_out.val_pairs if p.question in keep],
        [s for s in held_out.calibration_sets if s.question in keep],
        [e for e in held_out.strip_examples if e.question in keep],
        [s for s in held_out.fallback_sets if s.question in keep],
    )


def choices(judge: Evaluator, held_out: HeldOut) -> tuple[float, float]:
    """Sentence choice and document choice (module docstring) of an evaluator whose scores are cached."""
    from crag.evidence import SENTENCE_PASSAGES, answer_scores

    answers: dict[str, set[str]] = defaultdict(set)
    for p in held_out.val_pairs:
        if p.label == 1 and p.chunk_id:
            answers[p.question].add(p.chunk_id)
    strips = defaultdict(list)
    for e in held_out.strip_examples:
        strips[e.question].append(e)
    sentence_right, document_right = [], []
    for s in held_out.calibration_sets:
        if not s.present:
            continue
        examples = strips.get(s.question, [])
        if examples:
            scores = judge.score(s.question, [e.text for e in examples])
            best = max(range(len(examples)), key=lambda i: scores[i])
            sentence_right.append(examples[best].label == 1)
        passage_scores = judge.score(s.question, list(s.passages))
        top = sorted(range(len(s.passages)), key=lambda i: -passage_scores[i])[:SENTENCE_PASSAGES]
        evidence = answer_scores(judge, s.question, s.as_passages(), passage_scores)
        chosen = top[max(range(len(evidence)), key=lambda i: evidence[i])]
        document_right.append(s.chunk_ids[chosen] in answers[s.question])
    share = lambda flags: sum(flags) / len(flags) if flags else float("nan")  # noqa: E731
    return share(sentence_right), share(document_right)


def measure_point(judge: Evaluator, held_out: HeldOut) -> tuple[float, float, float, float]:
    from crag.inference import CachedEvaluator
    from crag.training.metrics import measure

    cached = CachedEvaluator(judge, max_items=500_000)
    metrics = measure(cached, held_out, sentence_evidence=True)
    sentence, document = choices(cached, held_out)
    return metrics.auc, metrics.routing_accuracy, sentence, document


def table(points: Sequence[Point]) -> list[str]:
    lines = [
        "| epochs | steps | training time | dev AUC | dev routing | dev sentence choice | dev document choice |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in points:
        lines.append(
            f"| {p.epochs:g} | {p.steps} | {p.seconds / 60:.0f} min | {p.auc:.3f} | {p.routing:.1%} "
            f"| {p.sentence_choice:.1%} | {p.document_choice:.1%} |"
        )
    return lines


def _epochs(text: str) -> list[float]:
    values = sorted({float(v) for v in text.split(",") if v.strip()})
    if not values or values[0] <= 0:
        raise argparse.ArgumentTypeError("give positive epochs, e.g. 0.25,0.5,1")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True, help="POLICYBOT_HOME for the run (the corpus is kept)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=_epochs, default=[0.25, 0.5, 1.0], help="where to measure, e.g. 0.25,0.5,1")
    parser.add_argument("--dev-questions", type=int, default=600, help="dev questions measured at each point (0: all)")
    parser.add_argument("--write", type=Path, default=None, help="also write the table to this Markdown file")
    parser.add_argument(
        "--rank-weight",
        type=float,
        default=None,
        help="the listwise term's weight (EvaluatorConfig.rank_weight; default: the default config's)",
    )
    parser.add_argument(
        "--joint-layers",
        type=int,
        default=None,
        help="MiniLM's top layers reading the pair packed (EvaluatorConfig.joint_minilm_layers)",
    )
    parser.add_argument("--no-prior", action="store_true", help="do not measure the untrained judge (cosine's row)")
    args = parser.parse_args(argv)

    import math

    from application import evaluators
    from application.corpus_supervision import labelled_data
    from bench.common import bench_settings, machine
    from crag.inference import evaluator_from_bundle
    from crag.judge import EvaluatorConfig, JudgeBundle, build_judge
    from crag.training.saving import update_metadata
    from crag.training.train import general_fingerprint, train_general

    settings = bench_settings(args.home)
    print("the corpus through retrieval (kept under the home after the first run)...", file=sys.stderr, flush=True)
    labelled = labelled_data(settings)
    if labelled is None:
        print("the corpus is switched off (POLICYBOT_CORPUS=off): the curve learns from it", file=sys.stderr)
        return 2
    held_out = dev_sample(labelled.held_out, args.dev_questions, args.seed)
    default = EvaluatorConfig()
    if args.rank_weight is not None:
        default = replace(default, rank_weight=args.rank_weight)
    if args.joint_layers is not None:
        default = replace(default, joint_minilm_layers=args.joint_layers)
    steps_per_epoch = math.ceil(len(labelled.train_pairs) / default.train_batch_size)
    at = {max(1, round(e * steps_per_epoch)): e for e in args.epochs}
    config = replace(default, max_steps=max(at), max_epochs=math.ceil(max(args.epochs)))
    n_present = sum(s.present for s in held_out.calibration_sets)
    print(
        f"{len(labelled.train_pairs)} train pairs ({steps_per_epoch} steps an epoch); measuring "
        f"{len(held_out.calibration_sets)} dev questions ({n_present} with their answer retrieved) at "
        f"{', '.join(f'{e:g}' for e in args.epochs)} epochs",
        file=sys.stderr,
        flush=True,
    )

    points: list[Point] = []
    training = {"seconds": 0.0, "since": time.monotonic()}

    def record(steps: int, epochs: float, judge: Evaluator) -> None:
        training["seconds"] += time.monotonic() - training["since"]
        started = time.monotonic()
        auc, routing, sentence, document = measure_point(judge, held_out)
        points.append(Point(epochs, steps, training["seconds"], auc, routing, sentence, document))
        print(
            f"  {epochs:g} epochs ({steps} steps, {training['seconds'] / 60:.1f} min of training): AUC {auc:.3f}, "
            f"routing {routing:.1%}, sentence choice {sentence:.1%}, document choice {document:.1%} "
            f"(measured in {time.monotonic() - started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
        training["since"] = time.monotonic()

    # Step 0: the untrained judge, whose score starts at the retriever's cosine.
    if not args.no_prior:
        prior = build_judge(default)
        prior.model.eval()
        record(0, 0.0, evaluator_from_bundle(prior, "prior", {"sentence_evidence": True}))
        del prior

    def after_step(step: int, bundle: JudgeBundle) -> None:
        if step in at:
            bundle.model.eval()
            record(step, at[step], evaluator_from_bundle(bundle, f"step-{step}", {"sentence_evidence": True}))
            bundle.model.train()

    folder = evaluators.general_folder(settings, labelled, args.seed)
    partial = folder.with_name(folder.name + ".curve")
    shutil.rmtree(partial, ignore_errors=True)
    training["since"] = time.monotonic()

    def show(event: dict) -> None:  # a line every 100 steps: an epoch is most of an hour on 2 cores
        if event.get("phase") == "train" and event.get("step", 0) % 100 == 0:
            loss = event.get("loss")
            print(f"  step {event['step']} of {event.get('total')}, loss {loss or 0:.4f}", file=sys.stderr, flush=True)

    train_general(
        labelled,
        partial,
        budget_s=1e9,
        config=config,
        seed=args.seed,
        progress=show,
        after_step=after_step,
        version=folder.name,
    )
    # Kept as the seed's general evaluator: the default shape and the same pairs, a length in steps.
    update_metadata(partial, {"fingerprint": general_fingerprint(labelled.train_pairs, default, args.seed)})
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)

    lines = [
        f"Learning curve of the general evaluator, seed {args.seed}, rank weight {default.rank_weight:g}, "
        f"joint layers {default.joint_minilm_layers}: "
        f"{len(labelled.train_pairs)} train pairs, "
        f"{len(held_out.calibration_sets)} dev questions; {machine()}.",
        "",
        *table(points),
    ]
    report = "\n".join(lines)
    print(report)
    print(f"kept as the general evaluator of seed {args.seed}: {folder}", file=sys.stderr)
    if args.write is not None:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(report + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
