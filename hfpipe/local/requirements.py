"""A training source's `requirements.txt` in local mode: what the sagemaker-training toolkit installs before the
script, given a package folder of its own here, cached by the requirements' hash, and never downloaded.

On SageMaker the toolkit runs `pip install -r requirements.txt` inside the container. Here the container is
this machine's environment, which must not change under the project, and local mode is offline: so

1. empty (blank lines and comments only): nothing;
2. already satisfied by this environment: nothing. `met_here` answers for lines of the form
   `name[specifier][; marker]` from the installed distributions' metadata (importlib.metadata, packaging's
   specifiers and markers) in this process, without a pip process; for anything else (options, URLs,
   extras) `pip install --dry-run --no-index --report`, which resolves against what is installed, answers.
   When `met_here` says so in the job itself, the toolkit's own `pip install -r requirements.txt` is left
   out too (hfpipe.local.container), and the job's log says so;
3. else the requirements are installed with `pip install --no-index --target <cache>/requirements/<hash>`
   from the wheels in `PIP_FIND_LINKS` (a folder of wheels the team keeps; nothing is fetched), once per hash,
   and that folder goes first on the job's PYTHONPATH, so the toolkit's own `pip install` finds them satisfied.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

#: Where the per-hash package folders are kept (HFPIPE_CACHE moves it, as for git sources).
CACHE_ENV = "HFPIPE_CACHE"
DONE = ".complete"


class RequirementsError(RuntimeError):
    """The source's requirements cannot be installed here, offline; the message says what to do."""


def read_requirements(source: Path) -> str:
    """The text of the source's top-level requirements.txt (a folder or a sourcedir.tar.gz); '' without one."""
    if source.is_dir():
        path = source / "requirements.txt"
        return path.read_text() if path.is_file() else ""
    with tarfile.open(source, "r:gz") as tar:
        try:
            member = tar.extractfile("requirements.txt")
        except KeyError:
            return ""
        return member.read().decode() if member is not None else ""


def _meaningful(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=env, check=False
    )


def met_here(lines: list[str]) -> bool | None:
    """Whether the distributions installed here meet every requirement line: True, False, or None when a
    line is more than `name[specifier][; marker]` (an option, a URL, extras, a trailing comment), which only
    pip can judge. A line whose marker does not hold here is met (pip skips it too)."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    for line in lines:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            return None
        if requirement.url or requirement.extras:
            return None
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        try:
            version = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            return False
        if not requirement.specifier.contains(version, prereleases=True):
            return False
    return True


def meaningful_lines(source: Path) -> list[str]:
    """The source's requirement lines, blank lines and comments left out."""
    return _meaningful(read_requirements(source))


def satisfied(requirements_file: Path) -> bool:
    """Whether this environment already holds every requirement (nothing to install; nothing fetched)."""
    done = _pip(
        "install", "--dry-run", "--no-index", "--quiet", "--report", "-", "-r", str(requirements_file)
    )
    if done.returncode != 0:
        return False
    return not json.loads(done.stdout or "{}").get("install")


def package_folder(source: Path, cache: Path | None = None) -> Path | None:
    """The folder to put first on the job's PYTHONPATH, or None when nothing needs installing."""
    lines = meaningful_lines(source)
    if not lines or met_here(lines):
        return None
    text = "\n".join(lines) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    root = (cache or Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "hfpipe")) / "requirements"
    folder = root / digest
    if (folder / DONE).is_file():
        return folder
    with tempfile.TemporaryDirectory() as scratch:  # nothing written to the cache when nothing is installed
        listed = Path(scratch) / "requirements.txt"
        listed.write_text(text)
        if satisfied(listed):
            return None
    root.mkdir(parents=True, exist_ok=True)
    listed = root / f"{digest}.txt"
    listed.write_text(text)
    partial = root / f"{digest}.partial"
    shutil.rmtree(partial, ignore_errors=True)  # an interrupted install starts again
    done = _pip("install", "--no-index", "--quiet", "--target", str(partial), "-r", str(listed))
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise RequirementsError(
            f"requirements.txt of the training source: {last}; local mode installs offline: install them in "
            "this environment, or set PIP_FIND_LINKS to a folder holding their wheels"
        )
    (partial / DONE).write_text(text)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder
