#!/usr/bin/env bash
# Lint, type check and the whole test suite (slow tests included). Creates .venv on first run, and
# .venv-serving (the inference containers' transformers) and .venv-checkov (the template scanner), which only
# the tests need.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
HFPIPE_BOOTSTRAP=dev source scripts/bootstrap.sh
# Python may keep the byte-code of what it imports in .venv: where PYTHONDONTWRITEBYTECODE is set (this
# machine and its CI set it), every process would compile torch, transformers and the CDK from source again
# (the suite took 25 min instead of 13). The install compiles nothing (scripts/bootstrap.sh).
unset PYTHONDONTWRITEBYTECODE
scripts/serving_venv.sh
scripts/checkov_venv.sh
ruff check .
ruff format --check .
mypy stacks lambda hfpipe app.py
# In parallel on the machine's cores, whole files per worker (their module fixtures, a local world or an
# engine, are set up once), in a new random order each run (pytest-randomly prints the seed; rerun an order
# with --randomly-seed=N). One worker more than cores: a quarter of the suite's time is spent waiting on
# child processes (training jobs, `hfpipe local up`), and on CI's 2 cores 3 workers took 478 s where 2 took
# more than 590 s. Arguments after these override them: -n 0 for one process, -p no:randomly.
pytest -n "$(( $(nproc) + 1 ))" --dist loadfile "$@"
