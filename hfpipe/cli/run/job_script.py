"""What a training job's entry point accepts, read from the job itself, so that advice about a run names only
arguments its script takes (`hfpipe report --plot` when there is nothing to plot).

The job says which script ran: its HyperParameters carry ``sagemaker_program`` and ``sagemaker_submit_directory``
(JSON-encoded, as the SageMaker SDK sends them). A submit directory under the artifacts bucket's sources/
prefix is a recipe's own source (docs/own-code.md): its entry point's parser is read from the archive without
running it (hfpipe/kinds/script_parser.py), as `hfpipe start` checks its hyperparameters. Any other is the
project's training code, whose scripts' arguments hfpipe/kinds/arguments.json lists.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hfpipe import contract


@dataclass(frozen=True)
class Script:
    """A job's entry point (None: the job names none) and the arguments its parser accepts; ``arguments`` None
    with ``unknown`` saying why where they cannot be known."""

    entry_point: str | None
    own: bool = False
    arguments: frozenset[str] | None = None
    unknown: str | None = None

    def accepts(self, name: str) -> bool | None:
        """Whether the script takes argument ``name`` (None: not known)."""
        return None if self.arguments is None else name in self.arguments

    def described_arguments(self) -> str:
        """Its arguments as advice names them: how many, and a few."""
        names = sorted(self.arguments or ())
        if not names:
            return "its parser takes no arguments"
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        return f"its parser's arguments: {shown}"


def _decoded(value: Any) -> str:
    """A hyperparameter as the SDK sends it (a JSON string), or as given when it is not JSON."""
    try:
        decoded = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        decoded = value
    return decoded if isinstance(decoded, str) else ""


def is_own_source(uri: str) -> bool:
    """Whether a submit directory is a recipe's own source: an archive under the artifacts bucket's sources/
    (contract.source_key), where `hfpipe start` uploads it and the only place the Plan takes one from."""
    key = uri.removeprefix("s3://").partition("/")[2]
    return uri.startswith("s3://") and key.startswith(contract.ARTIFACTS_SOURCES_PREFIX)


def job_script(job: dict[str, Any], archive: Callable[[str], bytes]) -> Script:
    """The script ``job`` (DescribeTrainingJob's answer) ran and what it accepts; ``archive`` reads an own
    source's sourcedir.tar.gz by its URI (S3, or a local run's copy)."""
    from hfpipe.core.recipe import sourcedir
    from hfpipe.kinds import arguments, script_parser

    hyperparameters = job.get("HyperParameters") or {}
    entry = _decoded(hyperparameters.get("sagemaker_program"))
    if not entry:
        return Script(None, unknown="the job names no entry point (sagemaker_program)")
    submit = _decoded(hyperparameters.get("sagemaker_submit_directory"))
    if not is_own_source(submit):
        names = arguments.accepted(entry)
        why = None if names is not None else f"{entry} is not one of the project's training scripts"
        return Script(entry, arguments=names, unknown=why)
    import botocore.exceptions

    from hfpipe.cli.aws import aws_error

    try:
        text = sourcedir.read_member(archive(submit), entry).decode("utf-8")
    except (OSError, KeyError, ValueError, tarfile.TarError) as exc:
        return Script(entry, own=True, unknown=f"its source {submit} not read ({exc})")
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        return Script(entry, own=True, unknown=str(aws_error(exc, f"reading {submit}")))
    parser = script_parser.read(text)
    if parser.reason is not None:
        return Script(
            entry, own=True, unknown=f"its parser cannot be read without running it: {parser.reason}"
        )
    return Script(entry, own=True, arguments=frozenset(parser.specs))
