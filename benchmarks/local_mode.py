"""Local mode end to end (`hfpipe local --recipe tiny-lora`), cold and warm: issue 7 item 4.

    .venv/bin/python benchmarks/local_mode.py [--pairs 3] [--recipe tiny-lora]

Each pair is two runs of the real command, each in a new Python process:
  cold  a fresh output folder (so no cached pipeline template) and a fresh HF_HOME / MPLCONFIGDIR
        (no datasets cache), as on a first run;
  warm  the same command again with the same folder and caches.
Not reset: the operating system's file cache and Python's bytecode of installed packages (a first run
after `scripts/bootstrap.sh` has those too). Wall time is measured around the process. The baseline of the
cold run is the training job inside it (`training_seconds` of its report.json); the baseline of the warm
run is the cold run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

from benchmarks.common import figure  # noqa: E402


def run_local(out: Path, cache: Path, recipe: str = "tiny-lora") -> tuple[float, dict[str, Any]]:
    """Wall seconds of one `hfpipe local` process and the report.json it wrote."""
    env = {
        **os.environ,
        "HF_HOME": str(cache / "hf"),
        "MPLCONFIGDIR": str(cache / "matplotlib"),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
    }
    before = {p.name for p in out.iterdir()} if out.is_dir() else set()
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "hfpipe.cli", "local", "--recipe", recipe, "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(
            f"hfpipe local --recipe {recipe} exited {proc.returncode}: {(proc.stdout + proc.stderr)[-2000:]}"
        )
    new = [p for p in out.iterdir() if p.name not in before and (p / "report.json").is_file()]
    if len(new) != 1:
        raise RuntimeError(f"expected one new execution folder with report.json in {out}, found {new}")
    return seconds, json.loads((new[0] / "report.json").read_text())


def cold_and_warm(pairs: int, recipe: str = "tiny-lora") -> dict[str, list[float]]:
    """`pairs` x (cold run, warm run): wall seconds and the training job's seconds of each."""
    if pairs < 1:
        raise ValueError(f"pairs={pairs}: need at least 1")
    out: dict[str, list[float]] = {"cold": [], "warm": [], "cold_training": [], "warm_training": []}
    for _ in range(pairs):
        with tempfile.TemporaryDirectory(prefix="hfpipe-local-bench-") as tmp:
            for kind in ("cold", "warm"):
                seconds, report = run_local(Path(tmp) / "out", Path(tmp) / "cache", recipe)
                if report.get("outcome") != "succeeded":
                    raise RuntimeError(f"{kind} run did not succeed: {report.get('failure_reason')}")
                out[kind].append(seconds)
                out[f"{kind}_training"].append(float(report["training_seconds"]))
    return out


def measure(quick: bool) -> list[dict]:
    """Issue 7 item 4: `hfpipe local --recipe tiny-lora` wall time, cold and warm; median of 3 pairs (quick: 1)."""
    pairs = 1 if quick else 3
    r = cold_and_warm(pairs)
    cold, warm = statistics.median(r["cold"]), statistics.median(r["warm"])
    note = f"median of {pairs}; new process each; "
    return [
        figure(
            "hfpipe local --recipe tiny-lora, cold",
            cold,
            "s",
            "its training job (report training_seconds)",
            statistics.median(r["cold_training"]),
            note + "fresh output folder, template cache and HF_HOME",
        ),
        figure(
            "hfpipe local --recipe tiny-lora, warm",
            warm,
            "s",
            "cold run",
            cold,
            note
            + f"second run, same folder and caches; its training job {statistics.median(r['warm_training']):.0f} s",
        ),
    ]


def main() -> None:
    """Command line; prints JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=3, help="cold + warm pairs (median reported)")
    parser.add_argument("--recipe", default="tiny-lora")
    args = parser.parse_args()
    print(json.dumps(cold_and_warm(args.pairs, args.recipe), indent=1))


if __name__ == "__main__":
    main()
