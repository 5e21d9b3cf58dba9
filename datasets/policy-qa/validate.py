"""Check the policy-qa corpus (or some of its organisations) and print what is wrong.

    python datasets/policy-qa/validate.py [ORG ...]

With no organisation named, the whole corpus is checked, its overall size and label shares
included. Exit status 0 when nothing is wrong, 1 otherwise. The checks are in
application/corpus.py; the test suite runs the same ones (tests/test_corpus.py).
"""

from __future__ import annotations

import sys

from application.corpus import CorpusError, load_corpus, summary, validate


def main(argv: list[str]) -> int:
    try:
        corpus, problems = load_corpus(orgs=argv)
    except CorpusError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    problems += validate(corpus, whole=not argv)
    for line in summary(corpus):
        print(line)
    for problem in problems:
        print(f"PROBLEM {problem}")
    print(
        f"{len(problems)} problem(s) in {len(corpus.organisations)} organisation(s), "
        f"{len(corpus.questions())} question(s)"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
