#!/usr/bin/env bash
# Creates .venv and node_modules from the pinned files, once; later calls return at once unless a pinned
# file changed. Sourced by the other scripts, and safe to source in your own shell:
#
#     source scripts/bootstrap.sh      # puts .venv/bin (hfpipe) and node_modules/.bin (cdk) on PATH
#
# It changes no folder and leaves no shell option behind: the install runs in a subshell with its own
# `set -euo pipefail`, and a failed install returns non-zero instead of closing the shell.
#
# What it installs: requirements-local.txt (the CDK app, the command, the training stack and moto, what
# `hfpipe local` runs), or with HFPIPE_BOOTSTRAP=dev (scripts/test.sh) requirements-dev.txt, which adds the
# test and lint tools; and node_modules (the pinned `cdk` command-line tool), installed while pip runs.
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
  set_name="${HFPIPE_BOOTSTRAP:-local}"
  case "$set_name" in
    local) requirements=requirements-local.txt ;;
    dev) requirements=requirements-dev.txt ;;
    *) echo "bootstrap: HFPIPE_BOOTSTRAP=$set_name: accepted are local (the default) and dev" >&2; exit 2 ;;
  esac
  pinned="$(cat requirements.txt requirements-local.txt requirements-dev.txt training_code/requirements.txt constraints.txt pyproject.toml | sha256sum | cut -c1-16)"
  node_pinned="$(cat package.json package-lock.json | sha256sum | cut -c1-16)"
  # dev includes local: a dev stamp satisfies a local call.
  stamp=".venv/.bootstrap-$set_name-$pinned"
  dev_stamp=".venv/.bootstrap-dev-$pinned"
  node_stamp="node_modules/.bootstrap-$node_pinned"
  if [ ! -f "$stamp" ] && [ ! -f "$dev_stamp" ] || [ ! -f "$node_stamp" ]; then
    started=$SECONDS
    echo "bootstrap: creating .venv ($requirements) and node_modules from the pinned files (a minute or two)" >&2
    npm_log="$(mktemp)"
    if [ ! -f "$node_stamp" ]; then
      # The CDK command-line tool, in the background while pip runs; its summary line is noise.
      ( npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>"$npm_log" && touch "$node_stamp" ) &
      npm_pid=$!
    fi
    if [ ! -f "$stamp" ] && [ ! -f "$dev_stamp" ]; then
      [ -x .venv/bin/python ] || "$PY" -m venv .venv
      echo "bootstrap: [1/2] Python packages ($requirements: torch CPU build, transformers, CDK, moto...)" >&2
      # pip first, for torch and uv alone: pip finds this machine's CPU build of torch (its configured
      # indexes and wheel folders); uv reads no pip configuration and would take PyPI's CUDA build. Then uv
      # installs the rest in parallel and keeps the torch already there, which satisfies the pin.
      # No byte-code at install: pip's serial compile took half of its install (torch alone 12 of its
      # 20 s) and uv's parallel one 27 s of 33 here; Python compiles what a command imports the first time
      # it imports it, and keeps it (scripts/local.sh and scripts/test.sh let it: see there).
      # pip names every local index folder it skips; those lines say nothing about the install.
      first="$(grep -E '^(torch|uv)==' requirements-local.txt | cut -d' ' -f1 | tr '\n' ' ')"
      # shellcheck disable=SC2086
      .venv/bin/python -m pip install -q --no-compile $first -c constraints.txt 2>&1 | { grep -v "^WARNING: Location" >&2 || true; }
      # uv's own link mode: hard links from its cache where the cache is on the venv's filesystem (8.6 s for
      # the rest of the pins here, where copying them took 25.5 s), else copies.
      .venv/bin/uv pip install -q --python .venv/bin/python -r "$requirements" -c constraints.txt
      echo "bootstrap: [2/2] the hfpipe command (editable install)..." >&2
      .venv/bin/python -m pip install -q --no-compile --no-deps --no-build-isolation -e . 2>&1 | { grep -v "^WARNING: Location" >&2 || true; }
      rm -f .venv/.bootstrap-*
      touch "$stamp"
    fi
    if [ -n "${npm_pid:-}" ]; then
      echo "bootstrap: waiting for the CDK command-line tool (npm ci)..." >&2
      if ! wait "$npm_pid"; then
        cat "$npm_log" >&2
        echo "bootstrap: npm ci failed" >&2
        exit 1
      fi
    fi
    rm -f "$npm_log"
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
