"""What a local run leaves in its folder (`--out/<execution>/`): one place for the names, read by the
command (`hfpipe logs --local`, `hfpipe report --local`) and written by local mode. Stdlib only, so the
command can read a run's folder without loading local mode's engine."""

from __future__ import annotations

#: The training job's output, as the local container captures it.
TRAINING_LOG = "training.log"
#: The run's report (written last: a run with a report has finished).
REPORT = "report.json"
#: The final metrics alone.
METRICS = "metrics.json"
#: The trained model, downloaded from the local account's artifacts bucket.
MODEL = "model.tar.gz"
#: Written when Ctrl-C (or an error) ended the run before its report: the folder is incomplete.
INTERRUPTED = "INTERRUPTED"

#: Where local runs go, under the checkout (or the current folder outside one).
RUNS_FOLDER = ".hfpipe/local"


def runs_folder(out: str | None = None) -> str:
    """`--out` when given, else `.hfpipe/local` of the checkout local mode runs from, so `hfpipe local`
    started in a subfolder and `hfpipe logs --local` from the root see the same runs."""
    if out is not None:
        return out
    from pathlib import Path

    from hfpipe.local.checkout import LocalModeError, checkout_root

    try:
        return str(checkout_root() / RUNS_FOLDER)
    except LocalModeError:
        return str(Path.cwd() / RUNS_FOLDER)
