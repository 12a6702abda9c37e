"""`hfpipe models`: the model package versions the Register step made in an environment, and deciding on them.

    hfpipe models --env dev [--recipe NAME] [--json]
    hfpipe models approve RECIPE/N|VERSION_ARN --env dev [--reason TEXT]
    hfpipe models reject RECIPE/N|VERSION_ARN --env dev [--reason TEXT]
    hfpipe models compare A B --env dev [--json]
    hfpipe models download RECIPE/N|VERSION_ARN --env dev [--to DIR]

Only the environment's own groups (hfpipe-<env>-<recipe>) count: a version of another environment's group is
refused before anything is called. Metrics, cost and lineage come from each version's statistics document
(ModelMetrics.ModelQuality.Statistics, written by the Register step), which UpdateModelPackage never touches;
the version's CustomerMetadataProperties fill in what the document lacks.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from hfpipe import contract
from hfpipe.cli import aws
from hfpipe.cli.aws import HfpipeError
from hfpipe.cli.parser import Subparsers, aws_options, env_option, listing_command, version_ref
from hfpipe.cli.promotion import gate
from hfpipe.cli.terminal import with_console
from hfpipe.core import api_shapes, json_text
from hfpipe.core.promotion import evaluation_gate, promotion, registry


@dataclass(frozen=True)
class VersionInfo:
    """One version of a group of the environment, with what its statistics document says."""

    group: str
    recipe: str
    version: int
    arn: str
    status: str
    created: datetime | None
    execution: str | None
    metrics: dict[str, float] = field(default_factory=dict)
    cost_usd: float | None = None
    estimated_cost_usd: float | None = None
    approval_description: str | None = None
    #: A promoted version's source version (ARN) and environment (``hfpipe promote``).
    promoted_from: str | None = None
    promoted_from_env: str | None = None
    #: An unmerged adapter's base, as the version records it (hfpipe.core.promotion.registry.adapter_base).
    adapter_base: str | None = None
    #: The task kind the version was trained for (its metadata's ``task``).
    task: str | None = None
    #: The evaluation stored with it (hfpipe.core.promotion.evaluation_gate.Evaluated, as JSON), if any.
    evaluation: dict[str, Any] | None = None

    @property
    def ref(self) -> str:
        """RECIPE/N: how the commands name it."""
        return f"{self.recipe}/{self.version}"

    @property
    def source(self) -> str | None:
        """A promoted version's source as RECIPE/N (ENV), e.g. tiny-lora/3 (dev)."""
        if not self.promoted_from:
            return None
        _, group, number = self.promoted_from.rsplit("/", 2)  # ...:model-package/<group>/<n>
        env = self.promoted_from_env or "?"
        return f"{group.removeprefix(registry.group_prefix(env))}/{number} ({env})"


def _number(value: Any) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _document(s3: Any, uri: str | None) -> dict[str, Any]:
    """The statistics document at ``uri`` ({} when there is none or it cannot be read: the row still shows)."""
    if not uri or not uri.startswith("s3://"):
        return {}
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    try:
        doc = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except Exception as exc:
        print(f"warning: {aws.aws_error(exc, f'reading {uri}')}; its metrics are not shown", file=sys.stderr)
        return {}
    return doc if isinstance(doc, dict) else {}


def describe_version(sagemaker: Any, s3: Any, env: str, arn: str) -> VersionInfo:
    """One version: DescribeModelPackage and its statistics document."""
    desc = aws.call(f"reading model package {arn}", sagemaker.describe_model_package, ModelPackageName=arn)
    group = str(desc.get("ModelPackageGroupName") or arn.rsplit("/", 2)[-2])
    stats = ((desc.get("ModelMetrics") or {}).get("ModelQuality") or {}).get("Statistics") or {}
    doc = _document(s3, stats.get("S3Uri"))
    meta = {**(desc.get("CustomerMetadataProperties") or {}), **(doc.get("metadata") or {})}
    metrics = {
        str(name): float(entry["value"])
        for name, entry in (doc.get("metrics") or {}).items()
        if isinstance(entry, dict) and _number(entry.get("value")) is not None
    }
    created = desc.get("CreationTime")
    return VersionInfo(
        group=group,
        recipe=group.removeprefix(registry.group_prefix(env)),
        version=int(desc.get("ModelPackageVersion") or arn.rsplit("/", 1)[-1]),
        arn=str(desc["ModelPackageArn"]),
        status=str(desc.get("ModelApprovalStatus", "-")),
        created=created if isinstance(created, datetime) else None,
        execution=meta.get("execution"),
        metrics=metrics,
        cost_usd=_number(meta.get("cost_usd")),
        estimated_cost_usd=_number(meta.get("estimated_cost_usd")),
        approval_description=desc.get("ApprovalDescription"),
        promoted_from=meta.get(promotion.PROMOTED_FROM),
        promoted_from_env=meta.get(promotion.PROMOTED_FROM_ENV),
        adapter_base=registry.adapter_base({"CustomerMetadataProperties": meta}),
        task=meta.get("task"),
        evaluation=doc.get(evaluation_gate.STATISTICS_KEY),
    )


def groups(sagemaker: Any, env: str, recipe: str | None) -> list[str]:
    """The environment's group names (one recipe's, or all of them)."""
    if recipe:
        return [contract.model_package_group_name(env, recipe)]
    prefix = registry.group_prefix(env)
    found = []
    for page in sagemaker.get_paginator("list_model_package_groups").paginate(NameContains=prefix):
        found += [
            g["ModelPackageGroupName"]
            for g in page.get("ModelPackageGroupSummaryList", [])
            if g["ModelPackageGroupName"].startswith(prefix)
        ]
    return sorted(found)


def version_arns(sagemaker: Any, group: str) -> list[str]:
    """The version ARNs of one group, oldest first ([] for a group that does not exist)."""
    arns = []
    try:
        for page in sagemaker.get_paginator("list_model_packages").paginate(
            ModelPackageGroupName=group, SortBy="CreationTime", SortOrder="Ascending"
        ):
            arns += [s["ModelPackageArn"] for s in page.get("ModelPackageSummaryList", [])]
    except Exception as exc:
        if "does not exist" in str(exc):
            return []
        raise aws.aws_error(exc, f"listing the versions of {group}") from None
    return arns


def resolve(sagemaker: Any, ref: str, env: str) -> str:
    """The ARN of the version ``ref`` (ARN or RECIPE/N) names, when it is one of ``env``'s."""
    try:
        group, number = registry.parse_ref(ref, env)
    except registry.RegistryRefError as exc:
        raise HfpipeError(str(exc)) from None
    for arn in version_arns(sagemaker, group):
        if arn.rsplit("/", 1)[-1] == str(number) and arn.rsplit("/", 2)[-2].lower() == group.lower():
            return arn
    raise HfpipeError(
        f"version {ref!r}: no version {number} in model package group {group}; "
        f"list them with `hfpipe models --env {env}`"
    )


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _metrics_text(metrics: dict[str, float], limit: int = 3) -> str:
    shown = [f"{k}={v:.4g}" for k, v in sorted(metrics.items())[:limit]]
    return ", ".join(shown) + (" ..." if len(metrics) > limit else "") if shown else "-"


def as_json(info: VersionInfo) -> dict[str, Any]:
    record = asdict(info)
    record["created"] = info.created.isoformat() if info.created else None
    record["ref"] = info.ref
    return record


def table(env: str, versions: list[VersionInfo]) -> Table:
    out = Table(
        title=f"model versions in {env} (groups {registry.group_prefix(env)}<recipe>)", title_justify="left"
    )
    # A "promoted from" column only where a version was promoted (hfpipe promote).
    promoted = any(v.promoted_from for v in versions)
    # An "adapter of" column only where a version is an unmerged adapter (recipe.adapter): the base it needs.
    adapters = any(v.adapter_base for v in versions)
    columns = ("version", "status", "metrics", "cost (USD)", "execution", "created (UTC)")
    # An "evaluation" column only where a version has one stored: its verdict (``failed``: its job failed).
    evaluated = any(v.evaluation for v in versions)
    extra = [
        *(["promoted from"] if promoted else []),
        *(["adapter of"] if adapters else []),
        *(["evaluation"] if evaluated else []),
    ]
    for column in (*columns, *extra):
        out.add_column(column, justify="right" if column.startswith("cost") else "left")
    for v in versions:
        row = [
            v.ref,
            v.status,
            _metrics_text(v.metrics),
            _money(v.cost_usd),
            v.execution or "-",
            v.created.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if v.created else "-",
        ]
        out.add_row(
            *row,
            *([v.source or "-"] if promoted else []),
            *([v.adapter_base or "-"] if adapters else []),
            *([(evaluation_gate.summary(v.evaluation) or {}).get("verdict", "-")] if evaluated else []),
        )
    return out


def _list(clients: aws.Clients, args: argparse.Namespace, console: Any) -> int:
    sagemaker, s3 = clients.sagemaker, clients.s3
    try:
        names = groups(sagemaker, args.env, args.recipe)
    except Exception as exc:
        raise aws.aws_error(exc, "listing model package groups") from None
    found = [
        describe_version(sagemaker, s3, args.env, arn) for g in names for arn in version_arns(sagemaker, g)
    ]
    if args.json:
        sys.stdout.write(json_text.dumps([as_json(v) for v in found], indent=2) + "\n")
        return 0
    if not found:
        which = f"recipe {args.recipe!r} in " if args.recipe else ""
        console.print(f"no model versions for {which}environment {args.env!r}")
        return 0
    console.print(table(args.env, found))
    pending = sum(v.status == "PendingManualApproval" for v in found)
    console.print(
        f"{len(found)} version{'s' if len(found) != 1 else ''}, {pending} pending approval; decide with "
        f"`hfpipe models approve|reject RECIPE/N --env {args.env}`"
    )
    return 0


def _described(sagemaker: Any, arn: str) -> str | None:
    """The version's approval description as it holds now (DescribeModelPackage's ApprovalDescription)."""
    package = aws.call(f"reading model package {arn}", sagemaker.describe_model_package, ModelPackageName=arn)
    return package.get("ApprovalDescription")


def _decide(
    clients: aws.Clients, args: argparse.Namespace, console: Any, environment: aws.Environment
) -> int:
    sagemaker = clients.sagemaker
    arn = resolve(sagemaker, args.refs[0], args.env)
    before = describe_version(sagemaker, clients.s3, args.env, arn)
    status = registry.DECISIONS[args.action]
    description = args.reason or f"{status.lower()} with hfpipe models {args.action}"
    decision = None
    if args.action == "approve":  # the gate: read again now, the champion from the evaluation's target
        decision = gate.check(
            clients, environment, arn, target=None, override=args.override_evaluation, before_note=args.reason
        )
        if decision.note:  # appended after what it held: earlier reasons and overrides stay (as deploy's)
            held = _described(sagemaker, arn)
            description = evaluation_gate.appended(
                evaluation_gate.appended(held, args.reason) if args.reason else held, decision.note
            )
    request = {"ModelPackageArn": arn, "ModelApprovalStatus": status, "ApprovalDescription": description}
    problems = api_shapes.problems("UpdateModelPackage", request)
    if problems:
        raise HfpipeError(f"{problems[0]}: SageMaker's UpdateModelPackage would refuse it; nothing changed")
    aws.call(f"updating model package {arn}", sagemaker.update_model_package, **request)
    console.print(f"{before.ref} ({before.group}): {before.status} -> {status}")
    console.print(f"  {arn}")
    if decision is not None:
        console.print(f"  evaluation gate: {decision.message}", soft_wrap=True)
    return 0


def _compare(clients: aws.Clients, args: argparse.Namespace, console: Any) -> int:
    a, b = (
        describe_version(clients.sagemaker, clients.s3, args.env, resolve(clients.sagemaker, ref, args.env))
        for ref in args.refs
    )
    if a.task and b.task and a.task != b.task:
        raise HfpipeError(
            f"models compare: {a.ref} is a {a.task} model and {b.ref} a {b.task} one; accepted: two versions of "
            "the same task (their metrics measure different things)"
        )
    rows = registry.metric_differences(a.metrics, b.metrics)
    if args.json:
        record = {
            "a": as_json(a),
            "b": as_json(b),
            "metrics": [dict(zip(("metric", "a", "b", "difference"), r, strict=True)) for r in rows],
        }
        sys.stdout.write(json_text.dumps(record, indent=2) + "\n")
        return 0
    out = Table(title=f"{a.ref} vs {b.ref} in {args.env}", title_justify="left")
    for column in ("metric", a.ref, b.ref, "difference (B - A)"):
        out.add_column(column, justify="left" if column == "metric" else "right")

    def shown(value: float | None, signed: bool = False) -> str:
        return "-" if value is None else (f"{value:+.4g}" if signed else f"{value:.4g}")

    for name, va, vb, diff in rows:
        out.add_row(name, shown(va), shown(vb), shown(diff, signed=True))
    cost_diff = None if a.cost_usd is None or b.cost_usd is None else b.cost_usd - a.cost_usd
    out.add_row("cost (USD)", _money(a.cost_usd), _money(b.cost_usd), shown(cost_diff, signed=True))
    out.add_row("status", a.status, b.status, "")
    _evaluation_rows(out, a, b, args.env)
    console.print(out)
    return 0


def _evaluation_rows(out: Table, a: VersionInfo, b: VersionInfo, env: str) -> None:
    """Each version's stored evaluation (the verdict, the rule's metric with its interval, the difference
    against the champion it was scored with, that champion's RECIPE/N in ``env``), where either has one."""
    ea, eb = evaluation_gate.summary(a.evaluation, env), evaluation_gate.summary(b.evaluation, env)
    if ea is None and eb is None:
        return
    for key, label in (
        ("verdict", "evaluation verdict"),
        ("score", "evaluation score [interval] on n"),
        ("difference", "vs its champion (interval)"),
        ("champion", "evaluated against"),
    ):
        # Rich reads "[...]" as markup: the label's [interval] and the scores' intervals are escaped.
        out.add_row(escape(label), escape((ea or {}).get(key, "-")), escape((eb or {}).get(key, "-")), "")


#: What `models download` writes next to the unpacked model: the version it came from.
VERSION_FILE = "hfpipe-version.json"


def _download_dir(value: str | None, info: VersionInfo) -> Path:
    from hfpipe.cli.paths import check_length

    dest = value if value is not None else f"{info.recipe}-{info.version}"
    check_length(dest, "--to")
    path = Path(dest)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise HfpipeError(
            f"--to {dest!r} exists and is not an empty folder; accepted: a new or empty folder (nothing there "
            "is overwritten)"
        )
    return path


def _download(clients: aws.Clients, args: argparse.Namespace, console: Any) -> int:
    arn = resolve(clients.sagemaker, args.refs[0], args.env)
    info = describe_version(clients.sagemaker, clients.s3, args.env, arn)
    desc = aws.call(
        f"reading model package {arn}", clients.sagemaker.describe_model_package, ModelPackageName=arn
    )
    container = ((desc.get("InferenceSpecification") or {}).get("Containers") or [{}])[0]
    url = str(container.get("ModelDataUrl") or "")
    if not url.startswith("s3://") or "/" not in url.removeprefix("s3://"):
        raise HfpipeError(
            f"version {info.ref} names no model.tar.gz (InferenceSpecification.Containers[0].ModelDataUrl is "
            f"{url or 'not set'!r}): nothing to download"
        )
    dest = _download_dir(args.to, info)
    bucket, _, key = url.removeprefix("s3://").partition("/")
    from hfpipe.local.serving.endpoint import extract_model

    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "model.tar.gz"
        aws.call(
            f"downloading {url}", clients.s3.download_file, Bucket=bucket, Key=key, Filename=str(archive)
        )
        size = archive.stat().st_size
        created = not dest.exists()
        try:
            with tarfile.open(archive, "r:gz") as tar:
                if VERSION_FILE in {m.name.removeprefix("./") for m in tar.getmembers()}:
                    raise HfpipeError(
                        f"{url} holds a file named {VERSION_FILE}, which download writes itself"
                    )
            extract_model(archive, dest)
        except (tarfile.TarError, EOFError, OSError) as err:
            if created and dest.is_dir() and not any(dest.iterdir()):
                dest.rmdir()
            raise HfpipeError(
                f"{url} is not a model.tar.gz that unpacks safely into {str(dest)!r} ({err}); nothing written"
            ) from None
    record = {
        **as_json(info),
        "env": args.env,
        "model_data_url": url,
        "image": container.get("Image"),
        "environment": container.get("Environment") or {},
        "downloaded": datetime.now(UTC).isoformat(),
    }
    (dest / VERSION_FILE).write_text(json_text.dumps(record, indent=2) + "\n")
    files = sum(1 for p in dest.rglob("*") if p.is_file())
    console.print(
        f"{info.ref} ({info.status}): {url} ({size / 1e6:.1f} MB) unpacked into {dest}, {files} files"
    )
    console.print(f"  the version's metadata: {dest / VERSION_FILE}")
    return 0


def cmd_models(args: argparse.Namespace, console: Any) -> int:
    """List the environment's model versions, approve or reject one, or compare two."""
    aws.validate_env_name(args.env)
    clients = aws.clients_for(args)
    # A mistyped or never-deployed environment is an error, not an empty one (as for the other commands).
    environment = aws.resolve_environment(clients, args.env)
    if args.action == "list":
        return _list(clients, args, console)
    if args.action == "compare":
        return _compare(clients, args, console)
    if args.action == "download":
        return _download(clients, args, console)
    return _decide(clients, args, console, environment)


# --- hfpipe models [list | approve | reject | compare | download] ----------------------------------------


def add_to(sub: Subparsers) -> None:
    """`hfpipe models` and its actions: arguments and help."""
    actions, listed = listing_command(
        sub,
        "models",
        "registered model versions: list, approve, reject, compare, download",
        "the environment's registered versions, by recipe, oldest first",
    )
    listed.add_argument("--recipe", help="only this recipe's versions")
    listed.add_argument("--json", action="store_true", help="print the versions as JSON")
    _options(listed)
    for name, text in (
        ("approve", "approve VERSION, so it can be deployed or promoted"),
        ("reject", "reject VERSION"),
    ):
        decide = actions.add_parser(name, help=text)
        _versions(decide, 1, "the version to " + name)
        decide.add_argument(
            "--reason",
            help=f"why: recorded as the version's approval description (default: '... with hfpipe models {name}')",
        )
        if name == "approve":
            gate.add_override_option(decide)
        _options(decide)
    compare = actions.add_parser("compare", help="two versions' metrics, cost and lineage side by side")
    _versions(compare, 2, "the two versions to compare")
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    _options(compare)
    download = actions.add_parser(
        "download", help="unpack VERSION's model into --to DIR (default ./RECIPE-N), with its metadata"
    )
    _versions(download, 1, "the version to download")
    download.add_argument(
        "--to", metavar="DIR", help="a new or empty folder for the model (default ./RECIPE-N)"
    )
    _options(download)


def _versions(parser: argparse.ArgumentParser, count: int, text: str) -> None:
    # argparse counts them: one missing or one too many is its usage error (exit 2), before any AWS call.
    parser.add_argument(
        "refs", nargs=count, metavar="VERSION", type=version_ref, help=f"{text}: RECIPE/N or a version ARN"
    )


def _options(parser: argparse.ArgumentParser) -> None:
    env_option(parser)
    aws_options(parser)
    parser.set_defaults(func=with_console(cmd_models), command_parser=parser)
