#!/usr/bin/env bash
# Install policybot and its dependencies into ./.venv (idempotent; re-running is fast).
# `--tests` adds what only the test suite needs: the test extras and Chromium for the admin
# console's browser tests (scripts/test.sh passes it; scripts/demo.sh does not).
set -euo pipefail
cd "$(dirname "$0")/.."

tests=no
for argument in "$@"; do
  case "$argument" in
    --tests) tests=yes ;;
    *) echo "usage: bash scripts/install.sh [--tests]" >&2; exit 2 ;;
  esac
done

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "policybot needs Python 3.11 or newer (found $("$PYTHON" --version 2>&1))." >&2
  exit 2
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
# torch first and pinned: this version's CPU build; a looser request pulls multi-GB CUDA wheels.
python -m pip install --quiet "torch==2.13.0"
if [ "$tests" = yes ]; then
  python -m pip install --quiet -e ".[test]"
else
  python -m pip install --quiet -e .
fi

# System packages: redis-server for the embedded stack; with --tests, Chromium for the browser tests.
missing=()
brew_names=()
command -v redis-server >/dev/null 2>&1 || { missing+=(redis-server); brew_names+=(redis); }
if [ "$tests" = yes ] && [ ! -x /usr/bin/chromium ]; then
  missing+=(chromium chromium-driver)
  brew_names+=(chromium)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    echo "installing ${missing[*]} (Debian packages)..."
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "note: missing ${missing[*]}. Install them (apt-get install ${missing[*]} / brew install ${brew_names[*]})" >&2
    echo "      or set REDIS_URL to a running Redis; without Chromium the console's browser tests are skipped." >&2
  fi
fi
echo "policybot installed in .venv ($(.venv/bin/policybot --help >/dev/null && echo ok))"
