"""Local mode: the pipeline with no AWS account, in rooms by what it emulates (docs/layers.md, "Rooms").

`engine/` is the account: `engine` runs the synthesized state machine on moto with the Lambda handlers
in-process, with its parts: `template` (the template's tokens resolved to local resources), `moto_patches` (the
one adapter to moto's internals: every read and change, for the pinned moto only), `hooks` (Lambda Invoke,
SageMaker error injection and plug-ins through botocore's event system), `bus` (the template's EventBridge
rules, matched by moto's own patterns), `quotas` (Service Quotas answered from a table), `guardrails`
(UpdateEndpoint's blue/green deployment and rollback, one deployment's steps in `deployment`), `traffic`
(InvokeEndpoint: which fleet serves, the container's errors, the metrics), `cloudwatch` (the template's alarms,
SageMaker's metrics, alarm evaluation), `standin` (what a config serves; stand-in traffic during updates),
`inference_components` (SageMaker's inference components) and `views` (read-only views of the engine's
account). `serving/` serves a model here: `endpoint` through its inference handler, `serve` over HTTP,
`openai_endpoint` the vllm kind's stand-in, `adapter_serving` adapters on the shared base. `training/` runs a
training job under the SageMaker training-container contract (`container`), with its source's `requirements`
and what `substitute` replaces. At the top: `stacks` synthesizes the app for a local environment; `runtime`
plugs training and serving into the engine; `run` puts them together for `hfpipe local`; `world` serves one
environment of cdk.json the same way until stopped (`hfpipe local up`), recorded in `world_file` for the
commands that reach it with HFPIPE_LOCAL=1; `checkout` finds the app, the Lambdas and the training code, which
the installed package does not ship.
"""
