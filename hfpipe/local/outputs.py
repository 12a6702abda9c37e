"""What a local run leaves in its folder (`--out/<execution>/`): one place for the names, read by the
command (`hfpipe logs --local`, `hfpipe report --local`) and written by local mode. Stdlib only, so the
command can read a run's folder without loading local mode's engine."""

from __future__ import annotations

import re
from pathlib import Path

#: The training job's output, as the local container captures it.
TRAINING_LOG = "training.log"
#: The run's report (written last: a run with a report has finished).
REPORT = "report.json"
#: The final metrics alone.
METRICS = "metrics.json"
#: The trained model, downloaded from the local account's artifacts bucket.
MODEL = "model.tar.gz"
#: The Trainer's state (`save_state`: its log history, each entry with its step), in the folder the script
#: saw as /opt/ml/checkpoints (hfpipe.local.training.container) of the run's training job.
TRAINER_STATE = "jobs/*/run/opt_ml/checkpoints/trainer_state.json"
#: The run's training job as SageMaker describes it (DescribeTrainingJob: metric definitions, hyperparameters,
#: final metrics), so `report --local --plot` reads a local run by the rule it reads a job on AWS by.
TRAINING_JOB = "training_job.json"
#: A recipe's own source as the job downloaded it (its sagemaker_submit_directory), by the job's name.
SOURCE_ARCHIVE = "jobs/{job}/sourcedir.tar.gz"
#: Written when Ctrl-C (or an error) ended the run before its report: the folder is incomplete.
INTERRUPTED = "INTERRUPTED"

#: Where local runs go, under the checkout (or the current folder outside one).
RUNS_FOLDER = ".hfpipe/local"


def runs_folder(out: str | None = None) -> str:
    """`--out` when given, else `.hfpipe/local` of the checkout local mode runs from, so `hfpipe local`
    started in a subfolder and `hfpipe logs --local` from the root see the same runs."""
    if out is not None:
        return out
    from hfpipe.local.checkout import LocalModeError, checkout_root

    try:
        return str(checkout_root() / RUNS_FOLDER)
    except LocalModeError:
        return str(Path.cwd() / RUNS_FOLDER)


#: A run's folder is named by its execution, `<recipe>-<UTC time>` (hfpipe.core.names.default_execution_name
#: of the recipe's name, at most 60 of [a-z0-9-]). Nothing else under the runs folder is a run's.
RUN_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,59}-[0-9]{8}-[0-9]{6}")
RUN_NAME_FORM = "<recipe>-<YYYYMMDD>-<HHMMSS>"
#: What a run writes: its log first, its report last, INTERRUPTED when it was cut short.
RUN_MARKERS = (TRAINING_LOG, REPORT, INTERRUPTED)


#: What a name given on the command line may be: an execution name (Step Functions: 1 to 80 letters,
#: digits, '-' or '_'), so a single folder name (no separator, never '.' or '..').
_GIVEN_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")


def is_run_name(name: str) -> bool:
    """Whether `name` can name a local run on the command line: one folder name, never a path."""
    return _GIVEN_NAME.fullmatch(name) is not None


def is_run_folder(path: Path) -> bool:
    """A local run's folder: a real folder (not a link) named as a run, holding what a run writes."""
    return (
        RUN_NAME.fullmatch(path.name) is not None
        and path.is_dir()
        and not path.is_symlink()
        and any((path / marker).is_file() for marker in RUN_MARKERS)
    )


def last_written(path: Path) -> float:
    """When a run last wrote its log, report or INTERRUPTED (what "newest" means for local runs)."""
    times = [(path / m).stat().st_mtime for m in RUN_MARKERS if (path / m).is_file()]
    return max(times, default=path.stat().st_mtime)


def run_folders(out: Path, *, unwritten: bool = False) -> list[Path]:
    """The local runs under `out`, oldest first ([] when `out` does not exist); with ``unwritten``, also the
    real folders named as a run that hold nothing a run writes (a run cut off before its log began), which
    `hfpipe local prune` counts and removes as it does the others."""
    if not out.is_dir():
        return []
    runs = [
        p
        for p in out.iterdir()
        if is_run_folder(p)
        or (unwritten and RUN_NAME.fullmatch(p.name) and p.is_dir() and not p.is_symlink())
    ]
    return sorted(runs, key=lambda p: (last_written(p), p.name))


def trainer_state(run_dir: Path) -> Path | None:
    """The run's trainer_state.json (the newest, after a restart), or None when the run saved none."""
    found = [p for p in run_dir.glob(TRAINER_STATE) if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None
