"""Tiny policy-qa organisations for tests: five documents in five formats, and given questions."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from application.corpus import CORPUS_ROOT

sys.path.insert(0, str(CORPUS_ROOT))
import build  # noqa: E402  (datasets/policy-qa/build.py)

# One question of each kind, labelled as write_org's documents answer them.
GOOD = [
    {
        "question": "how many days can i roll over??",
        "label": "kb",
        "document": "kb/leave.md",
        "section": "Carry-over",
        "phrases": ["5 days"],
    },
    {
        "question": "Hotel cap in Toronto?",
        "label": "kb",
        "document": "kb/travel.html",
        "section": "Hotels",
        "phrases": ["CAD 240"],
    },
    {
        "question": "do we get money for wifi at home",
        "label": "kb",
        "document": "kb/remote.txt",
        "section": "1. Stipend",
        "phrases": ["CAD 60"],
    },
    {
        "question": "can I keep a $40 bottle of wine from a vendor?",
        "label": "kb",
        "document": "kb/conduct.pdf",
        "section": "Gifts",
        "phrases": ["CAD 50"],
    },
    {
        "question": "who do I call about my payslip",
        "label": "fallback",
        "document": "fallback/contacts.docx",
        "phrases": ["ext. 4410"],
    },
    {
        "question": "hotel cap in Montreal?",
        "label": "none-on-topic",
        "variant_of": "tst-2",
        "note": "only Toronto has a rate",
    },
    {"question": "best poutine near the office?", "label": "none-off-topic"},
]


def write_org(root: Path, org_id: str, split: str, questions: list[dict], prefix: str = "tst") -> Path:
    folder = root / "orgs" / org_id
    for sub in ("kb", "fallback", "src"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    (folder / "org.yaml").write_text(
        yaml.safe_dump(
            {
                "id": org_id,
                "name": org_id.title(),
                "kind": "startup",
                "country": "Canada",
                "size": "40",
                "tone": "casual",
                "split": split,
            }
        )
    )
    (folder / "kb" / "leave.md").write_text(
        "# Leave\n\n## 4.2 Carry-over\n\nYou may carry **5 days** forward into the next year.\n\n"
        "## 4.3 Sick days\n\nTen paid sick days a year.\n"
    )
    (folder / "kb" / "travel.html").write_text(
        "<html><head><title>Travel</title></head><body><h1>Travel</h1><h2>Hotels</h2>"
        "<p>Book every hotel through the travel desk.</p><table><tr><th>City</th><th>Cap</th></tr><tr><td>Toronto</td><td>CAD 240</td></tr></table></body></html>"
    )
    (folder / "kb" / "remote.txt").write_text("REMOTE WORK\n\n1. Stipend\n\nStaff get CAD 60 a month for internet.\n")
    (folder / "src" / "conduct.pdf.md").write_text("# Conduct\n\n## 1. Gifts\n\nGifts up to CAD 50 are fine.\n")
    (folder / "src" / "fallback--contacts.docx.md").write_text("# Contacts\n\nPayroll: ext. 4410.\n")
    (folder / "questions.yaml").write_text(
        yaml.safe_dump([{"id": f"{prefix}-{i}", **q} for i, q in enumerate(questions, 1)], allow_unicode=True)
    )
    build.build(folder)
    return folder
