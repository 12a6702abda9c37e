"""Input rules: a recipe's fields (`recipe`, run by `hfpipe.core.run.plan.accept`, the one entry into the recipe rules),
`--set` / overrides, the command's options and local mode.

Stdlib only (the Lambdas import it). Every check raises ``RecipeError`` with one message that names the
field, the value and what is accepted; the class name is also the Step Functions error name of the Plan
state, so a bad input ends there with nothing created.

The SageMaker limits below are the CreateTrainingJob / CreateModel shapes of the SageMaker API reference
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateTrainingJob.html), as botocore ships
them in ``botocore/data/sagemaker/2017-07-24/service-2.json``:

- ``ChannelName``: 1-64 characters, pattern ``[A-Za-z0-9\\.\\-_]+``
- ``TrainingJobName``: 1-63 characters, pattern ``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``
- ``S3Uri``: at most 1024 characters, pattern ``(https|s3)://([^/]+)/?(.*)``
- ``HyperParameters``: at most 100 entries; key at most 256, value at most 2500 characters
- ``TrainingEnvironmentMap``: at most 100 entries; key ``[a-zA-Z_][a-zA-Z0-9_]*`` (at most 512), value at
  most 512 characters; the model's ``EnvironmentMap``: the same key pattern, key and value at most 1024
- ``MetricDefinitionList``: at most 40; ``MetricName`` 1-255 characters, ``MetricRegex`` 1-500
- ``ContainerImage``: at most 255 characters, no white space
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from hfpipe import kinds

if TYPE_CHECKING:  # annotations only: the base imports no room (docs/layers.md)
    from hfpipe.core.recipe.typed import MetricDefinition, Recipe


class RecipeError(ValueError):
    """A recipe or an override failed validation; the message names the field, the value and what fits."""


# --- numbers -------------------------------------------------------------------------------------------


#: The largest integer any field may hold: SageMaker's and Step Functions' integers are 64-bit (a recipe's
#: hyperparameters travel as strings, but a script parses them into 64-bit-or-smaller numbers too).
MAX_INTEGER = 2**63 - 1


def check_finite(value: Any, path: str) -> None:
    """Refuse NaN and +-Infinity anywhere inside ``value`` (dicts and lists walked), and integers beyond 64
    bits (Python would format a 5,000-digit one only to raise), naming where."""
    if isinstance(value, float) and not math.isfinite(value):
        raise RecipeError(f"{path}: {value!r} is not accepted; accepted: a finite number")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INTEGER:
        raise RecipeError(
            f"{path}: a {value.bit_length()}-bit integer is not accepted; accepted: at most {MAX_INTEGER} in size"
        )
    if isinstance(value, Mapping):
        for key, sub in value.items():
            check_finite(sub, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, sub in enumerate(value):
            check_finite(sub, f"{path}[{i}]")


def number(
    value: Any,
    field: str,
    *,
    minimum: float | None = None,
    exclusive_minimum: float | None = None,
    maximum: float | None = None,
    integer: bool = False,
) -> float:
    """A finite number (an integer when ``integer``) within the bounds, or an error naming the field."""
    kind = "a whole number" if integer else "a finite number"
    bounds = []
    if minimum is not None:
        bounds.append(f">= {minimum:g}")
    if exclusive_minimum is not None:
        bounds.append(f"> {exclusive_minimum:g}")
    if maximum is not None:
        bounds.append(f"<= {maximum:g}")
    accepted = kind + (f" {' and '.join(bounds)}" if bounds else "")
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and (not integer or float(value).is_integer())
        and (minimum is None or value >= minimum)
        and (exclusive_minimum is None or value > exclusive_minimum)
        and (maximum is None or value <= maximum)
    )
    if not ok:
        raise RecipeError(f"{field}: {value!r} is not accepted; accepted: {accepted}")
    return float(value)


# --- names that become paths -----------------------------------------------------------------------------

CHANNEL_NAME = re.compile(r"^[A-Za-z0-9.\-_]{1,64}$")
TRAINING_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
RECIPE_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
ENV_KEY = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_PATH_PART = re.compile(r"^[A-Za-z0-9_.\-]+$")


def channel_name(name: Any, field: str) -> str:
    """A SageMaker channel name; '.' and '..' match AWS's pattern but would leave the channels folder
    (/opt/ml/input/data/<name>), so they are refused too."""
    if not isinstance(name, str) or not CHANNEL_NAME.fullmatch(name) or name in {".", ".."}:
        raise RecipeError(
            f"{field}: {name!r} is not a channel name; accepted: 1 to 64 letters, digits, '.', '-' or '_' "
            "(SageMaker's ChannelName), other than '.' and '..'"
        )
    return name


def relative_path(value: Any, field: str, *, suffix: str | None = None) -> str:
    """A path that stays inside its folder: relative, '/'-separated, no '.', '..' or empty parts."""
    accepted = "a relative path of letters, digits, '.', '-' and '_' separated by '/', with no '..' part" + (
        f", ending in {suffix}" if suffix else ""
    )
    parts = value.split("/") if isinstance(value, str) else []
    if (
        not parts
        or any(p in {"", ".", ".."} or not _PATH_PART.fullmatch(p) for p in parts)
        or (suffix is not None and not value.endswith(suffix))
    ):
        raise RecipeError(f"{field}: {value!r} is not accepted; accepted: {accepted}")
    return str(value)


def key_prefix(value: Any, field: str) -> str:
    """An S3 key prefix inside a bucket of ours: a relative path (a trailing '/' allowed)."""
    if isinstance(value, str) and value.endswith("/"):
        relative_path(value[:-1], field)
        return value
    return relative_path(value, field)


def recipe_name(value: Any, field: str) -> str:
    """A bundled recipe's name, never a path (the Plan Lambda reads recipes/<name>.json)."""
    if not isinstance(value, str) or not RECIPE_NAME.fullmatch(value):
        raise RecipeError(
            f"{field}: {value!r} is not a recipe name; accepted: lower-case letters, digits and '-', at most "
            "40 characters (a bundled recipe; send other recipes as the 'recipe' object)"
        )
    return value


# --- URIs ------------------------------------------------------------------------------------------------

_S3_URI = re.compile(r"^s3://([a-z0-9][a-z0-9.\-]{1,61}[a-z0-9])(/.*)?$")


def s3_uri(value: Any, field: str) -> tuple[str, str]:
    """(bucket, key) of an ``s3://bucket/key`` URI (at most 1024 characters, SageMaker's S3Uri)."""
    match = _S3_URI.fullmatch(value) if isinstance(value, str) and len(value) <= 1024 else None
    if not match:
        raise RecipeError(
            f"{field}: {value!r} is not accepted; accepted: an s3://BUCKET/KEY URI (at most 1024 characters)"
        )
    key = (match.group(2) or "/")[1:]
    if any(part in {".", ".."} for part in key.split("/")):
        raise RecipeError(f"{field}: {value!r} is not accepted; accepted: an S3 key with no '.' or '..' part")
    return match.group(1), key


def owned_bucket(value: str, field: str, own: Iterable[str], allowed: Iterable[str]) -> str:
    """An S3 URI in one of the environment's buckets, or in a bucket its config allows."""
    bucket, _ = s3_uri(value, field)
    accepted = sorted({*own, *allowed})
    if bucket not in accepted:
        raise RecipeError(
            f"{field}: {value!r} is in bucket {bucket!r}, which is not this environment's; accepted: "
            f"buckets {accepted} (list other buckets in cdk.json allowed_s3_buckets)"
        )
    return value


def image_registry(uri: str) -> str:
    """The registry host of an image URI (``host/repository:tag``)."""
    return uri.split("/", 1)[0]


def owned_image(value: Any, field: str, own: Iterable[str], allowed: Iterable[str]) -> str:
    """An image URI in a registry of the image catalog, or one the environment's config allows."""
    if (
        not isinstance(value, str)
        or not value
        or len(value) > 255
        or re.search(r"\s", value)
        or "/" not in value
    ):
        raise RecipeError(
            f"{field}: {value!r} is not accepted; accepted: an image URI REGISTRY/REPOSITORY[:TAG|@DIGEST] "
            "(at most 255 characters)"
        )
    registry = image_registry(value)
    accepted = sorted({*own, *allowed})
    if registry not in accepted:
        raise RecipeError(
            f"{field}: {value!r} is in registry {registry!r}, which is not in this environment's image catalog; "
            f"accepted: registries {accepted} (list other registries in cdk.json allowed_image_registries)"
        )
    return value


# --- recipe fields the JSON Schema cannot express -------------------------------------------------------


def environment_value(value: Any, field: str) -> str:
    """A string, as SageMaker types environment values (botocore's EnvironmentValue); anything else is named
    as not a string, with the string probably meant (``true`` -> "true"), never encoded behind the recipe."""
    if not isinstance(value, str):
        meant = json.dumps(value) if isinstance(value, bool | int | float) else None
        hint = f' (e.g. "{meant}": --set \'{field.removeprefix("recipe.")}="{meant}"\')' if meant else ""
        raise RecipeError(f"{field}: {value!r} is not a string; accepted: a string{hint} (SageMaker's type)")
    return value


def environment(env: Any, field: str, *, max_len: int) -> dict[str, str]:
    """Check an environment map (SageMaker's key pattern and lengths) and return it encoded as strings."""
    if not isinstance(env, Mapping):
        raise RecipeError(f"{field}: {env!r} is not accepted; accepted: an object of NAME: value")
    if len(env) > 100:
        raise RecipeError(f"{field}: {len(env)} variables; accepted: at most 100")
    out: dict[str, str] = {}
    for key, value in env.items():
        if not isinstance(key, str) or not ENV_KEY.fullmatch(key) or len(key) > max_len:
            raise RecipeError(
                f"{field}: variable name {key!r} is not accepted; accepted: a letter or '_' followed by "
                f"letters, digits or '_' (at most {max_len} characters)"
            )
        encoded = environment_value(value, f"{field}.{key}")
        if len(encoded) > max_len:
            raise RecipeError(f"{field}.{key}: {len(encoded)} characters; accepted: at most {max_len}")
        out[key] = encoded
    return out


def hyperparameters(hp: Mapping[str, Any], field: str) -> None:
    """Names non-empty (at most 256 characters), values JSON-encodable in 2500 characters, no NaN."""
    for key, value in hp.items():
        if not isinstance(key, str) or not key.strip() or len(key) > 256 or key.startswith("sagemaker_"):
            raise RecipeError(
                f"{field}: name {key!r} is not accepted; accepted: a non-empty name of at most 256 characters, "
                "not starting with 'sagemaker_' (those are the pipeline's own)"
            )
        if value is None:
            raise RecipeError(
                f"{field}.{key}: null is not accepted; accepted: a string, number, boolean, list or object "
                "(leave the key out to use the script's default)"
            )
        if isinstance(value, str) and value.strip().lower().lstrip("+-") in {"nan", "inf", "infinity"}:
            raise RecipeError(f"{field}.{key}: {value!r} is not accepted; accepted: a finite number")
        if len(json.dumps(value)) > 2500:
            raise RecipeError(f"{field}.{key}: longer than 2500 characters as JSON; accepted: at most 2500")


def metric_definitions(definitions: list[MetricDefinition], field: str) -> None:
    """At most 40, unique names of 1-255 characters, regexes of 1-500 characters that compile and capture
    the value in group 1 (how SageMaker and local mode read it)."""
    if len(definitions) > 40:
        raise RecipeError(f"{field}: {len(definitions)} definitions; accepted: at most 40")
    seen: set[str] = set()
    for i, definition in enumerate(definitions):
        name, regex = definition["Name"], definition["Regex"]
        if not 1 <= len(name) <= 255 or name in seen:
            raise RecipeError(
                f"{field}[{i}].Name: {name!r} is not accepted; accepted: a unique name of 1 to 255 characters"
            )
        seen.add(name)
        if not 1 <= len(regex) <= 500:
            raise RecipeError(f"{field}[{i}].Regex: {regex!r} is not accepted; accepted: 1 to 500 characters")
        try:
            groups = re.compile(regex).groups
        except re.error as err:
            raise RecipeError(
                f"{field}[{i}].Regex: {regex!r} does not compile ({err}); accepted: a regular expression "
                "with one group around the value"
            ) from None
        if groups < 1:
            raise RecipeError(
                f"{field}[{i}].Regex: {regex!r} has no group; accepted: a regular expression with one group "
                "around the value, e.g. 'eval_loss = ([0-9.e+-]+)'"
            )


def distribution(dist: Mapping[str, Any], field: str) -> None:
    """Each distribution entry is an object whose `enabled` is a boolean (the SDK's shape)."""
    for key, entry in dist.items():
        if not isinstance(entry, Mapping):
            raise RecipeError(
                f'{field}.{key}: {entry!r} is not accepted; accepted: an object such as {{"enabled": true}}'
            )
        if "enabled" in entry and not isinstance(entry["enabled"], bool):
            raise RecipeError(
                f"{field}.{key}.enabled: {entry['enabled']!r} is not accepted; accepted: true or false"
            )
        if key == "smdistributed":
            for sub, sub_entry in entry.items():
                distribution({sub: sub_entry}, f"{field}.{key}")
        if key == "mpi" and "processes_per_host" in entry:
            number(entry["processes_per_host"], f"{field}.mpi.processes_per_host", minimum=1, integer=True)


_SOURCE_KINDS = ("dir", "git", "s3")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
#: A branch or tag name as git check-ref-format takes it, and never an option (no leading '-').
_GIT_REF = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9_./+-]{1,200}(?<![./])$")
#: git_config's secrets name the environment variable that holds them, never the secret itself: a recipe is a
#: file teams commit and share.
_ENV_NAME = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")
GIT_SECRETS = ("token", "password")


def environment_reference(value: Any) -> str | None:
    """The environment variable a git_config secret names (`$NAME` or `${NAME}`), None for any other value."""
    found = _ENV_NAME.fullmatch(value) if isinstance(value, str) else None
    return found.group(1) if found else None


def source_path(value: Any, field: str) -> str:
    """A folder inside the recipe's folder or the clone, as the SDK's `source_dir` is written: relative, with
    `./`, `.` parts and a trailing `/` allowed (`./scripts`, `.`), never `..` or absolute; normalized."""
    text = value if isinstance(value, str) else ""
    kept = [p for p in text.split("/") if p not in {"", "."}]
    if (
        not text
        or text.startswith("/")
        or "//" in text
        or any(p == ".." or not _PATH_PART.fullmatch(p) for p in kept)
    ):
        raise RecipeError(
            f"{field}: {value!r} is not accepted; accepted: a relative folder path of letters, digits, '.', '-' "
            "and '_' separated by '/' (a leading './' and a trailing '/' allowed, as the SDK's source_dir), "
            "with no '..' part and not absolute"
        )
    return "/".join(kept) or "."


def training_source(src: Mapping[str, Any] | None, field: str = "recipe.training.source") -> None:
    """A training source names exactly one of a folder beside the recipe, a git repository (the SDK's
    git_config: a branch or tag, a commit, credentials from the environment; a sub-folder) or an s3
    sourcedir.tar.gz with its sha256 (docs/own-code.md)."""
    if src is None:
        return
    given = [k for k in _SOURCE_KINDS if k in src]
    if len(given) != 1:
        raise RecipeError(
            f"{field}: {sorted(src)} is not accepted; accepted: exactly one of 'dir' (a folder next to the "
            "recipe), 'git' (a repository) or 's3' (a sourcedir.tar.gz, with 'sha256')"
        )
    kind = given[0]
    if kind == "dir":
        source_path(src["dir"], f"{field}.dir")
    elif kind == "git":
        git_source(src["git"], f"{field}.git")
    else:
        s3_uri(src["s3"], f"{field}.s3")
        if not src["s3"].endswith(".tar.gz"):
            raise RecipeError(f"{field}.s3: {src['s3']!r} is not accepted; accepted: the URI of a .tar.gz")
    if ("sha256" in src) != (kind == "s3") or (kind == "s3" and not _SHA256.fullmatch(str(src["sha256"]))):
        raise RecipeError(
            f"{field}.sha256: accepted: with 's3' only, and there required: the archive's sha256 as 64 lower-case "
            "hex digits (`hfpipe start` computes it for 'dir' and 'git')"
        )
    for key in ("include", "exclude"):
        if key in src and kind == "s3":
            raise RecipeError(f"{field}.{key}: accepted with 'dir' or 'git' only (an s3 archive is packed)")
    for i, path in enumerate(src.get("include", ())):
        relative_path(path, f"{field}.include[{i}]")
    for i, pattern in enumerate(src.get("exclude", ())):
        exclude_pattern(pattern, f"{field}.exclude[{i}]")


def exclude_pattern(pattern: Any, field: str) -> None:
    """A glob of files or folders inside the source (`*.csv`, `.venv/`, `data/raw/*`), never outside it."""
    parts = pattern.rstrip("/").split("/") if isinstance(pattern, str) else []
    if not parts or pattern.startswith("/") or any(p in {"", ".", ".."} for p in parts):
        raise RecipeError(
            f"{field}: {pattern!r} is not accepted; accepted: a glob of a file or folder inside the source, "
            "e.g. '*.csv', '.venv/' or 'data/raw/*' (no '..', '.' or empty part, not absolute)"
        )


def git_source(git: Mapping[str, Any], field: str) -> None:
    """The SDK's git_config (sagemaker/git_utils.py `git_clone_repo`): repo a URL or a path, never a git option;
    `branch` (a branch or a tag, as its `git checkout <branch>` takes either) or hfpipe's `tag`, and `commit`
    with either or alone; `token` / `password` naming an environment variable; the sub-folder inside the
    clone."""
    repo = git["repo"]
    if not repo.strip() or repo.startswith("-") or any(c.isspace() for c in repo):
        raise RecipeError(
            f"{field}.repo: {repo!r} is not accepted; accepted: a clone URL or a repository's path (no spaces, "
            "not starting with '-')"
        )
    if "@" in repo.split("://", 1)[-1].split("/", 1)[0] and "://" in repo:
        raise RecipeError(
            f"{field}.repo: a URL with credentials in it is not accepted; accepted: the URL without them, "
            "and token (or username and password) naming environment variables"
        )
    if "branch" in git and "tag" in git:
        raise RecipeError(
            f"{field}: ['branch', 'tag'] given; accepted: at most one of them (a branch may name a tag, as the "
            "SDK's git_config takes it), with or without 'commit'"
        )
    for ref in ("branch", "tag", "commit"):
        if ref not in git:
            continue
        pattern = _COMMIT if ref == "commit" else _GIT_REF
        if not pattern.fullmatch(git[ref]):
            accepted = (
                "7 to 40 lower-case hex digits"
                if ref == "commit"
                else "a git ref name, not starting with '-'"
            )
            raise RecipeError(f"{field}.{ref}: {git[ref]!r} is not accepted; accepted: {accepted}")
    for key in GIT_SECRETS:
        if key in git and environment_reference(git[key]) is None:
            raise RecipeError(
                f"{field}.{key}: a value written in the recipe is not accepted (a recipe is shared; the secret "
                "would be too); accepted: '${NAME}', the environment variable that holds it, or no "
                f"{key}: git's own credential helper answers"
            )
    if "path" in git:
        source_path(git["path"], f"{field}.path")


def recipe(r: Recipe) -> None:
    """The rules on a schema-checked recipe that the JSON Schema cannot express."""
    t, s = r["training"], r["serving"]
    relative_path(t["entry_point"], "recipe.training.entry_point", suffix=".py")
    training_source(t["source"])
    if not isinstance(t["channels"], Mapping):
        raise RecipeError(f"recipe.training.channels: {t['channels']!r} is not accepted; accepted: an object")
    if len(t["channels"]) > 20:
        raise RecipeError(f"recipe.training.channels: {len(t['channels'])} channels; accepted: at most 20")
    for name, where in t["channels"].items():
        field = f"recipe.training.channels.{name}"
        channel_name(name, "recipe.training.channels")
        if not isinstance(where, str):
            raise RecipeError(
                f"{field}: {where!r} is not accepted; accepted: an s3:// URI or a key prefix in the data bucket"
            )
        if "://" in where:  # only s3:// (SageMaker also takes https:// URIs; the pipeline's buckets are s3)
            s3_uri(where, field)
        else:
            key_prefix(where.lstrip("/"), field)
    hyperparameters(t["hyperparameters"], "recipe.training.hyperparameters")
    environment(t["environment"], "recipe.training.environment", max_len=512)
    environment(s["environment"], "recipe.serving.environment", max_len=1024)
    metric_definitions(t["metric_definitions"], "recipe.training.metric_definitions")
    distribution(t["distribution"] or {}, "recipe.training.distribution")
    local = t["checkpoint_local_path"]
    if not local.startswith("/opt/ml/") or ".." in local.split("/"):
        raise RecipeError(
            f"recipe.training.checkpoint_local_path: {local!r} is not accepted; accepted: a folder under "
            "/opt/ml/ with no '..' part"
        )
    checkpoint = t["checkpoint_s3_uri"]
    if checkpoint not in (None, "auto"):
        s3_uri(checkpoint, "recipe.training.checkpoint_s3_uri")
    try:
        # The schema's enums hold each name; whether this task can be served this way is the kinds' rule.
        kinds.task_kind(r["task"]).check_serving(s["kind"])
    except kinds.KindError as err:
        raise RecipeError(f"recipe.serving.kind: {err}") from None
    try:
        kinds.serving_kind(s["kind"]).check_container(r["container"]["inference"])
    except kinds.KindError as err:
        raise RecipeError(f"recipe.container.inference{err}") from None
    if s["server"] and not kinds.serving_kind(s["kind"]).server_settings:
        taking = [k.name for k in kinds.SERVING_KINDS.values() if k.server_settings]
        raise RecipeError(
            f"recipe.serving.server: server settings are taken by the serving kinds {taking}; serving kind "
            f"{s['kind']!r} takes its settings from serving.environment"
        )


def override_key(key: Any, field: str) -> list[str]:
    """The parts of a dotted override key; empty parts (``a..b``, ``a.``) are refused."""
    if not isinstance(key, str) or not key or any(not p.strip() for p in key.split(".")):
        raise RecipeError(
            f"{field}: key {key!r} is not accepted; accepted: a dotted recipe field with no empty part, "
            "e.g. training.hyperparameters.max_steps"
        )
    return [p.strip() for p in key.split(".")]
