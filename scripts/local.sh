#!/usr/bin/env bash
# The whole pipeline end to end on this machine, no AWS account: `hfpipe local` on the tiny LoRA recipe.
# Creates .venv on first run. Extra arguments go to `hfpipe local` (e.g. --recipe tiny-qa --out DIR).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
# Python may keep the byte-code of what it imports in .venv: where PYTHONDONTWRITEBYTECODE is set (this
# machine and its CI set it), every process would compile torch, transformers and the CDK from source again
# (the suite took 25 min instead of 13). The install compiles nothing (scripts/bootstrap.sh).
unset PYTHONDONTWRITEBYTECODE
if [[ " $* " != *" --recipe "* ]]; then
  set -- --recipe tiny-lora "$@"
fi
echo "hfpipe: the command is .venv/bin/hfpipe; put it on PATH in any shell with: source .venv/bin/activate" >&2
exec hfpipe local "$@"
