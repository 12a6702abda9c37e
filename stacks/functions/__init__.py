"""The pipeline's Lambda functions as components: one module per function, named like its runtime module.

``stacks/functions/<name>.py`` builds the function whose code is ``lambda/pipeline/pipeline_lambdas/<name>.py``
(``<Name>Function``) and grants its role exactly what that handler calls, with the cdk-nag
acknowledgements of those grants next to them. What they share is in common.py (the code asset, the
common function settings, IAM condition helpers) and training_task.py (the grants of the task hand-over
Launch and OnTrainingEvent both do). stacks/constructs/pipeline_lambdas.py composes them; lambda/ never
imports this package (docs/layers.md).
"""
