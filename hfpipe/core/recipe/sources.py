"""A recipe's own training source, as the Plan takes it: an s3 sourcedir.tar.gz in this environment's
artifacts bucket, under sources/, that exists, has the sha256 the input names and holds the entry point.

`hfpipe start` (hfpipe/cli/recipe/sources.py) packs a `dir` or `git` source with hfpipe.core.recipe.sourcedir.pack and
uploads it to `contract.source_key(sha256)`; the Plan Lambda reads only that prefix (its IAM policy), so a
source can be neither another bucket's object nor one edited after the hash was taken. Stdlib only: the
S3 client is given (boto3's in the Lambda and the command, moto's in tests and local mode).
"""

from __future__ import annotations

import hashlib
import tarfile
from typing import Any

from hfpipe import contract
from hfpipe.core.recipe import acceptance, sourcedir
from hfpipe.core.recipe.typed import Recipe, Training
from hfpipe.core.validate import RecipeError, s3_uri

FIELD = "recipe.training.source"
HYPERPARAMETERS = "recipe.training.hyperparameters"


def not_checked(entry_point: str, reason: str) -> str:
    """Why an own script's hyperparameters were not checked (the dry run's notes and the command say it)."""
    return (
        f"training.hyperparameters were not checked against {entry_point}'s parser: {reason}; they are "
        "passed as the SDK passes them (--name value)"
    )


def arguments_note(training: Training, data: bytes, notes: list[str] | None = None) -> str | None:
    """The recipe's hyperparameters checked against the parser of the entry point in the archive `data`
    (hfpipe.core.recipe.acceptance.own_script_arguments; a RecipeError when it refuses one; what it would misread
    added to `notes`); the note saying why they were not checked where its parser cannot be read without
    running it, None when they were."""
    entry_point = training["entry_point"]
    try:
        text = sourcedir.read_member(data, entry_point).decode("utf-8")
    except UnicodeDecodeError:
        return not_checked(entry_point, "it is not UTF-8 text")
    reason = acceptance.own_script_arguments(
        entry_point, text, training["hyperparameters"], HYPERPARAMETERS, notes
    )
    return None if reason is None else not_checked(entry_point, reason)


def _missing(exc: Exception) -> bool:
    code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
    return code in {"404", "NoSuchKey", "NotFound"}


def source_uri(recipe: Recipe, default_uri: str) -> str:
    """The sourcedir URI the training job runs: the project's (`default_uri`) or the recipe's, which
    `hfpipe.core.run.plan.accept` checked (`read_checked`)."""
    src = recipe["training"].get("source")
    return default_uri if src is None else str(src["s3"])


def read_checked(training: Training, artifacts_bucket: str, s3: Any) -> bytes:
    """The bytes of an s3 source, refused when it is a dir or git source (the command packs those), outside
    this environment's sources, missing, over the bound, with another sha256 or without the entry point (its
    script's arguments are `arguments_note`'s, which `hfpipe.core.run.plan.accept` runs on these bytes)."""
    t = training
    assert t["source"] is not None  # the Plan's call: a recipe with its own source
    if "s3" not in t["source"]:
        kind = "dir" if "dir" in t["source"] else "git"
        raise RecipeError(
            f"{FIELD}.{kind}: a {kind} source is packed and uploaded by `hfpipe start` (or `hfpipe local`); "
            "accepted in the execution input: 's3' with 'sha256'"
        )
    uri, expected = t["source"]["s3"], t["source"]["sha256"]
    bucket, key = s3_uri(uri, f"{FIELD}.s3")
    root = f"s3://{artifacts_bucket}/{contract.ARTIFACTS_SOURCES_PREFIX}"
    if bucket != artifacts_bucket or not key.startswith(contract.ARTIFACTS_SOURCES_PREFIX):
        raise RecipeError(
            f"{FIELD}.s3: {uri!r} is outside this environment's sources; accepted: a URI under {root} "
            "(`hfpipe start` uploads a dir or git source there)"
        )
    data = _read(s3, bucket, key, uri)
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise RecipeError(
            f"{FIELD}.sha256: {uri!r} has sha256 {actual}, not {expected}; accepted: the hash of the "
            "object as uploaded (pack and upload it again with `hfpipe start`)"
        )
    try:
        names = sourcedir.members(data)
    except (OSError, EOFError, tarfile.TarError) as err:  # gzip's BadGzipFile is an OSError
        raise RecipeError(
            f"{FIELD}.s3: {uri!r} is not a readable tar.gz ({err}); accepted: a sourcedir.tar.gz"
        ) from None
    if t["entry_point"] not in names:
        raise RecipeError(
            f"recipe.training.entry_point: {t['entry_point']!r} is not a file in {uri}; accepted: one of "
            f"{sorted(n for n in names if n.endswith('.py'))[:10]}"
        )
    return data


def _read(s3: Any, bucket: str, key: str, uri: str) -> bytes:
    """The object's bytes, refused when it does not exist or is over the archive bound."""
    if s3 is None:
        raise RecipeError(
            f"{FIELD}.s3: {uri!r} cannot be checked here (no S3 client); accepted: a Plan with S3"
        )
    try:
        head = s3.head_object(Bucket=bucket, Key=key)
    except Exception as exc:
        if _missing(exc):
            raise RecipeError(
                f"{FIELD}.s3: {uri!r} does not exist; accepted: an archive `hfpipe start` uploaded"
            ) from None
        raise
    if int(head.get("ContentLength", 0)) > sourcedir.MAX_ARCHIVE_BYTES:
        raise RecipeError(
            f"{FIELD}.s3: {uri!r} is {head['ContentLength']} bytes; accepted: at most "
            f"{sourcedir.MAX_ARCHIVE_BYTES} (a training source is code)"
        )
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    return bytes(body.read(sourcedir.MAX_ARCHIVE_BYTES + 1))
