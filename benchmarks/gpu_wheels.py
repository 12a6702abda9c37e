"""The wheel set of the GPU run: the pins of benchmarks/gpu_wheels.txt, matched against a folder of wheels.

Standard library plus `packaging` (pip's own dependency, present wherever pip is), so it runs before anything
is installed:

    python benchmarks/gpu_wheels.py check .whl            # every pin downloaded, total under the limit
    python benchmarks/gpu_wheels.py installable .whl      # the files this Python can install (one a line)
    python benchmarks/gpu_wheels.py report .whl           # which pins this Python can install, and why not
    python benchmarks/gpu_wheels.py installable .whl bitsandbytes datasets   # only these pins

scripts/gpu_wheels.sh downloads the set and runs `check`; benchmarks/gpu_run.sh installs `installable`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

PINS = Path(__file__).resolve().parent / "gpu_wheels.txt"
# The run tool carries at most 64 MiB of ignored paths, and the working tree (~1 MiB) travels with them.
MAX_MIB = 60.0


def normalize(name: str) -> str:
    """PEP 503 name normalization (wheel file names use underscores, pins may use dashes)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path = PINS) -> dict[str, str]:
    """{normalized name: version} from `name==version` lines; anything else is an error naming the line."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)", line)
        if not match:
            raise ValueError(f"{path}:{number}: {line!r} is not name==version")
        name = normalize(match.group(1))
        if name in pins:
            raise ValueError(f"{path}:{number}: {match.group(1)} is pinned twice")
        pins[name] = match.group(2)
    return pins


def _packaging() -> Any:
    """`packaging`, or the copy pip vendors when it is not installed on its own."""
    import importlib

    for base in ("packaging", "pip._vendor.packaging"):
        try:
            importlib.import_module(f"{base}.tags")
            importlib.import_module(f"{base}.utils")
            return importlib.import_module(base)
        except ImportError:
            continue
    raise ImportError("neither packaging nor pip's vendored copy is importable")


def wheel_files(folder: Path, pins: dict[str, str]) -> dict[str, Path]:
    """{normalized name: wheel file} for the pinned name and version (other files in the folder are ignored)."""
    parse_wheel_filename = _packaging().utils.parse_wheel_filename

    found: dict[str, Path] = {}
    for whl in sorted(folder.glob("*.whl")):
        name, version, _, _ = parse_wheel_filename(whl.name)
        key = normalize(str(name))
        if pins.get(key) == str(version):
            found[key] = whl
    return found


def compatible(whl: Path) -> bool:
    """Whether this interpreter and platform can install the wheel (pip's own tag rule)."""
    packaging = _packaging()
    supported = set(packaging.tags.sys_tags())
    return any(tag in supported for tag in packaging.utils.parse_wheel_filename(whl.name)[3])


def report(folder: Path, pins: dict[str, str] | None = None) -> dict[str, Any]:
    """Per pin: its file, size, and whether this Python can install it (with the reason when not)."""
    pins = read_pins() if pins is None else pins
    files = wheel_files(folder, pins)
    rows = []
    for name, version in pins.items():
        whl = files.get(name)
        row: dict[str, Any] = {"name": name, "version": version, "file": whl.name if whl else None}
        if whl is None:
            row.update(installable=False, reason=f"no {name}=={version} wheel in {folder}")
        else:
            row["bytes"] = whl.stat().st_size
            ok = compatible(whl)
            row["installable"] = ok
            if not ok:
                tags = "-".join(whl.name[:-4].split("-")[-3:])
                row["reason"] = (
                    f"wheel tags {tags} do not include this Python ({sys.implementation.cache_tag})"
                )
        rows.append(row)
    total = sum(r.get("bytes", 0) for r in rows)
    return {"folder": str(folder), "python": sys.version.split()[0], "wheels": rows, "total_bytes": total}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("check", "installable", "report"):
        print(__doc__, file=sys.stderr)
        return 2
    command, folder, only = argv[0], Path(argv[1]), [normalize(n) for n in argv[2:]]
    pins = read_pins()
    unknown = sorted(set(only) - set(pins))
    if unknown:
        print(f"gpu_wheels: not pinned in {PINS.name}: {', '.join(unknown)}", file=sys.stderr)
        return 2
    rep = report(folder, {n: v for n, v in pins.items() if not only or n in only})
    if command == "installable":
        for row in rep["wheels"]:
            if row["installable"]:
                print(folder / row["file"])
        return 0
    if command == "report":
        print(json.dumps(rep, indent=1))
        return 0
    missing = [f"{r['name']}=={r['version']}" for r in rep["wheels"] if r["file"] is None]
    for row in rep["wheels"]:
        if row["file"]:
            print(f"{row['bytes'] / 2**20:8.2f} MiB  {row['file']}")
    total = rep["total_bytes"]
    print(
        f"{total / 2**20:8.2f} MiB  total ({total} bytes, {len(rep['wheels'])} wheels), limit {MAX_MIB:g} MiB"
    )
    if missing:
        print(f"gpu_wheels: not in {folder}: {', '.join(missing)}", file=sys.stderr)
        return 1
    if total > MAX_MIB * 2**20:
        print(f"gpu_wheels: {total / 2**20:.2f} MiB is over the {MAX_MIB:g} MiB limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
