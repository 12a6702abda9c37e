#!/usr/bin/env bash
# The prepared GPU run: install the shipped wheels, check the GPU, measure, write results.
#
#   benchmarks/gpu_run.sh [--tiny] [OUT_DIR]
#
# OUT_DIR defaults to $OUT (the device machine's result folder), else benchmarks/results/gpu-run. It receives
# results.json and results.md (rewritten after every step, so a run stopped early still returns data),
# install.json (which wheels installed) and log.txt (everything printed).
#
# Environment: GPU_WHEELS (wheel folder, default .whl, filled by scripts/gpu_wheels.sh), PYTHON (default
# python3), GPU_BUDGET_S (seconds for the whole script, default 450: the GPU machine's run must end within
# 8 minutes), GPU_SITE (the private install folder, default a new temporary one).
# --tiny: the CPU rehearsal (tiny models, the same steps and install path; what tests/benchmarks runs).
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
tiny=()
if [ "${1:-}" = "--tiny" ]; then tiny=(--tiny); shift; fi
out="${1:-${OUT:-benchmarks/results/gpu-run}}"
wheels="${GPU_WHEELS:-.whl}"
python="${PYTHON:-python3}"
budget="${GPU_BUDGET_S:-450}"
if [ -n "${GPU_SITE:-}" ]; then
    site="$GPU_SITE"
else
    tmp_site="$(mktemp -d)"
    trap 'rm -rf "$tmp_site"' EXIT
    site="$tmp_site/site"
fi
started=$(date +%s)
mkdir -p "$out" "$site"
out="$(cd "$out" && pwd)"
exec > >(tee -a "$out/log.txt") 2>&1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_NO_ADVISORY_WARNINGS=1
echo "[gpu_run] $(date -u +%FT%TZ) out=$out wheels=$wheels site=$site budget=${budget}s ${tiny[*]+"${tiny[*]}"}"

# 1. The pinned wheels into a private folder, first on PYTHONPATH: the machine's own packages stay as they are.
#    Only the wheels this Python can install (a py312-only wheel cannot install on another Python; the
#    report says which and why); exactly the pinned versions, no dependencies, no index.
"$python" benchmarks/gpu_wheels.py report "$wheels" > "$out/install.json" || exit 3
mapfile -t installable < <("$python" benchmarks/gpu_wheels.py installable "$wheels")
if [ "${#installable[@]}" -gt 0 ]; then
    "$python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-compile \
        --no-cache-dir --target "$site" "${installable[@]}" || { echo "[gpu_run] pip install failed"; exit 3; }
fi
echo "[gpu_run] installed ${#installable[@]} wheels in $(( $(date +%s) - started )) s:" \
    "$(cd "$site" && ls -d ./*.dist-info | sed 's|^\./||; s|\.dist-info$||' | tr '\n' ' ')"
base_pythonpath="${PYTHONPATH:-}"
export PYTHONPATH="$site:$root${base_pythonpath:+:$base_pythonpath}"

# If the pinned transformers stack does not import with this torch, measure with the machine's own
# transformers, peft, accelerate, tokenizers and huggingface_hub rather than not at all: only the packages the
# machine lacks stay private. results.md shows which versions ran (environment line).
check='import torch, transformers, peft, accelerate, datasets, bitsandbytes; from transformers import Trainer, BloomForCausalLM'
if [ -n "${GPU_FALLBACK:-}" ] || ! "$python" -c "$check"; then
    echo "[gpu_run] FALLBACK (${GPU_FALLBACK:+forced by GPU_FALLBACK, }see above): the machine's transformers stack"
    fallback=(bitsandbytes datasets dill multiprocess fsspec)
    rm -rf "$site" && mkdir -p "$site"
    "$python" benchmarks/gpu_wheels.py report "$wheels" "${fallback[@]}" > "$out/install.json" || exit 3
    mapfile -t installable < <("$python" benchmarks/gpu_wheels.py installable "$wheels" "${fallback[@]}")
    if [ "${#installable[@]}" -gt 0 ]; then
        PYTHONPATH="$base_pythonpath" "$python" -m pip install --quiet --disable-pip-version-check --no-index \
            --no-deps --no-compile --no-cache-dir --target "$site" "${installable[@]}" || exit 3
    fi
    "$python" -c "$check" || echo "[gpu_run] the fallback does not import either; the steps will say why"
fi

# 2. Environment check, fits, speed: benchmarks/gpu_suite.py, each step capped, within what is left.
left=$(( budget - ( $(date +%s) - started ) ))
[ "$left" -lt 30 ] && left=30
timeout --kill-after 10 "$(( left + 15 ))" "$python" -m benchmarks.gpu_suite ${tiny[@]+"${tiny[@]}"} --out "$out" \
    --budget "$left" --install-report "$out/install.json"
code=$?
echo "[gpu_run] exit $code after $(( $(date +%s) - started )) s"
exit $code
