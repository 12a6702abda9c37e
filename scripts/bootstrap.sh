#!/usr/bin/env bash
# Creates .venv and node_modules from the pinned files, once; later calls return at once
# unless a pinned file changed. Sourced by the other scripts.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1
export CDK_DISABLE_CLI_TELEMETRY=true
export SAGEMAKER_SUPPRESS_V2_WARNING=1
export PIP_DISABLE_PIP_VERSION_CHECK=1

PY="${PYTHON:-python3}"
stamp_src="$(cat requirements.txt requirements-dev.txt training_code/requirements.txt constraints.txt pyproject.toml package.json package-lock.json | sha256sum | cut -c1-16)"
stamp=".venv/.bootstrap-$stamp_src"
if [ ! -f "$stamp" ]; then
  echo "bootstrap: creating .venv and installing pinned dependencies (first run takes a few minutes)" >&2
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  # pip names every local index folder it skips; those lines say nothing about the install.
  .venv/bin/python -m pip install -q -r requirements-dev.txt -c constraints.txt 2>&1 | { grep -v "^WARNING: Location" >&2 || true; }
  .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | { grep -v "^WARNING: Location" >&2 || true; }
  npm ci --no-audit --no-fund --loglevel=error >&2
  rm -f .venv/.bootstrap-*
  touch "$stamp"
fi
"$ROOT/scripts/serving_venv.sh"
export PATH="$ROOT/.venv/bin:$ROOT/node_modules/.bin:$PATH"
export VIRTUAL_ENV="$ROOT/.venv"
