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
   out too (hfpipe.local.training.container), and the job's log says so;
3. else the requirements are installed with `pip install --no-index --target <cache>/requirements/<hash>`
   from the wheels in `PIP_FIND_LINKS` (a folder of wheels the team keeps; nothing is fetched), once per hash,
   and that folder goes first on the job's PYTHONPATH, so the toolkit's own `pip install` finds them satisfied.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
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


#: A line that names another requirements file (pip's -r / --requirement, -c / --constraint); pip reads its
#: path relative to the file that names it, which the toolkit runs from the source's root.
_INCLUDE = re.compile(r"^(-r|--requirement|-c|--constraint)(?:\s*=\s*|\s+|(?=[^\s-]))(\S+)$")


def _read_member(source: Path, relative: str) -> str | None:
    """A file of the source (a folder or a sourcedir.tar.gz) by its relative path; None when it has none."""
    if source.is_dir():
        path = source / relative
        return path.read_text() if path.is_file() else None
    with tarfile.open(source, "r:gz") as tar:
        try:
            member = tar.extractfile(relative)
        except KeyError:
            return None
        return member.read().decode() if member is not None else None


def requirement_files(source: Path) -> dict[str, str]:
    """requirements.txt and every file its `-r` / `-c` lines name, by path relative to the source, as pip
    resolves them from the source's root (the toolkit's working folder); a file outside the source or
    missing is a RequirementsError naming the line."""
    files: dict[str, str] = {}
    pending = ["requirements.txt"]
    while pending:
        relative = pending.pop()
        if relative in files:
            continue
        text = _read_member(source, relative)
        if text is None and relative != "requirements.txt":
            raise RequirementsError(
                f"requirements.txt of the training source: {relative!r}, named by a -r or -c line, is not a file "
                "of the source; accepted: a requirements file inside the source, its path relative to the file "
                "that names it"
            )
        files[relative] = text or ""
        for line in _meaningful(text or ""):
            found = _INCLUDE.fullmatch(line)
            if found:
                pending.append(_inside(relative, found.group(2)))
    return files


def _inside(relative: str, named: str) -> str:
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(relative), named))
    if joined.startswith("../") or joined == ".." or posixpath.isabs(joined):
        raise RequirementsError(
            f"requirements.txt of the training source: {named!r} is outside the source; accepted: a "
            "requirements file inside it"
        )
    return joined


def requirement_lines(source: Path) -> list[str]:
    """Every requirement the source's requirements.txt asks for, its -r files' lines in place of their -r
    line (a -c line constrains and asks for nothing); what `met_here` judges."""
    files = requirement_files(source)

    def lines_of(relative: str, seen: tuple[str, ...]) -> list[str]:
        out: list[str] = []
        for line in _meaningful(files[relative]):
            found = _INCLUDE.fullmatch(line)
            if found is None:
                out.append(line)
            elif found.group(1) in {"-r", "--requirement"}:
                named = _inside(relative, found.group(2))
                out.extend(lines_of(named, (*seen, named)) if named not in seen else [])
        return out

    return lines_of("requirements.txt", ("requirements.txt",))


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
    """The source's requirement lines, blank lines and comments left out, its -r files' lines in place."""
    return requirement_lines(source)


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
    files = requirement_files(source)
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]
    root = (cache or Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "hfpipe")) / "requirements"
    folder = root / digest
    if (folder / DONE).is_file():
        return folder
    partial = root / f"{digest}.partial"
    with tempfile.TemporaryDirectory() as scratch:  # nothing written to the cache when nothing is installed
        # The source's requirement files as they lie in it, so -r and -c lines name what they name there.
        listed = _write_files(Path(scratch), files)
        if satisfied(listed):
            return None
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(partial, ignore_errors=True)  # an interrupted install starts again
        done = _pip("install", "--no-index", "--quiet", "--target", str(partial), "-r", str(listed))
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise RequirementsError(
            f"requirements.txt of the training source: {last}; local mode installs offline: install them in "
            "this environment, or set PIP_FIND_LINKS to a folder holding their wheels"
        )
    (partial / DONE).write_text("\n".join(lines) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder


def _write_files(folder: Path, files: dict[str, str]) -> Path:
    """The requirement files written under `folder` at their paths in the source; its requirements.txt."""
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder / "requirements.txt"
