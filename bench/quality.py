"""Answer quality, side by side in one run: plain RAG, CRAG with cosine, CRAG with the trained evaluator.

    .venv/bin/python -m bench.quality [--set samples|corpus|both] [--seeds 0,1,2] [--minutes 10]
        [--general-minutes 60] [--per-org 60] [--retrain] [--home DIR] [--write FILE] [--dump FILE]

Runs on its own POLICYBOT_HOME (default ./.policybot-bench): ingests samples/policies as the
knowledge base and samples/hr-portal as an allow-listed fallback collection. For each seed it
trains the general evaluator on the policy-qa corpus once (`--general-minutes`, kept in the home),
then adapts it to that knowledge base (`--minutes`, as `policybot evaluator train --seed`); a
seed's trained version is reused on later runs unless --retrain. Thresholds come from each
evaluator's own calibration (weak supervision and the corpus's dev split), never from the
questions asked here.

Two sets of questions:
- samples: the 64 questions of bench/questions.yaml over samples/;
- corpus: the policy-qa test organisations (datasets/policy-qa), each over its own documents:
  its knowledge base, and its fallback documents as an allow-listed collection source; an even
  spread of --per-org questions of every label per organisation. No training, calibration or
  tuning has seen them.

(a) plain RAG answers with the top chunk; (b) CRAG with cosine similarity and the product's
default cosine thresholds (what a user gets with no trained evaluator); (c) CRAG with the
trained evaluator of each seed, then their mean and, column by column, the worst seed.

Per set, two tables: routing and outcomes per category, then what the replies chose, apart from
the routing (answer choice: of the KB questions routed Correct, the right replies and those whose
first line holds the answer with its own citation right; fallback choice: the same of the
fallback-only questions answered from the fallback; document choice: of the answered KB
questions, those whose first citation is the labelled document). Then issue #32's targets
(TARGETS) against (c)'s worst seed on the corpus: met, or short by how many points.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from bench.common import REPO, bench_settings, ingest_samples, prepare
from bench.corpus_routing import every_nth
from bench.replies import (
    SplitDocuments,
    first_citation,
    first_line_citation,
    kb_retriever,
    organisation_pipeline,
    split_documents,
)
from bench.replies import judge as judge_reply
from core.config import PRETRAIN_MINUTES
from devtools.replies import reply_words

if TYPE_CHECKING:
    from application.runtime import LoadedEvaluator
    from core.config import Settings
    from crag.types import Answer, Citation

QUESTIONS = REPO / "bench" / "questions.yaml"
CATEGORIES = ("kb", "fallback", "none")  # the sample questions' categories
CORPUS_CATEGORIES = ("kb", "fallback", "none-on-topic", "none-off-topic")
ANSWERABLE = ("kb", "fallback")


@dataclass
class Outcome:
    found: bool
    right: bool  # answered with the expected phrase(s) and a citation of the expected document/origin
    action: str
    seconds: float
    leads_with_answer: bool = False  # right, and the reply's first line already holds the answer
    words: int = 0  # words of the reply, citation markers not counted (answered questions)
    # What the reply chose, for the choice figures (answer, fallback, document):
    first_line_cited: bool = False  # the first line holds the answer, and its own citation is the expected one
    from_fallback: bool = False  # answered, with a citation from the fallback
    first_document: str = ""  # the reply's first citation ([1]): its document
    first_origin: str = ""  # and origin ("kb" or "fallback"); "" when not answered
    expected_document: str = ""  # the question's labelled document (file name)


@dataclass
class SystemResult:
    name: str
    categories: Sequence[str] = CATEGORIES
    outcomes: dict[str, list[Outcome]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for category in self.categories:
            self.outcomes.setdefault(category, [])

    def rate(self, category: str, kind: str) -> float:
        """kind: "right" (answerable: right answer and citation; unanswerable: abstained),
        "wrong" (answered but not right; unanswerable: answered at all) or "abstained"."""
        items = self.outcomes[category]
        if not items:
            return 0.0
        answerable = category in ANSWERABLE
        if kind == "right":
            hits = sum(o.right for o in items) if answerable else sum(not o.found for o in items)
        elif kind == "wrong":
            hits = sum(o.found and not o.right for o in items) if answerable else sum(o.found for o in items)
        else:
            hits = sum(not o.found for o in items)
        return hits / len(items)

    def routing_accuracy(self) -> float:
        """Share of questions whose action fits their category (kb → correct; others → not correct)."""
        fits = [o.action == "correct" for o in self.outcomes["kb"]]
        fits += [o.action in ("ambiguous", "incorrect") for c in self.categories if c != "kb" for o in self.outcomes[c]]
        return sum(fits) / len(fits) if fits else 0.0

    def answer_first(self) -> float:
        """Of the right answers (KB and fallback-only), the share whose first line holds the answer."""
        right = [o for c in ANSWERABLE for o in self.outcomes[c] if o.right]
        return sum(o.leads_with_answer for o in right) / len(right) if right else 0.0

    def answer_choice(self, first_line: bool = False) -> float:
        """Of the KB questions routed Correct, the share whose reply holds the answer with the right
        citation ("right"), or with `first_line`, whose first line does, with its own citation right."""
        routed = [o for o in self.outcomes["kb"] if o.action == "correct"]
        return _share(routed, first_line)

    def fallback_choice(self, first_line: bool = False) -> float:
        """The same, of the fallback-only questions answered from the fallback."""
        answered = [o for o in self.outcomes["fallback"] if o.found and o.from_fallback]
        return _share(answered, first_line)

    def document_choice(self) -> float:
        """Of the answered KB questions, the share whose first citation is the labelled document."""
        answered = [o for o in self.outcomes["kb"] if o.found]
        gold = [o.first_origin == "kb" and o.first_document == o.expected_document for o in answered]
        return sum(gold) / len(gold) if gold else 0.0

    def kb_right_first_line(self) -> float:
        """Of the right KB replies, the share whose first line holds the answer with its own citation right."""
        return _share([o for o in self.outcomes["kb"] if o.right], first_line=True)

    def median_kb_words(self) -> float:
        words = [o.words for o in self.outcomes["kb"] if o.found]
        return statistics.median(words) if words else 0.0

    def median_ms(self) -> float:
        return statistics.median(o.seconds for c in self.categories for o in self.outcomes[c]) * 1000


def _share(outcomes: Sequence[Outcome], first_line: bool) -> float:
    hits = [o.first_line_cited if first_line else o.right for o in outcomes]
    return sum(hits) / len(hits) if hits else 0.0


def judge(item: dict, answer_text: str, found: bool, citations: list[tuple[str, str]]) -> bool:
    """A sample question's reply is right. citations: (document, origin) pairs."""
    if item["category"] == "none" or not found:
        return False
    phrase_ok = _holds_expected_phrase(item, answer_text)
    origin = "kb" if item["category"] == "kb" else "fallback"
    cited_ok = any(doc == item["expected_document"] and o == origin for doc, o in citations)
    return phrase_ok and cited_ok


def leads_with_answer(item: dict, answer_text: str) -> bool:
    """The reply's first line holds an expected phrase: the issue asks for the answer first."""
    return _holds_expected_phrase(item, answer_text.strip().split("\n")[0])


def sample_choice(item: dict, text: str, found: bool, citations: Sequence[Citation]) -> dict:
    """A sample reply's choice facts (Outcome's fields): whether its first line holds an expected
    phrase with its own citation of the expected document and origin, and its first citation."""
    if not found:
        return {"expected_document": item.get("expected_document") or ""}
    origin = "kb" if item["category"] == "kb" else "fallback"
    line = first_line_citation(text, citations)
    first = first_citation(citations)
    return {
        "first_line_cited": item["category"] != "none"
        and leads_with_answer(item, text)
        and line is not None
        and (line.document, line.origin) == (item["expected_document"], origin),
        "from_fallback": any(c.origin == "fallback" for c in citations),
        "first_document": first.document if first else "",
        "first_origin": first.origin if first else "",
        "expected_document": item.get("expected_document") or "",
    }


def _holds_expected_phrase(item: dict, text: str) -> bool:
    return any(phrase.lower() in text.lower() for phrase in item.get("expected_phrases", []))


def seed_evaluators(
    settings: Settings, seeds: Sequence[int], minutes: float, general_minutes: float, retrain: bool
) -> dict[int, str]:
    """Each seed's trained version: the newest stored one of that seed, or trained now (the
    general evaluator of that seed first, when `general_minutes` is above 0 and none is kept)."""
    from application import evaluators

    versions: dict[int, str] = {}
    for seed in seeds:
        stored = [row for row in evaluators.list_versions(settings) if (row.metrics or {}).get("seed") == seed]
        if stored and not retrain:
            versions[seed] = stored[0].version  # list_versions is newest first
            continue
        if general_minutes > 0:
            print(
                f"seed {seed}: the general evaluator ({general_minutes:g} min budget, kept if trained)...", flush=True
            )
            evaluators.pretrain_general(settings, general_minutes * 60, seed=seed)
        print(f"seed {seed}: adapting to the samples ({minutes:g} min budget)...", flush=True)
        result = evaluators.train_and_register(settings, budget_s=minutes * 60, activate="never", seed=seed)
        print(
            f"seed {seed}: {result.version}, {result.steps} steps, AUC {result.evaluator.auc:.3f} "
            f"vs cosine {result.cosine.auc:.3f}",
            flush=True,
        )
        versions[seed] = result.version
    return versions


def load_version(settings: Settings, version: str) -> LoadedEvaluator:
    from application import evaluators
    from application.runtime import load_active_evaluator

    evaluators.activate_version(settings, version)
    return load_active_evaluator(settings)


def plain_rag(settings: Settings, question: str, top_k: int):
    """Baseline (a): top-k straight to the answer: the best chunk, always answered."""
    from application.runtime import knowledge_base_collections
    from ingestion.retriever import ChunkRetriever

    passages = ChunkRetriever(settings, knowledge_base_collections(settings)).retrieve(question, top_k)
    if not passages:
        return "", False, [], "correct"
    return passages[0].text, True, [(passages[0].document, "kb")], "correct"


def dump_record(item: dict, system: str, answer: Answer, outcome: Outcome) -> dict:
    """One question's internals under one system, for reading misses (--dump)."""
    return {
        "id": item["id"],
        "category": item["category"],
        "system": system,
        "expected_document": item.get("expected_document"),
        "action": outcome.action,
        "found": outcome.found,
        "right": outcome.right,
        "first_line_cited": outcome.first_line_cited,
        "first_document": outcome.first_document,
        "first_origin": outcome.first_origin,
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


def open_bench(home: Path, minutes: float, retrain: bool, seed: int = 0) -> Settings:
    """Settings on the benchmark's own POLICYBOT_HOME, with the samples ingested and an evaluator trained."""
    settings = bench_settings(home)
    prepare(settings, minutes, retrain, seed)
    return settings


def load_questions() -> list[dict]:
    return yaml.safe_load(QUESTIONS.read_text())


Missed = dict[str, list[str]]


def ask_samples(
    settings: Settings, systems: dict[str, LoadedEvaluator | None], dumped: list[dict] | None
) -> tuple[dict[str, SystemResult], Missed]:
    """The 64 sample questions through each system (None: plain RAG)."""
    from application.runtime import Runtime
    from crag.types import Citation

    results = {name: SystemResult(name) for name in systems}
    missed: Missed = {name: [] for name in systems}
    runtimes = {name: None if loaded is None else Runtime(settings, loaded) for name, loaded in systems.items()}
    for item in load_questions():
        for name, runtime in runtimes.items():
            started = time.perf_counter()
            answer = None
            if runtime is None:
                text, found, cites, action = plain_rag(settings, item["question"], settings.top_k)
                citations = [Citation(n, o, "", doc, "", "", None, 0.0) for n, (doc, o) in enumerate(cites, 1)]
            else:
                answer = runtime.pipeline(None).answer(item["question"])
                text, found, action, citations = answer.text, answer.found, answer.action.value, answer.citations
                cites = [(c.document, c.origin) for c in citations]
            right = judge(item, text, found, cites)
            outcome = Outcome(
                found,
                right,
                action,
                time.perf_counter() - started,
                right and leads_with_answer(item, text),
                reply_words(text) if found else 0,
                **sample_choice(item, text, found, citations),
            )
            results[name].outcomes[item["category"]].append(outcome)
            if answer is not None and dumped is not None:
                dumped.append(dump_record(item, name, answer, outcome))
            if (item["category"] == "none" and found) or (item["category"] != "none" and not right):
                missed[name].append(f"{item['id']} ({action}, found={found})")
    return results, missed


def ask_corpus_set(
    documents: SplitDocuments, systems: dict[str, LoadedEvaluator | None], per_org: int, dumped: list[dict] | None
) -> tuple[dict[str, SystemResult], Missed, int]:
    """The corpus's test organisations' questions (an even spread of `per_org` each) through each
    system, over each organisation's own documents (`split_documents(settings, "test")`). Returns
    the results, the missed question ids and the number of organisations."""
    from application.corpus_supervision import as_asked
    from crag.types import Citation

    qa = documents.qa
    results = {name: SystemResult(name, CORPUS_CATEGORIES) for name in systems}
    missed: Missed = {name: [] for name in systems}
    for org in documents.organisations:
        pipelines = {
            name: None if loaded is None else organisation_pipeline(documents, org, loaded)
            for name, loaded in systems.items()
        }
        plain = kb_retriever(documents, org)
        questions = every_nth(org.questions, per_org)
        for question in questions:
            asked = as_asked(question)
            for name, pipeline in pipelines.items():
                started = time.perf_counter()
                if pipeline is None:
                    top = plain.retrieve(asked, qa.top_k)[:1]
                    text, found, action = (top[0].text if top else ""), bool(top), "correct"
                    citations = [Citation(1, "kb", "", p.document, p.title, p.section, None, 0.0) for p in top]
                else:
                    answer = pipeline.answer(asked)
                    text, found, action, citations = answer.text, answer.found, answer.action.value, answer.citations
                seconds = time.perf_counter() - started
                reply = judge_reply(question.record, text, found, citations)
                outcome = Outcome(
                    found,
                    reply.right,
                    action,
                    seconds,
                    reply.first_line_right,
                    reply.words,
                    reply.first_line_cited,
                    reply.from_fallback,
                    reply.first_document,
                    reply.first_origin,
                    Path(question.record.document or "").name,
                )
                results[name].outcomes[question.label].append(outcome)
                answerable = question.label in ANSWERABLE
                if (answerable and not reply.right) or (not answerable and found):
                    missed[name].append(f"{question.id} ({action}, found={found})")
                if dumped is not None:
                    dumped.append(
                        {
                            "id": question.id,
                            "label": question.label,
                            "system": name,
                            "question": asked,
                            "action": action,
                            "found": found,
                            "right": reply.right,
                            "first_line_cited": reply.first_line_cited,
                            "document": question.record.document,
                            "section": question.record.section,
                            "phrases": list(question.record.phrases),
                            "citations": [[c.origin, c.document, c.section] for c in citations],
                            "reply": text,
                        }
                    )
        print(f"  {org.id}: {len(questions)} questions", file=sys.stderr, flush=True)
    return results, missed, len(documents.organisations)


@dataclass(frozen=True)
class Column:
    title: str
    value: Callable[[SystemResult], float]
    higher_is_better: bool
    unit: str = "%"  # "%", "words" or "ms"

    def show(self, value: float) -> str:
        return f"{value:.0%}" if self.unit == "%" else f"{value:.0f}" if self.unit == "words" else f"{value:.0f} ms"


def columns(categories: Sequence[str]) -> list[Column]:
    def rate(category: str, kind: str) -> Callable[[SystemResult], float]:
        return lambda result: result.rate(category, kind)

    cols = [
        Column("KB: right + citation", rate("kb", "right"), True),
        Column("KB: wrong", rate("kb", "wrong"), False),
        Column("KB: abstained", rate("kb", "abstained"), False),
        Column("fallback-only: from fallback", rate("fallback", "right"), True),
        Column("fallback-only: wrong", rate("fallback", "wrong"), False),
        Column("fallback-only: abstained", rate("fallback", "abstained"), False),
    ]
    names = {"none": "unanswerable", "none-on-topic": "on-topic unanswerable", "none-off-topic": "off-topic"}
    for category in categories:
        if category in names:
            cols.append(Column(f"{names[category]}: abstained", rate(category, "right"), True))
    cols += [
        Column("routing accuracy", SystemResult.routing_accuracy, True),
        Column("right replies led by the answer", SystemResult.answer_first, True),
        Column("median KB reply words", SystemResult.median_kb_words, False, "words"),
        Column("median latency", SystemResult.median_ms, False, "ms"),
    ]
    return cols


def choice_columns() -> list[Column]:
    """What the reply chose, apart from where the question was routed."""
    return [
        Column("answer choice: KB routed Correct, reply holds the answer", SystemResult.answer_choice, True),
        Column(
            "answer choice: KB routed Correct, first line holds it", lambda r: r.answer_choice(first_line=True), True
        ),
        Column("right KB replies whose first line holds it", SystemResult.kb_right_first_line, True),
        Column("fallback choice: from the fallback, reply holds the answer", SystemResult.fallback_choice, True),
        Column(
            "fallback choice: from the fallback, first line holds it",
            lambda r: r.fallback_choice(first_line=True),
            True,
        ),
        Column("document choice: answered KB, first citation the gold document", SystemResult.document_choice, True),
    ]


def worst(values: Sequence[float], higher_is_better: bool) -> float:
    """The worst seed's value: the lowest where higher is better, else the highest."""
    return min(values) if higher_is_better else max(values)


def table(results: dict[str, SystemResult], trained: Sequence[str], cols: Sequence[Column]) -> list[str]:
    """One row per system; with several trained evaluators (one per seed) also their mean and,
    column by column, the worst of them."""
    lines = [
        "| system | " + " | ".join(c.title for c in cols) + " |",
        "| --- | " + " | ".join("---" for _ in cols) + " |",
    ]
    for name, result in results.items():
        lines.append(f"| {name} | " + " | ".join(c.show(c.value(result)) for c in cols) + " |")
    if len(trained) > 1:
        per_seed = [[c.value(results[name]) for name in trained] for c in cols]
        mean = [statistics.fmean(values) for values in per_seed]
        worst_row = [worst(v, c.higher_is_better) for c, v in zip(cols, per_seed, strict=True)]
        lines.append("| (c) mean of seeds | " + " | ".join(c.show(v) for c, v in zip(cols, mean, strict=True)) + " |")
        lines.append(
            "| **(c) worst seed** | " + " | ".join(c.show(v) for c, v in zip(cols, worst_row, strict=True)) + " |"
        )
    return lines


@dataclass(frozen=True)
class Target:
    figure: str
    value: Callable[[SystemResult], float]
    bound: float
    at_least: bool  # the figure must be >= bound (else <= bound)


# Issue #32's targets: (c), worst seed, the corpus's test organisations.
TARGETS = (
    Target("answer choice: KB routed Correct whose reply holds the answer", SystemResult.answer_choice, 0.92, True),
    Target("first line holds the key phrase, of right KB replies", SystemResult.kb_right_first_line, 0.90, True),
    Target("KB right with the right citation", lambda r: r.rate("kb", "right"), 0.80, True),
    Target("KB wrong", lambda r: r.rate("kb", "wrong"), 0.10, False),
    Target("fallback-only answered from the fallback", lambda r: r.rate("fallback", "right"), 0.70, True),
    Target("on-topic unanswerable abstained", lambda r: r.rate("none-on-topic", "right"), 0.65, True),
    Target("off-topic abstained", lambda r: r.rate("none-off-topic", "right"), 0.95, True),
    Target("routing", SystemResult.routing_accuracy, 0.82, True),
)


def targets_table(
    results: dict[str, SystemResult], trained: Sequence[str], targets: Sequence[Target] = TARGETS
) -> list[str]:
    """Each target against the worst seed of (c): met, or short by how many percentage points."""
    lines = ["| figure | (c) worst seed | target | met / short by |", "| --- | --- | --- | --- |"]
    for target in targets:
        value = worst([target.value(results[name]) for name in trained], target.at_least)
        gap = (target.bound - value) if target.at_least else (value - target.bound)
        verdict = "met" if gap <= 1e-9 else f"short by {round(gap * 100, 1):g} points"
        bound = f"{'≥' if target.at_least else '≤'} {target.bound:.0%}"
        lines.append(f"| {target.figure} | {value:.1%} | {bound} | {verdict} |")
    return lines


def run(args: argparse.Namespace) -> int:
    from application.runtime import cosine_evaluator

    settings = bench_settings(args.home)
    ingest_samples(settings)
    versions = seed_evaluators(settings, args.seeds, args.minutes, args.general_minutes, args.retrain)
    loaded = {seed: load_version(settings, version) for seed, version in versions.items()}
    trained_names = [f"(c) CRAG + trained, seed {seed}" for seed in versions]
    systems: dict[str, LoadedEvaluator | None] = {
        "(a) plain RAG": None,
        "(b) CRAG + cosine": cosine_evaluator(settings),
    } | {name: loaded[seed] for name, seed in zip(trained_names, versions, strict=True)}
    dumped: list[dict] | None = [] if args.dump else None

    lines = [
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}. Trained evaluators: "
        + "; ".join(
            f"seed {seed} {versions[seed]} (upper {e.thresholds.upper:.3f}, lower {e.thresholds.lower:.3f}, "
            f"strip {e.thresholds.strip:.3f})"
            for seed, e in loaded.items()
        )
        + ".",
        "",
    ]
    system_ids = {"(a) plain RAG": "plain-rag", "(b) CRAG + cosine": "cosine"} | {
        name: versions[seed] for name, seed in zip(trained_names, versions, strict=True)
    }
    targets: list[str] = []
    for which in ("samples", "corpus"):
        if args.set not in (which, "both"):
            continue
        results: dict[str, SystemResult] = {}
        missed: Missed = {}
        n_orgs = 0
        documents: SplitDocuments | None = None  # the test organisations, ingested once per run when asked
        for name, system in systems.items():
            # Each system's answers are kept under the home: a later run (another seed, a crash)
            # asks again only what it lacks. --fresh asks everything again.
            kept = args.home / "quality-results" / f"{which}-{args.per_org}-{system_ids[name]}.json"
            read = _read_kept(kept, name) if kept.exists() and not args.fresh else None
            if read is not None:
                results[name], missed[name], n_orgs = read
                continue
            print(f"asking the {which} questions: {name}...", file=sys.stderr, flush=True)
            if which == "samples":
                one, one_missed = ask_samples(settings, {name: system}, dumped)
            else:
                documents = documents or split_documents(settings, "test")
                one, one_missed, n_orgs = ask_corpus_set(documents, {name: system}, args.per_org, dumped)
            results[name], missed[name] = one[name], one_missed[name]
            _keep(kept, results[name], missed[name], n_orgs)
        if which == "samples":
            items = load_questions()
            counts = {c: sum(1 for i in items if i["category"] == c) for c in CATEGORIES}
            lines.append(
                f"**Sample questions** ({len(items)}: {counts['kb']} kb, {counts['fallback']} fallback-only, "
                f"{counts['none']} unanswerable, over samples/):"
            )
            categories: Sequence[str] = CATEGORIES
        else:
            counts = {c: len(results["(b) CRAG + cosine"].outcomes[c]) for c in CORPUS_CATEGORIES}
            lines.append(
                f"**Corpus test organisations** ({n_orgs} organisations, {sum(counts.values())} questions: "
                + ", ".join(f"{n} {c}" for c, n in counts.items())
                + "):"
            )
            categories = CORPUS_CATEGORIES
        lines += ["", *table(results, trained_names, columns(categories)), ""]
        lines += ["What the replies chose:", "", *table(results, trained_names, choice_columns()), ""]
        if which == "corpus":
            targets = targets_table(results, trained_names)
        if args.show_missed:
            lines += ["Missed questions per system:"]
            lines += [f"- {name}: {', '.join(ids) or 'none'}" for name, ids in missed.items()]
            lines.append("")
    if targets:
        lines += ["**Targets** (issue #32: (c), worst seed, the corpus's test organisations):", "", *targets, ""]
    lines.append(
        "Right: every key phrase and a citation of the labelled document (corpus: and section), from the "
        "knowledge base for KB questions, from the fallback for fallback-only ones. Unanswerable: abstained "
        "is right. Routing: KB questions routed Correct, all others not. Choice: of the KB questions routed "
        "Correct (answer) and of the fallback-only ones answered with a fallback citation (fallback), the "
        "replies that are right, and those whose first line holds the key phrase(s) with its own citation "
        "right; of the answered KB questions, those whose first citation is the labelled document (document). "
        "Worst seed: the worst value of each column over the seeds."
    )
    report = "\n".join(lines)
    print(report)
    if dumped is not None:
        args.dump.parent.mkdir(parents=True, exist_ok=True)
        args.dump.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in dumped))
    if args.write is not None:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(report + "\n")
    return 0


# Kept answers of another version lack facts the tables need (2: the choice figures' facts); they
# are asked again.
KEPT_VERSION = 2


def _keep(path: Path, result: SystemResult, missed: list[str], n_orgs: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    outcomes = {c: [asdict(o) for o in items] for c, items in result.outcomes.items()}
    path.write_text(
        json.dumps(
            {
                "version": KEPT_VERSION,
                "categories": list(result.categories),
                "outcomes": outcomes,
                "missed": missed,
                "orgs": n_orgs,
            }
        )
    )


def _read_kept(path: Path, name: str) -> tuple[SystemResult, list[str], int] | None:
    """The kept answers, or None (with a message) when they were kept by another version of this benchmark."""
    data = json.loads(path.read_text())
    if data.get("version", 1) != KEPT_VERSION:
        print(
            f"{path}: kept by an earlier version of bench.quality (without the choice figures' facts); asking again",
            file=sys.stderr,
            flush=True,
        )
        return None
    outcomes = {c: [Outcome(**o) for o in items] for c, items in data["outcomes"].items()}
    return SystemResult(name, tuple(data["categories"]), outcomes), data["missed"], data["orgs"]


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds are integers separated by commas, e.g. 0,1,2 (got {text!r})") from None
    if not seeds:
        raise argparse.ArgumentTypeError("give at least one seed")
    return seeds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", choices=("samples", "corpus", "both"), default="both", help="which questions")
    parser.add_argument("--seeds", type=_seeds, default=[0, 1, 2], help="training seeds, e.g. 0,1,2 (default)")
    parser.add_argument("--minutes", type=float, default=10.0, help="adapting budget per seed, when one is trained")
    parser.add_argument(
        "--general-minutes",
        type=float,
        default=PRETRAIN_MINUTES,
        help="the general evaluator's budget per seed, when none is kept (0: adapt from MiniLM); "
        "default: `evaluator pretrain`'s",
    )
    parser.add_argument(
        "--per-org", type=int, default=60, help="corpus questions per test organisation, every label (0: all)"
    )
    parser.add_argument("--retrain", action="store_true", help="train every seed's evaluator again")
    parser.add_argument("--home", type=Path, default=REPO / ".policybot-bench", help="POLICYBOT_HOME for the benchmark")
    parser.add_argument("--write", type=Path, default=None, help="also write the tables to this Markdown file")
    parser.add_argument(
        "--dump",
        type=Path,
        default=None,
        help="write every answer this run asks as JSONL (kept answers are not asked again: add --fresh for all)",
    )
    parser.add_argument("--fresh", action="store_true", help="ask again what earlier runs kept under the home")
    parser.add_argument("--show-missed", action="store_true", help="list the missed question ids per system")
    args = parser.parse_args(argv)
    args.home = args.home.resolve()
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
