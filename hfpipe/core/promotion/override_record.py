"""An evaluation-gate override recorded by the act that used it: the Lambda of the step that applies the gate
where traffic moves (the deploy state machine's Prepare, the adapter state machine's Apply) appends the
override's note (hfpipe.core.promotion.evaluation_gate.override_note, naming its execution) to the version's
approval description once the step has passed the gate with it. A command that started the execution and was
interrupted leaves the record made all the same (docs/evaluation.md, "Overriding the gate").
"""

from __future__ import annotations

from typing import Any

from hfpipe.core import api_shapes
from hfpipe.core.promotion import evaluation_gate


class OverrideNotRecorded(ValueError):
    """The note would break UpdateModelPackage's input shape (hfpipe.core.api_shapes): nothing written."""


def record(sagemaker: Any, arn: str, note: str, execution: str) -> bool:
    """Append ``note`` (an override_note naming ``execution``) to version ``arn``'s ApprovalDescription, its
    ModelApprovalStatus as it is now; False, with nothing written, when the description holds ``execution``'s
    note already (a retried step, a look after a wait: evaluation_gate.recorded_by).

    The package is read just before the update, so the note goes after what the description holds then (an
    approve's reason, earlier overrides). UpdateModelPackage (SageMaker API reference,
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_UpdateModelPackage.html): ModelPackageArn
    required; ApprovalDescription "A description for the approval status of the model", at most 1024
    characters, pattern ``.*``; ModelApprovalStatus Approved | Rejected | PendingManualApproval, given as read
    so the approval stays what it is (an Approved version's deploy must not change it)."""
    package = sagemaker.describe_model_package(ModelPackageName=arn)
    held = package.get("ApprovalDescription")
    if evaluation_gate.recorded_by(held, execution):
        return False
    request = {"ModelPackageArn": arn, "ApprovalDescription": evaluation_gate.appended(held, note)}
    if package.get("ModelApprovalStatus"):
        request["ModelApprovalStatus"] = package["ModelApprovalStatus"]
    problems = api_shapes.problems("UpdateModelPackage", request)
    if problems:
        raise OverrideNotRecorded(
            f"{problems[0]}: SageMaker's UpdateModelPackage would refuse the override's note on {arn}; "
            "nothing changed"
        )
    sagemaker.update_model_package(**request)
    return True
