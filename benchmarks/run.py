"""Rerun every benchmark and write the results table: one command.

    python -m benchmarks.run                 # every measurement; writes benchmarks/results/<date>-<machine>.md/.json
    python -m benchmarks.run --quick         # fewer repeats, for a smoke check
    python -m benchmarks.run --only gpu_lora # a subset, by module name

Each measurement is a module under benchmarks/ with ``measure(quick: bool) -> list[dict]`` returning
figures (see benchmarks.common.FIGURE_KEYS): a value, the baseline measured in the same run, their ratio.
A module that is not there yet is listed as missing; one that raises is recorded as failed with its error
and the others still run.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import machine_info, today, validate_figure, versions, write_report

# Issue 7's measurements, in the order of the issue; each is benchmarks/<name>.py.
MEASUREMENTS: tuple[str, ...] = (
    "benchmarks.synth",
    "benchmarks.qa_padding",
    "benchmarks.clm_throughput",
    "benchmarks.local_mode",
    "benchmarks.gpu_lora",
)
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def run_module(name: str, quick: bool) -> dict[str, Any]:
    """Import one measurement module and call measure(quick); never raises."""
    entry: dict[str, Any] = {"module": name, "status": "ok", "error": "", "figures": [], "seconds": 0.0}
    if not _module_exists(name):
        entry.update(status="missing", error=f"module {name} is not in this checkout")
        return entry
    t0 = time.perf_counter()
    try:
        module = importlib.import_module(name)
        measure = getattr(module, "measure", None)
        if not callable(measure):
            raise TypeError(f"{name} has no measure(quick: bool) -> list[dict] function")
        figures = measure(quick)
        if not isinstance(figures, list):
            raise TypeError(
                f"{name}.measure returned {type(figures).__name__}; expected a list of figure dicts"
            )
        entry["figures"] = [validate_figure(f, name) for f in figures]
    except Exception as exc:
        traceback.print_exc()
        entry.update(status="failed", error=f"{type(exc).__name__}: {exc}")
    entry["seconds"] = time.perf_counter() - t0
    return entry


def run_all(modules: Sequence[str], quick: bool, command: str) -> dict[str, Any]:
    """Every module in order, plus the machine, versions and date of the run."""
    report: dict[str, Any] = {
        "date": today(),
        "command": command,
        "quick": quick,
        "machine": machine_info(),
        "versions": versions(),
        "measurements": [],
    }
    for name in modules:
        print(f"[benchmarks] {name} ...", file=sys.stderr, flush=True)
        entry = run_module(name, quick)
        print(
            f"[benchmarks] {name}: {entry['status']} ({entry['seconds']:.1f} s)", file=sys.stderr, flush=True
        )
        report["measurements"].append(entry)
    return report


def _qualify(name: str) -> str:
    # --only gpu_lora means benchmarks.gpu_lora; a dotted name is taken as given (tests use their own modules).
    return name if "." in name else f"benchmarks.{name}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks, write <date>-<machine>.md/.json, print the markdown. Exit 1 if any module failed."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer repeats and steps")
    p.add_argument("--only", help=f"comma-separated module names (default: all of {', '.join(MEASUREMENTS)})")
    p.add_argument(
        "--out", type=Path, default=RESULTS_DIR, help="results folder (default benchmarks/results)"
    )
    a = p.parse_args(argv)
    modules = [_qualify(m.strip()) for m in a.only.split(",") if m.strip()] if a.only else list(MEASUREMENTS)
    command = (
        "python -m benchmarks.run" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    )
    report = run_all(modules, a.quick, command)
    md, js = write_report(report, a.out)
    print(md.read_text())
    print(f"wrote {md} and {js}", file=sys.stderr)
    return 1 if any(m["status"] == "failed" for m in report["measurements"]) else 0


if __name__ == "__main__":
    sys.exit(main())
