#!/usr/bin/env bash
# Install everything, then run the whole test suite against real services
# (embedded PostgreSQL+pgvector and Redis, started by the suite itself).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --tests
# Two pytest processes, one test file each at a time: much of the suite waits on worker
# processes, Slack round trips and retries, so two overlap on 2 cores. Each process starts
# its own PostgreSQL and Redis (tests/conftest.py). POLICYBOT_TEST_PROCESSES=0 runs in one.
exec .venv/bin/python -m pytest -n "${POLICYBOT_TEST_PROCESSES:-2}" --dist loadfile "$@"
