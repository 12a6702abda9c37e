"""Stdlib-only logic shared by the hfpipe command and the pipeline Lambdas.

No boto3 at import time: functions that talk to AWS take their clients as arguments. The Lambda
asset bundles a copy of this package next to the handler code.
"""
