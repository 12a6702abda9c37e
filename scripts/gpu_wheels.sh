#!/usr/bin/env bash
# Download the wheels benchmarks/gpu_run.sh installs on the GPU machine: exactly the pins of
# benchmarks/gpu_wheels.txt, for CPython 3.12 on manylinux x86-64, without dependencies.
#
#   scripts/gpu_wheels.sh            # into .whl/ (ignored by git; the run tool carries it: carry [".whl"])
#   scripts/gpu_wheels.sh DEST       # into DEST
#
# Then checks that every pin is there and that the set stays under 60 MiB (benchmarks/gpu_wheels.py check):
# the run tool carries at most 64 MiB, the working tree included.
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:-.whl}"
python="${PYTHON:-}"
if [ -z "$python" ]; then
    if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
mkdir -p "$dest"
# pip matches manylinux tags exactly: name every one the pinned wheels use (bitsandbytes: manylinux_2_24;
# tokenizers: manylinux_2_17 / manylinux2014).
"$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --dest "$dest" -r benchmarks/gpu_wheels.txt
"$python" benchmarks/gpu_wheels.py check "$dest"
