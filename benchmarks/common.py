"""Shared pieces of the benchmarks: the figure record, machine and version info, timing, result tables.

Every measurement module exposes ``measure(quick: bool) -> list[dict]``; each dict is a *figure* with the
keys in ``FIGURE_KEYS``. ``figure()`` builds one and computes the ratio, so a module never has to.
Stdlib only at import time: torch is imported lazily, only to name the GPU.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import math
import os
import platform
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FIGURE_KEYS = ("name", "value", "unit", "baseline_name", "baseline_value", "ratio", "notes")

# The versions the table records: what the figures depend on.
VERSIONED_PACKAGES = ("torch", "transformers", "peft", "bitsandbytes", "accelerate", "aws-cdk-lib")


def ratio(value: float | None, baseline: float | None) -> float | None:
    """value / baseline, or None when either is missing or the baseline is zero."""
    if value is None or baseline is None or baseline == 0:
        return None
    return value / baseline


def figure(
    name: str,
    value: float | None,
    unit: str,
    baseline_name: str,
    baseline_value: float | None,
    notes: str = "",
) -> dict[str, Any]:
    """One measured figure with its baseline (measured in the same run) and their ratio."""
    return {
        "name": name,
        "value": value,
        "unit": unit,
        "baseline_name": baseline_name,
        "baseline_value": baseline_value,
        "ratio": ratio(value, baseline_value),
        "notes": notes,
    }


def validate_figure(fig: Any, source: str) -> dict[str, Any]:
    """Check one figure returned by a measurement module; raise ValueError naming the module and the key."""
    if not isinstance(fig, dict):
        raise ValueError(
            f"{source}: a figure must be a dict with keys {list(FIGURE_KEYS)}, got {type(fig).__name__}"
        )
    missing = [k for k in FIGURE_KEYS if k not in fig]
    if missing:
        raise ValueError(
            f"{source}: figure {fig.get('name', '?')!r} lacks key(s) {missing}; every figure needs {list(FIGURE_KEYS)}"
        )
    for key in ("value", "baseline_value", "ratio"):
        v = fig[key]
        if v is not None and not isinstance(v, int | float):
            raise ValueError(f"{source}: figure {fig['name']!r} has {key}={v!r}; expected a number or None")
    return fig


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def gpu_names() -> list[str]:
    """Names of the visible CUDA devices; empty without torch or without a GPU."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def machine_info() -> dict[str, Any]:
    """CPU model, cores, memory, OS and GPUs of this machine."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "gpus": gpu_names(),
    }


def versions() -> dict[str, str | None]:
    """Python and the installed versions of the packages the figures depend on (None: not installed)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in VERSIONED_PACKAGES:
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def machine_slug(machine: dict[str, Any]) -> str:
    """A short file-name-safe name for the machine: the first GPU, else cores and memory."""
    if machine.get("gpus"):
        base = str(machine["gpus"][0])
    else:
        base = f"cpu-{machine.get('cores')}c-{round(machine.get('memory_gib') or 0)}gib"
    return re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-")


def format_number(v: Any) -> str:
    """Numbers for tables: 4 significant digits, no scientific notation for everyday magnitudes."""
    if v is None:
        return ""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if v == 0:
        return "0"
    if abs(v) >= 1e7 or abs(v) < 1e-3:
        return f"{v:.3e}"
    return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"


def markdown_table(headers: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    """A GitHub markdown table; cells are formatted with format_number and pipes escaped."""
    headers = list(headers)

    def cell(v: Any) -> str:
        return format_number(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def figures_table(figures: list[dict[str, Any]]) -> str:
    """The markdown table of figures, one row each, ratio against the baseline of the same run."""
    return markdown_table(
        ["measurement", "value", "unit", "baseline", "baseline value", "ratio", "notes"],
        (
            [
                f["name"],
                f["value"],
                f["unit"],
                f["baseline_name"],
                f["baseline_value"],
                None if f["ratio"] is None else f"{f['ratio']:.4g}x",
                f["notes"],
            ]
            for f in figures
        ),
    )


def render_markdown(report: dict[str, Any]) -> str:
    """The results file: date, machine, versions, then each measurement module's figures."""
    m = report["machine"]
    lines = [
        f"# Benchmark results {report['date']}",
        "",
        f"Command: `{report['command']}`{' (quick)' if report.get('quick') else ''}",
        "",
        "## Machine",
        "",
        f"- CPU: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB memory, {m['os']} {m['arch']}",
        f"- GPU: {', '.join(m['gpus']) if m['gpus'] else 'none'}",
        "",
        "## Versions",
        "",
        markdown_table(
            ["package", "version"], ([k, v or "not installed"] for k, v in report["versions"].items())
        ),
        "",
    ]
    for mod in report["measurements"]:
        lines += [f"## {mod['module']}", ""]
        if mod["status"] != "ok":
            lines += [f"{mod['status']}: {mod['error']}", ""]
        if mod["figures"]:
            lines += [figures_table(mod["figures"]), ""]
        lines += [f"({mod['seconds']:.1f} s)", ""]
    return "\n".join(lines)


def _rounded(value: Any) -> Any:
    """Floats to 6 significant digits: the measurements are not more precise than that, and long digit runs
    read like identifiers."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def write_report(report: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """Write <date>-<machine>.md and .json under out_dir; return both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{report['date']}-{machine_slug(report['machine'])}"
    md, js = out_dir / f"{stem}.md", out_dir / f"{stem}.json"
    md.write_text(render_markdown(report))
    js.write_text(json.dumps(_rounded(report), indent=2, sort_keys=False) + "\n")
    return md, js


def today() -> str:
    """The UTC date the results file is named after."""
    return dt.datetime.now(dt.UTC).date().isoformat()
