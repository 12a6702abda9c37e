"""Where local mode finds what the installed package does not ship: the CDK app (app.py, cdk.json,
stacks/) and the Lambda code (lambda/pipeline/), with the training code (training_code/) next to them.

The `hfpipe` wheel carries the command, the core rules, the kind registries, the recipes and a copy of the
training code (for `hfpipe invoke`'s request checks), which is all the AWS commands need. `hfpipe local` stands the whole pipeline up, so it needs a checkout of the repository: the one the
package was imported from (a clone on PYTHONPATH or installed with `pip install -e .`), else
`HFPIPE_CHECKOUT`, else the current folder or one above it.
"""

from __future__ import annotations

import os
from pathlib import Path

CHECKOUT_ENV = "HFPIPE_CHECKOUT"
# What local mode reads from the checkout.
NEEDED = ("app.py", "cdk.json", "stacks", "lambda/pipeline", "training_code")


class LocalModeError(RuntimeError):
    """Local mode cannot run or stand in for what is asked; the message says why in one line."""


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
