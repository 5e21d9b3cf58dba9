"""Answer quality, side by side in one run: plain RAG, CRAG with cosine, CRAG with the T5 evaluator.

    .venv/bin/python -m bench.quality [--minutes 10] [--retrain] [--home DIR] [--write docs/quality.md] [--dump FILE]

Runs on its own POLICYBOT_HOME (default ./.policybot-bench): ingests samples/policies as
the knowledge base and samples/hr-portal as an allow-listed fallback collection, trains
an evaluator if none is active (or with --retrain), then asks every question in
bench/questions.yaml through each system. Thresholds come from the evaluator's own
calibration on weak supervision, never from these questions.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
QUESTIONS = REPO / "bench" / "questions.yaml"
CATEGORIES = ("kb", "fallback", "none")


@dataclass
class Outcome:
    found: bool
    right: bool  # answered with the expected phrase and a citation of the expected document/origin
    action: str
    seconds: float
    leads_with_answer: bool = False  # right, and the reply's first line already holds the answer


@dataclass
class SystemResult:
    name: str
    outcomes: dict[str, list[Outcome]] = field(default_factory=lambda: {c: [] for c in CATEGORIES})

    def rate(self, category: str, kind: str) -> float:
        items = self.outcomes[category]
        if not items:
            return 0.0
        if kind == "right":
            hits = sum(o.right for o in items) if category != "none" else sum(not o.found for o in items)
        else:  # wrong: answered but not right (for "none": answered at all)
            hits = sum(o.found and not o.right for o in items) if category != "none" else sum(o.found for o in items)
        return hits / len(items)

    def routing_accuracy(self) -> float:
        """Share of questions whose action fits their category (kb → correct; others → not correct)."""
        fits = [o.action == "correct" for o in self.outcomes["kb"]]
        fits += [o.action in ("ambiguous", "incorrect") for c in ("fallback", "none") for o in self.outcomes[c]]
        return sum(fits) / len(fits) if fits else 0.0

    def answer_first(self) -> float:
        """Of the right answers (KB and fallback-only), the share whose first line holds the answer."""
        right = [o for c in ("kb", "fallback") for o in self.outcomes[c] if o.right]
        return sum(o.leads_with_answer for o in right) / len(right) if right else 0.0

    def median_ms(self) -> float:
        return statistics.median(o.seconds for c in CATEGORIES for o in self.outcomes[c]) * 1000


def judge(item: dict, answer_text: str, found: bool, citations: list[tuple[str, str]]) -> bool:
    """citations: (document, origin) pairs."""
    if item["category"] == "none" or not found:
        return False
    phrase_ok = _holds_expected_phrase(item, answer_text)
    origin = "kb" if item["category"] == "kb" else "fallback"
    cited_ok = any(doc == item["expected_document"] and o == origin for doc, o in citations)
    return phrase_ok and cited_ok


def leads_with_answer(item: dict, answer_text: str) -> bool:
    """The reply's first line holds an expected phrase: the issue asks for the answer first."""
    return _holds_expected_phrase(item, answer_text.strip().split("\n")[0])


def _holds_expected_phrase(item: dict, text: str) -> bool:
    return any(phrase.lower() in text.lower() for phrase in item.get("expected_phrases", []))


def prepare(settings, minutes: float, retrain: bool, seed: int = 0) -> None:
    from sqlalchemy import select

    from application import evaluators
    from core import db
    from core.models import FallbackSourceRow
    from ingestion.ingest import ingest_paths

    for folder, collection in (
        (REPO / "samples" / "policies", "policies"),
        (REPO / "samples" / "hr-portal", "hr-portal"),
    ):
        report = ingest_paths(settings, [folder], collection=collection, prune=True)
        if report.failed:
            raise SystemExit(f"ingestion failed: {report.failed}")
    with db.session(settings) as session:
        if not session.execute(
            select(FallbackSourceRow).where(FallbackSourceRow.name == "HR portal")
        ).scalar_one_or_none():
            session.add(FallbackSourceRow(name="HR portal", kind="collection", collection="hr-portal"))
    if retrain or evaluators.active_version(settings) is None:
        print(f"training the evaluator ({minutes:g} min budget, seed {seed})...", flush=True)
        result = evaluators.train_and_register(settings, budget_s=minutes * 60, activate="always", seed=seed)
        print(f"trained {result.version}: AUC {result.evaluator.auc:.3f} vs cosine {result.cosine.auc:.3f}", flush=True)


def plain_rag(settings, question: str, top_k: int):
    """Baseline (a): top-k straight to the answer: the best chunk, always answered."""
    from application.runtime import knowledge_base_collections
    from ingestion.retriever import ChunkRetriever

    passages = ChunkRetriever(settings, knowledge_base_collections(settings)).retrieve(question, top_k)
    if not passages:
        return "", False, [], "correct"
    return passages[0].text, True, [(passages[0].document, "kb")], "correct"


def dump_record(item: dict, system: str, answer, outcome: Outcome) -> dict:
    """One question's internals under one system, for reading misses (--dump)."""
    return {
        "id": item["id"],
        "category": item["category"],
        "system": system,
        "expected_document": item.get("expected_document"),
        "action": outcome.action,
        "found": outcome.found,
        "right": outcome.right,
        "thresholds": None
        if answer.thresholds is None
        else {"upper": answer.thresholds.upper, "lower": answer.thresholds.lower},
        "scores": [
            {
                "origin": s.passage.origin,
                "document": s.passage.document,
                "section": s.passage.section,
                "score": round(s.score, 4),
            }
            for s in answer.scores
        ],
        "strips": [
            {"document": s.passage.document, "score": round(s.score or 0.0, 4), "text": s.text} for s in answer.strips
        ],
        "answer": answer.text,
    }


def open_bench(home: Path, minutes: float, retrain: bool, seed: int = 0):
    """Settings on the benchmark's own POLICYBOT_HOME, with the samples ingested and an evaluator trained."""
    os.environ["POLICYBOT_HOME"] = str(home)
    os.environ.setdefault("POLICYBOT_REDIS_PORT", "6393")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from core.config import get_settings

    settings = get_settings()
    prepare(settings, minutes, retrain, seed)
    return settings


def load_questions() -> list[dict]:
    return yaml.safe_load(QUESTIONS.read_text())


def run(minutes: float, retrain: bool, home: Path, write: Path | None, dump: Path | None = None, seed: int = 0) -> int:
    from application.runtime import Runtime, cosine_evaluator, load_active_evaluator

    settings = open_bench(home, minutes, retrain, seed)
    items = load_questions()
    trained = load_active_evaluator(settings)
    systems = {
        "(a) plain RAG": None,
        "(b) CRAG + cosine": Runtime(settings, cosine_evaluator(settings)),
        "(c) CRAG + T5 evaluator": Runtime(settings, trained),
    }
    results = {name: SystemResult(name) for name in systems}
    wrong_examples: dict[str, list[str]] = {name: [] for name in systems}
    dumped: list[dict] = []
    for item in items:
        for name, runtime in systems.items():
            started = time.perf_counter()
            if runtime is None:
                text, found, cites, action = plain_rag(settings, item["question"], settings.top_k)
            else:
                answer = runtime.pipeline(None).answer(item["question"])
                text, found, action = answer.text, answer.found, answer.action.value
                cites = [(c.document, c.origin) for c in answer.citations]
            right = judge(item, text, found, cites)
            outcome = Outcome(
                found, right, action, time.perf_counter() - started, right and leads_with_answer(item, text)
            )
            results[name].outcomes[item["category"]].append(outcome)
            if runtime is not None and dump is not None:
                dumped.append(dump_record(item, name, answer, outcome))
            failed = (item["category"] == "none" and found) or (item["category"] != "none" and not outcome.right)
            if failed:
                wrong_examples[name].append(f"{item['id']} ({action}, found={found})")

    counts = {c: sum(1 for i in items if i["category"] == c) for c in CATEGORIES}
    lines = [
        f"Quality benchmark: {len(items)} questions ({counts['kb']} kb, {counts['fallback']} fallback-only, "
        f"{counts['none']} unanswerable); evaluator {trained.description}, thresholds upper {trained.thresholds.upper:.3f} "
        f"lower {trained.thresholds.lower:.3f} strip {trained.strip_threshold:.3f}.",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}.",
        "",
        "| system | KB: right answer + citation | KB: wrong | fallback-only: answered from fallback | fallback: wrong | "
        "unanswerable: abstained | unanswerable: answered | right answers led by the answer | routing accuracy | "
        "median latency |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, result in results.items():
        lines.append(
            f"| {name} | {result.rate('kb', 'right'):.0%} | {result.rate('kb', 'wrong'):.0%} | "
            f"{result.rate('fallback', 'right'):.0%} | {result.rate('fallback', 'wrong'):.0%} | "
            f"{result.rate('none', 'right'):.0%} | {result.rate('none', 'wrong'):.0%} | "
            f"{result.answer_first():.0%} | {result.routing_accuracy():.0%} | {result.median_ms():.0f} ms |"
        )
    lines += ["", "Missed questions per system:"]
    lines += [f"- {name}: {', '.join(missed) or 'none'}" for name, missed in wrong_examples.items()]
    report = "\n".join(lines)
    print(report)
    if dump is not None:
        import json

        dump.parent.mkdir(parents=True, exist_ok=True)
        dump.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in dumped))
    if write is not None:
        write.parent.mkdir(parents=True, exist_ok=True)
        write.write_text(
            "# Answer quality\n\nProduced by `.venv/bin/python -m bench.quality --write docs/quality.md` "
            f"on {time.strftime('%Y-%m-%d')}.\n\n" + report + "\n"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="training budget if an evaluator must be trained")
    parser.add_argument("--retrain", action="store_true", help="train a new evaluator even if one is active")
    parser.add_argument("--seed", type=int, default=0, help="training seed (compare several: trainings differ by seed)")
    parser.add_argument("--home", type=Path, default=REPO / ".policybot-bench", help="POLICYBOT_HOME for the benchmark")
    parser.add_argument("--write", type=Path, default=None, help="also write the table to this Markdown file")
    parser.add_argument("--dump", type=Path, default=None, help="write every CRAG answer's scores and strips as JSONL")
    args = parser.parse_args(argv)
    return run(args.minutes, args.retrain, args.home, args.write, args.dump, args.seed)


if __name__ == "__main__":
    sys.exit(main())
