"""Sanity checks for bench/questions.yaml against the sample corpora.

Usage: python bench/check_questions.py   (lists every failed check, exits non-zero if any)

- kb: expected_document is in samples/policies and contains every expected phrase;
  every policy file is the expected document of at least one kb question.
- fallback: expected_document is in samples/hr-portal, contains every expected phrase,
  and no phrase appears anywhere in samples/policies.
- none: no expected_document/expected_phrases, and none of its ABSENT_TERMS occurs in any file.
- pdf/docx: the extracted text contains the phrases too, and every heading of the
  Markdown source in samples/src/ comes out as its own line.
"""

from __future__ import annotations

import html
import re
import sys
from collections import Counter
from pathlib import Path

import docx
import yaml
from pypdf import PdfReader

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ROOT / "samples" / "policies"
HR_PORTAL = ROOT / "samples" / "hr-portal"
SRC = ROOT / "samples" / "src"
QUESTIONS = ROOT / "bench" / "questions.yaml"

MIN_COUNTS = {"kb": 22, "fallback": 10, "none": 12}

# Regexes (case-insensitive) that would signal an answer to a `none` question.
ABSENT_TERMS: dict[str, list[str]] = {
    "none-01": [r"dress code", r"attire", r"holiday party", r"\bdress"],
    "none-02": [r"\bdogs?\b", r"\bpets?\b", r"animals? (in|at) the office"],
    "none-03": [r"stock options?", r"\bvest(ing|ed|s)?\b", r"\bequity\b", r"\bshares\b"],
    "none-04": [r"\b401", r"retirement", r"pension"],
    "none-05": [r"notice period", r"weeks'? notice", r"resignation notice"],
    "none-06": [r"\bmerit\b", r"pay raise", r"annual raise", r"compensation review", r"salary review"],
    "none-07": [r"smok", r"vap(e|ing)", r"cigarette", r"tobacco"],
    "none-08": [r"company cars?\b", r"car allowance", r"\bfleet\b", r"leased? cars?"],
    "none-09": [r"birthday"],
    "none-10": [r"\bclubs?\b", r"\bsports?\b", r"running", r"softball"],
    "none-11": [r"\bbikes?\b", r"bicycle", r"\bcycling\b"],
    "none-12": [r"student loans?", r"loan repayment"],
    "none-13": [r"day ?care", r"creche", r"on-site child", r"childcare cent"],
    "none-14": [r"promotion", r"\bpromo\b", r"career ladder", r"job level"],
    "none-15": [r"volunteer"],
}


FAILURES: list[str] = []


def check(ok: object, message: str) -> None:
    if not ok:
        FAILURES.append(message)


def normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def raw_text(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        return "\n".join(page.extract_text() or "" for page in PdfReader(path).pages)
    if suffix == ".docx":
        document = docx.Document(str(path))
        cells = [cell.text for table in document.tables for row in table.rows for cell in row.cells]
        return "\n".join([p.text for p in document.paragraphs] + cells)
    text = path.read_text(encoding="utf-8")
    if suffix == ".html":
        text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    return text


def load(folder: Path) -> dict[str, str]:
    return {p.name: normalize(raw_text(p)) for p in sorted(folder.iterdir()) if p.is_file()}


def check_binary_headings(path: Path) -> None:
    source = SRC / f"{path.stem}.md"
    if not source.exists():
        check(False, f"{path.name}: missing source {source}")
        return
    lines = {normalize(line) for line in raw_text(path).splitlines()}
    for heading in re.findall(r"^#{1,3} (.+)$", source.read_text(encoding="utf-8"), re.M):
        check(normalize(heading) in lines, f"{path.name}: heading not on its own line: {heading!r}")


def main() -> int:
    policies, portal = load(POLICIES), load(HR_PORTAL)
    sources = {p.name: normalize(raw_text(p)) for p in sorted(SRC.glob("*.md"))}
    everything = {**policies, **portal, **{f"src/{k}": v for k, v in sources.items()}}
    items = yaml.safe_load(QUESTIONS.read_text(encoding="utf-8"))
    assert isinstance(items, list), "questions.yaml must be a YAML list"

    ids = [item["id"] for item in items]
    check(len(ids) == len(set(ids)), f"duplicate ids: {[i for i, n in Counter(ids).items() if n > 1]}")
    counts = Counter(item["category"] for item in items)
    check(set(counts) <= set(MIN_COUNTS), f"unknown categories: {set(counts) - set(MIN_COUNTS)}")
    for category, minimum in MIN_COUNTS.items():
        check(counts[category] >= minimum, f"{category}: {counts[category]} < {minimum}")

    for item in items:
        qid, category = item["id"], item["category"]
        check(item.get("question", "").strip(), f"{qid}: empty question")
        if category == "none":
            check("expected_document" not in item and "expected_phrases" not in item, f"{qid}: none has answers")
            check(qid in ABSENT_TERMS, f"{qid}: add its ABSENT_TERMS entry")
            for term in ABSENT_TERMS.get(qid, []):
                for name, text in everything.items():
                    check(not re.search(term, text), f"{qid}: {term!r} occurs in {name}")
            continue
        corpus = policies if category == "kb" else portal
        doc, phrases = item.get("expected_document"), item.get("expected_phrases") or []
        check(phrases, f"{qid}: no expected_phrases")
        if doc not in corpus:
            check(False, f"{qid}: {doc!r} not in {'policies' if category == 'kb' else 'hr-portal'}")
            continue
        source = sources.get(f"{Path(doc).stem}.md") if doc.endswith((".pdf", ".docx")) else None
        for phrase in phrases:
            p = normalize(phrase)
            check(p in corpus[doc], f"{qid}: {phrase!r} not in {doc}")
            if source is not None:
                check(p in source, f"{qid}: {phrase!r} not in src of {doc}")
            if category == "fallback":
                hits = [name for name, text in policies.items() if p in text]
                check(not hits, f"{qid}: fallback phrase {phrase!r} also in policies {hits}")

    covered = {item["expected_document"] for item in items if item["category"] == "kb"}
    check(covered == set(policies), f"policies without kb questions: {set(policies) - covered}")
    for name in policies:
        if name.endswith((".pdf", ".docx")):
            check_binary_headings(POLICIES / name)

    if FAILURES:
        print("\n".join(f"FAIL {m}" for m in FAILURES))
        return 1
    print(f"OK: {len(items)} questions " + ", ".join(f"{k}={counts[k]}" for k in MIN_COUNTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
