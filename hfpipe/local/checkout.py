"""Where local mode finds what the installed package does not ship: the CDK app (app.py, cdk.json,
stacks/) and the Lambda code (lambda/pipeline/), with the training code (training_code/) next to them.

The `hfpipe` wheel carries the command, the core rules, the kind registries, the recipes and a copy of the
training code (for `hfpipe invoke`'s request checks), which is all the AWS commands need. `hfpipe local` stands the whole pipeline up, so it needs a checkout of the repository: the one the
package was imported from (a clone on PYTHONPATH or installed with `pip install -e .`), else
`HFPIPE_CHECKOUT`, else the current folder or one above it. `load_lambda_package` imports the Lambda
handlers' package from there by its own name, as the Lambda runtime does.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

CHECKOUT_ENV = "HFPIPE_CHECKOUT"
#: The pipeline Lambdas' package (lambda/pipeline/pipeline_lambdas), imported by this name as in Lambda.
LAMBDA_PACKAGE = "pipeline_lambdas"
# What local mode reads from the checkout.
NEEDED = ("app.py", "cdk.json", "stacks", "lambda/pipeline", "training_code")


class LocalModeError(RuntimeError):
    """Local mode cannot run or stand in for what is asked; the message says why in one line."""


class FolderError(LocalModeError):
    """A folder local mode writes to cannot be made or written (a file on the way, no permission, a read-only
    file system): ``folder`` and the ``error`` the file system gave."""

    def __init__(self, folder: Path, error: OSError) -> None:
        super().__init__(f"cannot create the folder {str(folder)!r} ({error.strerror or error})")
        self.folder, self.error = folder, error


def _is_checkout(folder: Path) -> bool:
    return all((folder / name).exists() for name in NEEDED)


def checkout_root() -> Path:
    """The repository checkout local mode runs from; LocalModeError (one line) when there is none."""
    explicit = os.environ.get(CHECKOUT_ENV)
    if explicit:
        root = Path(explicit).expanduser().resolve()
        if not _is_checkout(root):
            raise LocalModeError(
                f"{CHECKOUT_ENV}={explicit!r} is not an hfpipe checkout: it needs {', '.join(NEEDED)}"
            )
        return root
    package_parent = Path(__file__).resolve().parents[2]
    for folder in (package_parent, *(p for c in [Path.cwd().resolve()] for p in (c, *c.parents))):
        if _is_checkout(folder):
            return folder
    raise LocalModeError(
        "`hfpipe local` needs a checkout of the hfpipe repository (app.py, cdk.json, stacks/, lambda/, "
        f"training_code/) and the CDK's Node.js packages: run it inside a clone, or set {CHECKOUT_ENV}=PATH"
    )


def cdk_environments(root: Path) -> dict[str, Any]:
    """cdk.json's `hfpipe:environments` in checkout ``root``, as `app.py` reads it (LocalModeError: none)."""
    environments = json.loads((root / "cdk.json").read_text())["context"].get("hfpipe:environments")
    if not isinstance(environments, dict) or not environments:
        raise LocalModeError(f"{root / 'cdk.json'}: no hfpipe:environments to stand up")
    return environments


def load_lambda_package(lambda_dir: Path | None) -> None:
    """Make the handlers' package (lambda/pipeline/pipeline_lambdas) importable by its name, as the Lambda
    runtime does from its task root, without touching sys.path: the package is loaded from its folder once
    (a test that already imported it from the same folder keeps its module)."""
    if LAMBDA_PACKAGE in sys.modules:
        return
    folder = (lambda_dir or checkout_root() / "lambda" / "pipeline") / LAMBDA_PACKAGE
    spec = importlib.util.spec_from_file_location(
        LAMBDA_PACKAGE, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None:
        raise LocalModeError(f"{folder}: not the pipeline Lambdas' package")
    module = importlib.util.module_from_spec(spec)
    sys.modules[LAMBDA_PACKAGE] = module
    spec.loader.exec_module(module)
