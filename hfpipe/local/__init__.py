"""Local mode: the pipeline with no AWS account, split by what it emulates.

`engine` runs the synthesized state machine on moto with the Lambda handlers in-process, with its parts:
`template` (the template's tokens resolved to local resources), `moto_patches` (the one adapter to
moto's internals: every read and change, for the pinned moto only), `hooks` (Lambda Invoke, SageMaker error injection and plug-ins through
botocore's event system), `bus` (the template's EventBridge rules, matched by moto's own patterns),
`quotas` (Service Quotas answered from a table), `guardrails` (UpdateEndpoint's blue/green deployment and
rollback), `traffic` (InvokeEndpoint: which fleet serves, the container's errors, the metrics), `cloudwatch`
(the template's alarms, SageMaker's metrics, alarm evaluation), `standin` (what a config serves; stand-in
traffic during updates) and `views` (read-only views of the engine's account); `container` runs a
training job under the SageMaker training-container contract; `endpoint` serves a model.tar.gz through its
inference handler; `stacks` synthesizes the app for a local environment; `runtime` plugs training and
serving into the engine; `run` puts them together for `hfpipe local`; `world` serves one environment of
cdk.json the same way until stopped (`hfpipe local up`), recorded in `world_file` for the commands that
reach it with HFPIPE_LOCAL=1; `checkout` finds the app, the Lambdas and the training code, which the
installed package does not ship.
"""
