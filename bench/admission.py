"""How far up the Ambiguous band evidence must score to be answered from, measured on the dev
organisations only.

    .venv/bin/python -m bench.admission --home DIR [--version V] [--per-org 40] [--shares 0,0.25,0.5,0.75,1]

Asks every label of the dev organisations' questions (an even spread of `--per-org` each) through
the product's pipeline (bench/replies.py's `organisation_pipeline`) with the Ambiguous band
admitting everything above lower (`ambiguous_bar_share` 0), and keeps each answer's judgement
with the evidence scores the decision weighed (`Answer.evidence_best`). It then replays the band's
admission for each share: an Ambiguous answer stands only if its stronger side's best evidence
clears lower + share * (upper - lower) (the fallback side its own bar too), as
`crag.pipeline.choose_evidence` decides, and prints what each share gives. `AMBIGUOUS_BAR_SHARE`
in crag/pipeline.py is chosen from this table: the share with the best net (right answers minus
`WRONG_CORRECT_COST` times wrong ones); the band's net is also split by the side it answers from
(knowledge base or fallback), whose bars could differ. The replay keeps the reply of share 0: a higher bar only
removes answers, but may also drop weaker passages from a reply it keeps. The test
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
    """One dev question's answer at share 0, with what the band's admission reads."""

    id: str
    label: str
    action: str
    found: bool
    right: bool  # answerable, answered right (key phrases, the labelled citation and origin)
    evidence_best: dict[str, float]
    upper: float
    lower: float
    fallback_bar: float | None


def band_side(asked: Asked) -> str:
    """The side an Ambiguous answer draws on: the stronger one (crag.pipeline.choose_evidence)."""
    kb = asked.evidence_best.get("kb", float("-inf"))
    return "fallback" if asked.evidence_best.get("fallback", float("-inf")) > kb else "kb"


def admitted(asked: Asked, share: float) -> bool:
    """Whether the answer of share 0 still stands at `share` (crag.pipeline.choose_evidence)."""
    if not asked.found or asked.action != "ambiguous":
        return asked.found
    side = band_side(asked)
    bar = asked.lower + share * (asked.upper - asked.lower)
    if side == "fallback" and asked.fallback_bar is not None:
        bar = max(bar, asked.fallback_bar)
    return asked.evidence_best[side] >= bar


def replay(rows: Sequence[Asked], share: float, cost: float) -> dict[str, float]:
    """The figures of `rows` with the band admitting from `share`."""
    by_label = {label: [r for r in rows if r.label == label] for label in LABELS}
    right = sum(1 for r in rows if r.right and admitted(r, share))
    wrong = sum(1 for r in rows if admitted(r, share) and not r.right)

    def share_of(label: str, test) -> float:
        items = by_label[label]
        return 100.0 * sum(1 for r in items if test(r)) / len(items) if items else float("nan")

    band = {
        side: [r for r in rows if r.action == "ambiguous" and r.found and band_side(r) == side]
        for side in ("kb", "fallback")
    }
    net_by_side = {
        side: sum(1 for r in items if r.right and admitted(r, share))
        - cost * sum(1 for r in items if admitted(r, share) and not r.right)
        for side, items in band.items()
    }
    return {
        "kb_right": share_of("kb", lambda r: r.right and admitted(r, share)),
        "kb_wrong": share_of("kb", lambda r: admitted(r, share) and not r.right),
        "fallback_right": share_of("fallback", lambda r: r.right and admitted(r, share)),
        "on_topic_abstained": share_of("none-on-topic", lambda r: not admitted(r, share)),
        "off_topic_abstained": share_of("none-off-topic", lambda r: not admitted(r, share)),
        "right": right,
        "wrong": wrong,
        "net": right - cost * wrong,
        "band_net_kb": net_by_side["kb"],
        "band_net_fallback": net_by_side["fallback"],
    }


def ask_dev(home: Path, version: str | None, per_org: int) -> tuple[str, list[Asked]]:
    """The dev questions asked at share 0, kept under the home per evaluator version and spread."""
    from application.corpus_supervision import as_asked
    from bench.common import bench_settings
    from bench.corpus_routing import every_nth
    from bench.quality import load_version
    from bench.replies import judge, organisation_pipeline, split_documents

    settings = bench_settings(home)
    if version is None:
        from application import evaluators

        rows = evaluators.list_versions(settings)
        if not rows:
            raise SystemExit(f"no trained evaluator stored under {home}: train one first")
        version = rows[0].version
    kept = home / "admission" / f"dev-{per_org}-{version}.json"
    if kept.exists():
        return version, [Asked(**row) for row in json.loads(kept.read_text())]
    loaded = load_version(settings, version)
    documents = split_documents(settings, "dev")
    rows_asked: list[Asked] = []
    for org in documents.organisations:
        pipeline = organisation_pipeline(documents, org, loaded)
        pipeline = replace(pipeline, config=replace(pipeline.config, ambiguous_bar_share=0.0))
        questions = every_nth(org.questions, per_org)
        for question in questions:
            answer = pipeline.answer(as_asked(question))
            judged = judge(question.record, answer.text, answer.found, answer.citations)
            thresholds = answer.thresholds
            assert thresholds is not None
            rows_asked.append(
                Asked(
                    question.id,
                    question.label,
                    answer.action.value,
                    answer.found,
                    question.label in ("kb", "fallback") and judged.right,
                    dict(answer.evidence_best),
                    thresholds.upper,
                    thresholds.lower,
                    thresholds.fallback,
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
    parser.add_argument("--version", help="the evaluator version (default: the newest stored)")
    parser.add_argument("--per-org", type=int, default=40, help="dev questions per organisation, every label (0: all)")
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
        "band net, KB side",
        "band net, fallback side",
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
                f"{f['band_net_kb']:g}",
                f"{f['band_net_fallback']:g}",
            ]
        )
    print(table(header, body))
    return 0


if __name__ == "__main__":
    sys.exit(main())
