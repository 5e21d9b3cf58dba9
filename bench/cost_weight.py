"""How much a wrong Correct should cost, and how much a passage's best sentence should weigh in
its answer score, measured on the dev organisations only.

    .venv/bin/python -m bench.cost_weight --home DIR [--version V] [--costs 1,1.5,2,3]
        [--sentence-weights 0.5] [--dev-questions 400]

For a trained evaluator stored in DIR (default: its newest), calibrates upper, lower, strip and
the fallback bar as the product does (on the policy-qa corpus's dev sets), once per cost weight
(`crag.training.metrics.calibrate`: upper maximises TPR - cost * FPR) and sentence weight
(`crag.evidence.answer_score`), and prints the dev questions' routing for each: cross-fitted
routing accuracy, and how often an answer-present set and an answer-absent set are routed
Correct. `WRONG_CORRECT_COST` in crag/training/metrics.py and `SENTENCE_WEIGHT` in
crag/evidence.py are chosen from this table; the test organisations are never read. Every score
is computed once, whatever the grid.

    .venv/bin/python -m bench.cost_weight --home DIR --mixes 160:131,400:131,160:319,400:319 [--draws 3]

With --mixes, instead: how upper moved with the mix of labelled dev questions and
weak-supervision questions that calibration happened to score when it pooled both kinds (before
crag/training/train.py's `_calibrate` took the dev questions alone), pooled or with each kind
weighing alike
(`crag.training.metrics.BALANCE_KINDS`): for each mix DEV:WEAK, `--draws` random draws of that
many questions of each kind, and their uppers, with the share of the dev sample's
answer-present and answer-absent sets each upper routes Correct. A count of 0 leaves that kind out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crag.training.metrics import HeldOut
    from crag.training.weak_supervision import WeakSupervision
    from crag.types import Evaluator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True, help="a bench home with a trained evaluator")
    parser.add_argument("--version", help="the evaluator version (default: the newest stored)")
    parser.add_argument("--costs", default="1,1.5,2,3", help="cost weights to compare")
    parser.add_argument(
        "--sentence-weights", default="0.5", help="the best sentence's shares of an answer score to compare"
    )
    parser.add_argument(
        "--dev-questions",
        type=int,
        default=400,
        help="an even sample of the dev questions (0: all 1,584, about 35 minutes of scoring on 2 cores)",
    )
    parser.add_argument("--mixes", default="", help="DEV:WEAK question counts to calibrate on, e.g. 160:131,400:319")
    parser.add_argument("--draws", type=int, default=3, help="with --mixes: random draws of each mix")
    args = parser.parse_args(argv)

    from application import evaluators
    from application.corpus_supervision import labelled_data
    from application.runtime import embed_function
    from bench.common import bench_settings, table
    from bench.learning_curve import dev_sample
    from crag.checkpoint import load_evaluator
    from crag.inference import CachedEvaluator
    from crag.training.metrics import measure
    from crag.training.weak_supervision import build_weak_supervision

    settings = bench_settings(args.home)
    rows = evaluators.list_versions(settings)
    row = next((r for r in rows if r.version == args.version), None) if args.version else (rows[0] if rows else None)
    if row is None:
        print(f"no evaluator {args.version or ''} stored under {args.home}", file=sys.stderr)
        return 2
    seed = int((row.metrics or {}).get("seed", 0))
    labelled = labelled_data(settings)
    if labelled is None:
        print("the corpus is switched off (POLICYBOT_CORPUS=off)", file=sys.stderr)
        return 2
    dev = dev_sample(labelled.held_out, args.dev_questions, seed)
    judge = CachedEvaluator(load_evaluator(row.path), max_items=1_000_000)  # every score once, whatever the cost
    if args.mixes:
        weak = build_weak_supervision(evaluators.corpus_chunks(settings), embed_function(settings), seed=seed)
        return _mixes(judge, weak, dev, args.mixes, args.draws, row.version)
    print(f"The cost of a wrong Correct and the sentence's weight, on the dev organisations: {row.version}", flush=True)
    header = ("cost", "sentence weight", "upper", "lower", "strip", "fallback", "dev routing (cross-fitted)")
    print(table([*header, *_ROUTED], []), flush=True)
    for cost in (float(c) for c in args.costs.split(",")):
        for weight in (float(w) for w in args.sentence_weights.split(",")):
            routed = measure(judge, dev, sentence_evidence=True, cost=cost, sentence_weight=weight)
            calibrated = routed.thresholds  # calibrated on all the dev sets, as the product calibrates
            fixed = measure(judge, dev, fixed_thresholds=calibrated, sentence_evidence=True, sentence_weight=weight)
            fallback = "-" if calibrated.fallback is None else f"{calibrated.fallback:.3f}"
            print(
                f"| {cost:g} | {weight:g} | {calibrated.upper:.3f} | {calibrated.lower:.3f} | {calibrated.strip:.3f} "
                f"| {fallback} | {routed.routing_accuracy:.1%} | {fixed.action_rates['present']['correct']:.0%} "
                f"| {fixed.action_rates['absent']['correct']:.0%} |",
                flush=True,
            )
    return 0


_ROUTED = ("present → Correct", "absent → Correct")


def _mixes(judge: Evaluator, weak: WeakSupervision, dev: HeldOut, mixes: str, draws: int, version: str) -> int:
    from bench.common import table
    from bench.learning_curve import dev_sample
    from crag.training.metrics import HeldOut, measure, merged_held_out

    weak_part = HeldOut(weak.val_pairs, weak.calibration_sets, weak.strip_examples)
    print(f"Upper against the calibration mix, on the dev organisations: {version}", flush=True)
    columns = [f"{way}: {cell}" for way in ("pooled", "balanced") for cell in ("upper", *_ROUTED)]
    print(table(["dev : weak questions", "draw", *columns], []), flush=True)
    for mix in mixes.split(","):
        n_dev, n_weak = (int(n) for n in mix.split(":"))
        for draw in range(draws):
            parts = [
                dev_sample(part, n, 100 * (k + 1) + draw)
                for k, (part, n) in enumerate(((weak_part, n_weak), (dev, n_dev)))
                if n > 0
            ]
            data = merged_held_out(*parts)  # a count of 0 leaves that kind out
            cells = []
            for balanced in (False, True):
                upper = measure(judge, data, sentence_evidence=True, balance_kinds=balanced).thresholds
                routed = measure(judge, dev, fixed_thresholds=upper, sentence_evidence=True)
                rates = routed.action_rates
                cells.append(
                    f"{upper.upper:.3f} | {rates['present']['correct']:.0%} | {rates['absent']['correct']:.0%}"
                )
            print(f"| {n_dev} : {n_weak} | {draw} | {' | '.join(cells)} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
