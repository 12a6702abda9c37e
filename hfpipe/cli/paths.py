"""Files and folders the user names on the command line: read, written and looked up in one way, so a bad
path is one line naming the option, the value and what is accepted (never a traceback), and a name looked
up inside a folder never leaves it.
"""

from __future__ import annotations

import os
from pathlib import Path

from hfpipe.cli.aws import HfpipeError

#: The longest file name (one path component) and whole path Linux and macOS accept (NAME_MAX and PATH_MAX
#: of ext4/xfs/APFS): longer ones fail with ENAMETOOLONG, said here before the file system says it.
NAME_MAX = 255
PATH_MAX = 4096


def _shown(value: str) -> str:
    """The value in a message: whole when short, else its start and its length."""
    return repr(value) if len(value) <= 80 else f"{value[:40]!r}... ({len(value)} characters)"


def check_length(value: str, option: str) -> None:
    """Refuse a path whose name or whole length the file system would refuse."""
    if len(os.fsencode(value)) > PATH_MAX:
        raise HfpipeError(f"{option} {_shown(value)}: a path is at most {PATH_MAX} bytes long")
    for part in Path(value).parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise HfpipeError(
                f"{option} {_shown(value)}: the name {_shown(part)} is longer than a file name can be "
                f"(at most {NAME_MAX} bytes)"
            )


def input_file(value: str, option: str) -> Path:
    """An existing regular file (not a folder), or a one-line error."""
    check_length(value, option)
    path = Path(value)
    if path.is_dir():
        raise HfpipeError(f"{option} {_shown(value)} is a folder; accepted: a file")
    if not path.is_file():
        raise HfpipeError(f"{option} {_shown(value)}: no such file")
    return path


def read_text(value: str, option: str) -> str:
    """The text of an existing file, which must be UTF-8 (JSON's encoding, RFC 8259 section 8.1; a UTF-8
    byte order mark is dropped)."""
    path = input_file(value, option)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise HfpipeError(f"{option} {_shown(value)}: cannot read it ({err.strerror or err})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise HfpipeError(
            f"{option} {_shown(value)} is not UTF-8 text (byte {err.start} is 0x{data[err.start]:02x}); "
            "accepted: a file saved as UTF-8 (a latin-1 file converts with `iconv -f latin1 -t utf-8`)"
        ) from None


def argument_text(value: str, option: str) -> str:
    """An option's text as UTF-8 can carry it: bytes that are not UTF-8 (a latin-1 file pasted with
    `"$(cat FILE)"`) reach Python as lone surrogates, which no request can encode."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise HfpipeError(
            f"{option} is not UTF-8 text (character {err.start} is the byte "
            f"0x{ord(value[err.start]) - 0xDC00:02x}); accepted: UTF-8 text (a latin-1 file converts with "
            "`iconv -f latin1 -t utf-8`)"
        ) from None
    return value


def output_file(value: str, option: str) -> Path:
    """A file to write: not a folder, with a name the file system accepts, in a folder that exists."""
    check_length(value, option)
    path = Path(value)
    if path.is_dir():
        raise HfpipeError(f"{option} {_shown(value)} is a folder; accepted: a file name")
    if not path.parent.is_dir():
        raise HfpipeError(
            f"{option} {_shown(value)}: folder {str(path.parent)!r} does not exist; create it first"
        )
    return path
