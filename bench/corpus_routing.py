"""Routing on the policy-qa corpus's test organisations: CRAG with cosine against CRAG with the
trained evaluator, on questions no training, calibration or gate has seen.

    .venv/bin/python -m bench.corpus_routing [--home DIR] [--write FILE]

Every dev and test question is asked through real retrieval over its organisation's own
knowledge base (application/corpus_supervision.py). Each evaluator routes the test questions
with thresholds calibrated without them: the trained evaluator with its stored thresholds
(weak supervision and the dev split), cosine with thresholds calibrated on the dev split the
same way. Per kind of question it prints the share routed Correct / Ambiguous / Incorrect:
a question whose answer retrieval put among the candidates should be Correct; any other
should not. Also retrieval recall@k (the answer among the candidates) per split.

Uses bench.quality's home by default; an evaluator must be active there (`python -m
bench.quality` trains one, or `policybot evaluator train` on that home).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from application.thresholds import stored_thresholds
from bench.common import REPO
from crag.decision import decide
from crag.types import Action, Evaluator

CATEGORIES = ("kb, answer retrieved", "kb, answer not retrieved", "fallback", "none-on-topic", "none-off-topic")


def category(asked) -> str:
    label = asked.question.label
    if label != "kb":
        return label
    return CATEGORIES[0] if any(asked.holds_answer(c) for c in asked.candidates) else CATEGORIES[1]


def every_nth(items: list, wanted: int) -> list:
    """An even spread of `wanted` items (questions are written topic by topic), or all of them."""
    if wanted <= 0 or wanted >= len(items):
        return items
    step = len(items) / wanted
    return [items[int(i * step)] for i in range(wanted)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, default=REPO / ".policybot-bench")
    parser.add_argument("--write", type=Path, help="also write the Markdown table to this file")
    parser.add_argument(
        "--per-org",
        type=int,
        default=0,
        help="route only this many test questions per organisation (every n-th; 0: all; "
        "each costs about 0.5 s per judge on 2 cores)",
    )
    args = parser.parse_args(argv)

    from application.corpus_supervision import ask_corpus, corpus_path, held_out, load_checked_corpus
    from application.evaluators import active_version
    from application.runtime import embed_function
    from bench.common import bench_settings
    from crag.checkpoint import load_evaluator
    from crag.inference import CachedEvaluator
    from crag.training.metrics import cosine_with_known, measure

    settings = bench_settings(args.home)
    row = active_version(settings)
    if row is None:
        print(f"no active evaluator in {args.home}: train one first (python -m bench.quality)", file=sys.stderr)
        return 2
    path = corpus_path(settings.model_copy(update={"corpus": ""}))
    assert path is not None
    corpus = load_checked_corpus(path, ("dev", "test"))
    asked, embeddings = ask_corpus(settings, corpus.in_split("dev") + corpus.in_split("test"))
    dev = [a for org in corpus.in_split("dev") for a in asked[org.id]]
    test = [a for org in corpus.in_split("test") for a in every_nth(asked[org.id], args.per_org)]

    evaluator = CachedEvaluator(load_evaluator(row.path, threads=settings.evaluator_threads))
    cosine = cosine_with_known(embed_function(settings), embeddings)
    thresholds = {
        "cosine": measure(cosine, held_out(dev)).thresholds,
        "T5 evaluator": stored_thresholds(row),
    }
    judges: dict[str, Evaluator] = {"cosine": cosine, "T5 evaluator": evaluator}
    lines = [
        f"Routing on the policy-qa test organisations ({len(corpus.in_split('test'))} organisations, "
        f"{len(test)} questions), evaluator {row.version}:",
        "",
    ]
    for split, items in (("dev", dev), ("test", test)):
        kb = [a for a in items if a.question.label == "kb"]
        hit = sum(any(a.holds_answer(c) for c in a.candidates) for a in kb)
        lines.append(
            f"- retrieval recall@{settings.top_k} ({split}): {hit}/{len(kb)} = {hit / len(kb):.1%} of kb questions"
        )
    lines += [
        "",
        "| judge | AUC | routing | " + " | ".join(CATEGORIES) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in CATEGORIES) + " |",
    ]
    for name, judge in judges.items():
        t = thresholds[name]
        metrics = measure(judge, held_out(test), fixed_thresholds=t)
        routed: dict[str, Counter[Action]] = {c: Counter() for c in CATEGORIES}
        for a in test:
            if a.candidates:
                scores = judge.score(a.asked, [c.text for c in a.candidates])
                action = decide(list(scores), t)
            else:
                action = Action.INCORRECT
            routed[category(a)][action] += 1
        cells = []
        for c in CATEGORIES:
            n = sum(routed[c].values())
            share = (routed[c][Action.CORRECT] if c == CATEGORIES[0] else n - routed[c][Action.CORRECT]) / max(n, 1)
            cells.append(
                f"{share:.0%} of {n} (C/A/I {routed[c][Action.CORRECT]}/{routed[c][Action.AMBIGUOUS]}/"
                f"{routed[c][Action.INCORRECT]})"
            )
        lines.append(f"| {name} | {metrics.auc:.3f} | {metrics.routing_accuracy:.1%} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Each cell: the share routed right (Correct for an answer retrieved, anything else otherwise), "
        "and the counts routed Correct / Ambiguous / Incorrect. Routing counts Ambiguous as half right.",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        args.write.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
