"""The pipeline's Lambda handlers: thin wrappers over pure functions that take boto3 clients.

Bundled with a copy of hfpipe/core, hfpipe/contract.py and recipes/ (stacks/constructs/pipeline_lambdas.py).
"""
