"""What every finished `hfpipe local` run must give, checked from its output folder and what it printed.

One end-to-end local run per recipe shape is enough, and each costs a training job: the runs live where a
test needs one anyway (tests/training/test_local_substitutions.py runs the full-size recipes, the walk-throughs
in tests/cli serve tiny-lora (the README's) and bloomz-7b1-lora-samsum (docs/vllm.md's)), and each checks its
run with this.
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import Any

from hfpipe.core.recipe.recipes import available_recipes, load_recipe
from hfpipe.local.training.substitute import for_this_machine


def check_finished_run(
    out_root: Path, recipe: str, printed: str, *, handler: bool = True, deployed: bool = True
) -> tuple[Path, dict[str, Any]]:
    """The run of `recipe` under `out_root` (exactly one): SUCCEEDED, its job Completed, the smoke test
    answered, its endpoint deleted and nothing left behind, its evaluation (if the recipe has one) given a
    verdict, registered as version 1 of its group, every
    substitution printed, its log and metrics written, and (`handler`) the model's own code/inference.py in
    its artifact. A `deployed` False run (a deploy: false recipe with its own source, recipes/own-code/: its
    substitutions depend on its script's parser, which the caller checks) has no endpoint, smoke test or
    model version. Returns the run folder and its report."""
    [run_dir] = [p for p in out_root.iterdir() if p.name.startswith(f"{recipe}-")]
    report = json.loads((run_dir / "report.json").read_text())
    assert report["execution_status"] == "SUCCEEDED", report
    assert report["training_job_status"] == "Completed", report
    assert "left in the local account: 0 endpoints/configs/models" in printed
    assert f"report: {recipe}-" in printed
    # Evaluated with a verdict: a fixture smaller than the floor of examples, or a job that failed, would still
    # end SUCCEEDED (a failed evaluation does not fail the run). A bundled recipe with an evaluation has one.
    evaluation = report.get("evaluation")
    if recipe in available_recipes() and load_recipe(recipe).get("evaluation") is not None:
        assert evaluation is not None, report
    if evaluation is not None:
        assert evaluation.get("verdict") not in (None, "failed"), evaluation
    if deployed:
        _check_deployed(report, recipe, printed)
    assert (run_dir / "training.log").stat().st_size > 0
    assert json.loads((run_dir / "metrics.json").read_text()) == report["final_metrics"]
    with tarfile.open(run_dir / "model.tar.gz") as tar:
        names = tar.getnames()
    assert any(Path(n).name == "config.json" for n in names), names
    if handler:
        assert "code/inference.py" in names, names  # the handler the endpoint served, in the artifact
    return run_dir, report


def _check_deployed(report: dict[str, Any], recipe: str, printed: str) -> None:
    """The smoke test answered, the endpoint deleted, the model registered, every substitution printed."""
    assert report["smoke_test"]["ok"] is True, report["smoke_test"]
    assert report["endpoint_deleted"] is True, report
    assert "smoke test" in printed
    # The Register step ran on the local engine: the run's model is version 1 of the recipe's group.
    assert re.search(rf":model-package/hfpipe-[a-z0-9]+-{re.escape(recipe)}/1$", report["model_package_arn"])
    assert f"{recipe}/1" in printed
    real = load_recipe(recipe)
    for line in for_this_machine(real, gpu=False).lines():
        assert line in printed, line  # every substitution printed
