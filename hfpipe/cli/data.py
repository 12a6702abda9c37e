"""`hfpipe data upload`: a local data set -> a new prefix of the environment's data bucket.

Accepted: a .json file (an array of records or JSON lines, as the Hugging Face `json` loader reads it),
a .jsonl file, a .parquet file, or a folder written by `datasets`' `save_to_disk`. The files are checked
before anything is uploaded, so a typo does not leave half a data set in the bucket.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hfpipe.cli.aws import HfpipeError

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
FILE_SUFFIXES = (".json", ".jsonl", ".parquet")


def validate_name(name: str) -> str:
    """A prefix name that is safe in S3 URIs and recipes, or an error."""
    if not _NAME.match(name):
        raise HfpipeError(
            f"--name {name!r} is not a valid data set name: use lower-case letters, digits, '.', '_' or '-' "
            "(at most 100, starting with a letter or digit)"
        )
    return name


def default_name(path: Path, now: datetime | None = None) -> str:
    """<file or folder name, lower-cased and cleaned>-<UTC timestamp>: a new prefix on every upload."""
    stem = path.name
    for suffix in FILE_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    stem = re.sub(r"[^a-z0-9._-]+", "-", stem.lower()).strip("-._") or "dataset"
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return f"{stem[:80]}-{stamp}"


def _check_json(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
    except ValueError:
        _check_jsonl(path)  # the json loader also reads JSON lines in a .json file
        return
    if not isinstance(doc, list | dict):
        raise HfpipeError(f"{path}: a JSON data set must be an array of records or JSON lines")


def _check_jsonl(path: Path) -> None:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise HfpipeError(
                    f"{path}: line {number} is not JSON ({exc.msg}); fix it and retry"
                ) from None
            if not isinstance(record, dict):
                raise HfpipeError(
                    f"{path}: line {number} is not a JSON object (one record per line expected)"
                )


def _check_parquet(path: Path) -> None:
    head = tail = b""
    if path.stat().st_size >= 8:
        with path.open("rb") as handle:
            head = handle.read(4)
            handle.seek(-4, 2)
            tail = handle.read(4)
    if head != b"PAR1" or tail != b"PAR1":
        raise HfpipeError(f"{path}: not a parquet file (no PAR1 magic bytes)")


_CHECKS = {".json": _check_json, ".jsonl": _check_jsonl, ".parquet": _check_parquet}


def collect_files(path: Path) -> list[tuple[Path, str]]:
    """(local file, key relative to the new prefix) for everything to upload, after checking the format."""
    if not path.exists():
        raise HfpipeError(f"{path}: no such file or folder")
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix not in _CHECKS:
            raise HfpipeError(
                f"{path}: unsupported data file {suffix or '(no suffix)'!r}; accepted: .json, .jsonl, .parquet "
                "or a `save_to_disk` folder"
            )
        if path.stat().st_size == 0:
            raise HfpipeError(f"{path}: the file is empty")
        _CHECKS[suffix](path)
        return [(path, path.name)]
    # A save_to_disk folder: a Dataset has dataset_info.json + state.json, a DatasetDict dataset_dict.json.
    is_dataset = (path / "state.json").is_file() and (path / "dataset_info.json").is_file()
    if not is_dataset and not (path / "dataset_dict.json").is_file():
        raise HfpipeError(
            f"{path}: a folder must be written by `datasets` save_to_disk (state.json + dataset_info.json, or "
            "dataset_dict.json); upload single .json/.jsonl/.parquet files by path"
        )
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".lock"))
    return [(p, p.relative_to(path).as_posix()) for p in files]


def upload(s3: Any, bucket: str, path: Path, name: str) -> tuple[str, int]:
    """Upload to s3://bucket/name/ (which must be new); returns the channel URI and the file count."""
    import botocore.exceptions

    validate_name(name)
    files = collect_files(path)
    prefix = f"{name}/"
    try:
        existing = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1).get("KeyCount", 0)
        if existing:
            raise HfpipeError(
                f"s3://{bucket}/{prefix} already holds data; choose another --name (data sets are never overwritten)"
            )
        for local, key in files:
            s3.upload_file(str(local), bucket, prefix + key)
    except botocore.exceptions.ClientError as exc:
        from hfpipe.cli.aws import aws_error

        raise aws_error(exc, f"uploading to s3://{bucket}/{prefix}") from None
    return f"s3://{bucket}/{prefix}", len(files)
