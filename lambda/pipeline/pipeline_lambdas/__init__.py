"""The pipeline's Lambda handlers: thin wrappers over pure functions that take boto3 clients.

Each handler module <name>.py runs as one function, built with its grants by stacks/functions/<name>.py;
the others are shared by handlers (aws.py, training_task.py, teardown.py, execution_end.py). No module
imports one that imports it back, directly or not (tests/layout/test_import_cycles.py).
Bundled with a copy of hfpipe/core, hfpipe/contract.py and recipes/ (stacks/functions/common.py).
"""
