"""`sourcedir.tar.gz`: the one deterministic packing of a training source folder, and reading one back.

SageMaker's `sagemaker_submit_directory` hyperparameter names a tar.gz that the training toolkit downloads
and extracts before running the entry point. The project's own `training_code/` asset (CDK, synth time:
stacks/constructs/source_asset.py) and a recipe's own source (`hfpipe start` / `hfpipe local`:
hfpipe/cli/sources.py) are packed by `pack` here: sorted entries, fixed owner, mode and mtime, and a gzip
header without name or time, so the same files always give the same bytes and the same sha256.

What is packed is only what is inside the folder: a symlink that points outside it is refused, `.git` and
caches are skipped, secrets (`.env`, keys, credentials) are skipped unless the recipe lists them, and the
archive is bounded (`MAX_ARCHIVE_BYTES`), which also bounds what the Plan Lambda reads back to check a hash.
Every file or folder left out is in `Packed.skipped` with the reason, for the command to name
(hfpipe.cli.sources.pack_source). Stdlib only (the Plan Lambda reads archives with `members`).
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import io
import os
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ARCHIVE_NAME = "sourcedir.tar.gz"
#: Folders never packed, with why (what the command says of each it leaves out).
EXCLUDED_DIRS = {
    "__pycache__": "Python's bytecode cache",
    ".pytest_cache": "pytest's cache",
    ".mypy_cache": "mypy's cache",
    ".ipynb_checkpoints": "Jupyter's checkpoints",
    ".git": "git's own folder",
}
EXCLUDED_SUFFIXES = (".pyc", ".pyo")
COMPILED = "compiled Python"
SECRET = "looks like a secret; list it in training.source.include"
#: Names never packed unless the recipe lists them (training.source.include): what usually holds a secret.
SECRET_PATTERNS = (
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_ed25519*",
    ".netrc",
    ".pypirc",
    "credentials",
)
FILE_MODE = 0o644
#: The largest archive packed or accepted (compressed bytes, and its files' total size unpacked): a
#: training source is code, not data (data goes in channels); the Plan Lambda reads it whole to hash it.
MAX_ARCHIVE_BYTES = 64 * 1024 * 1024


class SourceError(ValueError):
    """A source folder cannot be packed as it is; the message names the path and what is accepted."""


class MissingSource(SourceError, FileNotFoundError):
    """The source folder does not exist."""


@dataclass(frozen=True)
class Packed:
    """An archive's bytes, their sha256 (hex), the packed paths, and what was left out: (relative path, why),
    sorted; a folder's path ends in '/'."""

    data: bytes
    sha256: str
    files: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...] = field(default=())

    @property
    def skipped_secrets(self) -> tuple[str, ...]:
        """The files left out because their names look like secrets'."""
        return tuple(path for path, why in self.skipped if why == SECRET)


def is_secret(relative: str) -> bool:
    """Whether a file's name looks like a secret's (SECRET_PATTERNS)."""
    return any(fnmatch.fnmatch(Path(relative).name, p) for p in SECRET_PATTERNS)


def _walk(source: Path, skipped: list[tuple[str, str]]) -> list[Path]:
    """Every file under `source` (symlinks not followed); the excluded folders and suffixes are added to
    `skipped` with why, a folder once (not its contents)."""
    found = []
    for folder, dirs, files in os.walk(source, followlinks=False):
        here = Path(folder)
        relative = here.relative_to(source)
        skipped.extend(
            ((relative / d).as_posix() + "/", EXCLUDED_DIRS[d]) for d in dirs if d in EXCLUDED_DIRS
        )
        skipped.extend(((relative / n).as_posix(), COMPILED) for n in files if n.endswith(EXCLUDED_SUFFIXES))
        dirs[:] = [d for d in dirs if d not in EXCLUDED_DIRS]
        for name in dirs:
            if (here / name).is_symlink():
                found.append(here / name)  # a link to a folder: checked (and refused) by _checked
        found.extend(here / n for n in files if not n.endswith(EXCLUDED_SUFFIXES))
    return found


def _checked(path: Path, source: Path) -> Path:
    """`path`, or the file its symlink names when that stays inside `source`; refused otherwise."""
    relative = path.relative_to(source).as_posix()
    if not path.is_symlink():
        return path
    target = path.resolve()
    if not target.is_relative_to(source.resolve()):
        raise SourceError(
            f"source {relative!r}: a symlink to {str(target)!r}, outside the source folder; accepted: files "
            "inside the folder (copy the file in instead)"
        )
    if not target.is_file():
        raise SourceError(f"source {relative!r}: a symlink to a folder; accepted: files, or links to files")
    return target


def pack(source: Path, *, include: Iterable[str] = (), max_bytes: int = MAX_ARCHIVE_BYTES) -> Packed:
    """The deterministic gzip-compressed tar of `source`: same files and contents, same bytes.

    `include`: relative paths of files whose names look like secrets that are to be packed all the same.
    """
    if not source.is_dir():
        raise MissingSource(
            f"sourcedir: {str(source)!r} is not a directory; accepted: the training code folder"
        )
    wanted = set(include)
    entries, total = [], 0
    skipped: list[tuple[str, str]] = []
    for path in _walk(source, skipped):
        relative = path.relative_to(source).as_posix()
        real = _checked(path, source)
        if is_secret(relative) and relative not in wanted:
            skipped.append((relative, SECRET))
            continue
        total += real.stat().st_size
        if total > max_bytes:
            raise SourceError(_too_big(source, max_bytes))
        entries.append((relative, real))
    entries.sort()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for relative, real in entries:
            data = real.read_bytes()
            info = tarfile.TarInfo(relative)
            info.size = len(data)
            info.mode = FILE_MODE
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    compressed = io.BytesIO()
    # filename="" and mtime=0 keep the build's path and time out of the gzip header.
    with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    data = compressed.getvalue()
    if len(data) > max_bytes:
        raise SourceError(_too_big(source, max_bytes))
    return Packed(
        data, hashlib.sha256(data).hexdigest(), tuple(r for r, _ in entries), tuple(sorted(skipped))
    )


def _too_big(source: Path, max_bytes: int) -> str:
    return (
        f"source {str(source)!r}: more than {max_bytes // (1024 * 1024)} MiB; accepted: code of at most that "
        "size (data goes in training.channels, models are downloaded by the script)"
    )


def members(data: bytes) -> list[str]:
    """The regular files' names in an archive's bytes (the Plan checks the entry point is one of them)."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return [m.name for m in tar.getmembers() if m.isfile()]


def read_member(data: bytes, name: str) -> bytes:
    """One regular file's bytes from an archive's bytes (the Plan reads the entry point to check its parser)."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        member = tar.getmember(name)
        extracted = tar.extractfile(member) if member.isfile() else None
        if extracted is None:
            raise KeyError(name)
        return extracted.read()
