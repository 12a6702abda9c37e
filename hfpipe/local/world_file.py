"""Where the local world's environments are up (`hfpipe local up`), read by the command to route to them.

One record per environment, `<world folder>/<env>.json` = {"env", "url", "region", "pid", "started"}, written
by the environment's own process once its server answers and removed when it stops; the folder is
`$HFPIPE_LOCAL_HOME`, else `.hfpipe/world` in the checkout (the current folder outside one). A record whose
process is gone or whose port no longer answers (kill -9, a crash, a reboot) is stale: readers ignore it and
the next `hfpipe local up` for that environment replaces it. One file per environment, replaced atomically, so
two environments starting at once never write the same file. Stdlib only: the command reads it without
loading local mode's engine.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

#: The world folder, when set (the tests use a temporary one).
HOME_ENV = "HFPIPE_LOCAL_HOME"
#: `HFPIPE_LOCAL=1` routes a command's AWS calls for `--env ENV` to that environment's local server.
ROUTE_ENV = "HFPIPE_LOCAL"
#: The credentials the local servers are called with (moto's account answers any).
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@dataclass(frozen=True)
class Entry:
    """One environment up on this machine: its server's URL, its region, the process serving it."""

    env: str
    url: str
    region: str
    pid: int
    started: str  # ISO 8601, UTC

    def alive(self) -> bool:
        """Its process exists and its port accepts connections (a pid alone may have been reused)."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # another user's process: alive
        parts = urlsplit(self.url)
        try:
            with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=2):
                return True
        except OSError:
            return False


def folder() -> Path:
    """The world folder: $HFPIPE_LOCAL_HOME, else .hfpipe/world in the checkout (or the current folder)."""
    explicit = os.environ.get(HOME_ENV)
    if explicit:
        return Path(explicit).expanduser()
    from hfpipe.local.checkout import LocalModeError, checkout_root

    try:
        return checkout_root() / ".hfpipe" / "world"
    except LocalModeError:
        return Path.cwd() / ".hfpipe" / "world"


def _path(env: str) -> Path:
    return folder() / f"{env}.json"


def read(env: str) -> Entry | None:
    """The record of `env`, live or stale; None when there is none (or it cannot be read)."""
    try:
        data = json.loads(_path(env).read_text())
        return Entry(**{key: data[key] for key in Entry.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def live(env: str) -> Entry | None:
    """The record of `env` when its process still serves it; None when it is missing or stale."""
    entry = read(env)
    return entry if entry is not None and entry.alive() else None


def live_entries() -> list[Entry]:
    """Every environment up now, by name."""
    if not folder().is_dir():
        return []
    found = (live(path.stem) for path in sorted(folder().glob("*.json")))
    return [entry for entry in found if entry is not None]


def write(entry: Entry) -> Path:
    """Record `entry` (replacing whatever record its environment had)."""
    path = _path(entry.env)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{entry.pid}")
    temporary.write_text(json.dumps(asdict(entry), indent=2) + "\n")
    os.replace(temporary, path)
    return path


def remove(env: str, pid: int) -> None:
    """Remove `env`'s record if process `pid` wrote it (a newer process's record stays)."""
    entry = read(env)
    if entry is not None and entry.pid == pid:
        with contextlib.suppress(FileNotFoundError):
            _path(env).unlink()
