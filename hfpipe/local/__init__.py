"""Local mode: the pipeline with no AWS account, split by what it emulates.

`engine` runs the synthesized state machine on moto with the Lambda handlers in-process; `container` runs a
training job under the SageMaker training-container contract; `endpoint` serves a model.tar.gz through its
inference handler; `stacks` synthesizes the app for a local environment; `runtime` plugs training and
serving into the engine; `run` puts them together for `hfpipe local`.
"""
