"""`sourcedir.tar.gz`: the one deterministic packing of a training source folder, and reading one back.

SageMaker's `sagemaker_submit_directory` hyperparameter names a tar.gz that the training toolkit downloads
and extracts before running the entry point. The project's own `training_code/` asset (CDK, synth time:
stacks/constructs/source_asset.py) and a recipe's own source (`hfpipe start` / `hfpipe local`:
hfpipe/cli/recipe/sources.py) are packed by `pack` here: sorted entries, fixed owner and mtime, a file's mode as git
records it (executable or not), and a gzip header without name or time, so the same files always give the
same bytes and the same sha256.

What is packed is what the user meant: regular files inside the folder, every one resolved inside it after
every link (a link out, a dangling link or a link loop is refused, naming it); pipes, sockets and devices are
named and never opened; `.git` and caches are skipped, files named like secrets (`SECRET_PATTERNS`) are
skipped unless the recipe lists them, the recipe's `exclude` patterns are skipped, and the archive is bounded
(`MAX_ARCHIVE_BYTES`), which also bounds what the Plan Lambda reads back to check a hash. Every file or folder
left out is in `Packed.skipped` with the reason, for the command to name (hfpipe.cli.recipe.sources.pack_source).
Stdlib only (the Plan Lambda reads archives with `members`).
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import io
import os
import stat
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
#: A worktree's or a submodule's `.git` is a file naming the repository's folder on this machine.
GIT_FILE = "git's own file"
SECRET = "looks like a secret; list it in training.source.include"
EXCLUDED = "matches training.source.exclude"
#: Names never packed unless the recipe lists them (training.source.include): files that usually hold a
#: credential. The list follows the file-name signatures of the secret scanners that publish theirs, gitrob's
#: (github.com/michenriksen/gitrob, core/signatures.go) as carried on by shhgit (github.com/eth0izzle/shhgit,
#: app/rules/ and config.yaml), cut to what holds a credential rather than a history or a database: key and
#: certificate stores, cloud and package-registry credentials, git's and the shell's credential files.
SECRET_PATTERNS = (
    # environment files (dotenv, direnv)
    ".env",
    ".env.*",
    "*.env",
    ".envrc",
    # private keys, key stores, certificates with keys
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.pkcs12",
    "*.jks",
    "*.keystore",
    "*.ppk",
    "*.asc",
    "*.gpg",
    "*.ovpn",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*_rsa",
    "*_dsa",
    "*_ecdsa",
    "*_ed25519",
    "otr.private_key",
    # credentials of tools and services
    "credentials",
    "credentials.json",
    "credentials.xml",
    "*credentials.json",
    "*service-account*.json",
    "*service_account*.json",
    "client_secret*.json",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".pypirc",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".git-credentials",
    ".dockercfg",
    ".s3cfg",
    ".htpasswd",
    "terraform.tfvars",
    "*.tfvars",
    "secrets.y*ml",
    "master.key",
    "*.kdbx",
    "*.keychain",
)
#: Secrets named by a path inside their tool's folder (the name alone is too common to refuse).
SECRET_PATHS = (".docker/config.json", ".kube/config", ".ssh/*", ".gnupg/*", ".config/gcloud/*")
FILE_MODE = 0o644
EXECUTABLE_MODE = 0o755
#: What is not a regular file, by stat's test: named and left out, never opened (a pipe would block the read).
NOT_REGULAR = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)
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
    sorted; a folder's path ends in '/'. `sizes`: each packed file's size in bytes, in `files`' order."""

    data: bytes
    sha256: str
    files: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...] = field(default=())
    sizes: tuple[int, ...] = field(default=())

    @property
    def skipped_secrets(self) -> tuple[str, ...]:
        """The files left out because their names look like secrets'."""
        return tuple(path for path, why in self.skipped if why == SECRET)

    def summary(self, largest: int = 3) -> str:
        """What is packed, in one line: the file count, the size unpacked and packed, the largest files."""
        total = sum(self.sizes)
        top = sorted(zip(self.sizes, self.files, strict=True), key=lambda p: (-p[0], p[1]))[:largest]
        biggest = ", ".join(f"{name} ({human(size)})" for size, name in top)
        files = f"{len(self.files)} file{'s' if len(self.files) != 1 else ''}"
        return f"{files}, {human(total)} ({human(len(self.data))} packed); largest: {biggest or 'none'}"


def human(size: int) -> str:
    """A byte count as people read it (B, KiB, MiB)."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def is_secret(relative: str) -> bool:
    """Whether a file's name (or its path under its tool's folder) looks like a secret's."""
    name = Path(relative).name
    return any(fnmatch.fnmatch(name, p) for p in SECRET_PATTERNS) or any(
        _tail(relative, p) for p in SECRET_PATHS
    )


def _tail(relative: str, pattern: str) -> bool:
    """`pattern` matches the path's last parts (`.ssh/*` matches `home/.ssh/config`)."""
    depth = pattern.count("/") + 1
    return fnmatch.fnmatch("/".join(relative.split("/")[-depth:]), pattern)


def excluded(relative: str, patterns: Iterable[str]) -> bool:
    """Whether a path matches one of the recipe's exclude patterns: a glob on the whole relative path or on
    its name (`*.csv`, `data/raw/*`), a folder as `name/` or `path/to/name/`."""
    name = relative.rstrip("/").rsplit("/", 1)[-1]
    for pattern in patterns:
        bare = pattern.rstrip("/")
        if pattern.endswith("/") and not relative.endswith("/"):
            continue  # a folder pattern matches folders only
        if fnmatch.fnmatch(relative.rstrip("/"), bare) or ("/" not in bare and fnmatch.fnmatch(name, bare)):
            return True
    return False


def contained(container: Path, relative: str, field_name: str, what: str) -> Path:
    """`container/relative` resolved after every link, refused (naming the link) when it leaves `container`:
    a recipe's `dir` inside the recipe's folder, a git `path` inside the clone."""
    base = container.resolve()
    here = container
    for part in Path(relative).parts:
        here = here / part
        if here.is_symlink():
            target = here.resolve()
            if not target.is_relative_to(base):
                raise SourceError(
                    f"{field_name}: {relative!r}: {here.relative_to(container).as_posix()!r} is a symlink to "
                    f"{str(target)!r}, outside {what}; accepted: a folder inside it, with no link out at any "
                    "level"
                )
    return (container / relative).resolve()


@dataclass
class _Walk:
    """One walk of a source folder: what it packs ((relative, real path, mode, size)) and leaves out."""

    root: Path  # the folder, resolved: every packed file resolves inside it
    include: frozenset[str]
    exclude: tuple[str, ...]
    entries: list[tuple[str, Path, int, int]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def folder_kept(self, relative: str, name: str, path: Path) -> bool:
        """Whether to go into a folder: not a cache or git's, not excluded; a link to one is refused."""
        if name in EXCLUDED_DIRS:
            self.skipped.append((relative + "/", EXCLUDED_DIRS[name]))
            return False
        if excluded(relative + "/", self.exclude):
            self.skipped.append((relative + "/", EXCLUDED))
            return False
        if path.is_symlink():
            target = self._target(relative, path)
            raise SourceError(
                f"source {relative!r}: a symlink to the folder {str(target)!r}; accepted: files, or links "
                "to files inside the source folder (list the folder's files, or copy it in)"
            )
        return True

    def add(self, relative: str, path: Path) -> None:
        """One file: packed, or left out with why."""
        if path.name.endswith(EXCLUDED_SUFFIXES):
            self.skipped.append((relative, COMPILED))
            return
        if path.name == ".git":
            self.skipped.append((relative, GIT_FILE))
            return
        if excluded(relative, self.exclude):
            self.skipped.append((relative, EXCLUDED))
            return
        real = self._target(relative, path) if path.is_symlink() else path
        info = real.stat()
        if stat.S_ISDIR(info.st_mode):  # a link to a folder listed among files by os.walk
            self.folder_kept(relative, path.name, path)
        kind = next((what for test, what in NOT_REGULAR if test(info.st_mode)), None)
        if kind is not None:
            self.skipped.append((relative, f"{kind}: only regular files are packed"))
            return
        if is_secret(relative) and relative not in self.include:
            self.skipped.append((relative, SECRET))
            return
        mode = EXECUTABLE_MODE if info.st_mode & stat.S_IXUSR else FILE_MODE
        self.entries.append((relative, real, mode, info.st_size))

    def _target(self, relative: str, link: Path) -> Path:
        """The file a symlink names after every link, refused when it loops, dangles or leaves the root."""
        try:
            target = link.resolve(strict=True)
        except RuntimeError:  # Python 3.11-3.12: a loop
            raise SourceError(
                f"source {relative!r}: a symlink loop; accepted: links that end at a file"
            ) from None
        except FileNotFoundError:
            raise SourceError(
                f"source {relative!r}: a symlink to {os.readlink(link)!r}, which does not exist; accepted: "
                "links to files inside the source folder"
            ) from None
        except OSError as err:  # ELOOP from the system (3.13 raises it as OSError)
            raise SourceError(
                f"source {relative!r}: {err.strerror}; accepted: links that end at a file"
            ) from None
        if not target.is_relative_to(self.root):
            raise SourceError(
                f"source {relative!r}: a symlink to {str(target)!r}, outside the source folder "
                f"{str(self.root)!r}; accepted: files inside the folder (copy the file in instead)"
            )
        return target


def _walk(source: Path, walk: _Walk) -> None:
    """Every file under `source`, top down and sorted (links to folders are not followed: refused)."""

    def unreadable(err: OSError) -> None:
        raise SourceError(
            f"source {str(err.filename)!r}: cannot be read ({err.strerror}); accepted: a readable folder"
        )

    for folder, dirs, files in os.walk(source, followlinks=False, onerror=unreadable):
        here = Path(folder)
        relative = here.relative_to(source)
        kept = [d for d in sorted(dirs) if walk.folder_kept((relative / d).as_posix(), d, here / d)]
        dirs[:] = kept
        for name in sorted(files):
            walk.add((relative / name).as_posix(), here / name)


def pack(
    source: Path,
    *,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    max_bytes: int = MAX_ARCHIVE_BYTES,
) -> Packed:
    """The deterministic gzip-compressed tar of `source`: same files, contents and modes, same bytes.

    `include`: relative paths of files whose names look like secrets that are to be packed all the same;
    `exclude`: patterns of files and folders never packed (`excluded`)."""
    if not source.is_dir():
        raise MissingSource(
            f"sourcedir: {str(source)!r} is not a directory; accepted: the training code folder"
        )
    walk = _Walk(source.resolve(), frozenset(include), tuple(exclude))
    _walk(source, walk)
    entries = sorted(walk.entries)
    if sum(size for *_, size in entries) > max_bytes:
        raise SourceError(_too_big(source, max_bytes, entries))
    data = _archive(entries)
    if len(data) > max_bytes:
        raise SourceError(_too_big(source, max_bytes, entries))
    return Packed(
        data,
        hashlib.sha256(data).hexdigest(),
        tuple(r for r, *_ in entries),
        tuple(sorted(walk.skipped)),
        tuple(size for *_, size in entries),
    )


def _archive(entries: list[tuple[str, Path, int, int]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for relative, real, mode, _ in entries:
            data = real.read_bytes()
            info = tarfile.TarInfo(relative)
            info.size = len(data)
            # The SDK's archive keeps each file's mode (tarfile's add); git records only whether a file is
            # executable, so that is what is kept: the hash does not depend on this machine's umask.
            info.mode = mode
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    compressed = io.BytesIO()
    # filename="" and mtime=0 keep the build's path and time out of the gzip header.
    with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return compressed.getvalue()


def _too_big(source: Path, max_bytes: int, entries: list[tuple[str, Path, int, int]]) -> str:
    by_top: dict[str, int] = {}
    for relative, *_, size in entries:
        top = relative.split("/", 1)[0] + ("/" if "/" in relative else "")
        by_top[top] = by_top.get(top, 0) + size
    largest = sorted(by_top.items(), key=lambda item: -item[1])[:3]
    named = ", ".join(f"{name} ({human(size)})" for name, size in largest)
    return (
        f"source {str(source)!r}: more than {human(max_bytes)} (largest: {named}); accepted: "
        "code of at most that size (list what is not code in training.source.exclude; data goes in "
        "training.channels, models are downloaded by the script)"
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
