"""Render an organisation's DOCX and PDF policies from their Markdown sources.

    python datasets/policy-qa/build.py [ORG ...]     (every organisation when none is named)

`orgs/ORG/src/NAME.docx.md` becomes `orgs/ORG/kb/NAME.docx`; a source named
`src/fallback--NAME.pdf.md` becomes `fallback/NAME.pdf`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent.parent))  # the repo root, for devtools/ when run as a script

from devtools.render_markdown import render  # noqa: E402

FALLBACK_PREFIX = "fallback--"


def target_for(source: Path) -> Path:
    name = source.name.removesuffix(".md")  # "code-of-conduct.docx"
    folder = "kb"
    if name.startswith(FALLBACK_PREFIX):
        name, folder = name.removeprefix(FALLBACK_PREFIX), "fallback"
    return source.parent.parent / folder / name


def build(org_folder: Path) -> list[Path]:
    org_file = org_folder / "org.yaml"
    author = org_folder.name
    if org_file.exists():
        author = (yaml.safe_load(org_file.read_text(encoding="utf-8")) or {}).get("name", author)
    written = []
    for source in sorted((org_folder / "src").glob("*.md")):
        if not source.name.endswith((".docx.md", ".pdf.md")):
            raise SystemExit(f"{source}: name it NAME.docx.md or NAME.pdf.md")
        target = target_for(source)
        target.parent.mkdir(exist_ok=True)
        render(source, target, author=author)
        written.append(target)
    return written


def main(argv: list[str]) -> int:
    names = argv or sorted(p.name for p in (ROOT / "orgs").iterdir() if p.is_dir())
    for name in names:
        folder = ROOT / "orgs" / name
        if not folder.is_dir():
            print(f"no organisation '{name}' under {ROOT / 'orgs'}", file=sys.stderr)
            return 2
        for target in build(folder):
            print(f"wrote {target.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
