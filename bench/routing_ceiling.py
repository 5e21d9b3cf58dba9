"""How well each evaluator's scores could route the benchmark questions, whatever the thresholds.

    .venv/bin/python -m bench.routing_ceiling [--home DIR]

For every question in bench/questions.yaml it retrieves the knowledge-base candidates and
the fallback results (always, whatever action the pipeline would take), scores both with
cosine similarity and with the active trained evaluator, and prints per evaluator:

- the AUC of the best knowledge-base score, answerable-from-KB questions against the rest,
  and of the best fallback score, fallback-only questions against unanswerable ones;
- the **ceiling**: the best worst-category accuracy of the rule "answer from the KB if its
  best score >= t, else from the fallback if its best score >= t, else abstain", with `t`
  fitted on these very questions.

Each evaluator is read two ways: a passage scored whole (what the pipeline does) and a
passage scored as its best strip (an alternative that ranks better but that the calibrated
pipeline did not answer better with; docs/quality-history.md, "Routing on strips").

The ceiling is fitted on the test questions on purpose: it bounds what any calibration
could do with these scores. Below the quality targets, better thresholds cannot reach
them; only a better evaluator can. Uses bench.quality's home and setup.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from bench.quality import CATEGORIES, REPO, load_questions, open_bench

BestScores = dict[str, tuple[np.ndarray, np.ndarray]]  # reading -> (best KB score, best fallback score) per question


def best_scores(settings, evaluator, questions: list[dict]) -> BestScores:
    """Per question and reading ("passage": whole passages; "best strip": each passage's best
    strip): the best knowledge-base score and the best fallback score (-inf when none)."""
    from application.runtime import Runtime
    from crag.pipeline import AskContext, plan_fallback
    from crag.strips import decompose, strip_text_for_scoring

    pipeline = Runtime(settings, evaluator).pipeline(None)
    best: dict[str, tuple[list[float], list[float]]] = {"passage": ([], []), "best strip": ([], [])}
    for item in questions:
        question = item["question"]
        candidates = pipeline.retriever_for(AskContext()).retrieve(question, pipeline.config.top_k)
        plan = plan_fallback(question, AskContext(), pipeline.fallback_sources, pipeline.config)
        results = [p for source in plan.sources for p in source.search(plan.keywords, pipeline.config.fallback_limit)]
        for side, passages in enumerate((candidates, results)):
            strips = [strip_text_for_scoring(s) for p in passages for s in decompose(p, pipeline.config.strip_mode)]
            for reading, texts in (("passage", [p.text for p in passages]), ("best strip", strips)):
                scores = evaluator.evaluator.score(question, texts) if texts else []
                best[reading][side].append(max(scores, default=float("-inf")))
    return {reading: (np.asarray(kb), np.asarray(fallback)) for reading, (kb, fallback) in best.items()}


def ceiling(
    kb_best: np.ndarray, fallback_best: np.ndarray, categories: np.ndarray
) -> tuple[float, float, dict[str, float]]:
    """(worst-category accuracy, threshold, accuracy per category) of the best single threshold."""
    best: tuple[float, float, dict[str, float]] = (-1.0, 0.0, {})
    finite = np.concatenate([kb_best, fallback_best])
    for t in np.unique(finite[np.isfinite(finite)]):
        routed = np.where(kb_best >= t, "kb", np.where(fallback_best >= t, "fallback", "none"))
        accuracy = {c: float(np.mean(routed[categories == c] == c)) for c in CATEGORIES if np.any(categories == c)}
        if min(accuracy.values()) > best[0]:
            best = (min(accuracy.values()), float(t), accuracy)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=REPO / ".policybot-bench", help="POLICYBOT_HOME for the benchmark")
    parser.add_argument("--minutes", type=float, default=10.0, help="training budget if no evaluator is active yet")
    args = parser.parse_args(argv)
    settings = open_bench(args.home, args.minutes, retrain=False)
    from application.runtime import cosine_evaluator, load_active_evaluator
    from crag.training.metrics import roc_auc

    questions = load_questions()
    categories = np.asarray([q["category"] for q in questions])
    not_kb = categories != "kb"
    print(f"{len(questions)} questions; thresholds below are fitted on them (a ceiling, not a result)")
    print(
        "| evaluator | passage scored as | AUC kb vs rest | AUC fallback vs none | ceiling (worst category) | t | kb | fallback | none |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for evaluator in (cosine_evaluator(settings), load_active_evaluator(settings)):
        for reading, (kb_best, fallback_best) in best_scores(settings, evaluator, questions).items():
            auc_kb = roc_auc(kb_best.tolist(), (categories == "kb").tolist())
            auc_fallback = roc_auc(fallback_best[not_kb].tolist(), (categories[not_kb] == "fallback").tolist())
            worst, t, accuracy = ceiling(kb_best, fallback_best, categories)
            print(
                f"| {evaluator.description} | {reading} | {auc_kb:.3f} | {auc_fallback:.3f} | {worst:.0%} | {t:.3f} | "
                + " | ".join(f"{accuracy.get(c, 0.0):.0%}" for c in CATEGORIES)
                + " |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
