#!/usr/bin/env bash
# Lint, type check and the whole test suite (slow tests included). Creates .venv on first run, and
# .venv-serving (the inference containers' transformers), which only the tests need.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
HFPIPE_BOOTSTRAP=dev source scripts/bootstrap.sh
scripts/serving_venv.sh
ruff check .
ruff format --check .
mypy stacks lambda hfpipe app.py
pytest "$@"
