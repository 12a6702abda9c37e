#!/usr/bin/env bash
# Builds .venv-checkov: checkov and its pinned dependencies (requirements-checkov.txt), apart from .venv because
# they pin other versions than the app's. Only the test suite uses it (tests/infra/test_checkov.py).
# Called by scripts/test.sh after .venv exists (its uv installs here); rebuilt only when the pins change.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
stamp=".venv-checkov/.bootstrap-$(sha256sum requirements-checkov.txt | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "bootstrap: creating .venv-checkov (the template scanner the tests run)" >&2
  rm -rf .venv-checkov
  "${PYTHON:-python3}" -m venv --without-pip .venv-checkov
  .venv/bin/uv pip install -q --python .venv-checkov/bin/python --no-deps -r requirements-checkov.txt
  touch "$stamp"
fi
