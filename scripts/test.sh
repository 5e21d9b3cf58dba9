#!/usr/bin/env bash
# Install everything, then run the whole test suite against real services
# (embedded PostgreSQL+pgvector and Redis, started by the suite itself).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --tests
# Lint, format, import contracts and types first: fast (mypy's cache makes reruns a few seconds),
# and any finding fails the run before the slow suite starts. Settings: pyproject.toml.
lint_step() {  # quiet when it passes; on a finding, the tool's report and what failed
  local what="$1" output; shift
  if ! output=$("$@" 2>&1); then
    printf '%s\n' "$output" >&2
    echo "scripts/test.sh: $what failed (run: $*); fix it before the tests run." >&2
    exit 1
  fi
}
lint_step "ruff check (lint)" .venv/bin/ruff check --quiet .
lint_step "ruff format --check (run .venv/bin/ruff format . to fix)" .venv/bin/ruff format --check --quiet .
lint_step "import contracts (the layers point one way; crag stays free of Slack, Celery, SQLAlchemy, LlamaIndex and our other packages)" \
  .venv/bin/lint-imports
lint_step "mypy (types)" .venv/bin/mypy
echo "lint: ruff, ruff format, import contracts and mypy passed"
# Two pytest processes, one test file each at a time: much of the suite waits on worker
# processes, Slack round trips and retries, so two overlap on 2 cores. Each process starts
# its own PostgreSQL and Redis (tests/conftest.py). POLICYBOT_TEST_PROCESSES=0 runs in one.
exec .venv/bin/python -m pytest -n "${POLICYBOT_TEST_PROCESSES:-2}" --dist loadfile "$@"
