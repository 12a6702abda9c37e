"""A recipe's own training code for the command (docs/own-code.md): a `dir` next to the recipe file or a `git`
repository (cloned here, only at the user's command, into a cache folder), packed by
`hfpipe.core.recipe.sourcedir.pack` (the project asset's packing), uploaded once per content hash to the artifacts
bucket (`contract.source_key`), and named in the execution input as `{"s3": URI, "sha256": HASH}`, the only
form the Plan takes (hfpipe.core.recipe.sources checks it again there).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hfpipe import contract
from hfpipe.cli.aws import HfpipeError
from hfpipe.cli.recipe import git_source
from hfpipe.core.recipe import recipes as core_recipes
from hfpipe.core.recipe import sourcedir
from hfpipe.core.recipe.typed import Recipe, Source

if TYPE_CHECKING:  # annotations only: the plan is imported where it runs
    from hfpipe.core.run.plan import Accepted

#: Where git sources are cloned (one folder per repository URL and ref); HFPIPE_CACHE moves it.
CACHE_ENV = "HFPIPE_CACHE"


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "hfpipe")


def recipe_folder(ref: str) -> Path:
    """The folder a recipe's `dir` source is relative to: the recipe file's (a bundled recipe's: recipes/)."""
    path = Path(ref)
    return (path if path.suffix else core_recipes.recipes_dir() / f"{ref}.json").resolve().parent


@contextlib.contextmanager
def source_folder(
    ref: str, source: Source, cache: Path | None = None, say: Callable[[str], None] = print
) -> Iterator[Path]:
    """The local folder of a `dir` or `git` source (a git one cloned first and locked while the block runs),
    resolved after every link and refused, naming the link, when it leaves the recipe's folder or the clone."""
    if "dir" in source:
        container = recipe_folder(ref)
        yield _inside(
            container, source["dir"], "recipe.training.source.dir", f"the recipe's folder {str(container)!r}"
        )
        return
    git = source["git"]
    with git_source.checkout(git, cache or cache_root(), recipe_folder(ref), say) as clone:
        yield _inside(clone, git.get("path", "."), "recipe.training.source.git.path", "the clone")


def _inside(container: Path, relative: str, field: str, what: str) -> Path:
    try:
        folder = sourcedir.contained(container, relative, field, what)
    except sourcedir.SourceError as err:
        raise HfpipeError(str(err)) from None
    if not folder.is_dir():
        raise HfpipeError(
            f"{field}: {str(container / relative)!r} is not a folder; accepted: a folder holding the training code"
        )
    return folder


def pack_source(
    ref: str, resolved: Recipe, *, say: Callable[[str], None], cache: Path | None = None
) -> sourcedir.Packed | None:
    """The recipe's own source packed (None for the project's own training_code/), its entry point in it.

    The one way a command packs a source: each file or folder left out is named with why, and what is packed
    (file count, size, the largest files), through `say` (required, so that no command packs silently:
    docs/own-code.md promises both before anything is uploaded)."""
    t = resolved["training"]
    source = t.get("source")
    if source is None or "s3" in source:
        return None
    with source_folder(ref, source, cache, say) as folder:
        try:
            packed = sourcedir.pack(
                folder, include=source.get("include", ()), exclude=source.get("exclude", ())
            )
        except sourcedir.SourceError as err:
            raise HfpipeError(f"recipe.training.source: {err}") from None
    for path, why in packed.skipped:
        say(f"not packed: {path} ({why})")
    if t["entry_point"] not in packed.files:
        raise HfpipeError(
            f"recipe.training.entry_point: {t['entry_point']!r} is not a file in {str(folder)!r}; accepted: "
            f"one of {[f for f in packed.files if f.endswith('.py')][:10]}"
        )
    say(f"training source: {packed.summary()}")
    return packed


def check_source(accepted: Accepted, packed: sourcedir.Packed) -> Accepted:
    """The recipe accepted with the packed archive (`hfpipe.core.run.plan.accept`'s `source`): its hyperparameters
    checked against the packed entry point's parser before anything is uploaded, its notes saying why they
    were not where its parser cannot be read; the Plan does not check the same archive (sha256) again."""
    from hfpipe.core.run import plan as core_plan
    from hfpipe.core.validate import RecipeError

    try:
        return core_plan.accept(accepted, source=packed.data)
    except RecipeError as err:
        raise HfpipeError(str(err)) from None


def script_arguments(resolved: Recipe, packed: sourcedir.Packed | None) -> frozenset[str] | None:
    """The names the packed entry point's parser takes, read without running it (hfpipe.kinds.script_parser);
    None without an own source or where its parser cannot be read that way."""
    from hfpipe.kinds import script_parser

    if packed is None:
        return None
    try:
        text = sourcedir.read_member(packed.data, resolved["training"]["entry_point"]).decode("utf-8")
    except UnicodeDecodeError:
        return None
    parser = script_parser.read(text)
    return None if parser.reason is not None else frozenset(parser.specs)


def source_uri(bucket: str, packed: sourcedir.Packed) -> str:
    """Where `upload` puts an archive: sources/<sha256>/ of the artifacts bucket (known before the upload)."""
    return f"s3://{bucket}/{contract.source_key(packed.sha256)}"


class Staged:
    """An S3 client that also holds one archive not uploaded (yet): the plan reads it back as the Plan
    Lambda reads the uploaded one (HeadObject, GetObject), so a dry run checks what `start` would upload,
    and `start` refuses what the environment refuses, before anything leaves this machine."""

    def __init__(self, s3: Any, bucket: str, packed: sourcedir.Packed) -> None:
        self._s3, self._at, self._packed = s3, (bucket, contract.source_key(packed.sha256)), packed

    def head_object(self, **kwargs: Any) -> Any:
        if (kwargs.get("Bucket"), kwargs.get("Key")) != self._at:
            return self._s3.head_object(**kwargs)
        return {"ContentLength": len(self._packed.data), "Metadata": {"sha256": self._packed.sha256}}

    def get_object(self, **kwargs: Any) -> Any:
        if (kwargs.get("Bucket"), kwargs.get("Key")) != self._at:
            return self._s3.get_object(**kwargs)
        return {"Body": io.BytesIO(self._packed.data), "ContentLength": len(self._packed.data)}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s3, name)


def upload(s3: Any, bucket: str, packed: sourcedir.Packed) -> tuple[str, bool]:
    """(URI, uploaded): the archive at sources/<sha256>/, put only when no object with that hash is there."""
    import botocore.exceptions

    from hfpipe.cli.aws import aws_error

    key = contract.source_key(packed.sha256)
    try:
        head = s3.head_object(Bucket=bucket, Key=key)
        if head.get("Metadata", {}).get("sha256") == packed.sha256:
            return f"s3://{bucket}/{key}", False
    except botocore.exceptions.ClientError as exc:
        # 404: not uploaded yet; 403: what S3 answers for a missing key without s3:ListBucket (HeadObject's
        # documented behaviour), so the put decides.
        if str(exc.response.get("Error", {}).get("Code", "")) not in {"404", "NoSuchKey", "403"}:
            raise aws_error(exc, f"looking for s3://{bucket}/{key}") from None
    try:
        s3.put_object(
            Bucket=bucket,
            Key=key,
            Body=packed.data,
            # S3 checks the bytes it stores against this (PutObject's x-amz-checksum-sha256, base64 of the digest).
            ChecksumSHA256=base64.b64encode(bytes.fromhex(packed.sha256)).decode(),
            Metadata={"sha256": packed.sha256},
        )
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        raise aws_error(exc, f"uploading the training source to s3://{bucket}/{key}") from None
    return f"s3://{bucket}/{key}", True


def with_uploaded(execution_input: dict[str, Any], uri: str, sha256: str) -> dict[str, Any]:
    """The execution input naming the uploaded archive (an override of training.source is applied in it)."""
    out = copy.deepcopy(execution_input)
    out["recipe"].setdefault("training", {})["source"] = {"s3": uri, "sha256": sha256}
    overrides = {k: v for k, v in (out.get("overrides") or {}).items() if not k.startswith("training.source")}
    if "overrides" in out:
        out["overrides"] = overrides
    if not overrides:
        out.pop("overrides", None)
    return out
