"""How far up the Ambiguous band knowledge-base evidence must score to be answered from,
measured on the dev organisations only.

    .venv/bin/python -m bench.admission --home DIR [--version V] [--per-org 60] [--shares 0,0.25,0.5,0.75,1]

Asks every label of the dev organisations' questions (an even spread of `--per-org` each) through
the product's pipeline (bench/replies.py's `organisation_pipeline`) twice: with the band's
knowledge-base bar at lower (`ambiguous_bar_share` 0: the band answers from the knowledge base
whenever it is the stronger side) and at upper (1: never, so the fallback answers or the question
is abstained). It keeps each answer's judgement and the evidence scores the decision weighed
(`Answer.evidence_best`) under the home (`admission/`), then replays each share exactly as
`crag.pipeline.choose_evidence` decides: an Ambiguous question takes the first pass's answer when
its knowledge-base evidence is the stronger side and clears lower + share * (upper - lower), else
the second pass's. It prints what each share gives. `AMBIGUOUS_BAR_SHARE` in crag/pipeline.py is
chosen from this table: the share with the best net (right answers minus `WRONG_CORRECT_COST`
times wrong ones), and the rate at which the band's knowledge-base answers are right at each
height of the band. It also counts the abstentions that name the closest knowledge-base section
(`Answer.closest`), and how often that is a KB question's labelled section. The test
organisations are never read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from bench.common import REPO, table

LABELS = ("kb", "fallback", "none-on-topic", "none-off-topic")


@dataclass(frozen=True)
class Asked:
    """One dev question's answers with the band's knowledge-base bar at lower and at upper."""

    id: str
    label: str
    action: str
    found: bool  # at share 0
    right: bool  # at share 0: answerable, answered right (key phrases, the labelled citation and origin)
    found_at_upper: bool  # at share 1 (the same as at share 0 outside the band)
    right_at_upper: bool
    evidence_best: dict[str, float]
    upper: float
    lower: float
    # At share 1, an abstention's closest knowledge-base section (Answer.closest): named at all, and
    # the labelled section of a KB question.
    closest_named: bool = False
    closest_on_gold: bool = False


def from_knowledge_base(asked: Asked, share: float) -> bool:
    """Whether the band answers this question from the knowledge base at `share`
    (crag.pipeline.choose_evidence)."""
    kb = asked.evidence_best.get("kb", float("-inf"))
    bar = asked.lower + share * (asked.upper - asked.lower)
    return asked.action == "ambiguous" and kb >= bar and kb >= asked.evidence_best.get("fallback", float("-inf"))


def outcome(asked: Asked, share: float) -> tuple[bool, bool]:
    """(answered, right) at `share`."""
    if asked.action != "ambiguous" or from_knowledge_base(asked, share):
        return asked.found, asked.right
    return asked.found_at_upper, asked.right_at_upper


def replay(rows: Sequence[Asked], share: float, cost: float) -> dict[str, float]:
    """The figures of `rows` with the band's knowledge-base bar at `share`."""
    outcomes = [(r, *outcome(r, share)) for r in rows]

    def share_of(label: str, wanted) -> float:
        items = [(found, right) for r, found, right in outcomes if r.label == label]
        return 100.0 * sum(1 for found, right in items if wanted(found, right)) / len(items) if items else float("nan")

    right = sum(1 for _, found, is_right in outcomes if found and is_right)
    wrong = sum(1 for _, found, is_right in outcomes if found and not is_right)
    band_kb = [is_right for r, found, is_right in outcomes if found and from_knowledge_base(r, share)]
    return {
        "kb_right": share_of("kb", lambda found, is_right: found and is_right),
        "kb_wrong": share_of("kb", lambda found, is_right: found and not is_right),
        "fallback_right": share_of("fallback", lambda found, is_right: found and is_right),
        "on_topic_abstained": share_of("none-on-topic", lambda found, _: not found),
        "off_topic_abstained": share_of("none-off-topic", lambda found, _: not found),
        "right": right,
        "wrong": wrong,
        "net": right - cost * wrong,
        "band_kb_right": sum(band_kb),
        "band_kb_wrong": len(band_kb) - sum(band_kb),
    }


def by_height(rows: Sequence[Asked], bins: int = 4) -> list[tuple[float, int, int]]:
    """The band's knowledge-base answers at share 0 by their height in the band: (from, right, wrong)."""
    counts = [[0, 0] for _ in range(bins)]
    for r in rows:
        if r.found and from_knowledge_base(r, 0.0):
            height = (r.evidence_best["kb"] - r.lower) / (r.upper - r.lower)
            counts[min(int(height * bins), bins - 1)][0 if r.right else 1] += 1
    return [(i / bins, right, wrong) for i, (right, wrong) in enumerate(counts)]


def ask_dev(home: Path, version: str | None, per_org: int) -> tuple[str, list[Asked]]:
    """The dev questions asked at shares 0 and 1, kept under the home per evaluator version and spread."""
    from application.corpus_supervision import as_asked
    from application.runtime import cosine_evaluator
    from bench.common import bench_settings
    from bench.corpus_routing import every_nth
    from bench.quality import load_version
    from bench.replies import judge, on_gold_section, organisation_pipeline, split_documents

    settings = bench_settings(home)
    if version == "cosine":
        loaded = cosine_evaluator(settings)  # with the product's default thresholds, as bench.quality's (b)
    elif version is None:
        from application import evaluators

        rows = evaluators.list_versions(settings)
        if not rows:
            raise SystemExit(f"no trained evaluator stored under {home}: train one first")
        version = rows[0].version
    kept = home / "admission" / f"dev-{per_org}-{version}-v3.json"
    if kept.exists():
        return version, [Asked(**row) for row in json.loads(kept.read_text())]
    if version != "cosine":
        loaded = load_version(settings, version)
    documents = split_documents(settings, "dev")
    rows_asked: list[Asked] = []
    for org in documents.organisations:
        base = organisation_pipeline(documents, org, loaded)
        pipelines = [replace(base, config=replace(base.config, ambiguous_bar_share=share)) for share in (0.0, 1.0)]
        questions = every_nth(org.questions, per_org)
        for question in questions:
            asked = as_asked(question)
            answer = pipelines[0].answer(asked)
            judged = judge(question.record, answer.text, answer.found, answer.citations)
            found, right = answer.found, question.label in ("kb", "fallback") and judged.right
            found_at_upper, right_at_upper = found, right
            at_upper = answer
            if answer.action.value == "ambiguous":  # the only action the share changes
                at_upper = pipelines[1].answer(asked)
                judged = judge(question.record, at_upper.text, at_upper.found, at_upper.citations)
                found_at_upper = at_upper.found
                right_at_upper = question.label in ("kb", "fallback") and judged.right
            closest = at_upper.closest
            thresholds = answer.thresholds
            assert thresholds is not None
            rows_asked.append(
                Asked(
                    question.id,
                    question.label,
                    answer.action.value,
                    found,
                    right,
                    found_at_upper,
                    right_at_upper,
                    dict(answer.evidence_best),
                    thresholds.upper,
                    thresholds.lower,
                    closest is not None,
                    closest is not None
                    and question.label == "kb"
                    and on_gold_section(question.record, closest.origin, closest.document, closest.section),
                )
            )
        print(f"{org.id}: {len(questions)} questions asked", file=sys.stderr, flush=True)
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(json.dumps([asdict(row) for row in rows_asked]))
    return version, rows_asked


def _shares(text: str) -> list[float]:
    try:
        shares = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"shares are numbers separated by commas (got {text!r})") from None
    if not shares or any(not 0.0 <= share <= 1.0 for share in shares):
        raise argparse.ArgumentTypeError("give shares between 0 (lower) and 1 (upper)")
    return shares


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--home", type=Path, default=REPO / ".policybot-bench", help="a bench home with a trained evaluator"
    )
    parser.add_argument(
        "--version",
        help="the evaluator version (default: the newest stored; cosine: cosine with the default thresholds)",
    )
    parser.add_argument("--per-org", type=int, default=60, help="dev questions per organisation, every label (0: all)")
    parser.add_argument("--shares", type=_shares, default=[0.0, 0.25, 0.5, 0.625, 0.75, 0.875, 1.0])
    args = parser.parse_args(argv)

    from crag.pipeline import AMBIGUOUS_BAR_SHARE
    from crag.training.metrics import WRONG_CORRECT_COST

    version, rows = ask_dev(args.home.resolve(), args.version, args.per_org)
    counts = ", ".join(f"{sum(1 for r in rows if r.label == label)} {label}" for label in LABELS)
    band = sum(1 for r in rows if r.action == "ambiguous")
    print(f"The Ambiguous band's admission on the dev organisations: evaluator {version}")
    print(f"{len(rows)} questions ({counts}); {band} routed Ambiguous. Net: right - {WRONG_CORRECT_COST:g} x wrong.\n")
    header = [
        "share",
        "KB right",
        "KB wrong",
        "fallback-only right",
        "on-topic abstained",
        "off-topic abstained",
        "right",
        "wrong",
        "net",
        "band answers from the KB: right / wrong",
    ]
    body = []
    for share in args.shares:
        f = replay(rows, share, WRONG_CORRECT_COST)
        mark = " (now)" if share == AMBIGUOUS_BAR_SHARE else ""
        body.append(
            [
                f"{share:g}{mark}",
                *(f"{f[key]:.1f}%" for key in ("kb_right", "kb_wrong", "fallback_right")),
                *(f"{f[key]:.1f}%" for key in ("on_topic_abstained", "off_topic_abstained")),
                int(f["right"]),
                int(f["wrong"]),
                f"{f['net']:g}",
                f"{int(f['band_kb_right'])} / {int(f['band_kb_wrong'])}",
            ]
        )
    print(table(header, body))
    print("\nThe band's knowledge-base answers at share 0, by their height in the band (0: lower, 1: upper):\n")
    heights = by_height(rows)
    print(
        table(
            ["height", "right", "wrong"],
            [[f"{start:g}-{start + 1 / len(heights):g}", right, wrong] for start, right, wrong in heights],
        )
    )
    named = [r for r in rows if r.closest_named]
    print("\nAbstentions that name the closest knowledge-base section (Answer.closest), at share 1:\n")
    print(
        table(
            ["label", "abstained", "naming a section", "the labelled section"],
            [
                [
                    label,
                    sum(1 for r in rows if r.label == label and not outcome(r, 1.0)[0]),
                    sum(1 for r in named if r.label == label),
                    sum(1 for r in named if r.label == label and r.closest_on_gold) if label == "kb" else "-",
                ]
                for label in LABELS
            ],
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
