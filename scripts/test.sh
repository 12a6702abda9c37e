#!/usr/bin/env bash
# Lint, type check and the whole test suite (slow tests included). Creates .venv on first run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
ruff check .
ruff format --check .
mypy stacks lambda hfpipe app.py
pytest "$@"
