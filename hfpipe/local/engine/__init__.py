"""The emulated account: the state machine on moto with the Lambda handlers in process, the template's
tokens, botocore hooks, moto's internals, and the services moto lacks (EventBridge rules, CloudWatch
alarms, quotas, UpdateEndpoint's guardrails, InvokeEndpoint's routing, inference components)."""
