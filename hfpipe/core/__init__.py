"""Stdlib-only logic shared by the hfpipe command and the pipeline Lambdas.

No boto3 at import time: functions that talk to AWS take their clients as arguments. The Lambda
asset bundles a copy of this package, its rooms included, next to the handler code. The modules sit in
rooms by concern (recipe, run, deploy, promotion, adapters) over a few base modules here (docs/layers.md).
"""
