#!/usr/bin/env bash
# Install everything and run the main job on the embedded defaults:
# local PostgreSQL+pgvector and Redis, the sample policies ingested and listed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/policybot demo "$@"
