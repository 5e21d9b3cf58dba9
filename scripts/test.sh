#!/usr/bin/env bash
# Install everything, then run the whole test suite against real services
# (embedded PostgreSQL+pgvector and Redis, started by the suite itself).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --tests
exec .venv/bin/python -m pytest "$@"
