#!/usr/bin/env bash
# Builds .venv-serving: the inference containers' transformers (requirements-serving.txt) layered over .venv,
# so the inference handlers are tested under the version the endpoints run. Small: only the pinned packages
# are installed there; a .pth file appends .venv's site-packages (torch and the rest) after its own.
# Called by bootstrap.sh after .venv exists; rebuilt only when requirements-serving.txt changes.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
stamp=".venv-serving/.bootstrap-$(sha256sum requirements-serving.txt | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "bootstrap: creating .venv-serving (inference containers' transformers)" >&2
  rm -rf .venv-serving
  # The same interpreter as .venv, so .venv's compiled packages (torch) load there too.
  .venv/bin/python -m venv .venv-serving
  .venv-serving/bin/python -m pip install -q --no-deps -r requirements-serving.txt 2>&1 | { grep -v "^WARNING: Location" >&2 || true; }
  serving_site="$(.venv-serving/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  .venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$serving_site/training-venv.pth"
  touch "$stamp"
fi
