#!/usr/bin/env bash
# Creates .venv and node_modules from the pinned files, once; later calls return at once unless a pinned
# file changed. Sourced by the other scripts, and safe to source in your own shell:
#
#     source scripts/bootstrap.sh      # puts .venv/bin (hfpipe) and node_modules/.bin (cdk) on PATH
#
# It changes no folder and leaves no shell option behind: the install runs in a subshell with its own
# `set -euo pipefail`, and a failed install returns non-zero instead of closing the shell.
# The inference containers' environment (.venv-serving) is the test suite's alone: scripts/test.sh builds it.
_hfpipe_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1
export CDK_DISABLE_CLI_TELEMETRY=true
export SAGEMAKER_SUPPRESS_V2_WARNING=1
export PIP_DISABLE_PIP_VERSION_CHECK=1

if ! (
  set -euo pipefail
  cd "$_hfpipe_root"
  PY="${PYTHON:-python3}"
  stamp_src="$(cat requirements.txt requirements-dev.txt training_code/requirements.txt constraints.txt pyproject.toml package.json package-lock.json | sha256sum | cut -c1-16)"
  stamp=".venv/.bootstrap-$stamp_src"
  if [ ! -f "$stamp" ]; then
    started=$SECONDS
    echo "bootstrap: first run: creating .venv and node_modules from the pinned files (a few minutes)" >&2
    [ -x .venv/bin/python ] || "$PY" -m venv .venv
    echo "bootstrap: [1/3] Python packages (torch CPU build, transformers, CDK, test tools)..." >&2
    # pip names every local index folder it skips; those lines say nothing about the install.
    .venv/bin/python -m pip install -q -r requirements-dev.txt -c constraints.txt 2>&1 | { grep -v "^WARNING: Location" >&2 || true; }
    echo "bootstrap: [2/3] the hfpipe command (editable install)..." >&2
    .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | { grep -v "^WARNING: Location" >&2 || true; }
    echo "bootstrap: [3/3] the CDK command-line tool (npm ci)..." >&2
    npm ci --no-audit --no-fund --loglevel=error >/dev/null  # its summary line is noise; errors go to stderr
    rm -f .venv/.bootstrap-*
    touch "$stamp"
    echo "bootstrap: done in $((SECONDS - started)) s; to use hfpipe in this or a new shell: source .venv/bin/activate" >&2
  fi
); then
  echo "bootstrap: failed (see above); nothing on PATH was changed" >&2
  # `return` when sourced, `exit` when run.
  return 1 2>/dev/null || exit 1
fi
case ":$PATH:" in
  *":$_hfpipe_root/.venv/bin:"*) ;;
  *) export PATH="$_hfpipe_root/.venv/bin:$_hfpipe_root/node_modules/.bin:$PATH" ;;
esac
export VIRTUAL_ENV="$_hfpipe_root/.venv"
unset _hfpipe_root
