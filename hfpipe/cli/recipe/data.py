"""`hfpipe data upload`: a local data set -> a new prefix of the environment's data bucket.

Accepted: a .json file (an array of records or JSON lines, as the Hugging Face `json` loader reads it),
a .jsonl file, a .parquet file, or a folder written by `datasets`' `save_to_disk`. The files are checked
before anything is uploaded, so a typo does not leave half a data set in the bucket; with `--recipe` the
records are also checked against what that recipe's script reads (`hfpipe.core.recipe.records`).

All or nothing: S3 has no rename and no multi-object transaction, so an upload that fails part-way (an S3
error, boto3's transfer errors, a local read error) first deletes what it wrote; if even that fails, running
the same command again completes the set. Never overwrites: a prefix that holds only files of this data set,
each of the same size, some missing, is completed by writing the missing ones only (S3 writes an object
whole or not at all, so a file of another size is not a cut-short upload but someone else's: refused, as is
a prefix holding anything else). Only what lies inside the folder is uploaded: a symbolic link is refused.
Files a `datasets` loader looks for first (dataset_dict.json, state.json, dataset_info.json) go last, so a
half-written folder is never loadable as a data set.
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hfpipe.cli import aws, terminal
from hfpipe.cli.aws import HfpipeError
from hfpipe.cli.parser import Subparsers, aws_options, env_option, with_actions
from hfpipe.core.recipe import records as core_records
from hfpipe.core.recipe.typed import Recipe

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
FILE_SUFFIXES = (".json", ".jsonl", ".parquet")


def validate_name(name: str) -> str:
    """A prefix name that is safe in S3 URIs and recipes, or an error."""
    if not _NAME.fullmatch(name):
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


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise HfpipeError(
            f"{path}: not UTF-8 text (byte {exc.start}); JSON data sets must be UTF-8: re-save the file as UTF-8"
        ) from None


def _check_json(path: Path) -> None:
    text = _read_text(path)
    try:
        doc = json.loads(text)
    except RecursionError:
        raise HfpipeError(f"{path}: JSON nested deeper than can be read; records are flat objects") from None
    except ValueError:
        _check_jsonl(path)  # the json loader also reads JSON lines in a .json file
        return
    if not isinstance(doc, list | dict):
        raise HfpipeError(f"{path}: a JSON data set must be an array of records or JSON lines")
    if isinstance(doc, list):
        # Records are objects (the `json` loader makes each one a row): [1, 2, 3] holds none.
        others = [(n, item) for n, item in enumerate(doc, start=1) if not isinstance(item, dict)]
        if others and len(others) == len(doc):
            raise HfpipeError(
                f"{path}: the data set holds no records: its {len(doc)} item(s) are not JSON objects (item 1 "
                f"is {json.dumps(doc[0])[:40]}); accepted: an array of records (objects) or JSON lines"
            )
        if others:
            number, item = others[0]
            raise HfpipeError(
                f"{path}: item {number} ({json.dumps(item)[:40]}) is not a record (a JSON object); accepted: "
                "an array of records or JSON lines"
            )
    if not doc:
        raise HfpipeError(f"{path}: the data set holds no records")


def _check_jsonl(path: Path) -> None:
    records = 0
    _read_text(path)
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except RecursionError:
                raise HfpipeError(
                    f"{path}: line {number} is nested deeper than can be read; records are flat objects"
                ) from None
            except json.JSONDecodeError as exc:
                raise HfpipeError(
                    f"{path}: line {number} is not JSON ({exc.msg}); fix it and retry"
                ) from None
            if not isinstance(record, dict):
                raise HfpipeError(
                    f"{path}: line {number} is not a JSON object (one record per line expected)"
                )
            records += 1
    if not records:
        raise HfpipeError(f"{path}: the data set holds no records")


#: A parquet file: "PAR1", the row groups, the footer (file metadata), its length (4 bytes, little
#: endian), "PAR1" (https://parquet.apache.org/docs/file-format/).
_PARQUET_MAGIC = b"PAR1"


def _check_parquet(path: Path) -> None:
    size = path.stat().st_size
    head = tail = b""
    footer_len = 0
    if size >= 12:
        with path.open("rb") as handle:
            head = handle.read(4)
            handle.seek(-8, 2)
            footer_len = int.from_bytes(handle.read(4), "little")
            tail = handle.read(4)
    if head != _PARQUET_MAGIC or tail != _PARQUET_MAGIC:
        raise HfpipeError(f"{path}: not a parquet file (no PAR1 magic bytes)")
    if not 0 < footer_len <= size - 12:
        raise HfpipeError(
            f"{path}: not a parquet file (its footer length {footer_len} does not fit a {size}-byte file)"
        )
    try:
        import pyarrow.parquet as pq
    except ImportError:  # the installed command may lack pyarrow: the layout check above is what it has
        return
    try:
        metadata = pq.read_metadata(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid/OSError for a corrupt footer
        raise HfpipeError(f"{path}: not a readable parquet file ({exc})") from None
    if metadata.num_rows == 0:
        raise HfpipeError(f"{path}: the data set holds no records")


_CHECKS = {".json": _check_json, ".jsonl": _check_jsonl, ".parquet": _check_parquet}


def collect_files(path: Path) -> list[tuple[Path, str]]:
    """(local file, key relative to the new prefix) for everything to upload, after checking the format."""
    from hfpipe.cli.paths import check_length

    check_length(str(path), "PATH")
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
    links = sorted(p for p in path.rglob("*") if p.is_symlink())
    if links:
        # A link can point anywhere on this machine; only what the folder itself holds is uploaded.
        raise HfpipeError(
            f"{path}: {links[0]} is a symbolic link; upload a folder of plain files "
            f"(copy the target in, e.g. `cp -rL`)"
        )
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".lock"))
    return [(p, p.relative_to(path).as_posix()) for p in files]


_WRITTEN_LAST = ("dataset_info.json", "state.json", "dataset_dict.json")


def _order(files: list[tuple[Path, str]]) -> list[tuple[Path, str]]:
    return sorted(files, key=lambda f: (Path(f[1]).name in _WRITTEN_LAST, f[1].count("/") == 0, f[1]))


def upload(s3: Any, bucket: str, path: Path, name: str) -> tuple[str, int]:
    """Upload to s3://bucket/name/ (new, or an interrupted upload of the same files); returns the channel URI
    and the file count."""
    import boto3.exceptions
    import botocore.exceptions

    from hfpipe.cli.aws import aws_error

    # boto3's managed transfer wraps S3's errors in its own (S3UploadFailedError is a Boto3Error).
    transfer_errors = (
        botocore.exceptions.ClientError,
        botocore.exceptions.BotoCoreError,
        boto3.exceptions.Boto3Error,
    )

    validate_name(name)
    files = _order(collect_files(path))
    prefix = f"{name}/"
    where = f"s3://{bucket}/{prefix}"
    try:
        existing: dict[str, int] = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            existing.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
    except botocore.exceptions.ClientError as exc:
        raise aws_error(exc, f"listing {where}") from None
    planned = {prefix + key: local.stat().st_size for local, key in files}
    if existing:
        foreign = sorted(set(existing) - set(planned))
        different = sorted(k for k, size in existing.items() if k in planned and planned[k] != size)
        complete = all(existing.get(k) == size for k, size in planned.items())
        if foreign or different or complete:
            raise HfpipeError(
                f"{where} already holds data; choose another --name (data sets are never overwritten)"
            )
    # Only what is missing is written: a retry completes an interrupted upload and overwrites nothing.
    todo = [(local, key) for local, key in files if prefix + key not in existing]
    written: list[str] = []
    try:
        for local, key in todo:
            s3.upload_file(str(local), bucket, prefix + key)
            written.append(prefix + key)
    except (*transfer_errors, OSError) as exc:
        failure = _upload_failure(exc, where)
        try:
            for key in written:
                s3.delete_object(Bucket=bucket, Key=key)
        except transfer_errors:
            raise HfpipeError(
                f"{failure}; {len(written)} of {len(files)} files are in {where}: run the same command again "
                "to complete the upload"
            ) from None
        left = len(existing)
        tail = (
            f"{where} holds {left} files of an earlier attempt: run the same command again to complete it"
            if left
            else f"nothing was left in {where}"
        )
        raise HfpipeError(f"{failure}; {tail}") from None
    return where, len(files)


def _upload_failure(exc: BaseException, where: str) -> Exception:
    """The one-line error of a failed upload: S3's own error where there is one."""
    import botocore.exceptions

    from hfpipe.cli.aws import aws_error

    if isinstance(exc, botocore.exceptions.ClientError | botocore.exceptions.BotoCoreError):
        return aws_error(exc, f"uploading to {where}")
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, botocore.exceptions.ClientError):
        return aws_error(cause, f"uploading to {where}")
    return HfpipeError(f"uploading to {where}: {exc}")


def check_records(files: list[tuple[Path, str]], recipe: Recipe, ref: str) -> int:
    """Check that every record holds the columns the recipe's script reads; returns the records checked.

    JSON and JSON lines are read record by record; parquet files and `save_to_disk` folders by their column
    names (from the parquet schema / dataset_info.json features), since their rows need pyarrow to read."""
    columns = core_records.expected_columns(recipe)
    checked = 0
    for local, key in files:
        suffix = local.suffix.lower()
        if suffix in (".json", ".jsonl") and Path(key).name not in _WRITTEN_LAST:
            for number, record in enumerate(_records(local), start=1):
                problem = core_records.record_problem(record, columns)
                if problem:
                    raise HfpipeError(
                        f"{local}: record {number} does not fit recipe {ref!r} ({recipe['task']}): {problem}"
                    )
                checked += 1
        elif suffix == ".parquet" or Path(key).name == "dataset_info.json":
            found = _column_names(local)
            missing = sorted(set(columns) - set(found))
            if missing:
                raise HfpipeError(
                    f"{local}: columns {missing} are missing for recipe {ref!r} ({recipe['task']}); "
                    f"accepted: columns {sorted(columns)}; found {sorted(found)}"
                )
    return checked


def _records(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return core_records.squad_rows(doc)


def _column_names(path: Path) -> list[str]:
    if path.suffix.lower() == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:  # pragma: no cover - pyarrow comes with datasets
            raise HfpipeError(f"{path}: checking a parquet file against a recipe needs pyarrow") from None
        return list(pq.read_schema(path).names)
    info = json.loads(path.read_text(encoding="utf-8"))
    features = info.get("features") if isinstance(info, dict) else None
    return list(features) if isinstance(features, dict) else []


# --- hfpipe data upload ----------------------------------------------------------------------------------


def add_to(sub: Subparsers) -> None:
    """`hfpipe data` and its action `upload`: arguments and help."""
    p = sub.add_parser("data", help="data sets in the environment's data bucket")
    p.set_defaults(command_parser=p)
    actions = with_actions(p, default=None)
    up = actions.add_parser("upload", help="upload JSON, JSONL, parquet or a save_to_disk folder")
    up.add_argument(
        "path", metavar="PATH", help="a .json, .jsonl or .parquet file, or a datasets save_to_disk folder"
    )
    env_option(up)
    up.add_argument("--name", help="prefix in the data bucket (default: <file name>-<UTC time>)")
    up.add_argument(
        "--recipe", help="check that the records hold what this recipe's training script reads first"
    )
    aws_options(up)
    up.set_defaults(func=cmd_data_upload, command_parser=up)


def cmd_data_upload(args: argparse.Namespace) -> int:
    """Upload a local data set under a new prefix of the data bucket and print its channel URI."""
    aws.validate_env_name(args.env)
    path = Path(args.path)
    name = validate_name(args.name) if args.name is not None else default_name(path)
    files = collect_files(path)  # bad input fails before credentials or the environment are looked at
    if args.recipe is not None:
        from hfpipe.cli.recipe import recipes

        check_records(files, recipes.load(args.recipe, []).resolved, args.recipe)
    clients = aws.clients_for(args)
    bucket = aws.resolve_environment(clients, args.env).data_bucket
    uri, count = upload(clients.s3, bucket, path, name)
    console = terminal.console()
    console.print(f"uploaded {count} file{'s' if count != 1 else ''} to {uri}")
    console.print(f"use it in a recipe as a channel: {json.dumps({'training': uri})}")
    return 0
