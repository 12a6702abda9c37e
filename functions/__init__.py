"""The project's Lambda functions, one folder each: ``functions/<name>/handler.py`` is the function's code (its
``handler``, which the Lambda runtime imports as ``functions.<name>.handler.handler``) and
``functions/<name>/construct.py`` builds the function and grants its role what that handler calls.

Two layers side by side (docs/layers.md): every ``construct.py`` is the stacks' (CDK; never bundled), every
other module the runtime's (boto3 and hfpipe.core, bundled with a copy of hfpipe/core, hfpipe/contract.py and
recipes/ by shared/construct.py); a runtime module imports no construct, and no module imports one that
imports it back (tests/layout/test_import_cycles.py). shared/ and training_task/ hold what several functions
share; quota_request/ is the quota custom resource, bundled on its own.
"""
